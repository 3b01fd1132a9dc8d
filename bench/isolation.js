'use strict';

// What isolate: 'process' costs, side by side with in-process in one run: an awaited tiny
// run, a pool of 2 with 64 in flight (and onnxruntime-node, which runs in the process), a 1M
// add through storage(), how soon a crashed instance answers again, and how soon a hung run
// with timeoutMs 100 rejects. Outputs are checked against in-process runs before timing.
const { load, createPool } = require('..');
const { fixture } = require('../__test__/fixtures/manifest');
const { measureAsync, median } = require('./measure');

const N1M = 1 << 20;
const ramp = (n) => Float32Array.from({ length: n }, (_, k) => (k % 1000) * 0.5);

function same(what, a, b) {
  for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) throw new Error(`${what}: element ${k} is ${a[k]} and ${b[k]}`);
}

async function throughput(runOnce, total, inFlight = 64) {
  let next = 0;
  const t0 = process.hrtime.bigint();
  await Promise.all(Array.from({ length: inFlight }, async () => {
    while (next++ < total) await runOnce();
  }));
  return total / (Number(process.hrtime.bigint() - t0) / 1e9);
}

async function isolation({ quick, ortSetup }) {
  const R = quick ? 3 : 5;
  const total = quick ? 50000 : 200000;
  const out = { awaited: {}, pool: {}, big: {}, crash: {}, timeout: {} };
  const a = ramp(4);
  const b = new Float32Array(4).fill(1);
  const ref = load(fixture('add'));
  const want = ref.run({ a, b })[0].data;
  ref.close();

  // --- one awaited tiny run, in rounds, both in each round ---
  {
    const local = load(fixture('add'));
    const iso = load(fixture('add'), { isolate: 'process' });
    for (let i = 0; i < 200; i++) await Promise.all([local.runAsync({ a, b }), iso.runAsync({ a, b })]);
    same('isolated runAsync', (await iso.runAsync({ a, b }))[0].data, want);
    const pairs = [];
    for (let r = 0; r < R; r++) pairs.push([(await measureAsync(() => local.runAsync({ a, b }))).median_ns, (await measureAsync(() => iso.runAsync({ a, b }))).median_ns]);
    out.awaited.inProcessNs = median(pairs.map((p) => p[0]));
    out.awaited.isolatedNs = median(pairs.map((p) => p[1]));
    out.awaited.ratio = median(pairs.map((p) => p[1] / p[0]));
    local.close();
    iso.close();
  }

  // --- tiny add, pool of 2, 64 in flight ---
  {
    const local = createPool(fixture('add'), { size: 2 });
    const iso = createPool(fixture('add'), { size: 2, isolate: 'process' });
    same('isolated pool', (await iso.run({ a, b }))[0].data, want);
    let session;
    let feeds;
    if (ortSetup) {
      const { ort } = ortSetup;
      session = await ort.InferenceSession.create(ortSetup.model('add'));
      feeds = { a: new ort.Tensor('float32', a, [4]), b: new ort.Tensor('float32', b, [4]) };
    }
    const rows = [];
    for (let r = 0; r < R; r++) {
      rows.push({
        iso: await throughput(() => iso.run({ a, b }), total),
        local: await throughput(() => local.run({ a, b }), total),
        ort: session ? await throughput(() => session.run(feeds), total) : null,
      });
    }
    out.pool.isolated = median(rows.map((x) => x.iso));
    out.pool.inProcess = median(rows.map((x) => x.local));
    out.pool.ort = session ? median(rows.map((x) => x.ort)) : null;
    out.pool.vsInProcess = median(rows.map((x) => x.iso / x.local));
    out.pool.vsOrt = session ? median(rows.map((x) => x.iso / x.ort)) : null;
    await local.close();
    await iso.close();
  }

  // --- 1M f32 add, inputs written through storage() ---
  {
    const x = ramp(N1M);
    const y = new Float32Array(N1M).fill(1);
    const local = load(fixture('add-bound-1m'));
    const iso = load(fixture('add-bound-1m'), { isolate: 'process' });
    for (const rt of [local, iso]) {
      rt.storage('a').set(x);
      rt.storage('b').set(y);
    }
    same('isolated 1M', (await iso.runAsync())[0].data, (await local.runAsync())[0].data);
    const pairs = [];
    for (let r = 0; r < R; r++) pairs.push([(await measureAsync(() => local.runAsync())).median_ns, (await measureAsync(() => iso.runAsync())).median_ns]);
    out.big.inProcessNs = median(pairs.map((p) => p[0]));
    out.big.isolatedNs = median(pairs.map((p) => p[1]));
    out.big.ratio = median(pairs.map((p) => p[1] / p[0]));
    local.close();
    iso.close();
  }

  // --- a crash, then the next run on the restarted instance ---
  {
    const rt = load(fixture('faulty'), { isolate: 'process' });
    const xs = new Float32Array([1, 2, 3, 4]);
    await rt.runAsync({ x: xs, mode: 0, id: 0 });
    const ms = [];
    for (let i = 0; i < (quick ? 10 : 30); i++) {
      const err = await rt.runAsync({ x: xs, mode: 1, id: 0 }).catch((e) => e);
      if (err.code !== 'ERR_ZGC_INSTANCE_CRASHED') throw new Error(`expected a crash, got ${err.code || err}`);
      const t0 = performance.now();
      await rt.runAsync({ x: xs, mode: 0, id: 0 });
      ms.push(performance.now() - t0);
    }
    out.crash.nextRunMedianMs = median(ms);
    out.crash.nextRunMaxMs = Math.max(...ms);
    rt.close();
  }

  // --- a hung run with timeoutMs: 100 ---
  {
    const rt = load(fixture('faulty'), { isolate: 'process' });
    const xs = new Float32Array([1, 2, 3, 4]);
    const ms = [];
    for (let i = 0; i < (quick ? 3 : 7); i++) {
      const t0 = performance.now();
      const err = await rt.runAsync({ x: xs, mode: 4, id: 0 }, { timeoutMs: 100 }).catch((e) => e);
      ms.push(performance.now() - t0);
      if (err.code !== 'ERR_ZGC_TIMEOUT') throw new Error(`expected a timeout, got ${err.code || err}`);
      await rt.runAsync({ x: xs, mode: 0, id: 0 });
    }
    out.timeout.rejectMedianMs = median(ms);
    out.timeout.rejectMaxMs = Math.max(...ms);
    rt.close();
  }
  return out;
}

