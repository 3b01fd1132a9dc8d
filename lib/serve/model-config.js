'use strict';

// The model configuration extension: a model version's settings as Triton's model_config.proto
// `ModelConfig`, under the proto's field names, as Triton's REST API writes it and its tools
// (perf_analyzer, model_analyzer, tritonclient's get_model_config) read it. What serve has and
// the proto has no field for goes in `parameters`, as strings; nothing goes in a field the proto
// does not have.

/** Triton's version policy of serve's ("latest", "all" or { specific: [...] }). */
function versionPolicy(policy) {
  if (policy === 'all') return { all: {} };
  if (policy !== null && typeof policy === 'object') return { specific: { versions: policy.specific } };
  return { latest: { num_versions: 1 } };
}

/** Whether a sequence model's sequences share the instances (BOUND state in-process) rather than each hold one. */
function sharesInstances(v) {
  return v.pool.isolate !== 'process' && v.pool.runtimes[0].sources.some((s) => s.kind === 'state' && s.binding === 'bound');
}

/** The proto's 32-bit fields hold serve's larger settings at their most. */
const UINT32 = 4294967295;
const INT32 = 2147483647;

/** The ModelConfig of model version `v`. */
function tritonModelConfig(v) {
  const c = v.config;
  const sig = v.signature;
  const batched = sig.maxBatch !== undefined;
  // With max_batch_size > 0, Triton's dims leave out the batch dimension.
  const dims = (shape) => (batched ? shape.slice(1) : shape);
  const parameters = {};
  const param = (key, value) => {
    if (value !== undefined && value !== null) parameters[key] = { string_value: typeof value === 'string' ? value : JSON.stringify(value) };
  };
  const queuePolicy = { timeout_action: 'REJECT', default_timeout_microseconds: (c.timeoutMs ?? 0) * 1000, allow_timeout_override: true, max_queue_size: Number.isFinite(c.maxQueue) ? Math.min(c.maxQueue, UINT32) : 0 };
  const config = {
    name: v.model.name,
    platform: 'zgc_executable',
    backend: 'zgc',
    version_policy: versionPolicy(c.versionPolicy),
    max_batch_size: batched ? sig.maxBatch : 0,
    input: sig.inputs.map((i) => ({ name: i.name, data_type: `TYPE_${i.datatype}`, format: 'FORMAT_NONE', dims: dims(i.shape), is_shape_tensor: false, allow_ragged_batch: false, optional: false })),
    output: sig.outputs.map((o) => ({ name: o.name, data_type: `TYPE_${o.datatype}`, dims: dims(o.shape), label_filename: '', is_shape_tensor: false })),
    instance_group: [{ name: `${v.model.name}_0`, kind: 'KIND_CPU', count: Math.min(c.instances, INT32), gpus: [], secondary_devices: [], profile: [], passive: false, host_policy: '' }],
    default_model_filename: '',
    parameters,
  };
  if (c.dynamicBatching !== undefined) {
    const d = c.dynamicBatching;
    config.dynamic_batching = {
      preferred_batch_size: (d.preferredBatchSizes ?? []).map(Number),
      max_queue_delay_microseconds: Math.round(d.maxQueueDelayMs * 1000),
      preserve_ordering: false,
      priority_levels: c.priorityLevels ?? 0,
      default_priority_level: c.defaultPriorityLevel ?? 0,
      default_queue_policy: queuePolicy,
    };
    param('dynamic_batching.variants', d.variants);
  } else {
    // Triton keeps a queue's policy and priorities under dynamic_batching only.
    param('max_queue', Number.isFinite(c.maxQueue) ? c.maxQueue : undefined);
    param('timeout_ms', c.timeoutMs);
    param('priority_levels', c.priorityLevels);
    param('default_priority_level', c.defaultPriorityLevel);
  }
  if (c.sequenceBatching !== undefined) {
    const s = c.sequenceBatching;
    config.sequence_batching = {
      max_sequence_idle_microseconds: s.idleTimeoutMs * 1000,
      control_input: [],
      state: [],
      // BOUND state in-process: any number of sequences share the instances, oldest first;
      // else each holds an instance of its own, Triton's direct strategy.
      ...(sharesInstances(v) ? { oldest: { max_candidate_sequences: Math.min(s.maxSequences, INT32), preferred_batch_size: [], max_queue_delay_microseconds: 0, preserve_ordering: false } } : { direct: { max_queue_delay_microseconds: 0, minimum_slot_utilization: 0 } }),
    };
    param('sequence_batching.max_sequences', s.maxSequences);
    param('sequence_batching.wait_ms', s.waitMs);
  }
  if (c.decoupled !== undefined) {
    config.model_transaction_policy = { decoupled: true };
    param('decoupled.max_steps', c.decoupled.maxSteps);
    param('decoupled.stop_output', c.decoupled.stopOutput);
  }
  // Serve's own: parameter files of sources, label files, warmup requests, output names.
  if (Object.keys(c.parameters ?? {}).length > 0) param('source_parameters', c.parameters);
  param('labels', c.labels);
  param('warmup', c.warmup);
  param('offload', c.offload);
  param('isolate', c.isolate);
  param('max_memory_mb', c.maxMemoryMb);
  return config;
}

module.exports = { tritonModelConfig };
