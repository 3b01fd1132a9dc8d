'use strict';

// gRPC's ModelStreamInfer through the client: a decoupled model's responses to one request
// (model.responses()), several requests on one stream (client.stream()), a refused request
// answered on the stream as an error while the stream goes on. The steps expected are the
// artifact's, run here on state of their own.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { load } = require('../..');
const { connect } = require('../../lib/client');
const { fixture } = require('../helpers');
const { writeModel, servedRepo, listenInProcess } = require('../serve/setup');

const live = servedRepo(() => {
  const repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-client-stream-'));
  // accum-stop: a running sum in STATE, and `done` once its h[0] reaches 10; at most 6 steps.
  writeModel(repo, 'gen', { 1: 'accum-stop' }, { instances: 2, decoupled: { maxSteps: 6, stopOutput: 'output_2' } });
  writeModel(repo, 'add', { 1: 'add' }, { instances: 1 });
  return repo;
});

/** The responses a request of x gives: the same x run on fresh state until done or 6 steps. */
function steps(x) {
  const rt = load(fixture('accum-stop'));
  try {
    rt.storage('h');
    const out = [];
    for (let k = 1; k <= 6; k++) {
      const tensors = rt.run({ x });
      out.push(tensors.map((t) => Array.from(t.data)));
      if (tensors[2].data[0] === 1) break;
    }
    return out;
  } finally {
    rt.close();
  }
}

const answers = (list) => list.map((tensors) => tensors.map((t) => Array.from(t.data)));

