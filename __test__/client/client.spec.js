'use strict';

// zgc-runtime/client against this repository's serve, over REST (binary and JSON) and gRPC:
// a remote model describes itself and answers as the same artifact loaded here does; bad
// inputs are refused before anything is sent; the server's refusals, a timeout, an abort and
// a refused connection are ZgcErrors with their codes; a sequence keeps the server's state;
// several servers share the requests and a dead one is passed over.
const { load, createPool } = require('../..');
const { connect, ZgcError } = require('../../lib/client');
const { fixture, f16Bits, randomF32, rng } = require('../helpers');
const { makeRepository, writeModel, servedRepo, listenInProcess } = require('../serve/setup');
const { randomDtypeValues } = require('../dtypes-model');
const fs = require('node:fs');
const net = require('node:net');

function repository() {
  const { repo, params } = makeRepository();
  writeModel(repo, 'acc', { 1: 'accum' }, { instances: 1, sequenceBatching: { idleTimeoutMs: 60000 } });
  repository.params = params;
  return repo;
}

const live = servedRepo(repository);
const urls = () => ({ rest: live.server.url, json: live.server.url, grpc: `grpc://127.0.0.1:${live.grpcPort}` });
const KINDS = [
  ['REST (binary)', 'rest', {}],
  ['REST (JSON)', 'json', { binary: false }],
  ['gRPC', 'grpc', {}],
];

/** The dtypes artifact here, given the parameters the served one has (setup.js) as serve gives them. */
function localDtypes() {
  const local = load(fixture('dtypes'), { f16: 'bits' });
  for (const [name, p] of Object.entries(repository.params)) {
    if (p.bind) local.bind(name, p.data.slice());
    else local.set(name, p.data);
  }
  return local;
}

