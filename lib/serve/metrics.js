'use strict';

// GET /metrics through prom-client, one registry per server. Request outcomes and durations
// are counted as requests end; queue wait and compute come from the pools' native histograms
// at scrape time, so a run costs the metrics nothing.

const client = require('prom-client');
const { mergeHistograms } = require('../stats');

const OUTCOMES = ['success', 'bad_request', 'not_found', 'not_ready', 'too_large', 'queue_full', 'sequences_full', 'over_budget', 'timeout', 'model_error', 'instance_crashed', 'canceled'];

const DURATION_BOUNDS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** A histogram's exposition lines: cumulative buckets (per-bucket `counts`, then above the last bound), sum, count. */
function bucketLines(values, name, labels, bounds, counts, sum, count) {
  let cumulative = 0;
  for (let i = 0; i < bounds.length; i++) {
    cumulative += counts[i];
    values.push({ metricName: `${name}_bucket`, labels: { ...labels, le: bounds[i] }, value: cumulative });
  }
  values.push({ metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: count });
  values.push({ metricName: `${name}_sum`, labels, value: sum });
  values.push({ metricName: `${name}_count`, labels, value: count });
}

const keyOf = (model, version) => `${model}\u0000${version}`;


/** A histogram read from the pools' stats at scrape time, including pools switched out. */
function nativeHistogram(registry, name, help, field, repository, retired) {
  const metric = {
    name,
    help,
    type: 'histogram',
    aggregator: 'sum',
    get() {
      const series = new Map();
      for (const [key, r] of retired) series.set(key, { labels: r.labels, h: r[field] });
      for (const v of [...repository.draining, ...repository.served()]) {
        const key = keyOf(v.model.name, v.version);
        const prev = series.get(key);
        series.set(key, { labels: { model: v.model.name, version: v.version }, h: mergeHistograms(prev && prev.h, v.pool.stats()[field]) });
      }
      const values = [];
      for (const { labels, h } of series.values()) {
        bucketLines(values, name, labels, h.boundsMs.map((ms) => ms / 1000), h.counts, h.sumMs / 1000, h.count);
      }
      return { name, help, type: 'histogram', values, aggregator: 'sum' };
    },
  };
  registry.registerMetric(metric);
}

const versionFigures = () => ({ success: { count: 0, ns: 0 }, fail: { count: 0, ns: 0 }, input: { count: 0, ns: 0 }, output: { count: 0, ns: 0 }, last: 0 });

/**
 * A metric per served model version, read at scrape time from `pick(v)` (undefined: no
 * series): a gauge is set, a counter incremented from zero (a switched-out version's stops with it).
 */
function perVersion(Metric, m, name, help, pick) {
  return new Metric({
    name,
    help,
    labelNames: ['model', 'version'],
    registers: [m.registry],
    collect() {
      this.reset();
      for (const v of m.repository.served()) {
        const value = pick(v);
        if (value === undefined) continue;
        const labels = { model: v.model.name, version: v.version };
        if (Metric === client.Gauge) this.set(labels, value);
        else this.inc(labels, value);
      }
    },
  });
}
const perVersionGauge = (...args) => perVersion(client.Gauge, ...args);
const perVersionCounter = (...args) => perVersion(client.Counter, ...args);

/** Requests: counts by outcome and protocol, durations, and those being answered. */
function requestMetrics(m) {
  // Kept in plain maps and read at scrape time: a prom-client observe hashes its labels and
  // costs a tiny infer's worth of time.
  m.registry.registerMetric({
    name: 'zgc_inference_requests_total',
    help: 'Inference requests by model, version, outcome and protocol (rest, grpc)',
    type: 'counter',
    aggregator: 'sum',
    get() {
      const values = [...m.requests.values()].map((r) => ({ labels: r.labels, value: r.count }));
      return { name: this.name, help: this.help, type: 'counter', values, aggregator: 'sum' };
    },
  });
  m.registry.registerMetric({
    name: 'zgc_request_duration_seconds',
    help: 'Inference request time, from its first byte to its response',
    type: 'histogram',
    aggregator: 'sum',
    get() {
      const values = [];
      for (const [model, h] of m.durations) bucketLines(values, this.name, { model }, DURATION_BOUNDS, h.counts, h.sum, h.count);
      return { name: this.name, help: this.help, type: 'histogram', values, aggregator: 'sum' };
    },
  });
  new client.Gauge({ name: 'zgc_http_requests_in_flight', help: 'Inference requests being answered (REST and gRPC)', registers: [m.registry], collect() { this.set(m.state === null ? 0 : m.state.active); } });
}

