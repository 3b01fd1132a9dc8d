'use strict';

// lib/stats.js: stats() in one shape for every runtime and pool, from the core's queue (its
// percentiles and histograms are tested in crates/core/src/stats.rs), with what isolated
// instances' processes went through, checked against figures worked out by hand.
const { nativeStats, withFaults } = require('../../lib/stats');
const { histogramBoundsNs } = require('../../lib/native');

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

test('withFaults: isolated instances add what their processes went through, summed, and each one\'s pid', () => {
  const base = { completed: 5, failed: 1, queueDepth: 2, inFlight: 3, inline: 0, offloaded: 6, offload: 'always', decision: 'offloaded' };
  const faults = [
    { crashes: 1, restarts: 1, timeouts: 0, memoryKills: 2, aborts: 0, startFailures: 0, alive: true, pid: 11 },
    { crashes: 2, restarts: 1, timeouts: 4, memoryKills: 0, aborts: 6, startFailures: 1, alive: false, pid: null },
    { crashes: 0, restarts: 0, timeouts: 0, memoryKills: 3, aborts: 0, startFailures: 6, alive: false, pid: undefined },
  ];
  expect(withFaults(base, faults)).toEqual({
    ...base,
    offload: 'process',
    decision: 'process',
    crashes: 3,
    restarts: 2,
    timeouts: 4,
    memoryKills: 5,
    aborts: 6,
    startFailures: 7,
    alive: 1,
    pids: [11, null, null],
  });
});
