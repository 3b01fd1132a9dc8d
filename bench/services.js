'use strict';

// The service path, side by side in one process: zgc-runtime's async runs and pools against
// onnxruntime-node's session.run on equivalent ONNX models, a bare libuv hop and a
// synchronous run. Each figure is the median of ROUNDS rounds; outputs of every contender are
// checked against each other before anything is timed.
const fs = require('node:fs');
const { monitorEventLoopDelay } = require('node:perf_hooks');
const { load, createPool } = require('..');
const { fixture } = require('../__test__/fixtures/manifest');
const { measure, measureAsync, median } = require('./measure');

const N1M = 1 << 20;
const ramp = (n) => Float32Array.from({ length: n }, (_, k) => (k % 1000) * 0.5);

/** Runs/s of `runOnce` with `inFlight` calls outstanding until `total` have finished. */
async function throughput(runOnce, total, inFlight = 64) {
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next++ < total) await runOnce();
    }),
  );
  return total / (Number(process.hrtime.bigint() - t0) / 1e9);
}

async function rounds(count, fn) {
  const values = [];
  for (let r = 0; r < count; r++) values.push(await fn());
  return median(values);
}

function same(what, a, b) {
  if (a.length !== b.length) throw new Error(`${what}: lengths ${a.length} and ${b.length}`);
  for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) throw new Error(`${what}: element ${k} is ${a[k]} and ${b[k]}`);
}

/** p99 event-loop delay (ms) while `load` runs. */
async function loopDelay(work) {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  await work();
  h.disable();
  return h.percentile(99) / 1e6;
}

async function services({ quick, ortSetup }) {
  const R = quick ? 3 : 5;
  const tinyTotal = quick ? 50000 : 200000;
  const matTotal = quick ? 40 : 200;
  const ort = ortSetup && ortSetup.ort;
  const out = { tiny: {}, matmul: {}, awaited: {}, big: {}, loop: {}, ort: ortSetup ? ortSetup.version : null };

  // --- tiny add ---
  const a = ramp(4);
  const b = new Float32Array(4).fill(1);
  const sync = load(fixture('add'));
  const want = sync.run({ a, b })[0].data;
  out.tiny.syncRunsPerSec = 1e9 / measure(() => sync.run({ a, b })).median_ns;
  const into = { into: [new Float32Array(4)] };
  out.tiny.syncIntoNs = measure(() => sync.run({ a, b }, into)).median_ns;
  out.tiny.syncRunNs = measure(() => sync.run({ a, b })).median_ns;
  for (const offload of ['auto', 'always']) {
    const pool = createPool(fixture('add'), { size: 2, offload });
    same(`pool ${offload}`, (await pool.run({ a, b }))[0].data, want);
    out.tiny[`pool2_${offload}`] = await rounds(R, () => throughput(() => pool.run({ a, b }), tinyTotal));
    out.tiny[`pool2_${offload}_decision`] = pool.stats().decision;
    await pool.close();
  }
  let session;
  let feeds;
  if (ort) {
    session = await ort.InferenceSession.create(ortSetup.model('add'));
    feeds = { a: new ort.Tensor('float32', a, [4]), b: new ort.Tensor('float32', b, [4]) };
    same('onnxruntime add', (await session.run(feeds)).y.data, want);
    out.tiny.ort = await rounds(R, () => throughput(() => session.run(feeds), tinyTotal));
  }

  // --- one awaited run ---
  for (const offload of ['auto', 'always']) {
    const rt = load(fixture('add'), { offload });
    for (let i = 0; i < 100; i++) await rt.runAsync({ a, b }); // let 'auto' measure and decide
    same(`runAsync ${offload}`, (await rt.runAsync({ a, b }))[0].data, want);
    out.awaited[`runAsync_${offload}`] = (await measureAsync(() => rt.runAsync({ a, b }))).median_ns;
    out.awaited[`runAsync_${offload}_decision`] = rt.stats().decision;
    rt.close();
  }
  out.awaited.libuvHop = (await measureAsync(() => fs.promises.access(__filename))).median_ns;
  out.awaited.setImmediate = (await measureAsync(() => new Promise((r) => setImmediate(r)))).median_ns;
  if (ort) out.awaited.ort = (await measureAsync(() => session.run(feeds))).median_ns;

  // --- 1M add: async against sync ---
  {
    const x = ramp(N1M);
    const y = new Float32Array(N1M).fill(1);
    const rt = load(fixture('add-1m'));
    const wantBig = rt.run({ a: x, b: y })[0].data;
    same('1M runAsync', (await rt.runAsync({ a: x, b: y }))[0].data, wantBig);
    const pair = [];
    for (let r = 0; r < R; r++) {
      pair.push([measure(() => rt.run({ a: x, b: y })).median_ns, (await measureAsync(() => rt.runAsync({ a: x, b: y }))).median_ns]);
    }
    out.big.ownedSyncNs = median(pair.map((p) => p[0]));
    out.big.ownedAsyncNs = median(pair.map((p) => p[1]));
    out.big.ownedRatio = median(pair.map((p) => p[1] / p[0]));
    rt.close();
    const bound = load(fixture('add-bound-1m'));
    bound.storage('a').set(x);
    bound.storage('b').set(y);
    same('1M bound runAsync', (await bound.runAsync())[0].data, wantBig);
    const boundPair = [];
    for (let r = 0; r < R; r++) boundPair.push([measure(() => bound.run()).median_ns, (await measureAsync(() => bound.runAsync())).median_ns]);
    out.big.boundSyncNs = median(boundPair.map((p) => p[0]));
    out.big.boundAsyncNs = median(boundPair.map((p) => p[1]));
    out.big.boundRatio = median(boundPair.map((p) => p[1] / p[0]));
    bound.close();
    if (ort) {
      const s = await ort.InferenceSession.create(ortSetup.model('add-1m'));
      const f = { a: new ort.Tensor('float32', x, [N1M]), b: new ort.Tensor('float32', y, [N1M]) };
      same('onnxruntime 1M add', (await s.run(f)).y.data, wantBig);
      out.big.ortAsyncNs = (await measureAsync(() => s.run(f))).median_ns;
    }
  }

  // --- matmul 256^3: pools, and the event loop while they are saturated ---
  {
    const m = ramp(256 * 256);
    const ones = new Float32Array(256 * 256).fill(1);
    const ref = load(fixture('matmul'));
    ref.bind('b', ones);
    const wantMat = ref.run({ a: m })[0].data;
    ref.close();
    for (const size of [1, 2]) {
      const pool = createPool(fixture('matmul'), { size, setup: (rt) => rt.storage('b').set(ones) });
      same(`matmul pool ${size}`, (await pool.run({ a: m }))[0].data, wantMat);
      out.matmul[`pool${size}`] = await rounds(R, () => throughput(() => pool.run({ a: m }), matTotal));
      if (size === 2) {
        out.matmul.pool2_decision = pool.stats().decision;
        out.loop.pool2P99Ms = await loopDelay(() => throughput(() => pool.run({ a: m }), matTotal));
      }
      await pool.close();
    }
    if (ort) {
      const s = await ort.InferenceSession.create(ortSetup.model('matmul'));
      const f = { a: new ort.Tensor('float32', m, [256, 256]) };
      same('onnxruntime matmul', (await s.run(f)).y.data, wantMat);
      out.matmul.ort = await rounds(R, () => throughput(() => s.run(f), matTotal));
      out.loop.ortP99Ms = await loopDelay(() => throughput(() => s.run(f), matTotal));
    }
    const rt = load(fixture('matmul'));
    rt.bind('b', ones);
    out.loop.syncP99Ms = await loopDelay(async () => {
      for (let i = 0; i < matTotal; i++) {
        rt.run({ a: m });
        await new Promise((r) => setImmediate(r)); // yields between runs, as a request loop would
      }
    });
    rt.close();
  }
  sync.close();
  return out;
}

