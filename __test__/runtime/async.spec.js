'use strict';

const { execFileSync } = require('node:child_process');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const { load, ZgcError } = require('../..');
const { fixture, rng, randomF32 } = require('../helpers');

const data = (t) => Array.from(t.data);
// Arrays made by native code belong to Node's main realm, not to Jest's sandbox, so
// `instanceof` against the sandbox's constructors is false: compare the class tag.
const kind = (array) => Object.prototype.toString.call(array).slice(8, -1);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function slow(ms) {
  const rt = load(fixture('slow'));
  rt.set('sleep_ms', ms);
  return rt;
}

/**
 * slow-gated: run k of the instance waits until gate[0] >= k and writes k to started[0] as it
 * begins, so a test holds a run on the instance by construction and releases it.
 */
function gated() {
  const rt = load(fixture('slow-gated'));
  rt.set('sleep_ms', 0);
  const gate = rt.storage('gate');
  const started = rt.storage('started');
  const begun = async (k) => {
    while (started[0] < k) await new Promise((r) => setImmediate(r));
  };
  return { rt, gate, begun };
}

describe('runAsync', () => {
  test('gives the same outputs as run, as Tensors', async () => {
    const rt = load(fixture('add'));
    const next = rng(40);
    for (let i = 0; i < 20; i++) {
      const a = randomF32(next, 4, 100);
      const b = randomF32(next, 4, 100);
      const [out] = await rt.runAsync({ a, b });
      expect(out.dtype).toBe('f32');
      expect(out.shape).toEqual([4]);
      expect(kind(out.data)).toBe('Float32Array');
      expect(data(out)).toEqual(data(rt.run({ a, b })[0]));
      expect(data(out)).toEqual(Array.from(a, (v, k) => Math.fround(v + b[k])));
    }
    rt.close();
  });

  test('runs off the event loop: timers keep firing during a 300 ms run, unlike run()', async () => {
    const rt = slow(300);
    let ticks = 0;
    const timer = setInterval(() => {
      ticks += 1;
    }, 10);
    await rt.runAsync({ x: [1, 2, 3, 4] });
    const duringAsync = ticks;
    ticks = 0;
    rt.run({ x: [1, 2, 3, 4] });
    const duringSync = ticks;
    await sleep(0);
    clearInterval(timer);
    rt.close();
    expect(duringAsync).toBeGreaterThanOrEqual(10); // ~30 expected; shared machines are slow
    expect(duringSync).toBe(0);
  });

  test('inputs are taken at call time: mutating them afterwards changes nothing', async () => {
    const rt = slow(50);
    const first = rt.runAsync({ x: [0, 0, 0, 0] }); // keeps the runtime busy
    const x = new Float32Array([1, 2, 3, 4]);
    const second = rt.runAsync({ x });
    x.fill(100);
    await first;
    expect(data((await second)[0])).toEqual([2, 4, 6, 8]);
    rt.close();
  });

  test('calls on one runtime queue in call order and never overlap inside the instance', async () => {
    const rt = slow(2);
    const runs = Array.from({ length: 25 }, (_, i) => rt.runAsync({ x: [i, 0, 0, 0] }));
    const results = await Promise.all(runs);
    results.forEach((outputs, i) => {
      expect(outputs[0].data[0]).toBe(2 * i);
      expect(outputs[1].data[0]).toBe(i + 1); // the instance's own run count
      expect(outputs[1].data[1]).toBe(1); // at most one call inside it at a time
    });
    rt.close();
  });

  test('a synchronous call while an async run is pending throws ERR_ZGC_BUSY, then works', async () => {
    const rt = slow(30);
    const pending = rt.runAsync({ x: [1, 1, 1, 1] });
    for (const call of [() => rt.run(), () => rt.set('x', [1, 2, 3, 4]), () => rt.output(0)]) {
      expect(call).toThrow(expect.objectContaining({ code: 'ERR_ZGC_BUSY' }));
    }
    await pending;
    expect(data(rt.run({ x: [1, 2, 3, 4] })[0])).toEqual([2, 4, 6, 8]);
    rt.close();
  });

  test('an AbortSignal cancels a run that has not started; a started run finishes', async () => {
    const { rt, gate, begun } = gated();
    const controller = new AbortController();
    const started = rt.runAsync({ x: [1, 1, 1, 1] }, { signal: controller.signal });
    const queued = rt.runAsync({ x: [2, 2, 2, 2] }, { signal: controller.signal });
    const queuedResult = queued.then(
      () => 'resolved',
      (err) => err,
    );
    await begun(1);
    controller.abort();
    gate[0] = Infinity;
    expect((await started)[0].data[0]).toBe(2);
    const err = await queuedResult;
    expect(err).toBeInstanceOf(DOMException);
    expect(err.name).toBe('AbortError');
    // The aborted run never ran: the next run is the instance's second.
    const [, stats] = await rt.runAsync({ x: [0, 0, 0, 0] });
    expect(stats.data[0]).toBe(2);
    const already = AbortSignal.abort();
    await expect(rt.runAsync({ x: [0, 0, 0, 0] }, { signal: already })).rejects.toMatchObject({ name: 'AbortError' });
    await expect(rt.runAsync({}, { signal: 'no' })).rejects.toThrow(TypeError);
    rt.close();
  });

  test('an abort reason of your own is what the run rejects with, before and after it is queued', async () => {
    const rt = slow(60);
    const busy = rt.runAsync({ x: [1, 1, 1, 1] });
    const reason = new Error('client went away');
    const controller = new AbortController();
    const queued = rt.runAsync({ x: [2, 2, 2, 2] }, { signal: controller.signal }).catch((err) => err);
    controller.abort(reason);
    expect(await queued).toBe(reason);
    await expect(rt.runAsync({ x: [3, 3, 3, 3] }, { signal: controller.signal })).rejects.toBe(reason);
    await busy;
    rt.close();
  });

  test('a settled run leaves no listener on its signal, whether it resolved or rejected', async () => {
    const { getEventListeners } = require('node:events');
    const rt = load(fixture('status'), { offload: 'always' });
    rt.set('copy_status', 0);
    rt.set('bind_status', 0);
    rt.set('buf', [1, 2]);
    const { signal } = new AbortController();
    const running = rt.runAsync({ run_status: 0 }, { signal });
    expect(getEventListeners(signal, 'abort').length).toBe(1);
    await running;
    expect(getEventListeners(signal, 'abort').length).toBe(0);
    const failing = rt.runAsync({ run_status: 8 }, { signal }).catch((err) => err);
    expect(getEventListeners(signal, 'abort').length).toBe(1);
    expect((await failing).code).toBe('ERR_ZGC_MISSING_BINDING');
    expect(getEventListeners(signal, 'abort').length).toBe(0);
    rt.close();
  });

  test('runAsync checks its arguments as run() does, and null or undefined mean none', async () => {
    const rt = load(fixture('add'), { offload: 'always' });
    rt.set('a', [1, 2, 3, 4]);
    rt.set('b', [1, 1, 1, 1]);
    for (const call of [() => rt.runAsync(), () => rt.runAsync(null), () => rt.runAsync(undefined, null), () => rt.runAsync({}, {})]) {
      expect(data((await call())[0])).toEqual([2, 3, 4, 5]);
    }
    await expect(rt.runAsync(5)).rejects.toEqual(new TypeError('run inputs must be an object of source names to values, got number'));
    await expect(rt.runAsync({}, { signal: {} })).rejects.toEqual(new TypeError('runAsync option signal must be an AbortSignal'));
    rt.close();
    await expect(rt.runAsync({})).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED', message: 'runtime is closed' });
  });

  test('close() during a run: the run finishes before deinit, queued runs reject ERR_ZGC_CLOSED', async () => {
    const { rt, gate, begun } = gated();
    const inFlight = rt.runAsync({ x: [3, 3, 3, 3] });
    const queued = rt.runAsync({ x: [4, 4, 4, 4] });
    const queuedResult = queued.catch((err) => err);
    await begun(1);
    rt.close();
    expect(rt.closed).toBe(true);
    // The run is still held: the storage it reads outlives close() until it finishes.
    gate[0] = 1;
    // slow.c fails a run whose storage was deinitialised under it.
    expect(data((await inFlight)[0])).toEqual([6, 6, 6, 6]);
    const err = await queuedResult;
    expect(err).toBeInstanceOf(ZgcError);
    expect(err.code).toBe('ERR_ZGC_CLOSED');
    await expect(rt.runAsync()).rejects.toMatchObject({ code: 'ERR_ZGC_CLOSED' });
  });

  test('errors reject with ZgcError codes and leave the runtime usable', async () => {
    const rt = load(fixture('status'));
    rt.set('copy_status', 0);
    rt.set('bind_status', 0);
    rt.set('buf', [1, 2]);
    await expect(rt.runAsync({ run_status: 8 })).rejects.toMatchObject({ code: 'ERR_ZGC_MISSING_BINDING', status: 8, operation: 'zgc_runtime_run' });
    await expect(rt.runAsync({ nope: 1 })).rejects.toMatchObject({ code: 'ERR_ZGC_UNKNOWN_SOURCE' });
    await expect(rt.runAsync({ buf: [1, 2, 3] })).rejects.toMatchObject({ code: 'ERR_ZGC_SIZE', source: 'buf' });
    expect((await rt.runAsync({ run_status: 0 }))[0].data[0]).toBe(3);
    rt.close();
  });

  test('storage bound with bind() is copied when the run starts, so later writes do not race it', async () => {
    const rt = load(fixture('big'));
    const n = 1 << 20;
    const w = new Float32Array(n).fill(1);
    rt.bind('w', w);
    const x = new Float32Array(n);
    const run = rt.runAsync({ x });
    w.fill(50); // after the run started: not seen by it
    expect((await run)[0].data[12345]).toBe(1);
    expect((await rt.runAsync({ x }))[0].data[12345]).toBe(50); // the next run copies again
    rt.close();
  });

  test('storage() is runtime-owned and zero-copy; its memory lives while the runtime or any buffer over it does', async () => {
    const rt = load(fixture('big'));
    const n = 1 << 20;
    const w = rt.storage('w');
    expect(kind(w)).toBe('Float32Array');
    expect(w.length).toBe(n);
    w.fill(7);
    const x = new Float32Array(n).fill(1);
    expect((await rt.runAsync({ x }))[0].data[999]).toBe(8);
    expect(rt.run({ x })[0].data[5]).toBe(8);
    // Transfer through structuredClone: Node 20 sends a copy, Node 22+ and Bun refuse
    // (DataCloneError), Deno moves the memory to the clone. Either way the view that reaches
    // the storage is the one runs read.
    let view = w;
    try {
      const clone = structuredClone(w, { transfer: [w.buffer] });
      if (w.length === 0) view = clone; // moved: the clone is the storage now
      else clone.fill(9); // a copy: writing it reaches nothing
    } catch (err) {
      expect(err.name).toBe('DataCloneError');
      expect(w.length).toBe(n);
    }
    view.fill(4);
    expect((await rt.runAsync({ x }))[0].data[3]).toBe(5);
    // ArrayBuffer.prototype.transfer (Node 22+, Bun, Deno) moves it too: the old view is
    // detached, the new buffer is the runtime's storage, and runs see writes through it.
    if (typeof view.buffer.transfer === 'function') {
      const moved = new Float32Array(view.buffer.transfer());
      expect(view.length).toBe(0);
      moved.fill(6);
      expect((await rt.runAsync({ x }))[0].data[3]).toBe(7);
      expect(rt.run({ x })[0].data[n - 1]).toBe(7);
      view = moved;
    }
    rt.close();
    // After close the memory is still there for the buffer that holds it.
    expect(view[0]).toBe(typeof view.buffer.transfer === 'function' ? 6 : 4);
    expect(view[n - 1]).toBe(view[0]);
  });

  test('storage() refuses OWNED and EMBEDDED sources', () => {
    const rt = load(fixture('dtypes'));
    expect(() => rt.storage('x')).toThrow(expect.objectContaining({ code: 'ERR_ZGC_NOT_BOUND' }));
    expect(() => rt.storage('k')).toThrow(expect.objectContaining({ code: 'ERR_ZGC_EMBEDDED' }));
    const hb = rt.storage('hb');
    expect(kind(hb)).toBe('Uint16Array');
    expect(hb.length).toBe(6);
    rt.close();
  });

  test('where external buffers are forbidden, storage() falls back to a bound JavaScript array', () => {
    const script = `
      const { load } = require('.');
      const { fixture } = require('./__test__/fixtures/manifest');
      const rt = load(fixture('big'));
      const w = rt.storage('w');
      w.fill(2);
      const first = rt.run({ x: new Float32Array(w.length).fill(1) })[0].data[0];
      structuredClone(w, { transfer: [w.buffer] });
      let code = null;
      try { rt.run({ x: new Float32Array(1 << 20) }); } catch (err) { code = err.code; }
      console.log(JSON.stringify({ first, code }));`;
    const out = execFileSync(process.execPath, ['-e', script], {
      cwd: path.join(testDir, '..'),
      env: { ...process.env, ZGC_RUNTIME_NO_EXTERNAL_BUFFERS: '1' },
      encoding: 'utf8',
    });
    // A JS-owned fallback is detached by the transfer, which the runtime then detects.
    expect(JSON.parse(out)).toEqual({ first: 3, code: 'ERR_ZGC_DETACHED' });
  });
});
