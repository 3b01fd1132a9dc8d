'use strict';

// `stats()` as users read it, one shape for every runtime and pool: latencies in
// milliseconds, percentiles of recent runs and cumulative histograms over the core's bounds
// (crates/core/src/stats.rs). The core keeps them for every kind of instance: in-process in
// its queue (`nativeStats`), an isolated instance's in a `NativeStats` that the isolated
// lanes record into (`isolatedStats`).

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

/** `stats()` of an isolated runtime or pool, from its counters, queue and lanes, in the same shape. */
function isolatedStats(counters, dispatch, lanes) {
  return {
    completed: counters.completed,
    failed: counters.failed,
    queueDepth: dispatch.queue.length,
    inFlight: dispatch.inFlight,
    inline: 0,
    offloaded: counters.completed + counters.failed,
    offload: 'process',
    decision: 'process',
    ...latencyStats(counters.latencies.latencies()),
    estimatedComputeMs: null,
    estimatedHopMs: null,
    crashes: counters.crashes,
    restarts: counters.restarts,
    timeouts: counters.timeouts,
    memoryKills: counters.memoryKills,
    aborts: counters.aborts,
    startFailures: counters.startFailures,
    alive: lanes.filter((l) => l.failure === null && !l.closed && !l.recovering).length,
    pids: lanes.map((l) => (l.recovering || l.failure ? null : (l.pid ?? null))),
  };
}

module.exports = { mergeHistograms, nativeStats, isolatedStats };
