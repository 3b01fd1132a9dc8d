'use strict';

// lib/stats.js: stats() in one shape for every runtime and pool, over the core's histogram
// bounds (an in-process runtime's from the core's raw figures, an isolated one's from the
// core's stats that its lanes record into, NativeStats), checked against figures worked out
// by hand.
const { nativeStats, isolatedStats } = require('../../lib/stats');
const { histogramBoundsNs, NativeStats } = require('../../lib/native');

/** A NativeStats that keeps one kind of latency, as the old JavaScript Latencies did. */
class Latencies {
  constructor(kind = 'compute') {
    this.stats = new NativeStats();
    this.kind = kind;
  }

  add(ms) {
    if (this.kind === 'compute') this.stats.record(true, 0, ms);
    else this.stats.record(true, ms, 0);
  }

  percentiles() {
    const ns = this.stats.latencies()[this.kind === 'compute' ? 'computeNs' : 'queueWaitNs'];
    const ms = (v) => (v === null ? null : v / 1e6);
    return { p50: ms(ns[0]), p90: ms(ns[1]), p99: ms(ns[2]) };
  }

  histogram() {
    const l = this.stats.latencies();
    const counts = this.kind === 'compute' ? l.computeCounts : l.queueWaitCounts;
    const sumNs = this.kind === 'compute' ? l.computeSumNs : l.queueWaitSumNs;
    return { boundsMs: BOUNDS_MS, counts, sumMs: sumNs / 1e6, count: counts.reduce((a, b) => a + b, 0) };
  }
}

// 10 µs to 10 s in 1-2.5-5 steps, as docs/services.md lists them.
const BOUNDS_MS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];

test("the histograms' bounds are the core's, in milliseconds", () => {
  expect(histogramBoundsNs().map((ns) => ns / 1e6)).toEqual(BOUNDS_MS);
});

describe('nativeStats: the core\'s raw figures, in milliseconds', () => {
  const raw = {
    completed: 7,
    failed: 2,
    queueDepth: 3,
    inFlight: 1,
    inlineRuns: 5,
    offloadedRuns: 4,
    offload: 'auto',
    decision: 'inline',
    latencies: {
      queueWaitNs: [1000, 2000, null],
      computeNs: [3e6, 4e6, 5e6],
      queueWaitCounts: [1, 0, 2],
      queueWaitSumNs: 2.5e6,
      computeCounts: [0, 4],
      computeSumNs: 12e6,
    },
    estimatedComputeNs: 250000,
    estimatedHopNs: null,
  };

  test('every field, converted where it is a time', () => {
    expect(nativeStats(raw)).toEqual({
      completed: 7,
      failed: 2,
      queueDepth: 3,
      inFlight: 1,
      inline: 5,
      offloaded: 4,
      offload: 'auto',
      decision: 'inline',
      queueWaitMs: { p50: 0.001, p90: 0.002, p99: null },
      computeMs: { p50: 3, p90: 4, p99: 5 },
      queueWaitHistogram: { boundsMs: BOUNDS_MS, counts: [1, 0, 2], sumMs: 2.5, count: 3 },
      computeHistogram: { boundsMs: BOUNDS_MS, counts: [0, 4], sumMs: 12, count: 4 },
      estimatedComputeMs: 0.25,
      estimatedHopMs: null,
    });
  });

  test('an estimate not made yet stays null, an undefined one too', () => {
    expect(nativeStats({ ...raw, estimatedComputeNs: undefined }).estimatedComputeMs).toBeNull();
  });
});

