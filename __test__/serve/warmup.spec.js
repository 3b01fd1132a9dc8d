'use strict';

// Model warmup (issue 38): the requests config.json's "warmup" names run on every instance
// before the model serves; meanwhile it and the server are not ready, with the reason; a
// warmup that fails keeps the model unavailable, with the reason in its ready endpoint, the
// index and the log, and the rest of the server serving.
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { formatNpy } = require('../../lib/npy');
const { writeModel, listenInProcess } = require('../serve/setup');

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(check, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) return true;
    await sleep(10);
  }
  return false;
}

describe('model warmup (issue 38)', () => {
  let repo;
  let server;
  beforeAll(async () => {
    repo = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-warmup-'));
    const f32 = (v) => formatNpy('f32', [], Float32Array.of(v));
    // Two instances, 60 ms a run: warmup "zeros" three times, then "file" once, on each.
    writeModel(
      repo,
      'warm',
      { 1: 'slow' },
      { instances: 2, parameters: { sleep_ms: 'sleep.npy' }, warmup: [{ name: 'zeros', count: 3, inputs: { x: 'zeros' } }, { name: 'file', inputs: { x: { file: 'x.npy' } } }] },
      { 'sleep.npy': f32(60), 'x.npy': formatNpy('f32', [4], Float32Array.of(1, 2, 3, 4)) },
    );
    // Its warmup's run returns status 3: the artifact's own error.
    writeModel(repo, 'badwarm', { 1: 'status' }, { instances: 1, warmup: [{ name: 'fails', inputs: { run_status: { file: 'bad.npy' } } }] }, { 'bad.npy': formatNpy('i8', [], Int8Array.of(3)) });
    writeModel(repo, 'add', { 1: 'add' }, { instances: 1 });
    server = await listenInProcess([repo, '--model-control', 'explicit']);
  });
  afterAll(async () => {
    if (server) await server.stop();
    fs.rmSync(repo, { recursive: true, force: true });
  });
  const get = (p) => fetch(`${server.url}${p}`);

  test('a model is not ready while it warms up, and serves once every instance has run its warmup', async () => {
    // Listening already; the warmup takes four rounds of 60 ms.
    const early = await get('/v2/models/warm/ready');
    expect(early.status).toBe(400);
    expect((await early.json()).error).toBe('model "warm" is not ready (LOADING: warming up)');
    expect((await get('/v2/health/ready')).status).toBe(503);
    // Others serve meanwhile.
    expect((await get('/v2/models/add/ready')).status).toBe(200);

    expect(await until(async () => (await get('/v2/models/warm/ready')).status === 200)).toBe(true);
    // Eight runs before the first request: four on each instance.
    const stats = (await (await get('/v2/models/warm/stats')).json()).model_stats[0];
    expect([stats.execution_count, stats.inference_count]).toEqual([8, 0]);
    const r = await fetch(`${server.url}/v2/models/warm/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [4], data: [1, 1, 1, 1] }] }) });
    const body = await r.json();
    expect(body.outputs[0].data).toEqual([2, 2, 2, 2]);
    // The instance's fifth run.
    expect(body.outputs[1].data[0]).toBe(5);
    expect(server.stderr()).toMatch(/model "warm" version 1 ready \(2 instances, warmed up\)/);
  });

  test('a failed warmup keeps the model unavailable with the reason, in its ready endpoint, the index and the log', async () => {
    expect(await until(() => /model "badwarm" did not load/.test(server.stderr()))).toBe(true);
    const reason = 'version 1: warmup "fails" failed: ';
    const ready = await get('/v2/models/badwarm/ready');
    expect(ready.status).toBe(400);
    const message = (await ready.json()).error;
    expect(message.startsWith(`model "badwarm" is not ready (UNAVAILABLE: ${reason}`)).toBe(true);
    expect(message).toMatch(/\(ERR_ZGC_[A-Z_]+\)\)$/);
    const index = await (await fetch(`${server.url}/v2/repository/index`, { method: 'POST' })).json();
    expect(index.find((m) => m.name === 'badwarm')).toEqual({ name: 'badwarm', state: 'UNAVAILABLE', reason: expect.stringMatching(/^version 1: warmup "fails" failed: /) });
    expect(server.stderr()).toContain(`model "badwarm" did not load: ${reason}`);
    // A load by request waits for the warmup and says why it failed.
    const load = await fetch(`${server.url}/v2/repository/models/badwarm/load`, { method: 'POST' });
    expect(load.status).toBe(400);
    expect((await load.json()).error).toMatch(/^failed to load model "badwarm": version 1: warmup "fails" failed: /);
  });

  test('a warmup naming no input of the model, or a file of another shape, is a load error naming it', () => {
    const { createServer } = require('../../lib/serve');
    const bad = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-warmup-bad-'));
    try {
      writeModel(bad, 'm', { 1: 'add' }, { warmup: [{ name: 'w', inputs: { c: 'zeros' } }] });
      expect(() => createServer({ models: bad })).toThrow(/warmup "w" names input "c", which the model has not \(its inputs: a, b\)/);
      writeModel(bad, 'm', { 1: 'add' }, { warmup: [{ name: 'w', inputs: { a: { file: 'a.npy' } } }] }, { 'a.npy': formatNpy('f32', [3], new Float32Array(3)) });
      expect(() => createServer({ models: bad })).toThrow(/warmup "w": .*a\.npy has shape \(3\), input "a" has shape \(4\)/);
      writeModel(bad, 'm', { 1: 'add' }, { warmup: [{ name: 'w', inputs: { a: { file: 'a.npy' } } }] }, { 'a.npy': formatNpy('i8', [4], new Int8Array(4)) });
      expect(() => createServer({ models: bad })).toThrow(/warmup "w": .*a\.npy holds i8, input "a" is FP32/);
      writeModel(bad, 'm', { 1: 'add' }, { warmup: [{ name: 'w', count: 0 }] });
      expect(() => createServer({ models: bad })).toThrow(/warmup "w": "count" must be a positive integer, got 0/);
    } finally {
      fs.rmSync(bad, { recursive: true, force: true });
    }
  });
});

describe('warmup requests as config.json gives them', () => {
  const { checkWarmup, randomValues } = require('../../lib/serve/warmup');
  const rule = '"warmup" must be an array of { "name", "count", "inputs": { input: "zeros" | "random" | { "file": "x.npy" } } }';
  test('defaults: a name by position, a count of 1, inputs all zeros', () => {
    expect(checkWarmup(undefined, 'm')).toEqual([]);
    expect(checkWarmup([{}, { name: 'w', count: 2, inputs: { a: 'random', b: { file: 'b.npy' } } }], 'm')).toEqual([
      { name: 'warmup 0', count: 1, inputs: {} },
      { name: 'w', count: 2, inputs: { a: 'random', b: { file: 'b.npy' } } },
    ]);
  });
  test.each([
    [{}, `m: ${rule}`],
    [[null], `m: ${rule}; entry 0 is null`],
    [[3], `m: ${rule}; entry 0 is 3`],
    [[[]], `m: ${rule}; entry 0 is []`],
    [[{ name: 3 }], 'm: warmup 0: "name" must be a string'],
    [[{ name: 'w', count: 1.5 }], 'm: warmup "w": "count" must be a positive integer, got 1.5'],
    [[{ name: 'w', inputs: null }], 'm: warmup "w": "inputs" must be an object of input name -> "zeros", "random" or { "file" }'],
    [[{ name: 'w', inputs: [] }], 'm: warmup "w": "inputs" must be an object of input name -> "zeros", "random" or { "file" }'],
    [[{ name: 'w', inputs: { a: 'ones' } }], 'm: warmup "w": input "a" must be "zeros", "random" or { "file": "x.npy" }, got "ones"'],
    [[{ name: 'w', inputs: { a: null } }], 'm: warmup "w": input "a" must be "zeros", "random" or { "file": "x.npy" }, got null'],
    [[{ name: 'w', inputs: { a: { file: 3 } } }], 'm: warmup "w": input "a" must be "zeros", "random" or { "file": "x.npy" }, got {"file":3}'],
    [[{ name: 'w', inputs: { a: { file: 'a.npy', bind: true } } }], 'm: warmup "w": input "a" must be "zeros", "random" or { "file": "x.npy" }, got {"file":"a.npy","bind":true}'],
  ])('%j is refused', (value, message) => {
    expect(() => checkWarmup(value, 'm')).toThrow(new Error(message));
  });
  test('random values: the same at every load, small, and of every sign', () => {
    const { f16Value } = require('../../lib/numbers');
    const f32 = randomValues({ datatype: 'FP32', count: 1000 }, 7);
    expect(f32).toEqual(randomValues({ datatype: 'FP32', count: 1000 }, 7));
    expect(f32).not.toEqual(randomValues({ datatype: 'FP32', count: 1000 }, 8));
    expect(Math.min(...f32)).toBeGreaterThanOrEqual(-1);
    expect(Math.max(...f32)).toBeLessThan(1);
    expect(Math.min(...f32)).toBeLessThan(-0.9);
    expect(Math.max(...f32)).toBeGreaterThan(0.9);
    const f16 = Array.from(randomValues({ datatype: 'FP16', count: 1000 }, 7), f16Value);
    expect(f16.every((v) => Math.abs(v) < 1)).toBe(true);
    expect(f16.some((v) => v < -0.5) && f16.some((v) => v > 0.5)).toBe(true);
    const i8 = randomValues({ datatype: 'INT8', count: 1000 }, 7);
    expect(i8).toBeInstanceOf(Int8Array);
    expect(Math.min(...i8)).toBeLessThan(-120);
    expect(Math.max(...i8)).toBeGreaterThan(120);
    const bool = randomValues({ datatype: 'BOOL', count: 1000 }, 7);
    expect(new Set(bool)).toEqual(new Set([0, 1]));
    // A seed of 0 still makes values (xorshift stays at 0 from 0).
    expect(new Set(randomValues({ datatype: 'BOOL', count: 100 }, 0)).size).toBe(2);
  });
});
