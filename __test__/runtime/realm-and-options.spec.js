'use strict';

// Issue 25: results behave inside Jest (every TypedArray handed out is an instance of the
// calling realm's constructors: this file runs in Jest's own realm), and close() right after
// the first runAsync lets the run that stats() reports in flight finish.
const vm = require('node:vm');
const { load, createPool } = require('../..');
const { fixture, f16Bits } = require('../helpers');
const { expectDtypes, randomDtypeValues } = require('../dtypes-model');

const HAS_F16 = typeof Float16Array === 'function';
const data = (t) => Array.from(t.data);

// Jest gives each test file a realm of its own; the test only means something where it does.
describe('Jest runs this file in a realm of its own (issue 25)', () => {
  test('this file runs in a realm other than the main one (as every Jest test does)', () => {
    const mainFloat32Array = vm.runInThisContext('Float32Array');
    expect(mainFloat32Array === Float32Array).toBe(false);
  });
});

describe("every TypedArray handed out is an instance of this realm's constructor (issue 25)", () => {
  const modes = ['never', 'always', 'auto'];

  test.each(modes)('runtime results, offload %s: sync, into, runAsync and output()', async (offload) => {
    const rt = load(fixture('add'), { offload });
    const inputs = { a: [1, 2, 3, 4], b: [10, 20, 30, 40] };
    const results = [rt.run(inputs)[0], (await rt.runAsync(inputs))[0], (await rt.runAsync(inputs))[0], rt.output(0)];
    for (const y of results) {
      expect(y.data).toBeInstanceOf(Float32Array);
      expect(y.data instanceof Float32Array).toBe(true);
      expect(data(y)).toEqual([11, 22, 33, 44]);
    }
    rt.close();
  });

  test('large outputs (past the small-output scratch) and pool runs, inline and offloaded', async () => {
    const x = Float32Array.from({ length: 1 << 20 }, (_, i) => i % 7);
    for (const offload of modes) {
      const pool = createPool(fixture('add-1m'), { size: 2, offload });
      const [y] = await pool.run({ a: x, b: x });
      expect(y.data).toBeInstanceOf(Float32Array);
      expect([y.data[0], y.data[6], y.data[(1 << 20) - 1]]).toEqual([0, 12, 2 * (((1 << 20) - 1) % 7)]);
      await pool.close();
    }
  });

  test('i8, bool and f16 (values and bits) outputs, offloaded, equal to the model of dtypes.c', async () => {
    const values = randomDtypeValues(25);
    for (const f16 of ['float32', 'bits']) {
      const rt = load(fixture('dtypes'), { offload: 'always', f16 });
      for (const [name, v] of Object.entries(values)) rt.set(name, v);
      const outputs = await rt.runAsync();
      const classes = { f32: Float32Array, f16: f16 === 'bits' ? Uint16Array : Float32Array, i8: Int8Array, bool: Uint8Array };
      for (const o of outputs) expect(o.data).toBeInstanceOf(classes[o.dtype]);
      const expected = expectDtypes(values, 0).outputs;
      expect(Array.from(outputs[2].data)).toEqual(expected[2]);
      expect(Array.from(outputs[3].data)).toEqual(expected[3]);
      expect(Array.from(outputs[1].data)).toEqual(f16 === 'bits' ? expected[1].map(f16Bits) : expected[1]);
      rt.close();
    }
  });

  (HAS_F16 ? test : test.skip)("f16: 'float16' results and storage are this realm's Float16Array", async () => {
    const rt = load(fixture('half'), { offload: 'always', f16: 'float16' });
    const [h] = await rt.runAsync({ x: Float32Array.from({ length: 1 << 20 }, (_, i) => i / 4) });
    expect(h.data).toBeInstanceOf(Float16Array);
    expect(h.data[3]).toBe(0.75);
    rt.close();
  });

  test('storage() arrays, and they stay the storage the artifact reads', async () => {
    const rt = load(fixture('dtypes'), { offload: 'always' });
    const classes = { f32: Float32Array, f16: Uint16Array, i8: Int8Array, bool: Uint8Array };
    for (const s of rt.sources.filter((s) => s.binding === 'bound')) expect(rt.storage(s.name)).toBeInstanceOf(classes[s.dtype]);
    rt.close();
    const add = load(fixture('add-bound-1m'), { offload: 'always' });
    const a = add.storage('a');
    const b = add.storage('b');
    expect([a, b]).toEqual([expect.any(Float32Array), expect.any(Float32Array)]);
    a.fill(1);
    b.fill(2);
    expect((await add.runAsync())[0].data[1000]).toBe(3);
    a[1000] = 100;
    expect(add.run()[0].data[1000]).toBe(102);
    add.close();
  });
});