describe.each(KINDS)('a remote model over %s', (_, kind, options) => {
  let client;
  beforeAll(async () => {
    client = await connect(urls()[kind], options);
  });
  afterAll(() => client.close());

  test('describes itself from its metadata as the local runtime of its artifact does', async () => {
    const remote = await client.model('add');
    const local = load(fixture('add'));
    expect(remote.sources).toEqual(local.sources.filter((s) => s.kind === 'input').map((s) => ({ name: s.name, dtype: s.dtype, shape: s.shape })));
    expect(remote.outputs.map((o) => [o.dtype, o.shape])).toEqual(local.outputs.map((o) => [o.dtype, o.shape]));
    expect(remote.versions).toEqual(['1', '2']);
    local.close();
  });

  test('runAsync answers as the local runtime does, for TypedArrays, arrays and { shape, data }', async () => {
    const remote = await client.model('add', { version: 2 });
    const local = load(fixture('add'));
    const next = rng(3);
    for (let i = 0; i < 20; i++) {
      const a = randomF32(next, 4);
      const b = randomF32(next, 4);
      const want = Array.from(local.run({ a, b })[0].data);
      const given = i % 3 === 0 ? { a, b } : i % 3 === 1 ? { a: Array.from(a), b: Array.from(b) } : { a: { shape: [4], data: a }, b: { shape: [4], data: Array.from(b) } };
      const [out] = await remote.runAsync(given);
      expect(out).toMatchObject({ name: 'output_0', dtype: 'f32', shape: [4] });
      expect(out.data).toBeInstanceOf(Float32Array);
      expect(Array.from(out.data)).toEqual(want);
    }
    local.close();
  });

  test('every dtype of the dtypes model: f16 to the bit, i8 and bool exact', async () => {
    const remote = await client.model('dtypes', { f16: 'bits' });
    expect(remote.sources.map((s) => [s.name, s.dtype])).toEqual([['x', 'f32'], ['h', 'f16'], ['q', 'i8'], ['m', 'bool']]);
    const local = localDtypes();
    const v = randomDtypeValues(9);
    const inputs = { x: Float32Array.from(v.x), h: Uint16Array.from(v.h, f16Bits), q: Int8Array.from(v.q), m: Uint8Array.from(v.m, Number) };
    const want = local.run(inputs).map((t) => t.data);
    const outs = await remote.runAsync(inputs);
    expect(outs.map((o) => o.name)).toEqual(['o0', 'o1', 'o2', 'o3', 'o4', 'o5']);
    // o4 is the instance's running sum (STATE): not compared.
    for (const i of [0, 1, 2, 3, 5]) {
      expect(outs[i].data[Symbol.toStringTag]).toBe(want[i][Symbol.toStringTag]);
      expect(Array.from(outs[i].data)).toEqual(Array.from(want[i]));
    }
    expect(outs.map((o) => o.dtype)).toEqual(['f32', 'f16', 'i8', 'bool', 'f32', 'f32']);
    // f16 as values by default: the exact values of those bits.
    const asValues = await (await client.model('dtypes')).runAsync({ x: v.x, h: v.h, q: v.q, m: v.m });
    expect(asValues[1].data).toBeInstanceOf(Float32Array);
    expect(Array.from(asValues[1].data, f16Bits)).toEqual(Array.from(want[1]));
    local.close();
  });

  test("f16: 'float16' gives a Float16Array over the exact bits where the host has one, and is refused by name where not", async () => {
    if (typeof globalThis.Float16Array !== 'function') {
      await expect(connect(urls()[kind], { ...options, f16: 'float16' })).rejects.toThrow(`option f16 'float16' needs a host with Float16Array; this one (node ${process.version}) has none`);
      return;
    }
    const f16 = await connect(urls()[kind], { ...options, f16: 'float16' });
    try {
      const v = randomDtypeValues(12);
      const inputs = { x: v.x, h: new Float16Array(v.h), q: v.q, m: v.m };
      const [bits, halves] = await Promise.all([(await client.model('dtypes', { f16: 'bits' })).runAsync(inputs), (await f16.model('dtypes')).runAsync(inputs)]);
      expect(halves[1].data[Symbol.toStringTag]).toBe('Float16Array');
      expect(Array.from(new Uint16Array(halves[1].data.buffer, halves[1].data.byteOffset, 4))).toEqual(Array.from(bits[1].data));
    } finally {
      f16.close();
    }
  });

  test('outputs picks and orders outputs; into writes them in place', async () => {
    const remote = await client.model('slow');
    const local = load(fixture('slow'));
    local.set('sleep_ms', 0);
    const x = Float32Array.of(1, 2, 3, 4);
    const want = local.run({ x }).map((t) => Array.from(t.data));
    const picked = await remote.runAsync({ x }, { outputs: ['output_1', 'output_0'] });
    // output_1 counts the instance's runs: only its length is compared.
    expect(picked.map((t) => [t.name, t.data.length])).toEqual([['output_1', 3], ['output_0', 4]]);
    expect(Array.from(picked[1].data)).toEqual(want[0]);
    const into = [new Float32Array(4), new Float32Array(3)];
    const outs = await remote.runAsync({ x }, { into });
    expect(outs.map((t) => t.data)).toEqual(into);
    expect(outs[0].data).toBe(into[0]);
    expect(outs[1].data).toBe(into[1]);
    expect(Array.from(into[0])).toEqual(want[0]);
    await expect(remote.runAsync({ x }, { into: [new Float32Array(4), new Float32Array(2)] })).rejects.toMatchObject({ code: 'ERR_ZGC_SIZE' });
    local.close();
  }, 20000);

  test('bad inputs are refused before anything is sent, with the local codes', async () => {
    const remote = await client.model('add');
    const before = client.stats()[0].requests;
    await expect(remote.runAsync({ a: [1, 2, 3], b: [1, 2, 3, 4] })).rejects.toMatchObject({ code: 'ERR_ZGC_SIZE', source: 'a', message: 'source "a": shape [4] holds 4 elements, got 3' });
    await expect(remote.runAsync({ a: new Int8Array(4), b: [1, 2, 3, 4] })).rejects.toMatchObject({ code: 'ERR_ZGC_DTYPE', source: 'a' });
    await expect(remote.runAsync({ c: [1, 2, 3, 4] })).rejects.toMatchObject({ code: 'ERR_ZGC_UNKNOWN_SOURCE', message: 'source "c": model "add" has no such input (its inputs: a, b)' });
    await expect(remote.runAsync({ a: { shape: [2, 2], data: [1, 2, 3, 4] } })).rejects.toMatchObject({ code: 'ERR_ZGC_SIZE' });
    await expect(remote.runAsync({ a: [1, 2, 3, 4] }, { outputs: ['nope'] })).rejects.toMatchObject({ code: 'ERR_ZGC_OUTPUT_INDEX' });
    await expect(remote.runAsync({ a: [1, 2, 3, 4] }, { timeOutMs: 5 })).rejects.toThrow('runAsync() has no option "timeOutMs" (did you mean "timeoutMs"?)');
    expect(client.stats()[0].requests).toBe(before);
  });

  test("the server's refusals are ZgcErrors with its status and words", async () => {
    const missing = await client.model('nope').catch((e) => e);
    expect(missing).toBeInstanceOf(ZgcError);
    expect(missing).toMatchObject({ code: 'ERR_ZGC_REMOTE_NOT_FOUND', status: kind === 'grpc' ? 5 : 404 });
    expect(missing.message).toContain('unknown model "nope"');
    // A missing input is the server's to refuse: it may be optional there.
    const add = await client.model('add');
    const err = await add.runAsync({ a: [1, 2, 3, 4] }).catch((e) => e);
    expect(err).toMatchObject({ code: 'ERR_ZGC_REMOTE_INVALID', status: kind === 'grpc' ? 3 : 400 });
    expect(err.message).toMatch(/"b"/);
  });

  test('a sequence keeps the server state between its runs, as a local sequence does', async () => {
    const remote = await client.model('acc');
    const pool = createPool(fixture('accum'), { size: 1 });
    const localSeq = pool.sequence();
    const seq = remote.sequence();
    const next = rng(11);
    for (let i = 0; i < 5; i++) {
      const x = randomF32(next, 4);
      const want = (await localSeq.run({ x })).map((t) => Array.from(t.data));
      const got = await seq.run({ x }, { end: i === 4 });
      expect(got.map((t) => Array.from(t.data))).toEqual(want);
    }
    expect(seq.ended).toBe(true);
    await expect(seq.run({ x: [0, 0, 0, 0] })).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED' });
    await localSeq.close();
    await pool.close();
  });

  test('a sequence run refused before it is sent changes nothing: the next one starts the sequence', async () => {
    const remote = await client.model('acc');
    const pool = createPool(fixture('accum'), { size: 1 });
    const localSeq = pool.sequence();
    const seq = remote.sequence();
    await expect(seq.run({ x: [1, 2] })).rejects.toMatchObject({ code: 'ERR_ZGC_SIZE', source: 'x' });
    await expect(seq.run({ x: [1, 2, 3, 4] }, { end: true, outputs: ['nope'] })).rejects.toMatchObject({ code: 'ERR_ZGC_OUTPUT_INDEX' });
    expect([seq.runs, seq.ended]).toEqual([0, false]);
    for (const x of [[1, 2, 3, 4], [0.5, 0, 0, 1]]) {
      const want = (await localSeq.run({ x })).map((t) => Array.from(t.data));
      expect((await seq.run({ x })).map((t) => Array.from(t.data))).toEqual(want);
    }
    await localSeq.close();
    await pool.close();
  });

  test('classification answers the top classes as bytes "value:index"', async () => {
    const remote = await client.model('add');
    const [top] = await remote.runAsync({ a: [1, 9, 3, 4], b: [0, 0, 0, 0] }, { classification: 2 });
    expect(top.dtype).toBe('bytes');
    // Triton's words: the value as C's %f, then the class index.
    expect(top.data.every((b) => b instanceof Uint8Array)).toBe(true);
    expect(top.data.map((b) => new TextDecoder().decode(b))).toEqual(['9.000000:1', '4.000000:3']);
  });
});

