#!/usr/bin/env node
'use strict';

// npm run stress: 1,000,000 tiny runs and 10,000 load/run/close cycles (paths and bytes),
// 100,000 offloaded async runs (a runtime, a pool of 2) and 1,000 runtimes each starting and
// ending a worker thread, failing when resident memory, open file descriptors or OS threads
// grow past a small bound after warm-up. `--short` (CI, through __test__/pool/stress.spec.js) does a tenth of each.
// Run with --expose-gc (npm run stress does) so that collected garbage is not counted.
const fs = require('node:fs');
const path = require('node:path');
const { load, createPool } = require('..');
const { fixture } = require('../__test__/fixtures/manifest');

const short = process.argv.includes('--short');
const RUNS = short ? 100_000 : 1_000_000;
const CYCLES = short ? 1_000 : 10_000;
const MAX_GROWTH_MB = 8;

const turn = () => new Promise((resolve) => setImmediate(resolve));

// Node runs native finalizers on a later turn of the event loop, so collect and yield.
async function settle() {
  for (let i = 0; i < 3; i++) {
    if (globalThis.gc) globalThis.gc();
    await turn();
  }
  return { rss: process.memoryUsage().rss / 2 ** 20, fds: fs.readdirSync('/proc/self/fd').length, threads: await threads() };
}

/** OS threads of this process, once the async-run workers of closed runtimes have ended. */
async function threads() {
  let count = fs.readdirSync('/proc/self/task').length;
  for (let i = 0; i < 100; i++) {
    await new Promise((r) => setTimeout(r, 10));
    const now = fs.readdirSync('/proc/self/task').length;
    if (now === count) break;
    count = now;
  }
  return count;
}

/** Runs `loop(from, to)` over `warmup` iterations (a tenth of `total` unless given), then measures the rest. */
async function measured(name, total, loop, warmup = Math.ceil(total / 10)) {
  await loop(0, warmup);
  const before = await settle();
  const t0 = process.hrtime.bigint();
  await loop(warmup, total);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const after = await settle();
  return {
    name,
    iterations: total,
    seconds: +seconds.toFixed(2),
    rssBeforeMB: +before.rss.toFixed(1),
    rssAfterMB: +after.rss.toFixed(1),
    growthMB: +(after.rss - before.rss).toFixed(2),
    fdGrowth: after.fds - before.fds,
    threadGrowth: after.threads - before.threads,
  };
}

// Yields every 1,000 iterations, as a service between requests would.
function phase(name, total, step, warmup) {
  return measured(name, total, async (from, to) => {
    for (let i = from; i < to; i++) {
      step(i);
      if (i % 1000 === 999) await turn();
    }
  }, warmup);
}

/** As `phase`, for an async step, 64 at a time. */
function phaseAsync(name, total, step) {
  return measured(name, total, async (from, to) => {
    let next = from;
    await Promise.all(Array.from({ length: 64 }, async () => {
      while (next < to) await step(next++);
    }));
  });
}

const rt = load(fixture('add'));
const a = new Float32Array([1, 2, 3, 4]);
const b = new Float32Array([0.5, 0.5, 0.5, 0.5]);
const into = [new Float32Array(4)];
const bytes = fs.readFileSync(fixture('add'));
const offloaded = load(fixture('add'), { offload: 'always' });
const pool = createPool(fixture('add'), { size: 2, offload: 'always' });
async function main() {
  const results = [
    await phase('tiny run()', RUNS, (i) => {
      a[0] = i;
      const [out] = rt.run({ a, b });
      if (out.data[0] !== Math.fround(i + 0.5)) throw new Error(`run ${i} gave ${out.data[0]}`);
    }),
    await phase('tiny run({ into })', RUNS, () => rt.run({ a, b }, { into })),
    await phase('load(path)/run/close', CYCLES, () => {
      const r = load(fixture('add'));
      r.run({ a, b });
      r.close();
    }),
    await phase('load(bytes)/run/close', CYCLES, () => {
      const r = load(bytes);
      r.run({ a, b });
      r.close();
    }),
    // V8's heap grows to its steady size over the first ~2,000 runtimes left to the collector
    // (Node 26: +8 MB, then flat over 8,000 more), so the warm-up is that long even in --short.
    await phase('load/run, never closed (finalizers)', CYCLES + 2000, () => {
      load(fixture('dtypes')).set('x', new Float32Array(6));
    }, 2000),
    await phaseAsync('runAsync, offloaded, 64 in flight', RUNS / 10, async (i) => {
      const [out] = await offloaded.runAsync({ a: [i, 0, 0, 0], b });
      if (out.data[0] !== Math.fround(i + 0.5)) throw new Error(`runAsync ${i} gave ${out.data[0]}`);
    }),
    await phaseAsync('pool of 2, offloaded, 64 in flight', RUNS / 10, async (i) => {
      const [out] = await pool.run({ a: [i, 0, 0, 0], b });
      if (out.data[0] !== Math.fround(i + 0.5)) throw new Error(`pool.run ${i} gave ${out.data[0]}`);
    }),
    // Each runtime's first offloaded run starts its worker thread; close() must end it.
    await phaseAsync('load/runAsync/close (a worker each)', CYCLES / 10, async () => {
      const r = load(fixture('add'), { offload: 'always' });
      await r.runAsync({ a, b });
      r.close();
    }),
  ];
  rt.close();
  offloaded.close();
  await pool.close();

  const signed = (n) => `${n >= 0 ? '+' : ''}${n}`;
  for (const r of results) console.log(`${r.name.padEnd(38)} ${String(r.iterations).padStart(9)} in ${String(r.seconds).padStart(6)} s  rss ${r.rssBeforeMB} -> ${r.rssAfterMB} MB (${signed(r.growthMB)})  fds ${signed(r.fdGrowth)}  threads ${signed(r.threadGrowth)}`);
  const failed = results.filter((r) => r.growthMB > MAX_GROWTH_MB || r.fdGrowth > 0 || r.threadGrowth > 0);
  console.log(JSON.stringify({ ok: failed.length === 0, maxGrowthMB: MAX_GROWTH_MB, results }));
  if (failed.length) {
    console.error(`memory, descriptors or threads grew past the bound (${MAX_GROWTH_MB} MB, 0 fds, 0 threads): ${failed.map((r) => r.name).join(', ')}`);
    process.exit(1);
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
