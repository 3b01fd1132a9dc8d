'use strict';

// The protobuf wire format of the protocol's gRPC messages (lib/serve/inference.proto),
// encoded and decoded from small schemas. Written here rather than loaded from the .proto at
// run time: tensor bytes are read in place (a `bytes` field decodes to a view of the
// message's buffer) and written once, and the package needs no protobuf library.

const WIRE = { varint: 0, i64: 1, len: 2, i32: 5 };
const TYPES = {
  string: WIRE.len,
  bytes: WIRE.len,
  message: WIRE.len,
  bool: WIRE.varint,
  int32: WIRE.varint,
  int64: WIRE.varint,
  uint32: WIRE.varint,
  uint64: WIRE.varint,
  float: WIRE.i32,
  double: WIRE.i64,
};

class DecodeError extends Error {}

/** Field `[name, type, { repeated, schema }]` by number; `map` fields are repeated entries {key, value}. */
function schema(fields) {
  const byNumber = new Map();
  for (const [number, name, type, opts = {}] of fields) byNumber.set(number, { number, name, type, ...opts });
  return byNumber;
}

function readVarint(buf, state) {
  let lo = 0;
  let shift = 0;
  let pos = state.pos;
  // Up to 10 bytes; values past 2^53 lose precision, which no field of this protocol carries.
  let result = 0;
  for (let i = 0; i < 10; i++) {
    if (pos >= buf.length) throw new DecodeError('truncated varint');
    const b = buf[pos++];
    if (shift < 28) lo |= (b & 0x7f) << shift;
    else result += (b & 0x7f) * 2 ** shift;
    shift += 7;
    if ((b & 0x80) === 0) {
      state.pos = pos;
      return result + (lo >>> 0);
    }
  }
  throw new DecodeError('varint too long');
}

/** A varint read as a signed 64-bit value (int32/int64 negatives are ten-byte two's complement). */
function signed(v) {
  return v >= 2 ** 63 ? v - 2 ** 64 : v;
}

function scalar(type, buf, state, view) {
  switch (type) {
    case 'bool':
      return readVarint(buf, state) !== 0;
    case 'int32': {
      const v = readVarint(buf, state);
      return v >= 2 ** 31 ? signed(v) : v;
    }
    case 'int64':
      return signed(readVarint(buf, state));
    case 'uint32':
    case 'uint64':
      return readVarint(buf, state);
    case 'float': {
      if (state.pos + 4 > buf.length) throw new DecodeError('truncated float');
      const v = view.getFloat32(state.pos, true);
      state.pos += 4;
      return v;
    }
    case 'double': {
      if (state.pos + 8 > buf.length) throw new DecodeError('truncated double');
      const v = view.getFloat64(state.pos, true);
      state.pos += 8;
      return v;
    }
    default:
      throw new DecodeError(`unknown type ${type}`);
  }
}

function skip(wire, buf, state) {
  if (wire === WIRE.varint) readVarint(buf, state);
  else if (wire === WIRE.i64) state.pos += 8;
  else if (wire === WIRE.i32) state.pos += 4;
  else if (wire === WIRE.len) state.pos += readVarint(buf, state);
  else throw new DecodeError(`wire type ${wire} is not supported`);
  if (state.pos > buf.length) throw new DecodeError('truncated field');
}

/** Decodes `buf[start, end)` as a message of `fields`; bytes fields are views of `buf`. */
function decode(fields, buf, start = 0, end = buf.length) {
  const msg = {};
  for (const f of fields.values()) if (f.repeated || f.type === 'map') msg[f.name] = [];
  const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  const sub = buf.subarray(0, end);
  const state = { pos: start };
  while (state.pos < end) {
    const tag = readVarint(sub, state);
    const number = Math.floor(tag / 8);
    const wire = tag & 7;
    const f = fields.get(number);
    if (f === undefined) {
      skip(wire, sub, state);
      continue;
    }
    if (wire === WIRE.len && (f.type === 'string' || f.type === 'bytes' || f.type === 'message' || f.type === 'map')) {
      const len = readVarint(sub, state);
      const from = state.pos;
      const to = from + len;
      if (to > end) throw new DecodeError(`field ${f.name} runs past its message`);
      state.pos = to;
      let value;
      if (f.type === 'string') value = Buffer.from(buf.buffer, buf.byteOffset + from, len).toString('utf8');
      else if (f.type === 'bytes') value = buf.subarray(from, to);
      else value = decode(f.schema, buf, from, to);
      if (f.type === 'map') msg[f.name].push(value);
      else if (f.repeated) msg[f.name].push(value);
      else msg[f.name] = value;
    } else if (wire === WIRE.len && f.repeated) {
      // Packed scalars.
      const len = readVarint(sub, state);
      const to = state.pos + len;
      if (to > end) throw new DecodeError(`field ${f.name} runs past its message`);
      const list = msg[f.name];
      const packed = buf.subarray(0, to);
      while (state.pos < to) list.push(scalar(f.type, packed, state, view));
    } else if (wire === TYPES[f.type]) {
      const v = scalar(f.type, sub, state, view);
      if (f.repeated) msg[f.name].push(v);
      else msg[f.name] = v;
    } else {
      throw new DecodeError(`field ${f.name}: wire type ${wire} does not match ${f.type}`);
    }
  }
  return msg;
}

/** A message being written: parts joined once at the end. */
class Writer {
  constructor() {
    this.parts = [];
    this.length = 0;
  }

  raw(bytes) {
    this.parts.push(bytes);
    this.length += bytes.length;
  }

  varint(v) {
    const bytes = [];
    let n = v;
    if (n < 0) n += 2 ** 64;
    while (n >= 0x80) {
      bytes.push((n % 128) | 0x80);
      n = Math.floor(n / 128);
    }
    bytes.push(n);
    this.raw(Uint8Array.from(bytes));
  }

