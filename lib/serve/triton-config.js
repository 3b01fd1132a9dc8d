'use strict';

// A model's settings from Triton's config.pbtxt (model_config.proto's ModelConfig in protobuf's
// text format, read by pbtxt.js), as the config.json object serve reads otherwise. The fields
// that map become serve's keys; the ones serve cannot honour are refused, each by name and
// why. What model-config.js writes (GET .../config) reads back to the same settings.

const { parsePbtxt, PbtxtError } = require('./pbtxt');

/** A refusal of `file`'s content: the field's path and why. */
class ConfigError extends Error {}

/** Triton's parameters that carry serve's own settings, as model-config.js writes them. */
const PARAMETERS = {
  source_parameters: ['parameters', 'json'],
  labels: ['labels', 'json'],
  warmup: ['warmup', 'json'],
  offload: ['offload', 'string'],
  isolate: ['isolate', 'string'],
  max_memory_mb: ['maxMemoryMb', 'json'],
  max_queue: ['maxQueue', 'json'],
  timeout_ms: ['timeoutMs', 'json'],
  priority_levels: ['priorityLevels', 'json'],
  default_priority_level: ['defaultPriorityLevel', 'json'],
  'dynamic_batching.variants': [['dynamicBatching', 'variants'], 'json'],
  'sequence_batching.max_sequences': [['sequenceBatching', 'maxSequences'], 'json'],
  'sequence_batching.wait_ms': [['sequenceBatching', 'waitMs'], 'json'],
  'decoupled.max_steps': [['decoupled', 'maxSteps'], 'json'],
  'decoupled.stop_output': [['decoupled', 'stopOutput'], 'string'],
};

/** Reads message fields of `msg` at `where`: each taken once; `rest()` refuses any left. */
function fieldsOf(msg, where) {
  const taken = new Set();
  const at = (name) => (where === '' ? name : `${where}.${name}`);
  const list = (name) => {
    taken.add(name);
    return msg[name] ?? [];
  };
  const one = (name) => {
    const values = list(name);
    if (values.length > 1) throw new ConfigError(`${at(name)} is given ${values.length} times; it takes one value`);
    return values[0];
  };
  const kind = (name, value, want) => {
    if (typeof value === 'bigint') throw new ConfigError(`${at(name)} is ${value}, past what serve takes`);
    const got = value === null || typeof value !== 'object' ? typeof value : 'ident' in value ? 'ident' : 'message';
    if (got !== want) throw new ConfigError(`${at(name)} must be ${want === 'ident' ? 'an enum value' : `a ${want}`}, got ${got === 'ident' ? value.ident : got === 'message' ? 'a message' : JSON.stringify(value)}`);
    return value;
  };
  return {
    at,
    list,
    one,
    number(name, { min = 0, whole = true } = {}) {
      const v = one(name);
      if (v === undefined) return undefined;
      kind(name, v, 'number');
      if ((whole && !Number.isSafeInteger(v)) || v < min) throw new ConfigError(`${at(name)} must be ${whole ? 'an integer' : 'a number'} >= ${min}, got ${v}`);
      return v;
    },
    numbers(name) {
      return list(name).map((v) => {
        kind(name, v, 'number');
        if (!Number.isSafeInteger(v)) throw new ConfigError(`${at(name)} must hold integers, got ${v}`);
        return v;
      });
    },
    string(name) {
      const v = one(name);
      return v === undefined ? undefined : kind(name, v, 'string');
    },
    bool(name) {
      const v = one(name);
      if (v === undefined) return undefined;
      if (typeof v === 'number' && (v === 0 || v === 1)) return v === 1;
      kind(name, v, 'ident');
      if (v.ident !== 'true' && v.ident !== 'false' && v.ident !== 'True' && v.ident !== 'False' && v.ident !== 't' && v.ident !== 'f') throw new ConfigError(`${at(name)} must be true or false, got ${v.ident}`);
      return v.ident[0] === 't' || v.ident[0] === 'T';
    },
    ident(name) {
      const v = one(name);
      return v === undefined ? undefined : kind(name, v, 'ident').ident;
    },
    message(name) {
      const v = one(name);
      return v === undefined ? undefined : fieldsOf(kind(name, v, 'message'), at(name));
    },
    messages(name) {
      return list(name).map((v, i) => fieldsOf(kind(name, v, 'message'), `${at(name)}[${i}]`));
    },
    /** Refuses every field not taken: `why(name)` says why, else it is not one serve honours. */
    rest(why = () => undefined) {
      for (const name of Object.keys(msg)) {
        if (taken.has(name)) continue;
        const reason = why(name);
        throw new ConfigError(`${at(name)}: ${reason ?? 'serve does not take this field of ModelConfig (docs/serving.md lists those it does)'}`);
      }
    },
  };
}