function reportIsolation(s) {
  const f = (v, d = 0) => (v === undefined || v === null ? '—' : Number(v).toFixed(d));
  const us = (ns) => `${(ns / 1e3).toFixed(2)} µs`;
  const ms = (ns) => `${(ns / 1e6).toFixed(2)} ms`;
  return [
    '| isolation figure | isolate: process | in-process | other | ratio (target) |',
    '|---|---|---|---|---|',
    `| one awaited tiny runAsync | ${us(s.awaited.isolatedNs)} | ${us(s.awaited.inProcessNs)} | | ${f(s.awaited.ratio, 2)}x in-process (≤ 10 µs) |`,
    `| tiny add, pool of 2, 64 in flight, runs/s | ${f(s.pool.isolated)} | ${f(s.pool.inProcess)} | onnxruntime-node ${f(s.pool.ort)} | ${f(s.pool.vsOrt, 2)}x onnxruntime (≥ 2x); ${f(s.pool.vsInProcess, 2)}x in-process (≥ 0.3x) |`,
    `| 1M f32 add via storage(), awaited | ${ms(s.big.isolatedNs)} | ${ms(s.big.inProcessNs)} | | ${f(s.big.ratio, 2)}x in-process (≤ 1.25x) |`,
    `| after a crash, the next run resolves in | ${f(s.crash.nextRunMedianMs, 2)} ms median, ${f(s.crash.nextRunMaxMs, 2)} ms max | | | (≤ 20 ms) |`,
    `| a hung run with timeoutMs 100 rejects in | ${f(s.timeout.rejectMedianMs, 1)} ms median, ${f(s.timeout.rejectMaxMs, 1)} ms max | | | (≤ 150 ms) |`,
  ].join('\n');
}

module.exports = { isolation, reportIsolation };