/** Pools: queue depth, runs in flight, instances alive, isolated instances' deaths, and the runs' latency histograms. */
function poolMetrics(m) {
  perVersionGauge(m, 'zgc_queue_depth', 'Runs waiting for a free instance', (v) => v.pool.pending);
  perVersionGauge(m, 'zgc_runs_in_flight', 'Runs executing now', (v) => v.pool.inFlight);
  // Isolated models (isolate: 'process'): what their instances' processes went through.
  const isolated = (pick) => (v) => (v.pool.isolate === 'process' ? pick(v.pool.stats()) : undefined);
  perVersionCounter(m, 'zgc_instance_crashes_total', 'Runs that failed because their instance process died (isolate: process)', isolated((s) => s.crashes + s.memoryKills));
  perVersionCounter(m, 'zgc_instance_restarts_total', 'Instance processes started again after a death, timeout or abort', isolated((s) => s.restarts));
  perVersionCounter(m, 'zgc_instance_timeouts_total', 'Runs stopped at their model timeoutMs, their process killed', isolated((s) => s.timeouts));
  perVersionGauge(m, 'zgc_instances_alive', 'Instances able to run now (an isolated one is not while its process restarts)', (v) => (v.pool.isolate === 'process' ? v.pool.stats().alive : v.pool.size));
  nativeHistogram(m.registry, 'zgc_queue_wait_seconds', 'Time runs waited for an instance', 'queueWaitHistogram', m.repository, m.retired);
  nativeHistogram(m.registry, 'zgc_compute_seconds', 'Time runs took on an instance', 'computeHistogram', m.repository, m.retired);
}

/** Batched models (config.json "dynamicBatching") and sequence models ("sequenceBatching"). */
function batchingMetrics(m) {
  // The rows each run held, by the variants' sizes, and the rows of zeros padded.
  m.registry.registerMetric({
    name: 'zgc_batch_rows',
    help: "Rows of requests each batched run held (buckets: the model's batch variants)",
    type: 'histogram',
    aggregator: 'sum',
    get() {
      const values = [];
      for (const v of m.repository.served()) {
        const batcher = v.pool.batcher;
        if (batcher === undefined) continue;
        const s = batcher.stats();
        const bounds = batcher.batchSizes;
        const counts = new Array(bounds.length).fill(0);
        for (const [rows, n] of Object.entries(s.runsByRows)) counts[bounds.findIndex((b) => Number(rows) <= b)] += n;
        bucketLines(values, 'zgc_batch_rows', { model: v.model.name, version: v.version }, bounds, counts, s.rows, s.batches);
      }
      return { name: 'zgc_batch_rows', help: this.help, type: 'histogram', values, aggregator: 'sum' };
    },
  });
  perVersionCounter(m, 'zgc_batch_padded_rows_total', 'Rows of zeros run to fill batch variants', (v) => (v.pool.batcher === undefined ? undefined : v.pool.batcher.stats().paddedRows));
  perVersionGauge(m, 'zgc_sequences_active', 'Client sequences active (sequence_id), each with its own state', (v) => (v.sequences === undefined ? undefined : v.sequences.size));
  perVersionCounter(m, 'zgc_sequences_expired_total', 'Client sequences ended because no request came for idleTimeoutMs', (v) => (v.sequences === undefined ? undefined : v.sequences.expired));
}

/** The server's limits: the in-flight budget (lib/serve/body.js), client shared memory, connections. */
function limitMetrics(m) {
  const budget = (pick) => () => (m.budget === null ? 0 : pick(m.budget));
  new client.Gauge({ name: 'zgc_inflight_bytes', help: 'Bytes of request bodies held by requests being answered', registers: [m.registry], collect() { this.set(budget((b) => b.held)()); } });
  new client.Gauge({ name: 'zgc_inflight_limit_bytes', help: 'The in-flight budget (--max-inflight-bytes)', registers: [m.registry], collect() { this.set(budget((b) => b.limit)()); } });
  new client.Counter({ name: 'zgc_inflight_refusals_total', help: 'Requests refused with 503 because the in-flight budget was full', registers: [m.registry], collect() { this.reset(); this.inc(budget((b) => b.refused)()); } });
  new client.Gauge({ name: 'zgc_shm_regions', help: 'Client shared memory regions registered (--allow-client-shm)', registers: [m.registry], collect() { this.set(m.regions === null ? 0 : m.regions.count); } });
  new client.Gauge({ name: 'zgc_shm_region_bytes', help: 'Bytes the registered client shared memory regions span', registers: [m.registry], collect() { this.set(m.regions === null ? 0 : m.regions.bytes); } });
  m.connectionRefusals = new client.Counter({ name: 'zgc_connection_refusals_total', help: 'Connections refused because --max-connections were open and none was idle', registers: [m.registry] });
}

