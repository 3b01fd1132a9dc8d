// The smoke suite for hosts that do not run Jest (Bun, Deno; any Node works too): what a
// user's first hour does with the package, checked against values computed here.
//   bun __test__/hosts/smoke.mjs      deno run -A __test__/hosts/smoke.mjs
// Prints a line per check and ends with one JSON line {host, passed, failed, float16}.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import * as esm from '../../lib/index.mjs';

const require = createRequire(import.meta.url);
const cjs = require('../../lib/index.js');
const { fixture, malformed } = require('../fixtures/manifest.js');
const { f16Bits, f16Round } = require('../helpers.js');
const { load, createPool, ZgcError } = cjs;

const HOST = globalThis.Bun ? `Bun ${process.versions.bun}` : globalThis.Deno ? `Deno ${globalThis.Deno.version.deno}` : `Node ${process.version}`;
const HAS_F16 = typeof globalThis.Float16Array === 'function';
const SELF = fileURLToPath(import.meta.url);
const f = Math.fround;
const tag = (a) => Object.prototype.toString.call(a).slice(8, -1);

/** Runs this file again with the same host, as a child process. */
function again(...args) {
  const argv = globalThis.Deno ? ['run', '-A', SELF, ...args] : [SELF, ...args];
  return spawnSync(process.execPath, argv, { encoding: 'utf8', timeout: 120000 });
}

async function addChecks(rt, seed) {
  for (let i = 0; i < 200; i++) {
    const a = [seed, i, -i, 0.25];
    const b = [1, 2, 3, seed / 3];
    const [out] = i % 2 ? await rt.runAsync({ a, b }) : rt.run({ a, b });
    assert.deepEqual(Array.from(out.data), a.map((v, k) => f(f(v) + f(b[k]))));
  }
}

