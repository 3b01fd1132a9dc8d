'use strict';

// gRPC's ModelConfig: a ModelConfig under the proto's field names (as REST sends it) written
// as model_config.proto's message, and read back, field by field from the table below (the
// numbers and types of the proto, for the fields serve fills; others are stepped over).

const { Writer, schema, decode } = require('./pb');

const ENUMS = {
  DataType: { TYPE_INVALID: 0, TYPE_BOOL: 1, TYPE_UINT8: 2, TYPE_UINT16: 3, TYPE_UINT32: 4, TYPE_UINT64: 5, TYPE_INT8: 6, TYPE_INT16: 7, TYPE_INT32: 8, TYPE_INT64: 9, TYPE_FP16: 10, TYPE_FP32: 11, TYPE_FP64: 12, TYPE_STRING: 13, TYPE_BF16: 14 },
  Format: { FORMAT_NONE: 0, FORMAT_NHWC: 1, FORMAT_NCHW: 2 },
  Kind: { KIND_AUTO: 0, KIND_GPU: 1, KIND_CPU: 2, KIND_MODEL: 3 },
  TimeoutAction: { REJECT: 0, DELAY: 1 },
};

// [number, name, type, message schema or enum name]; types: string, uint (any varint), bool,
// enum, message, repeated message (messages), packed varints (ints), map of ModelParameter.
const Latest = [[1, 'num_versions', 'uint']];
const Specific = [[1, 'versions', 'ints']];
const VersionPolicy = [[1, 'latest', 'message', Latest], [2, 'all', 'message', []], [3, 'specific', 'message', Specific]];
const Input = [[1, 'name', 'string'], [2, 'data_type', 'enum', 'DataType'], [3, 'format', 'enum', 'Format'], [4, 'dims', 'ints'], [6, 'is_shape_tensor', 'bool'], [7, 'allow_ragged_batch', 'bool'], [8, 'optional', 'bool']];
const Output = [[1, 'name', 'string'], [2, 'data_type', 'enum', 'DataType'], [3, 'dims', 'ints'], [4, 'label_filename', 'string'], [6, 'is_shape_tensor', 'bool']];
const QueuePolicy = [[1, 'timeout_action', 'enum', 'TimeoutAction'], [2, 'default_timeout_microseconds', 'uint'], [3, 'allow_timeout_override', 'bool'], [4, 'max_queue_size', 'uint']];
const DynamicBatching = [[1, 'preferred_batch_size', 'ints'], [2, 'max_queue_delay_microseconds', 'uint'], [3, 'preserve_ordering', 'bool'], [4, 'priority_levels', 'uint'], [5, 'default_priority_level', 'uint'], [6, 'default_queue_policy', 'message', QueuePolicy]];
const Direct = [[1, 'max_queue_delay_microseconds', 'uint']];
const Oldest = [[1, 'max_candidate_sequences', 'uint'], [2, 'preferred_batch_size', 'ints'], [3, 'max_queue_delay_microseconds', 'uint'], [4, 'preserve_ordering', 'bool']];
const SequenceBatching = [[3, 'direct', 'message', Direct], [4, 'oldest', 'message', Oldest], [1, 'max_sequence_idle_microseconds', 'uint']];
const InstanceGroup = [[1, 'name', 'string'], [4, 'kind', 'enum', 'Kind'], [2, 'count', 'uint'], [3, 'gpus', 'ints'], [8, 'secondary_devices', 'messages', []], [5, 'profile', 'strings'], [7, 'passive', 'bool'], [9, 'host_policy', 'string']];
const ModelConfig = [
  [1, 'name', 'string'],
  [2, 'platform', 'string'],
  [17, 'backend', 'string'],
  [3, 'version_policy', 'message', VersionPolicy],
  [4, 'max_batch_size', 'uint'],
  [5, 'input', 'messages', Input],
  [6, 'output', 'messages', Output],
  [11, 'dynamic_batching', 'message', DynamicBatching],
  [13, 'sequence_batching', 'message', SequenceBatching],
  [7, 'instance_group', 'messages', InstanceGroup],
  [8, 'default_model_filename', 'string'],
  [14, 'parameters', 'parameters'],
  [19, 'model_transaction_policy', 'message', [[1, 'decoupled', 'bool']]],
];

