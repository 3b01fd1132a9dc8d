'use strict';

// The PTO bindings against pto_host.c, a CPU implementation of the host API that keeps the
// real library's hazards (process-global state, first set_device wins, calls from another
// thread fail, hanging parameters hang). koffi opens the same copy of the library to read the
// fixture's call counter, so "refused without calling the library" is observed, not assumed.
const { execFileSync, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
// The suite's own folder (__test__), which fixtures and helpers are found from.
const testDir = path.join(__dirname, '..');
const koffi = require('koffi');
const zgc = require('../..');
const { fixture } = require('../helpers');

const { pto } = zgc;
const { PtoError } = pto;
const text = (s) => new TextEncoder().encode(s);
const KERNELS = { 0: 'add', 1: 'add_scalar', 2: 'mul' };
const LAUNCH = { aicpuThreadNum: 1, blockDim: 1, aicpuBinary: text('aicpu.so'), aicoreBinary: text('aicore.o') };

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'zgc-pto-'));
let copies = 0;
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** A copy of the library under a new path: a separate instance with its own global state. */
function freshLibrary() {
  const file = path.join(tmp, `pto-${copies++}.so`);
  fs.copyFileSync(fixture('pto-host'), file);
  const library = pto.load(file);
  const probe = koffi.load(file);
  return {
    file,
    library,
    calls: probe.func('long pto_fixture_calls(void)'),
    lastTid: probe.func('long pto_fixture_last_tid(void)'),
    hung: probe.func('long pto_fixture_hung(void)'),
    live: probe.func('int pto_fixture_live(void)'),
    initFromHere: probe.func('int InitRuntime(void *)'),
  };
}

async function registerAll(library, kernels = KERNELS) {
  for (const [id, name] of Object.entries(kernels)) await library.registerKernel(Number(id), text(name));
}

async function rejects(promise, code, message) {
  const err = await promise.then(
    () => null,
    (e) => e,
  );
  expect(err).toBeInstanceOf(PtoError);
  expect(err.code).toBe(code);
  if (message) expect(err.message).toMatch(message);
  return err;
}

describe('pto: a task graph end to end', () => {
  test('setDevice, registerKernel, initialize, launch, finalize: states follow and validation passes', async () => {
    const { library } = freshLibrary();
    expect(library.runtimeSize).toBeGreaterThan(2_000_000);
    expect(library.device).toBeNull();
    await library.setDevice(0);
    expect(library.device).toBe(0);
    await registerAll(library);
    const rt = library.createRuntime();
    expect(rt.state).toBe('created');
    await rt.initialize();
    expect(rt.state).toBe('initialized');
    await rt.launch(LAUNCH);
    expect(rt.state).toBe('launched');
    await rt.finalize();
    expect(rt.state).toBe('finalized');
    // A second graph on the same library once the first is finalised.
    const again = library.createRuntime();
    await again.initialize();
    await again.launch({ ...LAUNCH, aicpuThreadNum: 4, blockDim: 24, deviceId: 0 });
    await again.finalize();
  });

  test('calls queued without awaiting run in call order', async () => {
    const { library } = freshLibrary();
    const rt = library.createRuntime();
    const steps = [library.setDevice(0), ...Object.entries(KERNELS).map(([id, k]) => library.registerKernel(Number(id), text(k))), rt.initialize(), rt.launch(LAUNCH), rt.finalize()];
    await Promise.all(steps);
    expect(rt.state).toBe('finalized');
  });

  test('every call runs on one dedicated thread of the library: not the JS thread, not a pool thread', async () => {
    const probe = freshLibrary();
    const { library } = probe;
    const tid = library.threadId;
    expect(tid).not.toBe(process.pid); // the main thread's tid is the pid
    expect(fs.readFileSync(`/proc/self/task/${tid}/comm`, 'utf8').trim()).toBe('zgc-pto-host');
    await library.setDevice(0);
    expect(probe.lastTid()).toBe(tid);
    await registerAll(library);
    const rt = library.createRuntime();
    await rt.initialize();
    await rt.launch(LAUNCH);
    expect(probe.lastTid()).toBe(tid);
    await rt.finalize();
    expect(probe.lastTid()).toBe(tid);
  });

  test('the fixture keeps the real rule: a call from a thread other than set_device\'s fails with 107002', async () => {
    const probe = freshLibrary();
    await probe.library.setDevice(0);
    // InitRuntime straight from the JS thread, as a thread-pool binding would: refused.
    expect(probe.initFromHere(Buffer.alloc(probe.library.runtimeSize + 64))).toBe(107002);
    const rt = probe.library.createRuntime();
    await rt.initialize(); // through the library's own thread: fine
    await rt.finalize().catch(() => {});
  });
});

