'use strict';

// The statistics extension in Triton's shape (GET v2/models[/{name}[/versions/{v}]]/stats,
// gRPC ModelStatistics): per model version, its requests (success, fail) and their parse and
// answer times (compute_input, compute_output), from the counts /metrics reads; its runs'
// queue wait and compute (queue, compute_infer), from the pools' histograms /metrics reads.

const { resolveVersion } = require('./context');

const NONE = () => ({ count: 0, ns: 0 });

function versionStatistics(metrics, v) {
  const s = metrics.versionStats(v);
  const copy = (d) => ({ count: d.count, ns: d.ns });
  return {
    name: v.model.name,
    version: v.version,
    last_inference: s.last,
    inference_count: s.success.count,
    // Every run an instance did, as zgc_compute_seconds_count counts them.
    execution_count: s.compute.count,
    inference_stats: {
      success: copy(s.success),
      fail: copy(s.fail),
      queue: copy(s.queue),
      compute_input: copy(s.input),
      compute_infer: copy(s.compute),
      compute_output: copy(s.output),
      cache_hit: NONE(),
      cache_miss: NONE(),
    },
    // One request is one run of batch size 1 (no dynamic batching yet).
    batch_stats: s.compute.count === 0 ? [] : [{ batch_size: 1, compute_input: copy(s.input), compute_infer: copy(s.compute), compute_output: copy(s.output) }],
    memory_usage: [],
  };
}

/**
 * `{ model_stats }` of every version served, of every version of model `name`, or of one
 * version. A model that serves no version has none to report (it is not an error, as in Triton).
 */
function modelStatistics(ctx, name, versionText) {
  const { repository, metrics } = ctx;
  let versions;
  // gRPC's empty strings are its absent fields.
  if (!name) versions = [...repository.served()];
  else if (versionText) versions = [resolveVersion(ctx, name, versionText)];
  else {
    const model = repository.models.get(name);
    if (model === undefined) resolveVersion(ctx, name);
    versions = [...model.versions.values()];
  }
  return { model_stats: versions.map((v) => versionStatistics(metrics, v)) };
}

module.exports = { modelStatistics };
