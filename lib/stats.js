'use strict';

// `stats()` as users read it, one shape for every runtime and pool: latencies in
// milliseconds, percentiles of recent runs and cumulative histograms over the core's bounds
// (crates/core/src/executor.rs: HISTOGRAM_BOUNDS_NS). In-process, the core keeps them
// (`nativeStats`); an isolated instance's are kept here (`Latencies`, `isolatedStats`).

const { histogramBoundsNs } = require('./native');

const BOUNDS_MS = histogramBoundsNs().map((ns) => ns / 1e6);

/** A histogram as `stats()` gives it. */
const histogram = (counts, sumMs) => ({ boundsMs: BOUNDS_MS, counts, sumMs, count: counts.reduce((a, b) => a + b, 0) });

/** Two histograms of `stats()` as one (`a` may be absent). */
function mergeHistograms(a, b) {
  if (!a) return b;
  return { boundsMs: b.boundsMs, counts: b.counts.map((c, i) => c + a.counts[i]), sumMs: a.sumMs + b.sumMs, count: a.count + b.count };
}

/** `stats()` as users read it: latencies in milliseconds. */
function nativeStats(raw) {
  const ms = (ns) => (ns === null || ns === undefined ? null : ns / 1e6);
  const pct = (list) => ({ p50: ms(list[0]), p90: ms(list[1]), p99: ms(list[2]) });
  return {
    completed: raw.completed,
    failed: raw.failed,
    queueDepth: raw.queueDepth,
    inFlight: raw.inFlight,
    inline: raw.inlineRuns,
    offloaded: raw.offloadedRuns,
    offload: raw.offload,
    decision: raw.decision,
    queueWaitMs: pct(raw.queueWaitNs),
    computeMs: pct(raw.computeNs),
    queueWaitHistogram: histogram(raw.queueWaitCounts, ms(raw.queueWaitSumNs)),
    computeHistogram: histogram(raw.computeCounts, ms(raw.computeSumNs)),
    estimatedComputeMs: ms(raw.estimatedComputeNs),
    estimatedHopMs: ms(raw.estimatedHopNs),
  };
}

/** Latencies kept in JavaScript (an isolated instance's), as the core keeps them in-process: recent percentiles and cumulative histograms. */
class Latencies {
  constructor() {
    this.ring = [];
    this.next = 0;
    this.counts = new Array(BOUNDS_MS.length + 1).fill(0);
    this.sum = 0;
  }

  add(ms) {
    // The last 4,096, oldest overwritten first (the array grows to that length, then wraps).
    this.ring[this.next] = ms;
    this.next = (this.next + 1) % 4096;
    let bucket = BOUNDS_MS.findIndex((b) => ms <= b);
    if (bucket < 0) bucket = BOUNDS_MS.length;
    this.counts[bucket]++;
    this.sum += ms;
  }

  percentiles() {
    const sorted = [...this.ring].sort((a, b) => a - b);
    const at = (q) => (sorted.length === 0 ? null : sorted[Math.min(sorted.length, Math.max(1, Math.ceil((q / 100) * sorted.length))) - 1]);
    return { p50: at(50), p90: at(90), p99: at(99) };
  }

  histogram() {
    return histogram([...this.counts], this.sum);
  }
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
    queueWaitMs: counters.queueWait.percentiles(),
    computeMs: counters.compute.percentiles(),
    queueWaitHistogram: counters.queueWait.histogram(),
    computeHistogram: counters.compute.histogram(),
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

module.exports = { mergeHistograms, nativeStats, isolatedStats, Latencies };