const DATATYPE = (t, where) => {
  if (t === undefined) return undefined;
  if (!/^TYPE_[A-Z0-9]+$/.test(t)) throw new ConfigError(`${where}.data_type must be a DataType (TYPE_FP32, …), got ${t}`);
  return t.slice(5) === 'STRING' ? 'BYTES' : t.slice(5);
};

/** A tensor of `input` or `output`, as declared: its name, datatype and dims, checked against the artifact once it loads. */
function tensorOf(f, kind) {
  const name = f.string('name');
  if (name === undefined || name === '') throw new ConfigError(`${f.at('name')}: every ${kind} needs a name`);
  const t = { name, datatype: DATATYPE(f.ident('data_type'), f.at('')), dims: f.numbers('dims') };
  if (kind === 'input') {
    const format = f.ident('format');
    if (format !== undefined && format !== 'FORMAT_NONE') throw new ConfigError(`${f.at('format')}: ${format} is not taken (serve passes tensors as the artifact lays them out)`);
    for (const flag of ['is_shape_tensor', 'allow_ragged_batch', 'optional']) {
      if (f.bool(flag) === true) throw new ConfigError(`${f.at(flag)}: serve has no ${flag.replace(/_/g, ' ')} inputs`);
    }
  } else {
    if (f.bool('is_shape_tensor') === true) throw new ConfigError(`${f.at('is_shape_tensor')}: serve has no shape tensors`);
    const labels = f.string('label_filename');
    if (labels !== undefined && labels !== '') throw new ConfigError(`${f.at('label_filename')}: give an output's labels in parameters { key: "labels" … } (serve's labels setting)`);
  }
  if (f.list('reshape').length > 0) throw new ConfigError(`${f.at('reshape')}: serve takes no reshape`);
  f.rest();
  return t;
}

const micros = (us, where) => {
  if (us === undefined) return undefined;
  if (us % 1000 !== 0) throw new ConfigError(`${where} must be a whole number of milliseconds (a multiple of 1000 µs) here, got ${us}`);
  return us / 1000;
};

function parameterValue(entry, key, as) {
  const value = entry.message('value');
  const text = value === undefined ? undefined : value.string('string_value');
  if (value !== undefined) value.rest();
  if (text === undefined) throw new ConfigError(`parameters "${key}" needs value { string_value: … }`);
  if (as === 'string') return text;
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ConfigError(`parameters "${key}": its string_value must be JSON, as GET …/config writes it: ${err.message}`);
  }
}