describe('pto: loading', () => {
  test('the same path (also through a symlink or ~-free relative path) gives the same library', () => {
    const { file, library } = freshLibrary();
    expect(library.path).toBe(fs.realpathSync(file));
    expect(pto.load(file)).toBe(library);
    const link = path.join(tmp, `link-${copies++}.so`);
    fs.symlinkSync(file, link);
    expect(pto.load(link)).toBe(library);
    expect(pto.load(path.relative(process.cwd(), file))).toBe(library);
  });

  test('bytes load without leaving a file, as a separate library with its own state', async () => {
    const before = fs.readdirSync(os.tmpdir()).sort();
    const bytes = fs.readFileSync(fixture('pto-host'));
    const a = pto.load(bytes);
    const b = pto.load(new Uint8Array(bytes));
    expect(fs.readdirSync(os.tmpdir()).sort()).toEqual(before);
    expect(fs.readFileSync('/proc/self/maps', 'utf8')).toMatch(/memfd:zgc-pto-library \(deleted\)/);
    expect(a).not.toBe(b);
    expect(a.path).toBeNull();
    expect(a.threadId).not.toBe(b.threadId);
    // Separate process-global state: each takes its own first device.
    await a.setDevice(1);
    await b.setDevice(2);
    expect([a.device, b.device]).toEqual([1, 2]);
  });

  test('two libraries side by side run their graphs at once, each correct', async () => {
    const bytes = fs.readFileSync(fixture('pto-host'));
    const libraries = [pto.load(bytes), freshLibrary().library];
    await Promise.all(
      libraries.map(async (library, i) => {
        await library.setDevice(i);
        await registerAll(library);
        for (let round = 0; round < 5; round++) {
          const rt = library.createRuntime();
          await rt.initialize();
          await rt.launch({ ...LAUNCH, aicpuThreadNum: 2, blockDim: 4 });
          await rt.finalize();
        }
      }),
    );
  });

  test('missing symbols, non-libraries and missing files are ERR_PTO_LOAD naming the problem', () => {
    expect(() => pto.load(fixture('pto-no-finalize'))).toThrow(expect.objectContaining({ code: 'ERR_PTO_LOAD', message: expect.stringMatching(/does not export `FinalizeRuntime`/) }));
    expect(() => pto.load(fixture('not-a-library'))).toThrow(expect.objectContaining({ code: 'ERR_PTO_LOAD', message: expect.stringMatching(/not-a-library\.so/) }));
    expect(() => pto.load(path.join(tmp, 'nope.so'))).toThrow(expect.objectContaining({ code: 'ERR_PTO_LOAD', message: expect.stringMatching(/nope\.so.*No such file/) }));
    expect(() => pto.load(fs.readFileSync(fixture('pto-no-finalize')))).toThrow(expect.objectContaining({ code: 'ERR_PTO_LOAD', message: expect.stringMatching(/FinalizeRuntime/) }));
    expect(() => pto.load(new Uint8Array(0))).toThrow(PtoError);
    expect(() => pto.load(42)).toThrow(TypeError);
  });

  test('the subpath export and ESM give the same bindings', () => {
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', `
      import * as sub from 'zgc-runtime/pto';
      import { pto } from 'zgc-runtime';
      import { createRequire } from 'node:module';
      const cjs = createRequire(import.meta.url)('zgc-runtime/pto');
      console.log(JSON.stringify([sub.load === pto.load, cjs.load === pto.load, sub.PtoError === pto.PtoError]));
    `], { cwd: path.join(testDir, '..'), encoding: 'utf8', env: { ...process.env, NODE_PATH: '' } });
    expect(JSON.parse(out.trim().split('\n').pop())).toEqual([true, true, true]);
  });
});

describe('pto: misuse is a PtoError, and the library is never called', () => {
  test('out-of-order calls, a second live runtime, another device, finalize twice, use after finalize', async () => {
    const probe = freshLibrary();
    const { library } = probe;
    const refused = async (promise, code, message) => {
      const calls = probe.calls();
      const err = await rejects(promise, code, message);
      expect(probe.calls()).toBe(calls);
      expect(err.rc).toBeNull();
      return err;
    };
    const rt = library.createRuntime();
    await refused(rt.initialize(), 'ERR_PTO_STATE', /setDevice\(\) must come first/);
    await refused(rt.launch(LAUNCH), 'ERR_PTO_STATE', /initialize\(\) must come before launch\(\)/);
    await refused(rt.finalize(), 'ERR_PTO_STATE', /never initialised/);
    await library.setDevice(3);
    await library.setDevice(3); // the same id again is fine
    const err = await refused(library.setDevice(4), 'ERR_PTO_DEVICE', /device 4 asked.*device is 3/);
    expect(err.operation).toBe('set_device');
    await registerAll(library);
    await rt.initialize();
    await refused(rt.initialize(), 'ERR_PTO_STATE', /already initialised/);
    const other = library.createRuntime();
    await refused(other.initialize(), 'ERR_PTO_LIVE_RUNTIME', /is live/);
    expect(probe.live()).toBe(1);
    await refused(rt.launch({ ...LAUNCH, deviceId: 0 }), 'ERR_PTO_DEVICE', /device 0 asked.*device is 3/);
    await rt.launch(LAUNCH);
    await refused(rt.launch(LAUNCH), 'ERR_PTO_STATE', /already launched/);
    await rt.finalize();
    await refused(rt.finalize(), 'ERR_PTO_STATE', /already finalised/);
    await refused(rt.launch(LAUNCH), 'ERR_PTO_STATE', /finalised; create a new one/);
    await refused(rt.initialize(), 'ERR_PTO_STATE', /finalised; create a new one/);
    await other.initialize(); // the first is no longer live
    await other.finalize().catch(() => {});
  });

  test.each([
    ['aicpuThreadNum 0', { aicpuThreadNum: 0, blockDim: 1 }, /aicpuThreadNum must be 1\.\.4, got 0/],
    ['aicpuThreadNum 5', { aicpuThreadNum: 5, blockDim: 5 }, /aicpuThreadNum must be 1\.\.4, got 5/],
    ['blockDim 0', { aicpuThreadNum: 1, blockDim: 0 }, /blockDim must be at least 1/],
    ['blockDim -3', { aicpuThreadNum: 1, blockDim: -3 }, /blockDim must be at least 1/],
    ['blockDim not a multiple', { aicpuThreadNum: 3, blockDim: 4 }, /multiple of aicpuThreadNum/],
    ['blockDim 25 (75 cores of 72)', { aicpuThreadNum: 1, blockDim: 25 }, /at most 24/],
    ['empty aicpu binary', { aicpuBinary: new Uint8Array(0) }, /aicpuBinary is empty/],
    ['empty aicore binary', { aicoreBinary: new Uint8Array(0) }, /aicoreBinary is empty/],
    ['a string binary', { aicoreBinary: 'aicore.o' }, /aicoreBinary must be a Uint8Array/],
    ['a fractional blockDim', { blockDim: 1.5 }, /blockDim must be a 32-bit integer/],
    ['a huge aicpuThreadNum', { aicpuThreadNum: 2 ** 40 }, /aicpuThreadNum must be a 32-bit integer/],
  ])('launch with %s is refused before the device could hang', async (_label, change, message) => {
    const probe = freshLibrary();
    await probe.library.setDevice(0);
    await registerAll(probe.library);
    const rt = probe.library.createRuntime();
    await rt.initialize();
    const calls = probe.calls();
    const err = await rejects(rt.launch({ ...LAUNCH, ...change }), 'ERR_PTO_INVALID_ARGUMENT', message);
    expect(err.operation).toBe('launch_runtime');
    expect(probe.calls()).toBe(calls);
    expect(probe.hung()).toBe(0);
    expect(rt.state).toBe('initialized');
    await rt.launch(LAUNCH); // still usable
    await rt.finalize();
  });

  test('kernels: empty bytes and bad ids refused; after a launch commits a kernel, other bytes are refused', async () => {
    const probe = freshLibrary();
    const { library } = probe;
    const calls = probe.calls();
    await rejects(library.registerKernel(0, new Uint8Array(0)), 'ERR_PTO_INVALID_ARGUMENT', /kernel 0 is empty/);
    await rejects(library.registerKernel(-1, text('add')), 'ERR_PTO_INVALID_ARGUMENT', /funcId must be >= 0/);
    await rejects(library.registerKernel('0', text('add')), 'ERR_PTO_INVALID_ARGUMENT', /funcId must be a 32-bit integer/);
    await rejects(library.registerKernel(0, [1, 2]), 'ERR_PTO_INVALID_ARGUMENT', /must be a Uint8Array/);
    await rejects(library.setDevice(-1), 'ERR_PTO_INVALID_ARGUMENT', /device id must be >= 0/);
    await rejects(library.createRuntime().launch(null), 'ERR_PTO_INVALID_ARGUMENT', /must be an object/);
    expect(probe.calls()).toBe(calls);
    await library.setDevice(0);
    await registerAll(library);
    const rt = library.createRuntime();
    await rt.initialize();
    await rt.launch(LAUNCH);
    await rt.finalize();
    await library.registerKernel(2, text('mul')); // the committed bytes again: a no-op
    await rejects(library.registerKernel(2, text('add')), 'ERR_PTO_STATE', /kernel 2 was committed/);
  });
});

describe('pto: the library\'s results are never dropped', () => {
  test('a launch that skipped an unregistered kernel passes, so finalize rejects ERR_PTO_VALIDATION with rc -1', async () => {
    const { library } = freshLibrary();
    await library.setDevice(0);
    await registerAll(library, { 0: 'add', 1: 'add_scalar' }); // no mul: task 3 is skipped
    const rt = library.createRuntime();
    await rt.initialize();
    await rt.launch(LAUNCH); // returns 0: proves nothing
    const err = await rejects(rt.finalize(), 'ERR_PTO_VALIDATION', /validation failure/);
    expect([err.rc, err.operation]).toEqual([-1, 'FinalizeRuntime']);
    expect(rt.state).toBe('finalized');
  });

  test('a positive device code comes through as rc, and the runtime can still be finalised', async () => {
    const { library } = freshLibrary();
    await library.setDevice(0);
    await registerAll(library, { 0: 'add', 1: 'add_scalar', 2: 'not-a-kernel' });
    const rt = library.createRuntime();
    await rt.initialize();
    const err = await rejects(rt.launch(LAUNCH), 'ERR_PTO_FAILED', /launch_runtime failed with rc 507015 \(a device-runtime error code/);
    expect([err.rc, err.operation]).toEqual([507015, 'launch_runtime']);
    expect(rt.state).toBe('initialized');
    await rejects(rt.finalize(), 'ERR_PTO_VALIDATION');
  });
});

describe('pto: lifetimes', () => {
  test('a live runtime collected without finalize is finalised on the library thread, not freed under it', () => {
    const file = path.join(tmp, `gc-${copies++}.so`);
    fs.copyFileSync(fixture('pto-host'), file);
    const script = `
      const { pto } = require(${JSON.stringify(path.join(testDir, '..'))});
      const koffi = require('koffi');
      const live = koffi.load(${JSON.stringify(file)}).func('int pto_fixture_live(void)');
      const library = pto.load(${JSON.stringify(file)});
      (async () => {
        await library.setDevice(0);
        await (async () => { await library.createRuntime().initialize(); })();
        const before = live();
        for (let i = 0; i < 20 && live() !== 0; i++) {
          globalThis.gc();
          await new Promise((r) => setTimeout(r, 20));
        }
        const rt = library.createRuntime();
        await rt.initialize(); // not refused: the collected one is no longer live
        await rt.finalize().catch(() => {});
        console.log('RESULT ' + JSON.stringify({ before, after: live() }));
      })();
    `;
    const child = spawnSync(process.execPath, ['--expose-gc', '-e', script], { cwd: testDir, encoding: 'utf8', timeout: 60000 });
    const line = child.stdout.split('\n').find((l) => l.startsWith('RESULT '));
    expect(JSON.parse(line.slice(7))).toEqual({ before: 1, after: 0 });
    // Its finalisation is said on stderr, with FinalizeRuntime's verdict (validation fails: the
    // runtime was never launched).
    expect(child.stderr).toMatch(/^zgc-runtime: PTO runtime #\d+ was collected unfinalised; FinalizeRuntime on its behalf failed: FinalizeRuntime reported a validation failure/m);
  });
});

describe('pto: the README example', () => {
  test('examples/pto.js runs the graph on the fixture and reports validation', () => {
    const out = execFileSync(process.execPath, [path.join(testDir, '..', 'examples', 'pto.js')], { encoding: 'utf8', timeout: 60000, env: { ...process.env, PTO_FIXTURE_QUIET: '' } });
    expect(out).toMatch(/\[pto\] validation passed/);
    expect(out).toMatch(/task graph ran on device 0 \(thread \d+\) and validated/);
  });
});