const checks = {
  'require and import give the same API'() {
    assert.equal(esm.load, cjs.load);
    assert.equal(esm.default, cjs);
    assert.equal(typeof esm.pto.load, 'function');
    assert.equal(require('../../lib/pto.js').load, esm.pto.load);
  },

  async 'load by path, run and runAsync'() {
    const rt = load(fixture('add'));
    assert.equal(rt.path, fs.realpathSync(fixture('add')));
    await addChecks(rt, 3);
    rt.close();
    assert.throws(() => rt.run(), (e) => e instanceof ZgcError && e.code === 'ERR_ZGC_CLOSED');
  },

  async 'load from bytes'() {
    const rt = load(fs.readFileSync(fixture('add')));
    assert.equal(rt.path, null);
    await addChecks(rt, 5);
    rt.close();
  },

  'run with into reuses the arrays and the Tensors'() {
    const rt = load(fixture('add'));
    const into = [new Float32Array(4)];
    const first = rt.run({ a: [1, 2, 3, 4], b: [10, 20, 30, 40] }, { into });
    assert.equal(first[0].data, into[0]);
    assert.deepEqual(Array.from(into[0]), [11, 22, 33, 44]);
    assert.equal(rt.run({ a: [0, 0, 0, 0], b: [1, 1, 1, 1] }, { into }), first);
    assert.deepEqual(Array.from(into[0]), [1, 1, 1, 1]);
    rt.close();
  },

  'bad input: a ZgcError naming the source, and the runtime still works'() {
    const rt = load(fixture('add'));
    assert.throws(() => rt.run({ a: [1, 2, 3] }), (e) => e.code === 'ERR_ZGC_SIZE' && e.source === 'a');
    assert.throws(() => rt.run({ a: new Int8Array(4) }), (e) => e.code === 'ERR_ZGC_DTYPE' && /got Int8Array/.test(e.message));
    assert.throws(() => rt.run({ nope: 1 }), (e) => e.code === 'ERR_ZGC_UNKNOWN_SOURCE');
    assert.deepEqual(Array.from(rt.run({ a: [1, 1, 1, 1], b: [2, 2, 2, 2] })[0].data), [3, 3, 3, 3]);
    rt.close();
  },

  async 'runAsync keeps call order and takes inputs at call time'() {
    const rt = load(fixture('slow'));
    rt.set('sleep_ms', 1);
    const x = new Float32Array([1, 2, 3, 4]);
    const runs = Array.from({ length: 20 }, (_, i) => rt.runAsync({ x: [i, 0, 0, 0] }));
    const taken = rt.runAsync({ x });
    x.fill(100);
    const results = await Promise.all(runs);
    results.forEach(([y, stats], i) => {
      assert.equal(y.data[0], 2 * i);
      assert.equal(stats.data[0], i + 1);
      assert.equal(stats.data[1], 1);
    });
    assert.deepEqual(Array.from((await taken)[0].data), [2, 4, 6, 8]);
    rt.close();
  },

  async 'a pool of 2 runs 200 runs correctly, then drains and closes'() {
    const pool = createPool(fixture('slow'), { size: 2, setup: (rt) => rt.set('sleep_ms', 0) });
    const outs = await Promise.all(Array.from({ length: 200 }, (_, i) => pool.run({ x: [i, -i, 1, 0] })));
    outs.forEach(([y], i) => assert.deepEqual(Array.from(y.data), [2 * i, -2 * i, 2, 0]));
    assert.deepEqual(pool.runtimes.map((rt) => rt.output(1).data[0]).reduce((s, n) => s + n, 0), 200);
    await pool.close();
    assert.ok(pool.runtimes.every((rt) => rt.closed));
  },

  async 'worker_threads: the addon and the artifact in 3 workers and this thread at once'() {
    const workers = [1, 2, 3].map((seed) => new Promise((resolve, reject) => {
      const w = new Worker(SELF, { workerData: { seed } });
      let done = false;
      w.on('message', (m) => { done = m; });
      w.on('error', reject);
      w.on('exit', () => (done === true ? resolve() : reject(new Error(`worker ${seed} ended without finishing`))));
    }));
    const rt = load(fixture('add'));
    await addChecks(rt, 7);
    rt.close();
    await Promise.all(workers);
  },

  'f16 from a Float32Array: rounded to nearest even, decoded exactly or as bits'() {
    const rt = load(fixture('half'));
    const n = 1 << 20;
    const x = Float32Array.from({ length: n }, (_, k) => (k - 500000) / 7);
    const [y] = rt.run({ x });
    for (let k = 0; k < n; k += 997) assert.equal(y.data[k], f16Round(x[k]));
    const bits = load(fixture('half'), { f16: 'bits' }).run({ x })[0].data;
    assert.equal(tag(bits), 'Uint16Array');
    for (let k = 0; k < n; k += 997) assert.equal(bits[k], f16Bits(x[k]));
    rt.close();
  },

  'f16 with Float16Array where the host has one; refused by name elsewhere'() {
    if (!HAS_F16) {
      assert.throws(() => load(fixture('half'), { f16: 'float16' }), /needs a global Float16Array/);
      return;
    }
    const rt = load(fixture('half'), { f16: 'float16' });
    const x = Float16Array.from({ length: 1 << 20 }, (_, k) => (k % 4096) / 16);
    const [y] = rt.run({ x });
    assert.equal(tag(y.data), 'Float16Array');
    for (let k = 0; k < x.length; k += 1013) assert.equal(y.data[k], x[k]);
    const into = [new Float16Array(1 << 20)];
    rt.run({ x }, { into });
    assert.equal(into[0][4095], x[4095]);
    rt.close();
    const dt = load(fixture('dtypes'));
    assert.throws(() => dt.set('q', new Float16Array(5)), (e) => e.code === 'ERR_ZGC_DTYPE' && /\(i8\) expects an Int8Array, got Float16Array/.test(e.message));
    assert.throws(() => dt.bind('qb', new Float16Array(4)), (e) => e.code === 'ERR_ZGC_DTYPE' && /got Float16Array/.test(e.message));
    dt.close();
  },

  async 'storage() memory lives while the runtime or any buffer over it does'() {
    const rt = load(fixture('big'));
    const n = 1 << 20;
    let view = rt.storage('w');
    view.fill(2);
    const x = new Float32Array(n).fill(1);
    assert.equal((await rt.runAsync({ x }))[0].data[5], 3);
    if (typeof view.buffer.transfer === 'function') {
      const moved = new Float32Array(view.buffer.transfer());
      assert.equal(view.length, 0);
      moved.fill(5);
      assert.equal(rt.run({ x })[0].data[n - 1], 6);
      view = moved;
    }
    rt.close();
    assert.equal(view[123], typeof view.buffer.transfer === 'function' ? 5 : 2);
  },

  async "isolate: 'process': a crash fails its run, the instance comes back, a hung run times out"() {
    const rt = load(fixture('faulty'), { isolate: 'process' });
    const x = new Float32Array([1, 2, 3, 4]);
    const want = Array.from(x, (v) => f(f(v * 2) + 1));
    assert.deepEqual(Array.from((await rt.runAsync({ x, mode: 0, id: 0 }))[0].data), want);
    await assert.rejects(rt.runAsync({ x, mode: 1, id: 1 }), (e) => e.code === 'ERR_ZGC_INSTANCE_CRASHED' && e.signal === 'SIGSEGV');
    await assert.rejects(rt.runAsync({ x, mode: 4, id: 2 }, { timeoutMs: 100 }), (e) => e.code === 'ERR_ZGC_TIMEOUT');
    assert.deepEqual(Array.from(rt.run({ x, mode: 0, id: 3 })[0].data), want);
    assert.equal(rt.stats().restarts, 2);
    const pool = createPool(fixture('add'), { isolate: 'process', size: 2 });
    const outs = await Promise.all(Array.from({ length: 100 }, (_, i) => pool.run({ a: [i, 0, 0, 0], b: [1, 1, 1, 1] })));
    outs.forEach((o, i) => assert.equal(o[0].data[0], i + 1));
    await pool.close();
    rt.close();
  },

  'a malformed artifact in a child process: a clear error, no crash, then a good one runs'() {
    const r = again('--child-malformed');
    assert.equal(r.status, 0, r.stderr);
    const result = JSON.parse(r.stdout.trim().split('\n').pop());
    assert.equal(result.refused, malformed.length);
    assert.deepEqual(result.good, [11, 22, 33, 44]);
  },
};