/** serve's config object from the text of a config.pbtxt for model `name`. */
function configFromPbtxt(text, name) {
  let msg;
  try {
    msg = parsePbtxt(text);
  } catch (err) {
    if (err instanceof PbtxtError) throw new ConfigError(`not protobuf text format: ${err.message}`);
    throw err;
  }
  const f = fieldsOf(msg, '');
  const config = {};
  const given = f.string('name');
  if (given !== undefined && given !== name) throw new ConfigError(`name "${given}" is not the model's directory name "${name}"`);
  const platform = f.string('platform');
  const backend = f.string('backend');
  if ((platform !== undefined && platform !== '' && platform !== 'zgc_executable') || (backend !== undefined && backend !== '' && backend !== 'zgc')) {
    throw new ConfigError(`${backend ? `backend "${backend}"` : `platform "${platform}"`} is not served here: serve runs ZGC executables (backend "zgc", platform "zgc_executable")`);
  }
  const file = f.string('default_model_filename');
  if (file !== undefined && file !== '' && file !== 'model.so') throw new ConfigError(`default_model_filename "${file}": a version's artifact is its model.so`);

  // Serve's own settings, written into parameters by GET …/config.
  for (const entry of f.messages('parameters')) {
    const key = entry.string('key');
    if (!Object.hasOwn(PARAMETERS, key)) throw new ConfigError(`parameters "${key}" is not one serve takes (it takes ${Object.keys(PARAMETERS).join(', ')})`);
    const [path, as] = PARAMETERS[key];
    const value = parameterValue(entry, key, as);
    entry.rest();
    if (Array.isArray(path)) (config[path[0]] ??= {})[path[1]] = value;
    else config[path] = value;
  }

  const policy = f.message('version_policy');
  if (policy !== undefined) {
    const latest = policy.message('latest');
    const all = policy.message('all');
    const specific = policy.message('specific');
    if ([latest, all, specific].filter(Boolean).length > 1) throw new ConfigError('version_policy takes one of latest, all and specific');
    if (latest !== undefined) {
      const n = latest.number('num_versions', { min: 1 }) ?? 1;
      if (n !== 1) throw new ConfigError(`version_policy.latest.num_versions ${n}: serve's latest policy serves 1 version (use all or specific)`);
      latest.rest();
      config.versionPolicy = 'latest';
    }
    if (all !== undefined) {
      all.rest();
      config.versionPolicy = 'all';
    }
    if (specific !== undefined) {
      config.versionPolicy = { specific: specific.numbers('versions') };
      specific.rest();
    }
    policy.rest();
  }

  let instances = 0;
  for (const g of f.messages('instance_group')) {
    const kind = g.ident('kind') ?? 'KIND_AUTO';
    if (kind !== 'KIND_CPU' && kind !== 'KIND_AUTO') throw new ConfigError(`${g.at('kind')}: ${kind} instances are not served here (serve runs on the CPU: KIND_CPU)`);
    if (g.numbers('gpus').length > 0) throw new ConfigError(`${g.at('gpus')}: serve runs no instance on a GPU`);
    instances += g.number('count', { min: 1 }) ?? 1;
    g.string('name');
    g.list('profile');
    g.list('secondary_devices');
    if (g.bool('passive') === true) throw new ConfigError(`${g.at('passive')}: serve has no passive instances`);
    const hostPolicy = g.string('host_policy');
    if (hostPolicy !== undefined && hostPolicy !== '') throw new ConfigError(`${g.at('host_policy')}: serve has no host policies`);
    g.rest();
  }
  if (instances > 0) config.instances = instances;

  const maxBatch = f.number('max_batch_size') ?? 0;
  const batching = f.message('dynamic_batching');
  if (batching !== undefined) {
    const d = (config.dynamicBatching ??= {});
    const delay = micros(batching.number('max_queue_delay_microseconds'), batching.at('max_queue_delay_microseconds'));
    if (delay !== undefined) d.maxQueueDelayMs = delay;
    const preferred = batching.numbers('preferred_batch_size');
    if (preferred.length > 0) d.preferredBatchSizes = preferred;
    if (batching.bool('preserve_ordering') === true) throw new ConfigError(`${batching.at('preserve_ordering')}: serve answers each request as its batch ends, in no promised order`);
    const levels = batching.number('priority_levels');
    if (levels !== undefined && levels > 0) config.priorityLevels = levels;
    const level = batching.number('default_priority_level');
    if (level !== undefined && level > 0) config.defaultPriorityLevel = level;
    const queue = batching.message('default_queue_policy');
    if (queue !== undefined) {
      const action = queue.ident('timeout_action') ?? 'REJECT';
      if (action !== 'REJECT') throw new ConfigError(`${queue.at('timeout_action')}: ${action} is not taken (a request past its timeout is refused: REJECT)`);
      const timeout = micros(queue.number('default_timeout_microseconds'), queue.at('default_timeout_microseconds'));
      if (timeout !== undefined && timeout > 0) config.timeoutMs = timeout;
      queue.bool('allow_timeout_override');
      const size = queue.number('max_queue_size');
      if (size !== undefined && size > 0) config.maxQueue = size;
      queue.rest();
    }
    batching.rest((n) => (n === 'priority_queue_policy' ? 'serve has one queue policy for every priority (default_queue_policy)' : undefined));
    if (d.variants === undefined) {
      throw new ConfigError('dynamic_batching needs the graph compiled in several batch sizes: name them in parameters { key: "dynamic_batching.variants" value: { string_value: "{\\"1\\": \\"model.so\\", \\"8\\": \\"model_b8.so\\"}" } }');
    }
  }
  if (maxBatch > 0) {
    const largest = config.dynamicBatching?.variants ? Math.max(...Object.keys(config.dynamicBatching.variants).map(Number)) : undefined;
    if (largest === undefined) throw new ConfigError(`max_batch_size ${maxBatch}: serve batches only with dynamic_batching and its variants (a model's batch size is its artifact's)`);
    if (largest !== maxBatch) throw new ConfigError(`max_batch_size ${maxBatch} is not the largest variant's batch size, ${largest}`);
  }

  const sequences = f.message('sequence_batching');
  if (sequences !== undefined) {
    const s = (config.sequenceBatching ??= {});
    const idle = sequences.number('max_sequence_idle_microseconds');
    if (idle !== undefined) s.idleTimeoutMs = Math.max(1, Math.ceil(idle / 1000));
    const oldest = sequences.message('oldest');
    const direct = sequences.message('direct');
    if (oldest !== undefined) {
      const n = oldest.number('max_candidate_sequences');
      if (n !== undefined && n > 0) s.maxSequences ??= n;
      oldest.numbers('preferred_batch_size');
      oldest.number('max_queue_delay_microseconds');
      oldest.bool('preserve_ordering');
      oldest.rest();
    }
    if (direct !== undefined) {
      direct.number('max_queue_delay_microseconds');
      direct.number('minimum_slot_utilization', { whole: false });
      direct.rest();
    }
    for (const name of ['control_input', 'state']) {
      if (sequences.list(name).length > 0) throw new ConfigError(`${sequences.at(name)}: serve's sequences keep their state in the artifact's STATE sources, with no ${name.replace('_', ' ')}s`);
    }
    sequences.rest();
  }

  const transaction = f.message('model_transaction_policy');
  const decoupled = transaction === undefined ? false : transaction.bool('decoupled') === true;
  if (transaction !== undefined) transaction.rest();
  if (decoupled) config.decoupled ??= {};
  else if (config.decoupled !== undefined) throw new ConfigError('parameters "decoupled.*" need model_transaction_policy { decoupled: true }');

  const inputs = f.messages('input').map((t) => tensorOf(t, 'input'));
  const outputs = f.messages('output').map((t) => tensorOf(t, 'output'));
  if (outputs.length > 0) config.outputs = outputs.map((o) => o.name);
  if (inputs.length > 0 || outputs.length > 0) config.declared = { inputs, outputs, batched: maxBatch > 0 };
  f.rest((n) => {
    if (n === 'ensemble_scheduling') return 'serve has no ensembles';
    if (n === 'model_warmup') return 'give warmup requests in parameters { key: "warmup" … } (serve\'s warmup setting)';
    return undefined;
  });
  return config;
}

