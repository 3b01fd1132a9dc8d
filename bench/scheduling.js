'use strict';

// The schedulers of issue 39, side by side in one process. Batching: 64 concurrent single-row
// requests to a graph that costs 1 ms a run whatever its batch (affine.c, RUN_US=1000: a
// device's fixed launch cost), through createBatcher over its batch-1, 4 and 8 variants and
// through a pool of the batch-1 variant, at the same instance count. Sequences: 100
// concurrent sequences over a pool of 2 (accum.c, BOUND state), each sending its next run when
// its last is answered, against the same runs without sequences. Every answer is checked.
//   node bench/scheduling.js [--quick]
const { createPool, createBatcher, load } = require('..');
const { fixture } = require('../__test__/fixtures/manifest');
const { measure, median } = require('./measure');

const CLIENTS = 64;
const INSTANCES = 2;
const DELAY_MS = 2;

/** p-th percentile (0..100) of `values`, nearest rank. */
function percentile(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** `total` requests from CLIENTS clients, each sending its next when its last is answered: req/s and latencies (ms). */
async function closedLoop(send, total) {
  let next = 0;
  const latencies = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: CLIENTS }, async () => {
      while (next < total) {
        const i = next++;
        const start = performance.now();
        await send(i);
        latencies.push(performance.now() - start);
      }
    }),
  );
  return { rps: total / ((performance.now() - t0) / 1000), p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

/** Row i's request, and a check of its answer (total is the row's sum). */
const row = (i) => ({ x: Float32Array.of(i % 97, 1, -2, 0.5), s: Float32Array.of(1) });
const check = (i, [, total]) => {
  if (total.data.length !== 1 || total.data[0] !== (i % 97) - 0.5) throw new Error(`request ${i}: total ${Array.from(total.data)}`);
};

async function scheduling({ quick = false } = {}) {
  const rounds = 2;
  const total = quick ? 2000 : 6000;
  const variants = { 1: fixture('affine-slow-b1'), 4: fixture('affine-slow-b4'), 8: fixture('affine-slow-b8') };
  // One run of the largest variant: what a request may wait beyond the delay.
  const b8 = load(variants[8]);
  const batchRunMs = measure(() => b8.run({ x: new Float32Array(32), s: new Float32Array(8) })).median_ns / 1e6;
  b8.close();
  const pool = createPool(variants[1], { size: INSTANCES, offload: 'always' });
  const batcher = createBatcher(variants, { instances: INSTANCES, maxQueueDelayMs: DELAY_MS, offload: 'always' });
  const results = { unbatched: [], batched: [] };
  try {
    for (let r = 0; r < rounds; r++) {
      results.unbatched.push(await closedLoop((i) => pool.run(row(i)).then((t) => check(i, t)), total));
      results.batched.push(await closedLoop((i) => batcher.run(row(i)).then((t) => check(i, t)), total));
    }
  } finally {
    await pool.close();
    await batcher.close();
  }
  const pick = (list, key) => median(list.map((x) => x[key]));
  const out = { clients: CLIENTS, instances: INSTANCES, maxQueueDelayMs: DELAY_MS, batchRunMs, requests: total, rounds };
  for (const k of ['unbatched', 'batched']) out[k] = { rps: pick(results[k], 'rps'), p50: pick(results[k], 'p50'), p99: pick(results[k], 'p99') };
  const stats = batcher.stats();
  out.batched.meanRows = stats.rows / stats.batches;
  out.ratio = out.batched.rps / out.unbatched.rps;
  out.p99Bound = out.unbatched.p99 + DELAY_MS + batchRunMs;
  out.sequences = await sequences(quick ? 100 : 300, rounds);
  return out;
}

/** 100 sequences of `steps` runs each, and the same runs as plain pool runs: runs/s of each. */
async function sequences(steps, rounds) {
  const pool = createPool(fixture('accum'), { size: 2, offload: 'always', setup: (rt) => rt.storage('h') });
  const timed = async (client) => {
    const t0 = performance.now();
    await Promise.all(Array.from({ length: 100 }, (_, c) => client(c)));
    return (100 * steps) / ((performance.now() - t0) / 1000);
  };
  const withSequences = (c) => {
    const seq = pool.sequence();
    return (async () => {
      for (let k = 1; k <= steps; k++) {
        const [y, n] = await seq.run({ x: [c, 1, 0, 0] });
        if (y.data[0] !== c * k || n.data[0] !== k) throw new Error(`sequence ${c} run ${k}: ${y.data[0]}, ${n.data[0]}`);
      }
      await seq.close();
    })();
  };
  const plain = async (c) => {
    for (let k = 1; k <= steps; k++) {
      const [y] = await pool.run({ x: [c, 1, 0, 0] });
      if (y.data.length !== 4) throw new Error('plain run: no sum');
    }
  };
  const figures = { sequences: [], plain: [] };
  try {
    for (let r = 0; r < rounds; r++) {
      figures.sequences.push(await timed(withSequences));
      figures.plain.push(await timed(plain));
    }
  } finally {
    await pool.close();
  }
  const runsPerSec = { sequences: median(figures.sequences), plain: median(figures.plain) };
  return { count: 100, steps, instances: 2, ...runsPerSec, ratio: runsPerSec.sequences / runsPerSec.plain };
}

function reportScheduling(s) {
  const f = (x) => x.toFixed(x < 10 ? 2 : 0);
  return [
    `Scheduling: ${s.clients} concurrent single-row requests, ${s.instances} instances, a graph of ${f(s.batchRunMs)} ms a run (medians of ${s.rounds} rounds of ${s.requests})`,
    `| | req/s | p50 ms | p99 ms |`,
    `|---|---|---|---|`,
    `| pool of the batch-1 variant | ${f(s.unbatched.rps)} | ${f(s.unbatched.p50)} | ${f(s.unbatched.p99)} |`,
    `| createBatcher, variants 1/4/8, maxQueueDelayMs ${s.maxQueueDelayMs} (${f(s.batched.meanRows)} rows a run) | ${f(s.batched.rps)} | ${f(s.batched.p50)} | ${f(s.batched.p99)} |`,
    `batching: ${s.ratio.toFixed(2)}x the throughput (target >= 1.5x); p99 ${f(s.batched.p99)} ms against a bound of ${f(s.p99Bound)} ms (the unbatched p99 + the delay + one batch run): ${s.batched.p99 <= s.p99Bound ? 'within' : 'over'}`,
    `sequences: ${s.sequences.count} concurrent sequences of ${s.sequences.steps} runs over a pool of ${s.sequences.instances} (BOUND state): ${f(s.sequences.sequences)} runs/s, against ${f(s.sequences.plain)} runs/s for the same runs without sequences: ${s.sequences.ratio.toFixed(2)}x (target >= 0.8x)`,
  ].join('\n');
}

module.exports = { scheduling, reportScheduling };

if (require.main === module) {
  scheduling({ quick: process.argv.includes('--quick') }).then((s) => console.log(reportScheduling(s)));
}