function write(w, schema, msg) {
  for (const [number, name, type, sub] of schema) {
    const v = msg[name];
    if (v === undefined || v === null) continue;
    if (type === 'string') w.string(number, v);
    else if (type === 'strings') for (const s of v) w.string(number, s);
    else if (type === 'uint') w.uint(number, v);
    else if (type === 'bool') w.bool(number, v);
    else if (type === 'enum') w.uint(number, ENUMS[sub][v]);
    else if (type === 'ints') w.packedInt64(number, v);
    else if (type === 'message') w.message(number, encode(sub, v));
    else if (type === 'messages') for (const m of v) w.message(number, encode(sub, m));
    else if (type === 'parameters') {
      for (const [key, p] of Object.entries(v)) {
        const value = new Writer();
        value.string(1, p.string_value);
        const entry = new Writer();
        entry.string(1, key);
        entry.message(2, value);
        w.message(number, entry);
      }
    }
  }
}

function encode(schema, msg) {
  const w = new Writer();
  write(w, schema, msg);
  return w;
}

/** A ModelConfigResponse's bytes: `{ config }`, the ModelConfig of model-config.js. */
function modelConfigResponse({ config }) {
  const w = new Writer();
  w.message(1, encode(ModelConfig, config));
  return w.finish();
}

/** The decoding schemas of the table: parameters as map entries, enums and lists as varints. */
const ParameterValue = schema([[1, 'string_value', 'string']]);
const ParameterEntry = schema([
  [1, 'key', 'string'],
  [2, 'value', 'message', { schema: ParameterValue }],
]);
const schemas = new Map();
function schemaOf(table) {
  if (!schemas.has(table)) {
    const fields = table.map(([number, name, type, sub]) => {
      if (type === 'message' || type === 'messages') return [number, name, 'message', { schema: schemaOf(sub), repeated: type === 'messages' }];
      if (type === 'parameters') return [number, name, 'map', { schema: ParameterEntry }];
      if (type === 'ints') return [number, name, 'int64', { repeated: true }];
      if (type === 'strings') return [number, name, 'string', { repeated: true }];
      return [number, name, type === 'string' ? 'string' : type === 'bool' ? 'bool' : 'int64'];
    });
    schemas.set(table, schema(fields));
  }
  return schemas.get(table);
}

/** What proto3 leaves off the wire and REST's JSON prints: each scalar's and list's default. */
const DEFAULTS = { string: '', uint: 0, bool: false, enum: 0, ints: [], strings: [], messages: [] };

/** A decoded message as REST's JSON: enums by name, defaults filled in, absent messages left out. */
function plain(table, msg) {
  const out = {};
  for (const [, name, type, sub] of table) {
    let v = msg[name];
    if (v === undefined && type in DEFAULTS) v = DEFAULTS[type];
    if (v === undefined) continue;
    if (type === 'enum') out[name] = Object.keys(ENUMS[sub]).find((k) => ENUMS[sub][k] === v) ?? v;
    else if (type === 'message') out[name] = plain(sub, v);
    else if (type === 'messages') out[name] = v.map((m) => plain(sub, m));
    else if (type === 'parameters') out[name] = Object.fromEntries(v.map(({ key, value }) => [key, { string_value: value ? value.string_value ?? '' : '' }]));
    else out[name] = v;
  }
  return out;
}

const ConfigResponse = schema([[1, 'config', 'message', { schema: schemaOf(ModelConfig) }]]);

/** A ModelConfigResponse's bytes as `{ config }`, the fields of the table under the proto's names. */
function decodeModelConfigResponse(buf) {
  const { config } = decode(ConfigResponse, buf);
  return { config: plain(ModelConfig, config || {}) };
}

module.exports = { modelConfigResponse, decodeModelConfigResponse };