/** Checks the inputs and outputs a config.pbtxt declared against the artifact's `signature`. */
function checkDeclared(declared, signature) {
  const dimsOf = (shape) => (declared.batched ? shape.slice(1) : shape);
  const same = (t, actual, kind) => {
    if (t.datatype !== undefined && t.datatype !== actual.datatype) throw new ConfigError(`${kind} "${t.name}" is declared TYPE_${t.datatype}; the artifact's is TYPE_${actual.datatype}`);
    const dims = dimsOf(actual.shape);
    if (t.dims.length > 0 && (t.dims.length !== dims.length || t.dims.some((d, i) => d !== dims[i] && d !== -1))) throw new ConfigError(`${kind} "${t.name}" is declared with dims [${t.dims.join(', ')}]; the artifact's are [${dims.join(', ')}]`);
  };
  if (declared.inputs.length > 0) {
    for (const t of declared.inputs) {
      const actual = signature.byName.get(t.name);
      if (actual === undefined) throw new ConfigError(`input "${t.name}" is not one of the artifact's (${signature.inputList})`);
      same(t, actual, 'input');
    }
    const missing = signature.inputs.filter((i) => !declared.inputs.some((t) => t.name === i.name));
    if (missing.length > 0) throw new ConfigError(`input ${missing.map((i) => `"${i.name}"`).join(', ')} of the artifact is not declared`);
  }
  declared.outputs.forEach((t, i) => same(t, signature.outputs[i], 'output'));
}

module.exports = { configFromPbtxt, checkDeclared, ConfigError };