describe('close() right after the first runAsync: the run it accepted finishes (issue 25)', () => {
  test.each(['always', 'auto'])('offload %s, 50 fresh runtimes: the run resolves, later ones reject ERR_ZGC_CLOSED', async (offload) => {
    for (let i = 0; i < 50; i++) {
      const rt = load(fixture('add'), { offload });
      const first = rt.runAsync({ a: [i, 0, 0, 0], b: [1, 1, 1, 1] });
      rt.close();
      expect(data((await first)[0])).toEqual([i + 1, 1, 1, 1]);
      await expect(rt.runAsync({})).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED' });
    }
  });

  test('of two runs submitted, the one in flight finishes and the one waiting is rejected', async () => {
    for (let i = 0; i < 20; i++) {
      const rt = load(fixture('slow'), { offload: 'always' });
      rt.set('sleep_ms', 5);
      const first = rt.runAsync({ x: [i, 1, 1, 1] });
      const second = rt.runAsync({ x: [2, 2, 2, 2] }).catch((err) => err);
      const { inFlight, queueDepth } = rt.stats();
      expect([inFlight, queueDepth]).toEqual([1, 1]);
      rt.close();
      expect(data((await first)[0])).toEqual([2 * i, 2, 2, 2]);
      expect(await second).toMatchObject({ code: 'ERR_ZGC_CLOSED' });
    }
  });
});

describe('options objects refuse unknown keys, naming the nearest valid one (issue 25)', () => {
  const refused = (call, message) => expect(call).toThrow(new TypeError(message));

  test('load, run, runAsync', async () => {
    refused(() => load(fixture('add'), { ofload: 'always' }), 'load() has no option "ofload" (did you mean "offload"?); it takes f16, offload, isolate, timeoutMs, maxMemoryMb, startTimeoutMs');
    refused(() => load(fixture('add'), { f16s: 'bits' }), 'load() has no option "f16s" (did you mean "f16"?); it takes f16, offload, isolate, timeoutMs, maxMemoryMb, startTimeoutMs');
    const rt = load(fixture('add'));
    refused(() => rt.run({}, { int: [] }), 'run() has no option "int" (did you mean "into"?); it takes into');
    await expect(rt.runAsync({}, { signl: null })).rejects.toEqual(new TypeError('runAsync() has no option "signl" (did you mean "signal"?); it takes signal'));
    await expect(rt.runAsync({}, { timeout: 5 })).rejects.toEqual(new TypeError('runAsync() has no option "timeout"; it takes signal'));
    // The runtime is still usable.
    expect(Array.from(rt.run({ a: [1, 1, 1, 1], b: [2, 2, 2, 2] })[0].data)).toEqual([3, 3, 3, 3]);
    rt.close();
  });

  test('createPool and pool.run', async () => {
    refused(() => createPool(fixture('add'), { sise: 2 }), 'createPool() has no option "sise" (did you mean "size"?); it takes size, maxQueue, setup, f16, offload, isolate, timeoutMs, maxMemoryMb, startTimeoutMs');
    refused(() => createPool(fixture('add'), { maxqueue: 2 }), 'createPool() has no option "maxqueue" (did you mean "maxQueue"?); it takes size, maxQueue, setup, f16, offload, isolate, timeoutMs, maxMemoryMb, startTimeoutMs');
    const pool = createPool(fixture('add'), { size: 1 });
    await expect(pool.run({}, { sigal: undefined })).rejects.toEqual(new TypeError('pool.run() has no option "sigal" (did you mean "signal"?); it takes signal, priority'));
    await pool.close();
  });

  test("createServer: unknown keys refused; maxBody takes the CLI's sizes", async () => {
    const { createServer } = require('../../lib/serve');
    const models = [`add=${fixture('add')}`];
    expect(() => createServer({ models, maxbody: 5 })).toThrow(new TypeError(
      'createServer() has no option "maxbody" (did you mean "maxBody"?); it takes models, config, poolSize, maxQueue, timeoutMs, pollMs, shutdownTimeoutMs, offload, isolate, modelControl, restrictedApi, allowClientShm, maxBody, maxInflightBytes, headersTimeoutMs, requestTimeoutMs, keepAliveTimeoutMs, maxConnections, parseTimeoutMs, grpcMaxConcurrentStreams, grpcHandshakeTimeoutMs, grpcIdleTimeoutMs, log',
    ));
    expect(() => createServer({ models, maxBody: '64 furlongs' })).toThrow(RangeError);
    expect(() => createServer({ models, maxBody: '0k' })).toThrow(/maxBody must be a size/);
    for (const [maxBody, bytes] of [['64m', 64 * 2 ** 20], ['1.5k', 1536], [2048, 2048], ['10MB', 10 * 2 ** 20]]) {
      const server = createServer({ models, maxBody, pollMs: 0, poolSize: 1 });
      await new Promise((r) => server.listen(0, '127.0.0.1', r));
      const url = `http://127.0.0.1:${server.address().port}/v2/models/add/infer`;
      const over = await fetch(url, { method: 'POST', body: Buffer.alloc(bytes + 1, 32) });
      expect(over.status).toBe(413);
      const body = JSON.stringify({ inputs: [{ name: 'a', datatype: 'FP32', shape: [4], data: [1, 2, 3, 4] }, { name: 'b', datatype: 'FP32', shape: [4], data: [1, 1, 1, 1] }] });
      const ok = await fetch(url, { method: 'POST', body: body.padEnd(Math.min(bytes, 4096), ' ') });
      expect(ok.status).toBe(200);
      expect((await ok.json()).outputs[0].data).toEqual([2, 3, 4, 5]);
      expect(() => server.shutdown({ deadline: 5 })).toThrow('server.shutdown() has no option "deadline" (did you mean "deadlineMs"?); it takes deadlineMs');
      await server.shutdown({ deadlineMs: 5000 });
    }
  });
});