  tag(number, wire) {
    this.varint(number * 8 + wire);
  }

  string(number, s) {
    if (s === undefined || s === '') return;
    const b = Buffer.from(s, 'utf8');
    this.tag(number, WIRE.len);
    this.varint(b.length);
    this.raw(b);
  }

  bytes(number, b) {
    this.tag(number, WIRE.len);
    this.varint(b.byteLength);
    this.raw(b instanceof Uint8Array ? b : new Uint8Array(b.buffer, b.byteOffset, b.byteLength));
  }

  bool(number, v) {
    if (!v) return;
    this.tag(number, WIRE.varint);
    this.varint(1);
  }

  packedInt64(number, list) {
    if (list.length === 0) return;
    const inner = new Writer();
    for (const v of list) inner.varint(v);
    this.tag(number, WIRE.len);
    this.varint(inner.length);
    for (const p of inner.parts) this.raw(p);
  }

  message(number, inner) {
    this.tag(number, WIRE.len);
    this.varint(inner.length);
    for (const p of inner.parts) this.raw(p);
  }

  finish() {
    return Buffer.concat(this.parts, this.length);
  }
}

// --- the protocol's messages (field numbers are the wire contract: inference.proto) ---

const InferParameter = schema([
  [1, 'boolParam', 'bool'],
  [2, 'int64Param', 'int64'],
  [3, 'stringParam', 'string'],
  [4, 'doubleParam', 'double'],
  [5, 'uint64Param', 'uint64'],
]);
const ParameterEntry = schema([
  [1, 'key', 'string'],
  [2, 'value', 'message', { schema: InferParameter }],
]);
const InferTensorContents = schema([
  [1, 'boolContents', 'bool', { repeated: true }],
  [2, 'intContents', 'int32', { repeated: true }],
  [3, 'int64Contents', 'int64', { repeated: true }],
  [4, 'uintContents', 'uint32', { repeated: true }],
  [5, 'uint64Contents', 'uint64', { repeated: true }],
  [6, 'fp32Contents', 'float', { repeated: true }],
  [7, 'fp64Contents', 'double', { repeated: true }],
  [8, 'bytesContents', 'bytes', { repeated: true }],
]);
const InferInputTensor = schema([
  [1, 'name', 'string'],
  [2, 'datatype', 'string'],
  [3, 'shape', 'int64', { repeated: true }],
  [4, 'parameters', 'map', { schema: ParameterEntry }],
  [5, 'contents', 'message', { schema: InferTensorContents }],
]);
const InferRequestedOutputTensor = schema([
  [1, 'name', 'string'],
  [2, 'parameters', 'map', { schema: ParameterEntry }],
]);
const ModelInferRequest = schema([
  [1, 'modelName', 'string'],
  [2, 'modelVersion', 'string'],
  [3, 'id', 'string'],
  [4, 'parameters', 'map', { schema: ParameterEntry }],
  [5, 'inputs', 'message', { repeated: true, schema: InferInputTensor }],
  [6, 'outputs', 'message', { repeated: true, schema: InferRequestedOutputTensor }],
  [7, 'rawInputContents', 'bytes', { repeated: true }],
]);
const NameVersion = schema([
  [1, 'name', 'string'],
  [2, 'version', 'string'],
]);
const Empty = schema([]);
const RepositoryIndexRequest = schema([
  [1, 'repositoryName', 'string'],
  [2, 'ready', 'bool'],
]);
const RepositoryModelRequest = schema([
  [1, 'repositoryName', 'string'],
  [2, 'modelName', 'string'],
]);

function boolResponse(field) {
  return (msg) => {
    const w = new Writer();
    w.bool(1, msg[field]);
    return w.finish();
  };
}

function tensorMetadata(t) {
  const w = new Writer();
  w.string(1, t.name);
  w.string(2, t.datatype);
  w.packedInt64(3, t.shape);
  return w;
}

const encoders = {
  live: boolResponse('live'),
  ready: boolResponse('ready'),
  empty: () => Buffer.alloc(0),
  serverMetadata(msg) {
    const w = new Writer();
    w.string(1, msg.name);
    w.string(2, msg.version);
    for (const e of msg.extensions) w.string(3, e);
    return w.finish();
  },
  modelMetadata(msg) {
    const w = new Writer();
    w.string(1, msg.name);
    for (const v of msg.versions) w.string(2, v);
    w.string(3, msg.platform);
    for (const t of msg.inputs) w.message(4, tensorMetadata(t));
    for (const t of msg.outputs) w.message(5, tensorMetadata(t));
    return w.finish();
  },
  repositoryIndex(msg) {
    const w = new Writer();
    for (const m of msg.models) {
      const inner = new Writer();
      inner.string(1, m.name);
      inner.string(2, m.version);
      inner.string(3, m.state);
      inner.string(4, m.reason);
      w.message(1, inner);
    }
    return w.finish();
  },
  /** `{ modelName, modelVersion, id, outputs: [{ name, datatype, shape, data }] }`, tensors as raw contents. */
  inferResponse(msg) {
    const w = new Writer();
    w.string(1, msg.modelName);
    w.string(2, msg.modelVersion);
    w.string(3, msg.id);
    for (const o of msg.outputs) {
      const inner = new Writer();
      inner.string(1, o.name);
      inner.string(2, o.datatype);
      inner.packedInt64(3, o.shape);
      w.message(5, inner);
    }
    for (const o of msg.outputs) w.bytes(6, o.data);
    return w.finish();
  },
};

module.exports = {
  DecodeError,
  decode,
  encoders,
  messages: { ModelInferRequest, NameVersion, Empty, RepositoryIndexRequest, RepositoryModelRequest },
};