/** In a child: every malformed fixture, each refused with its code and rule; then a good one. */
function childMalformed() {
  let refused = 0;
  for (const m of malformed) {
    try {
      load(fixture(`malformed-${m.rule.toLowerCase()}`));
    } catch (err) {
      if (err.code === m.code && m.message.test(err.message)) refused += 1;
      else throw new Error(`${m.rule}: ${err.code} ${err.message}`);
    }
  }
  const good = Array.from(load(fixture('add')).run({ a: [1, 2, 3, 4], b: [10, 20, 30, 40] })[0].data);
  console.log(JSON.stringify({ refused, good }));
}

async function main() {
  let passed = 0;
  let failed = 0;
  for (const [name, check] of Object.entries(checks)) {
    try {
      await check();
      passed += 1;
      console.log(`ok   ${name}`);
    } catch (err) {
      failed += 1;
      console.log(`FAIL ${name}\n     ${String(err && err.stack).split('\n').slice(0, 6).join('\n     ')}`);
    }
  }
  console.log(JSON.stringify({ host: HOST, passed, failed, float16: HAS_F16 }));
  process.exitCode = failed === 0 ? 0 : 1;
}

if (!isMainThread) {
  const rt = load(fixture('add'));
  await addChecks(rt, workerData.seed);
  rt.close();
  parentPort.postMessage(true);
} else if (process.argv.includes('--child-malformed')) {
  childMalformed();
} else {
  await main();
}
