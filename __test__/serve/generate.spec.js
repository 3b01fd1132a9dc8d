'use strict';

// Triton's generate extension: POST .../generate answers the outputs by name, as a direct run
// gives them; .../generate_stream answers as server-sent events, one per step of a decoupled
// model (each step what the same input gives run alone on fresh state), and refusals name
// what is wrong. The same format as the real Triton's is checked in __test__/triton.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { load } = require('../..');
const { fixture } = require('../fixtures/manifest');
const { rng, randomF32 } = require('../helpers');
const { writeModel, servedRepo } = require('./setup');
const { request } = require('./wire');

/** The events of a text/event-stream body, each `data:` line parsed (output_0's shortest decimals read back as f32). */
const f32 = (answer) => ({ ...answer, output_0: answer.output_0.map(Math.fround) });
const events = (text) => text.split('\n\n').filter(Boolean).map((e) => f32(JSON.parse(e.replace(/^data: /, ''))));

describe("Triton's generate extension", () => {
  const live = servedRepo(() => {
    const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-generate-'));
    writeModel(repo, 'add', { 1: 'add' }, { instances: 1 });
    writeModel(repo, 'gen', { 1: 'accum-stop' }, { instances: 1, decoupled: { maxSteps: 5, stopOutput: 'output_2' } });
    return repo;
  });
  const post = (model, kind, body) => request(`${live.server.url}/v2/models/${model}/${kind}`, { body: JSON.stringify(body) });

  test('generate: the outputs by name, as a direct run gives them; generate_stream: the same as one event', async () => {
    const next = rng(51);
    const rt = load(fixture('add'));
    try {
      for (let i = 0; i < 5; i++) {
        const [a, b] = [Array.from(randomF32(next, 4)), Array.from(randomF32(next, 4))];
        const want = Array.from(rt.run({ a, b })[0].data);
        const r = await post('add', 'generate', { id: `g${i}`, a, b });
        expect([r.status, r.headers['content-type'], f32(r.json)]).toEqual([200, 'application/json', { id: `g${i}`, model_name: 'add', model_version: '1', output_0: want }]);
        const s = await post('add', 'generate_stream', { a, b });
        expect([s.status, s.headers['content-type'], events(s.text)]).toEqual([200, 'text/event-stream; charset=utf-8', [{ model_name: 'add', model_version: '1', output_0: want }]]);
      }
    } finally {
      rt.close();
    }
  });

  test("a decoupled model's steps as events, each what the same input gives run alone on fresh state", async () => {
    for (const x of [[4, 0, 0, 0], [1, 1, 1, 1], [10, 0, 0, 0]]) {
      const rt = load(fixture('accum-stop'));
      rt.storage('h');
      const want = [];
      for (let k = 1; k <= 5; k++) {
        const [sum, n, done] = rt.run({ x });
        want.push({ model_name: 'gen', model_version: '1', output_0: Array.from(sum.data), output_1: Array.from(n.data), output_2: [done.data[0] === 1] });
        if (done.data[0] === 1) break;
      }
      rt.close();
      const s = await post('gen', 'generate_stream', { x });
      expect([x, s.status, events(s.text)]).toEqual([x, 200, want]);
    }
  });

  test('refusals name what is wrong, before any event', async () => {
    const cases = [
      ['add', 'generate', { a: [1, 2, 3], b: [1, 1, 1, 1] }, 'input "a": "data" has 3 elements, shape [4] takes 4'],
      ['add', 'generate', { a: [1, 2, 3, 4] }, 'input "b" is missing (the model takes a, b)'],
      ['add', 'generate_stream', { a: [1, 2, 3, 4], b: [1, 1, 1, 1], c: 1 }, '"c" is not an input of model "add" (its inputs: a, b)'],
      ['add', 'generate', [1, 2], 'the request must be a JSON object of input names to values'],
      ['gen', 'generate', { x: [1, 0, 0, 0] }, 'model "gen" is decoupled (several responses a request): use generate_stream'],
      ['nope', 'generate', { x: 1 }, 'unknown model "nope"'],
    ];
    for (const [model, kind, body, message] of cases) {
      const r = await post(model, kind, body);
      expect([model, kind, r.status === 404 ? 404 : r.status, r.json]).toEqual([model, kind, model === 'nope' ? 404 : 400, { error: message }]);
    }
  });
});