function report(s) {
  const f = (v, d = 0) => (v === undefined || v === null ? '—' : Number(v).toFixed(d));
  const us = (ns) => (ns === undefined ? '—' : `${(ns / 1e3).toFixed(2)} µs`);
  const ms = (ns) => (ns === undefined ? '—' : `${(ns / 1e6).toFixed(2)} ms`);
  const x = (a, b) => (a && b ? `${(a / b).toFixed(2)}x` : '—');
  const lines = [
    `| service figure | zgc-runtime | onnxruntime-node ${s.ort || '(skipped)'} | other | ratio |`,
    '|---|---|---|---|---|',
    `| tiny add, 64 in flight, runs/s | pool of 2 'auto' ${f(s.tiny.pool2_auto)} (${s.tiny.pool2_auto_decision}); 'always' ${f(s.tiny.pool2_always)} | ${f(s.tiny.ort)} (64 concurrent session.run) | sync run() ${f(s.tiny.syncRunsPerSec)} | ${x(s.tiny.pool2_auto, s.tiny.ort)} onnxruntime; ${x(s.tiny.pool2_auto, s.tiny.syncRunsPerSec)} sync |`,
    `| matmul 256³, 64 in flight, runs/s | pool of 2 ${f(s.matmul.pool2, 1)} (${s.matmul.pool2_decision}); pool of 1 ${f(s.matmul.pool1, 1)} | ${f(s.matmul.ort, 1)} | | ${x(s.matmul.pool2, s.matmul.pool1)} pool 2/1; ${x(s.matmul.pool2, s.matmul.ort)} onnxruntime |`,
    `| one awaited tiny run | runAsync 'auto' ${us(s.awaited.runAsync_auto)} (${s.awaited.runAsync_auto_decision}); 'always' ${us(s.awaited.runAsync_always)} | ${us(s.awaited.ort)} | libuv hop (fs.promises.access) ${us(s.awaited.libuvHop)}; setImmediate ${us(s.awaited.setImmediate)} | 'always' ${x(s.awaited.runAsync_always, s.awaited.libuvHop)} the hop |`,
    `| 1M f32 add, OWNED, awaited | runAsync ${ms(s.big.ownedAsyncNs)}; run ${ms(s.big.ownedSyncNs)} | ${ms(s.big.ortAsyncNs)} | | ${f(s.big.ownedRatio, 2)}x its sync run |`,
    `| 1M f32 add, BOUND via storage(), awaited | runAsync ${ms(s.big.boundAsyncNs)}; run ${ms(s.big.boundSyncNs)} | | | ${f(s.big.boundRatio, 2)}x its sync run |`,
    `| event-loop p99 delay, matmuls saturating | pool of 2 ${f(s.loop.pool2P99Ms, 2)} ms | ${f(s.loop.ortP99Ms, 2)} ms | sync run() ${f(s.loop.syncP99Ms, 2)} ms | |`,
    `| sync tiny run, per call | run() ${f(s.tiny.syncRunNs)} ns; run {into} ${f(s.tiny.syncIntoNs)} ns | | | |`,
  ];
  return lines.join('\n');
}

module.exports = { services, report };