describe('NativeStats: what an isolated instance records, in milliseconds, kept by the core', () => {
  test('nothing yet: no percentiles, empty histogram', () => {
    const l = new Latencies();
    expect(l.percentiles()).toEqual({ p50: null, p90: null, p99: null });
    expect(l.histogram()).toEqual({ boundsMs: BOUNDS_MS, counts: new Array(20).fill(0), sumMs: 0, count: 0 });
  });

  test('percentiles by nearest rank; each latency in the first bucket whose bound holds it, past the last in the extra one', () => {
    const l = new Latencies();
    // 1..100 ms, shuffled: p50 is the 50th, p90 the 90th, p99 the 99th.
    const values = Array.from({ length: 100 }, (_, i) => i + 1).sort((a, b) => ((a * 37) % 101) - ((b * 37) % 101));
    for (const v of values) l.add(v);
    expect(l.percentiles()).toEqual({ p50: 50, p90: 90, p99: 99 });
    const h = l.histogram();
    expect(h.sumMs).toBe(5050);
    expect(h.count).toBe(100);
    // <= 1 ms: 1; (1, 2.5]: 2; (2.5, 5]: 3..5; (5, 10]: 6..10; (10, 25]: 11..25; (25, 50]: 26..50; (50, 100]: 51..100.
    const want = new Array(20).fill(0);
    want[6] = 1;
    want[7] = 1;
    want[8] = 3;
    want[9] = 5;
    want[10] = 15;
    want[11] = 25;
    want[12] = 50;
    expect(h.counts).toEqual(want);
    l.add(0.01); // on a bound: that bucket
    l.add(20000); // past the last bound
    expect(l.histogram().counts[0]).toBe(1);
    expect(l.histogram().counts[19]).toBe(1);
    // The histogram is a copy: adding later does not change one taken before.
    const before = l.histogram();
    l.add(1);
    expect(before.count).toBe(102);
  });

  test('the percentiles keep the last 4,096 latencies', () => {
    const l = new Latencies();
    for (let i = 0; i < 4096; i++) l.add(1000);
    for (let i = 0; i < 4096; i++) l.add(1);
    expect(l.percentiles()).toEqual({ p50: 1, p90: 1, p99: 1 });
    l.add(5);
    // The oldest 1 gave way: 4,095 ones and one 5.
    expect(l.percentiles()).toEqual({ p50: 1, p90: 1, p99: 1 });
    for (let i = 0; i < 100; i++) l.add(5);
    expect(l.percentiles().p99).toBe(5);
    expect(l.histogram().count).toBe(4096 * 2 + 101);
  });

  test('the window is exactly 4,096 long: half of it overwritten, the median moves to the new half', () => {
    const l = new Latencies();
    for (let i = 0; i < 4096; i++) l.add(2);
    for (let i = 0; i < 2048; i++) l.add(1);
    // 2,048 ones and 2,048 twos: the 2,048th is a one (a 4,097th entry would make it a two).
    expect(l.percentiles().p50).toBe(1);
  });
});

test('isolatedStats: the same shape from counters, queue and lanes', () => {
  const latencies = new NativeStats();
  latencies.record(true, 2, 4);
  const counters = { completed: 5, failed: 1, crashes: 2, restarts: 3, timeouts: 4, memoryKills: 5, aborts: 6, startFailures: 7, latencies };
  const bucket = (ms) => BOUNDS_MS.findIndex((b) => ms <= b);
  const one = (ms) => ({ boundsMs: BOUNDS_MS, counts: Array.from({ length: 20 }, (_, i) => (i === bucket(ms) ? 1 : 0)), sumMs: ms, count: 1 });
  const lanes = [
    { failure: null, closed: false, recovering: false, pid: 11 },
    { failure: null, closed: false, recovering: false, pid: 14 },
    { failure: null, closed: false, recovering: true, pid: 12 },
    { failure: new Error('gave up'), closed: false, recovering: false, pid: 13 },
    { failure: null, closed: true, recovering: false, pid: undefined },
  ];
  expect(isolatedStats(counters, { queue: [1, 2], inFlight: 3 }, lanes)).toEqual({
    completed: 5,
    failed: 1,
    queueDepth: 2,
    inFlight: 3,
    inline: 0,
    offloaded: 6,
    offload: 'process',
    decision: 'process',
    queueWaitMs: { p50: 2, p90: 2, p99: 2 },
    computeMs: { p50: 4, p90: 4, p99: 4 },
    queueWaitHistogram: one(2),
    computeHistogram: one(4),
    estimatedComputeMs: null,
    estimatedHopMs: null,
    crashes: 2,
    restarts: 3,
    timeouts: 4,
    memoryKills: 5,
    aborts: 6,
    startFailures: 7,
    alive: 2,
    pids: [11, 14, null, null, null],
  });
});