describe('time limits and aborts', () => {
  let client;
  beforeAll(async () => {
    client = await connect(urls().rest);
  });
  afterAll(() => client.close());

  test('timeoutMs rejects ERR_ZGC_REMOTE_TIMEOUT; an aborted signal rejects with its reason', async () => {
    const slow = await client.model('slowtimeout');
    await expect(slow.runAsync({ x: [1, 2, 3, 4] }, { timeoutMs: 50 })).rejects.toMatchObject({ code: 'ERR_ZGC_REMOTE_TIMEOUT' });
    const controller = new AbortController();
    const running = slow.runAsync({ x: [1, 2, 3, 4] }, { signal: controller.signal });
    controller.abort(new Error('enough'));
    await expect(running).rejects.toThrow('enough');
    const pre = new AbortController();
    pre.abort(new Error('before'));
    await expect(slow.runAsync({ x: [1, 2, 3, 4] }, { signal: pre.signal })).rejects.toThrow('before');
  });
});

/** A port nothing listens on: listened on, then closed. */
function deadPort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

describe('several servers', () => {
  test('connect() to nothing rejects ERR_ZGC_CONNECTION, not sent', async () => {
    const port = await deadPort();
    const err = await connect(`http://127.0.0.1:${port}`).catch((e) => e);
    expect(err).toMatchObject({ code: 'ERR_ZGC_CONNECTION', sent: false, server: `http://127.0.0.1:${port}` });
  });

  test('requests spread over the servers; a dead one is passed over and left out; every answer is right', async () => {
    const other = await listenInProcess([live.repo]);
    const port = await deadPort();
    const dead = `http://127.0.0.1:${port}`;
    const client = await connect([live.server.url, other.url, dead], { retryAfterMs: 60000 });
    try {
      const remote = await client.model('add');
      const next = rng(5);
      const runs = Array.from({ length: 60 }, () => {
        const a = randomF32(next, 4);
        const b = randomF32(next, 4);
        return { want: Array.from(a, (v, i) => Math.fround(v + b[i])), done: remote.runAsync({ a, b }) };
      });
      for (const r of runs) expect(Array.from((await r.done)[0].data)).toEqual(r.want);
      const stats = client.stats();
      expect(stats.map((s) => s.url)).toEqual([live.server.url, other.url, dead]);
      expect(stats[0].requests).toBeGreaterThan(5);
      expect(stats[1].requests).toBeGreaterThan(5);
      // Tried once (or by the first calls that raced to it), then left out.
      expect(stats[2]).toMatchObject({ outstanding: 0, available: false });
      expect(stats[2].failures).toBe(stats[2].requests);
      expect(stats[2].failures).toBeGreaterThanOrEqual(1);
      expect(stats[0].failovers + stats[1].failovers + stats[2].failovers).toBe(stats[2].failures);
    } finally {
      client.close();
      await other.stop();
    }
  });
});