describe('streams over gRPC', () => {
  let client;
  beforeAll(async () => {
    client = await connect(`grpc://127.0.0.1:${live.grpcPort}`);
  });
  afterAll(() => client.close());

  test("model.responses(): a decoupled model's responses to one request, in order, ending after its last", async () => {
    const gen = await client.model('gen');
    for (const x of [[4, 1, 0, 0], [1, 2, 3, 4], [10, 0, 0, 0]]) {
      const got = [];
      for await (const tensors of gen.responses({ x })) got.push(tensors);
      expect(got.map((t) => t.map((o) => o.name))).toEqual(got.map(() => ['output_0', 'output_1', 'output_2']));
      expect(answers(got)).toEqual(steps(x));
    }
    expect(client.stats()[0].outstanding).toBe(0);
  });

  test('client.stream(): several requests on one stream, each answered by its id; a refused one is an error on the stream, which goes on', async () => {
    const [gen, add] = [await client.model('gen'), await client.model('add')];
    const stream = client.stream();
    const ids = [stream.send(gen, { x: [4, 1, 0, 0] }), stream.send(add, { a: [1, 2, 3, 4], b: [1, 1, 1, 1] }), stream.send(add, { a: [1, 2, 3, 4] }, { id: 'bad' }), stream.send(gen, { x: [1, 2, 3, 4] }, { id: 'g2' })];
    expect(ids).toEqual(['1', '2', 'bad', 'g2']);
    expect(stream.pending).toBe(4);
    stream.end();
    const got = new Map(ids.map((id) => [id, []]));
    for await (const r of stream) got.get(r.id).push(r);
    expect(answers(got.get('1').map((r) => r.tensors))).toEqual(steps([4, 1, 0, 0]));
    expect(got.get('1').map((r) => r.final)).toEqual([false, false, true]);
    expect(got.get('2').map((r) => [r.final, r.model, answers([r.tensors])[0]])).toEqual([[true, 'add', [[2, 3, 4, 5]]]]);
    expect(got.get('bad')).toHaveLength(1);
    expect(got.get('bad')[0].error).toMatchObject({ code: 'ERR_ZGC_REMOTE', message: `grpc://127.0.0.1:${live.grpcPort}: [request id: bad] input "b" is missing (the model takes a, b)` });
    expect(answers(got.get('g2').map((r) => r.tensors))).toEqual(steps([1, 2, 3, 4]));
    expect(stream.pending).toBe(0);
    await expect(async () => stream.send(add, { a: [1, 2, 3, 4], b: [1, 1, 1, 1] })).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED' });
  });

  test('inputs are checked before the stream is written to; an aborted signal ends responses() with its reason', async () => {
    const gen = await client.model('gen');
    expect(() => gen.responses({ x: [1] })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_SIZE', source: 'x' }));
    const controller = new AbortController();
    const it = gen.responses({ x: [1, 2, 3, 4] }, { signal: controller.signal });
    const first = await it.next();
    expect(answers([first.value])).toEqual([steps([1, 2, 3, 4])[0]]);
    controller.abort(new Error('enough'));
    await expect(it.next()).rejects.toThrow('enough');
  });

  test('a REST client has no stream: the error says to use the gRPC address', async () => {
    const rest = await connect(live.server.url);
    try {
      expect(() => rest.stream()).toThrow("a stream of requests (ModelStreamInfer) is gRPC's: connect to the server's grpc:// address for it");
    } finally {
      rest.close();
    }
  });
});

describe('closing', () => {
  test("client.close() cancels a stream left open: the server drains at once, with nothing left", async () => {
    const server = await listenInProcess([live.repo]);
    const port = await server.server.listenGrpc(0, '127.0.0.1');
    const client = await connect(`grpc://127.0.0.1:${port}`);
    const gen = await client.model('gen');
    const stream = client.stream();
    stream.send(gen, { x: [1, 0, 0, 0] });
    const it = stream[Symbol.asyncIterator]();
    expect((await it.next()).value.final).toBe(false);
    client.close();
    // Were the stream still open, the drain would wait for it until its deadline, undrained.
    const done = await server.stop();
    expect(done.drained).toBe(true);
  });
});

describe('the stream iterator, asked twice at once', () => {
  test('each next() settles: two waiting callers get the next two responses', async () => {
    const client = await connect(`grpc://127.0.0.1:${live.grpcPort}`);
    try {
      const gen = await client.model('gen');
      const stream = client.stream();
      const it = stream[Symbol.asyncIterator]();
      // Both wait before anything is sent.
      const [a, b] = [it.next(), it.next()];
      stream.send(gen, { x: [4, 1, 0, 0] });
      const got = await Promise.all([a, b]);
      expect(answers(got.map((r) => r.value.tensors))).toEqual(steps([4, 1, 0, 0]).slice(0, 2));
      stream.cancel();
      // After the end, every waiting caller is told it is over.
      await expect(Promise.all([it.next(), it.next()])).resolves.toEqual([{ value: undefined, done: true }, { value: undefined, done: true }]);
      expect(() => stream.send(gen, { x: [1, 0, 0, 0] })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_CLOSED' }));
    } finally {
      client.close();
    }
  });

  test('send() after end() is refused, and the requests sent before it are answered', async () => {
    const client = await connect(`grpc://127.0.0.1:${live.grpcPort}`);
    try {
      const add = await client.model('add');
      const stream = client.stream();
      stream.send(add, { a: [1, 2, 3, 4], b: [1, 1, 1, 1] });
      stream.end();
      expect(() => stream.send(add, { a: [1, 2, 3, 4], b: [1, 1, 1, 1] })).toThrow(expect.objectContaining({ code: 'ERR_ZGC_CLOSED', message: 'the stream was ended with end(): it takes no more requests' }));
      const got = [];
      for await (const r of stream) got.push(answers([r.tensors])[0]);
      expect(got).toEqual([[[2, 3, 4, 5]]]);
    } finally {
      client.close();
    }
  });

  test("a stream that fails ends responses() and leaves no listener on the caller's signal", async () => {
    const { getEventListeners } = require('node:events');
    const server = await listenInProcess([live.repo]);
    const port = await server.server.listenGrpc(0, '127.0.0.1');
    const client = await connect(`grpc://127.0.0.1:${port}`);
    const gen = await client.model('gen');
    await server.stop();
    const controller = new AbortController();
    try {
      for (let i = 0; i < 3; i++) {
        const it = gen.responses({ x: [1, 0, 0, 0] }, { signal: controller.signal });
        await expect(it.next()).rejects.toMatchObject({ code: 'ERR_ZGC_CONNECTION', sent: false });
      }
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    } finally {
      client.close();
    }
  });
});
