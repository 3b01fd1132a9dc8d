'use strict';

// `stats()` as users read it, one shape for every runtime and pool: latencies in
// milliseconds, percentiles of recent runs and cumulative histograms over the core's bounds
// (crates/core/src/stats.rs), which the core's queue keeps for every kind of instance; an
// isolated instance's adds what its processes went through (`withFaults`).

const { histogramBoundsNs } = require('./native');

const BOUNDS_MS = histogramBoundsNs().map((ns) => ns / 1e6);

/** A histogram as `stats()` gives it. */
const histogram = (counts, sumMs) => ({ boundsMs: BOUNDS_MS, counts, sumMs, count: counts.reduce((a, b) => a + b, 0) });

/** Two histograms of `stats()` as one (`a` may be absent). */
function mergeHistograms(a, b) {
  if (!a) return b;
  return { boundsMs: b.boundsMs, counts: b.counts.map((c, i) => c + a.counts[i]), sumMs: a.sumMs + b.sumMs, count: a.count + b.count };
}

const ms = (ns) => (ns === null || ns === undefined ? null : ns / 1e6);

/** The core's latencies (nanoseconds) as `stats()` gives them, in milliseconds. */
function latencyStats(l) {
  const pct = (list) => ({ p50: ms(list[0]), p90: ms(list[1]), p99: ms(list[2]) });
  return {
    queueWaitMs: pct(l.queueWaitNs),
    computeMs: pct(l.computeNs),
    queueWaitHistogram: histogram(l.queueWaitCounts, ms(l.queueWaitSumNs)),
    computeHistogram: histogram(l.computeCounts, ms(l.computeSumNs)),
  };
}

/** `stats()` as users read it: latencies in milliseconds. */
function nativeStats(raw) {
  return {
    completed: raw.completed,
    failed: raw.failed,
    queueDepth: raw.queueDepth,
    inFlight: raw.inFlight,
    inline: raw.inlineRuns,
    offloaded: raw.offloadedRuns,
    offload: raw.offload,
    decision: raw.decision,
    ...latencyStats(raw.latencies),
    estimatedComputeMs: ms(raw.estimatedComputeNs),
    estimatedHopMs: ms(raw.estimatedHopNs),
  };
}

/** `stats` of isolated instances, with what their processes went through (their `faults()`). */
function withFaults(stats, faults) {
  const sum = (key) => faults.reduce((n, f) => n + f[key], 0);
  return {
    ...stats,
    offload: 'process',
    decision: 'process',
    crashes: sum('crashes'),
    restarts: sum('restarts'),
    timeouts: sum('timeouts'),
    memoryKills: sum('memoryKills'),
    aborts: sum('aborts'),
    startFailures: sum('startFailures'),
    alive: faults.filter((f) => f.alive).length,
    pids: faults.map((f) => f.pid ?? null),
  };
}

module.exports = { mergeHistograms, nativeStats, withFaults };