describe('a server left out comes back', () => {
  test('once it answers ready again (asked every retryAfterMs), it takes requests again', async () => {
    const port = await deadPort();
    const client = await connect([live.server.url, `http://127.0.0.1:${port}`], { retryAfterMs: 50 });
    let late;
    try {
      const add = await client.model('add');
      const run = async () => expect(Array.from((await add.runAsync({ a: [1, 2, 3, 4], b: [4, 3, 2, 1] }))[0].data)).toEqual([5, 5, 5, 5]);
      for (let i = 0; i < 4; i++) await run();
      expect(client.stats()[1]).toMatchObject({ available: false, outstanding: 0 });
      expect(client.stats()[1].failures).toBeGreaterThanOrEqual(1);
      const failures = client.stats()[1].failures;
      // Now something listens there: the next probe finds it ready.
      const { createServer } = require('../../lib/serve');
      late = createServer({ models: [live.repo], log: () => {} });
      await new Promise((resolve) => late.listen(port, '127.0.0.1', resolve));
      const deadline = Date.now() + 10000;
      while (!client.stats()[1].available && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(client.stats()[1].available).toBe(true);
      const before = client.stats()[1].requests;
      await Promise.all(Array.from({ length: 10 }, run));
      expect(client.stats()[1].requests).toBeGreaterThan(before);
      // Probes are not requests: no failure was added while it was away.
      expect(client.stats()[1].failures).toBe(failures);
    } finally {
      client.close();
      if (late) await late.shutdown({ deadlineMs: 5000 });
    }
  });
});

describe('the package entry', () => {
  test('zgc-runtime/client resolves to this module, from CommonJS and ESM', async () => {
    const pkg = JSON.parse(fs.readFileSync(require.resolve('../../package.json'), 'utf8'));
    expect(pkg.exports['./client']).toEqual({ types: './lib/client/index.d.ts', import: './lib/client/index.mjs', require: './lib/client/index.js' });
    const { execFileSync } = require('node:child_process');
    const both = execFileSync(process.execPath, ['--input-type=module', '-e', "import { connect } from 'zgc-runtime/client'; import { createRequire } from 'node:module'; console.log(connect === createRequire(import.meta.url)('zgc-runtime/client').connect, typeof connect)"], { cwd: require('node:path').join(__dirname, '..', '..'), encoding: 'utf8' });
    expect(both.trim()).toBe('true function');
  });
});
