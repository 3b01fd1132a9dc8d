'use strict';

// The README's service example, end to end over HTTP: concurrent requests through the pool
// give what a synchronous runtime with the same weights computes.
const { load } = require('../..');
const { startService } = require('../../examples/service');
const { buildMlp, weights } = require('../../examples/build');
const { rng, randomF32 } = require('../helpers');

describe('examples/service.js', () => {
  let service;
  beforeAll(async () => {
    service = await startService({ size: 2 });
  });
  afterAll(() => service.close());

  const post = (body) =>
    fetch(`http://127.0.0.1:${service.port}/predict`, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });

  test('200 concurrent requests get the outputs of a synchronous run with the same weights', async () => {
    const rt = load(buildMlp());
    for (const name of ['w1', 'b1', 'w2']) rt.set(name, weights[name]);
    const next = rng(42);
    const xs = Array.from({ length: 200 }, () => Array.from(randomF32(next, 4, 3)));
    const replies = await Promise.all(xs.map((x) => post({ x }).then(async (r) => ({ status: r.status, body: await r.json() }))));
    replies.forEach(({ status, body }, i) => {
      expect(status).toBe(200);
      const [logits, probs] = rt.run({ x: xs[i] });
      expect(body.logits).toEqual(Array.from(logits.data));
      expect(body.probs).toEqual(Array.from(probs.data));
    });
    rt.close();
  });

  test('bad inputs are a 400 naming the problem, and the service keeps answering', async () => {
    let r = await post({ x: [1, 2, 3] });
    expect(r.status).toBe(400);
    expect(await r.json()).toEqual({ code: 'ERR_ZGC_SIZE', error: expect.stringMatching(/"x".*4.*3/) });
    r = await post({ x: [1, 2, 3, 'four'] });
    expect(r.status).toBe(400);
    expect((await r.json()).code).toBe('ERR_ZGC_VALUE');
    r = await post('{not json');
    expect(r.status).toBe(400);
    r = await post({ x: [1, 0, 0, 0] });
    expect(r.status).toBe(200);
    expect((await r.json()).probs).toHaveLength(3);
  });
});