/** Triton's reason label of a failed request, by serve's outcome. */
const TRITON_REASON = {
  queue_full: 'REJECTED',
  sequences_full: 'REJECTED',
  over_budget: 'REJECTED',
  not_ready: 'REJECTED',
  timeout: 'REJECTED',
  canceled: 'CANCELED',
  model_error: 'BACKEND',
  instance_crashed: 'BACKEND',
  bad_request: 'OTHER',
  not_found: 'OTHER',
  too_large: 'OTHER',
};

/**
 * Triton's per-model series (nv_inference_*), with its labels and meanings, from the same
 * figures as the statistics extension: counts of successful and failed requests (by Triton's
 * reason), inferences and executions, and cumulative durations in microseconds. GPU, cache and
 * energy series have no counterpart here.
 */
function tritonMetrics(m) {
  const counter = (name, help, pick) =>
    m.registry.registerMetric({
      name,
      help,
      type: 'counter',
      aggregator: 'sum',
      get() {
        const values = [];
        for (const v of m.repository.served()) values.push({ labels: { model: v.model.name, version: v.version }, value: pick(m.versionStats(v), v) });
        return { name, help, type: 'counter', values, aggregator: 'sum' };
      },
    });
  const us = (d) => Math.round(d.ns / 1000);
  counter('nv_inference_request_success', 'Number of successful inference requests, all batch sizes', (s) => s.success.count);
  m.registry.registerMetric({
    name: 'nv_inference_request_failure',
    help: 'Number of failed inference requests, all batch sizes',
    type: 'counter',
    aggregator: 'sum',
    get() {
      const byKey = new Map();
      for (const v of m.repository.served()) {
        for (const reason of ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER']) byKey.set(`${keyOf(v.model.name, v.version)}\u0000${reason}`, { labels: { model: v.model.name, version: v.version, reason }, value: 0 });
      }
      for (const r of m.requests.values()) {
        const entry = byKey.get(`${keyOf(r.labels.model, r.labels.version)}\u0000${TRITON_REASON[r.labels.outcome]}`);
        if (entry !== undefined) entry.value += r.count;
      }
      return { name: this.name, help: this.help, type: 'counter', values: [...byKey.values()], aggregator: 'sum' };
    },
  });
  // One request is one inference of batch size 1, as the statistics extension counts it.
  counter('nv_inference_count', 'Number of inferences performed (does not include cached requests)', (s) => s.success.count);
  counter('nv_inference_exec_count', 'Number of model executions performed (does not include cached requests)', (s) => s.compute.count);
  counter('nv_inference_request_duration_us', 'Cumulative inference request duration in microseconds (includes cached requests)', (s) => us(s.success));
  counter('nv_inference_queue_duration_us', 'Cumulative inference queuing duration in microseconds (includes cached requests)', (s) => us(s.queue));
  counter('nv_inference_compute_input_duration_us', 'Cumulative compute input duration in microseconds (does not include cached requests)', (s) => us(s.input));
  counter('nv_inference_compute_infer_duration_us', 'Cumulative compute inference duration in microseconds (does not include cached requests)', (s) => us(s.compute));
  counter('nv_inference_compute_output_duration_us', 'Cumulative inference compute output duration in microseconds (does not include cached requests)', (s) => us(s.output));
  perVersionGauge(m, 'nv_inference_pending_request_count', 'Instantaneous number of pending requests awaiting execution per-model.', (v) => v.pool.pending);
}

/** A server's metrics: one prom-client registry, and what the statistics extension reports. */
class Metrics {
  constructor(repository) {
    this.repository = repository;
    this.registry = new client.Registry();
    client.collectDefaultMetrics({ register: this.registry });
    /** Request counts and durations (see requestMetrics), and per model version what statistics.js reports. */
    this.requests = new Map();
    this.durations = new Map();
    this.perVersion = new Map();
    /** Histograms of pools already switched out, merged per model and version. */
    this.retired = new Map();
    /** What the server hands over once made: its in-flight budget, shared memory regions and request state. */
    this.budget = null;
    this.regions = null;
    this.state = null;
    requestMetrics(this);
    poolMetrics(this);
    batchingMetrics(this);
    limitMetrics(this);
    tritonMetrics(this);
  }

  get contentType() {
    return this.registry.contentType;
  }

  text() {
    return this.registry.metrics();
  }

  watchBudget(b) {
    this.budget = b;
  }

  watchRegions(r) {
    this.regions = r;
  }

  watchState(state) {
    this.state = state;
  }

  refuseConnection() {
    this.connectionRefusals.inc();
  }

  /** Keeps what a closed pool counted, so that its model's series never go down. */
  retire(version) {
    const key = keyOf(version.model.name, version.version);
    const s = version.pool.stats();
    const prev = this.retired.get(key) || {};
    this.retired.set(key, {
      labels: { model: version.model.name, version: version.version },
      queueWaitHistogram: mergeHistograms(prev.queueWaitHistogram, s.queueWaitHistogram),
      computeHistogram: mergeHistograms(prev.computeHistogram, s.computeHistogram),
    });
  }

  /**
   * One finished inference request; a successful one's parse (`inputMs`) and answer
   * (`outputMs`) times too, the statistics extension's compute_input and compute_output.
   */
  count(model, version, outcome, seconds, protocol, inputMs, outputMs) {
    const key = `${model}\u0000${version}\u0000${outcome}\u0000${protocol}`;
    let r = this.requests.get(key);
    if (r === undefined) this.requests.set(key, (r = { labels: { model, version, outcome, protocol }, count: 0 }));
    r.count++;
    let h = this.durations.get(model);
    if (h === undefined) this.durations.set(model, (h = { counts: new Float64Array(DURATION_BOUNDS.length + 1), sum: 0, count: 0 }));
    let b = 0;
    while (b < DURATION_BOUNDS.length && seconds > DURATION_BOUNDS[b]) b++;
    h.counts[b]++;
    h.sum += seconds;
    h.count++;
    if (version === '') return;
    const vk = keyOf(model, version);
    let f = this.perVersion.get(vk);
    if (f === undefined) this.perVersion.set(vk, (f = versionFigures()));
    const ns = Math.round(seconds * 1e9);
    if (outcome === 'success') {
      f.success.count++;
      f.success.ns += ns;
      f.input.count++;
      f.input.ns += Math.round(inputMs * 1e6);
      f.output.count++;
      f.output.ns += Math.round(outputMs * 1e6);
      f.last = Date.now();
    } else {
      f.fail.count++;
      f.fail.ns += ns;
    }
  }

  /**
   * What the statistics extension reports of one model version: its requests' counts and
   * times, and its runs' queue wait and compute from the same histograms /metrics shows
   * (with those of its pools switched out).
   */
  versionStats(v) {
    const key = keyOf(v.model.name, v.version);
    const f = this.perVersion.get(key) || versionFigures();
    const r = this.retired.get(key);
    const s = v.pool.stats();
    let queue = r ? mergeHistograms(r.queueWaitHistogram, s.queueWaitHistogram) : s.queueWaitHistogram;
    let compute = r ? mergeHistograms(r.computeHistogram, s.computeHistogram) : s.computeHistogram;
    // A pool switched out by a reload counts until it is retired: its figures never vanish meanwhile.
    for (const d of this.repository.draining) {
      if (d === v || keyOf(d.model.name, d.version) !== key) continue;
      const ds = d.pool.stats();
      queue = mergeHistograms(ds.queueWaitHistogram, queue);
      compute = mergeHistograms(ds.computeHistogram, compute);
    }
    const asDuration = (h) => ({ count: h.count, ns: Math.round(h.sumMs * 1e6) });
    return { ...f, queue: asDuration(queue), compute: asDuration(compute) };
  }
}

const createMetrics = (repository) => new Metrics(repository);

module.exports = { createMetrics, OUTCOMES };
