'use strict';

// The protobuf wire format of the protocol's gRPC messages (lib/serve/inference.proto),
// encoded and decoded from small schemas. Written here rather than loaded from the .proto at
// run time: tensor bytes are read in place (a `bytes` field decodes to a view of the
// message's buffer) and written once, and the package needs no protobuf library.

const { Writer, WIRE, varintSize, putVarint } = require('./writer');
const TYPES = {
  string: WIRE.len,
  bytes: WIRE.len,
  message: WIRE.len,
  bool: WIRE.varint,
  int32: WIRE.varint,
  int64: WIRE.varint,
  uint32: WIRE.varint,
  uint64: WIRE.varint,
  // 64-bit integers read exactly, as bigints (tensor contents; the other fields stay numbers).
  int64n: WIRE.varint,
  uint64n: WIRE.varint,
  float: WIRE.i32,
  double: WIRE.i64,
};

/** A message that does not decode: the reason and the byte offset where decoding stopped. */
class DecodeError extends Error {
  constructor(reason, offset) {
    super(`${reason} at byte ${offset}`);
    this.reason = reason;
    this.offset = offset;
  }
}

/** Field `[name, type, { repeated, schema }]` by number; `map` fields are repeated entries {key, value}. */
function schema(fields) {
  const byNumber = new Map();
  for (const [number, name, type, opts = {}] of fields) byNumber.set(number, { number, name, type, ...opts });
  // The fields a decoded message starts with as empty lists.
  byNumber.lists = [...byNumber.values()].filter((f) => f.repeated || f.type === 'map').map((f) => f.name);
  return byNumber;
}

/**
 * A varint of `buf` at `state.pos`, which must end before `end`, as an unsigned number (past
 * 2^53 it loses precision, which no unsigned field of this protocol carries). Its low and
 * high 32 bits are left in `state.lo` and `state.hi` for `signed`.
 */
function readVarint(buf, state, end) {
  let pos = state.pos;
  if (pos >= end) throw new DecodeError('truncated varint', pos);
  const first = buf[pos];
  // Stryker disable next-line ConditionalExpression,BlockStatement: a fast path; the loop reads a one-byte varint the same
  if (first < 0x80) {
    state.pos = pos + 1;
    state.lo = first;
    state.hi = 0;
    return first;
  }
  let lo = 0;
  let hi = 0;
  for (let i = 0; i < 10; i++) {
    if (pos >= end) throw new DecodeError('truncated varint', pos);
    const b = buf[pos++];
    if (i < 4) lo |= (b & 0x7f) << (7 * i);
    else if (i === 4) {
      lo |= (b & 0x0f) << 28;
      hi |= (b & 0x7f) >> 4;
    } else {
      // Stryker disable next-line ArithmeticOperator: shift counts are taken mod 32, so 7 * i + 32 shifts the same
      hi |= (b & 0x7f) << (7 * i - 32);
    }
    if ((b & 0x80) === 0) {
      state.pos = pos;
      state.lo = lo >>> 0;
      state.hi = hi >>> 0;
      return state.hi * 2 ** 32 + state.lo;
    }
  }
  throw new DecodeError('varint too long', state.pos);
}

/** The varint just read as a signed 64-bit value (negatives are ten-byte two's complement), exact to 2^53. */
function signed(state) {
  if (state.hi < 2 ** 31) return state.hi * 2 ** 32 + state.lo;
  const lo = (~state.lo + 1) >>> 0;
  const hi = (~state.hi + (lo === 0 ? 1 : 0)) >>> 0;
  return -(hi * 2 ** 32 + lo);
}

const viewOf = (buf, state) => state.view || (state.view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength));

function scalar(type, buf, state, end) {
  switch (type) {
    case 'bool':
      return readVarint(buf, state, end) !== 0;
    case 'int32':
    case 'int64':
      readVarint(buf, state, end);
      return signed(state);
    case 'uint32':
    case 'uint64':
      return readVarint(buf, state, end);
    case 'int64n':
    case 'uint64n': {
      readVarint(buf, state, end);
      const u = (BigInt(state.hi) << 32n) | BigInt(state.lo);
      return type === 'int64n' ? BigInt.asIntN(64, u) : u;
    }
    case 'float': {
      if (state.pos + 4 > end) throw new DecodeError('truncated float', state.pos);
      const v = viewOf(buf, state).getFloat32(state.pos, true);
      state.pos += 4;
      return v;
    }
    case 'double': {
      if (state.pos + 8 > end) throw new DecodeError('truncated double', state.pos);
      const v = viewOf(buf, state).getFloat64(state.pos, true);
      state.pos += 8;
      return v;
    }
    default:
      throw new DecodeError(`unknown type ${type}`, state.pos);
  }
}

/** Steps over a field of the wire type `wire` whose tag began at `at`. */
function skip(wire, buf, state, end, at) {
  if (wire === WIRE.varint) readVarint(buf, state, end);
  else if (wire === WIRE.i64) state.pos += 8;
  else if (wire === WIRE.i32) state.pos += 4;
  else if (wire === WIRE.len) {
    // Read first: `state.pos += readVarint(...)` would add the length to where the length began.
    const len = readVarint(buf, state, end);
    state.pos += len;
  }
  else throw new DecodeError(`wire type ${wire} is not supported`, at);
  if (state.pos > end) throw new DecodeError('truncated field', at);
}

const toString = Buffer.prototype.toString;
/** UTF-8 text of `buf[from, to)`, without a Buffer object made for it where `buf` is one. */
const utf8 = (buf, from, to) => (Buffer.isBuffer(buf) ? toString.call(buf, 'utf8', from, to) : Buffer.from(buf.buffer, buf.byteOffset + from, to - from).toString('utf8'));

/**
 * Decodes `buf[start, end)` as a message of `fields`; bytes fields are views of `buf`.
 * `limits.elements` caps the entries of fields marked `elements` (tensor contents), checked
 * before any entry is read; fields with a `max` have that cap always.
 */
function decode(fields, buf, start = 0, end = buf.length, limits = NO_LIMITS) {
  return decodeAt(fields, buf, { pos: start, lo: 0, hi: 0, view: null, limits }, end);
}

const NO_LIMITS = { elements: Infinity };

/** The most entries field `f` may hold, and the words for the message when it holds more. */
const capOf = (f, state) => (f.max !== undefined ? f.max : f.elements ? state.limits.elements : Infinity);

/** `count` is the entries a packed field holds, or null where only "more than the cap" is known. */
function tooMany(f, count, cap, at) {
  const n = (x) => x.toLocaleString('en-US');
  const rule = f.max !== undefined ? f.why(n(cap)) : `the model's largest input has ${n(cap)} elements`;
  return new DecodeError(`field ${f.name} has ${count === null ? `more than ${n(cap)}` : n(count)} entries: ${rule}`, at);
}

/** Entries of packed scalars of `type` in `buf[from, to)`, counted without reading them. */
function packedCount(type, buf, from, to) {
  if (type === 'float') return Math.ceil((to - from) / 4);
  if (type === 'double') return Math.ceil((to - from) / 8);
  let n = 0;
  for (let i = from; i < to; i++) if (buf[i] < 0x80) n++;
  return n;
}

function decodeAt(fields, buf, state, end) {
  const msg = {};
  for (const name of fields.lists) msg[name] = [];
  while (state.pos < end) {
    const at = state.pos;
    const tag = readVarint(buf, state, end);
    const number = Math.floor(tag / 8);
    const wire = tag & 7;
    const f = fields.get(number);
    if (f === undefined) {
      skip(wire, buf, state, end, at);
      continue;
    }
    if (wire === WIRE.len && (f.type === 'string' || f.type === 'bytes' || f.type === 'message' || f.type === 'map')) {
      const len = readVarint(buf, state, end);
      const from = state.pos;
      const to = from + len;
      if (to > end) throw new DecodeError(`field ${f.name} runs past its message`, at);
      let value;
      if (f.type === 'string') value = utf8(buf, from, to);
      else if (f.type === 'bytes') value = buf.subarray(from, to);
      else value = decodeAt(f.schema, buf, state, to);
      state.pos = to;
      if (f.repeated || f.type === 'map') {
        const list = msg[f.name];
        if (list.length >= capOf(f, state)) throw tooMany(f, null, capOf(f, state), at);
        list.push(value);
      } else msg[f.name] = value;
    } else if (wire === WIRE.len && f.repeated) {
      // Packed scalars.
      const len = readVarint(buf, state, end);
      const to = state.pos + len;
      if (to > end) throw new DecodeError(`field ${f.name} runs past its message`, at);
      const list = msg[f.name];
      const cap = capOf(f, state);
      if (cap !== Infinity) {
        const count = list.length + packedCount(f.type, buf, state.pos, to);
        if (count > cap) throw tooMany(f, count, cap, at);
      }
      while (state.pos < to) list.push(scalar(f.type, buf, state, to));
    } else if (wire === TYPES[f.type]) {
      const v = scalar(f.type, buf, state, end);
      if (f.repeated) {
        const list = msg[f.name];
        if (list.length >= capOf(f, state)) throw tooMany(f, null, capOf(f, state), at);
        list.push(v);
      } else msg[f.name] = v;
    } else {
      throw new DecodeError(`field ${f.name}: wire type ${wire} does not match ${f.type}`, at);
    }
  }
  return msg;
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
// Contents are capped at the model's largest input, shapes at the ABI's largest rank, and
// tensor lists at its most sources, before an entry is read.
const elements = { repeated: true, elements: true };
const InferTensorContents = schema([
  [1, 'boolContents', 'bool', elements],
  [2, 'intContents', 'int32', elements],
  [3, 'int64Contents', 'int64', elements],
  [4, 'uintContents', 'uint32', elements],
  [5, 'uint64Contents', 'uint64', elements],
  [6, 'fp32Contents', 'float', elements],
  [7, 'fp64Contents', 'double', elements],
  [8, 'bytesContents', 'bytes', elements],
]);
const MAX_RANK = 64;
const MAX_SOURCES = 65536;
const InferInputTensor = schema([
  [1, 'name', 'string'],
  [2, 'datatype', 'string'],
  [3, 'shape', 'int64', { repeated: true, max: MAX_RANK, why: (cap) => `a tensor has at most ${cap} dimensions` }],
  [4, 'parameters', 'map', { schema: ParameterEntry }],
  [5, 'contents', 'message', { schema: InferTensorContents }],
]);
const InferRequestedOutputTensor = schema([
  [1, 'name', 'string'],
  [2, 'parameters', 'map', { schema: ParameterEntry }],
]);
const sources = { repeated: true, max: MAX_SOURCES, why: (cap) => `a model has at most ${cap} sources` };
const ModelInferRequest = schema([
  [1, 'modelName', 'string'],
  [2, 'modelVersion', 'string'],
  [3, 'id', 'string'],
  [4, 'parameters', 'map', { schema: ParameterEntry }],
  [5, 'inputs', 'message', { ...sources, schema: InferInputTensor }],
  [6, 'outputs', 'message', { ...sources, schema: InferRequestedOutputTensor }],
  [7, 'rawInputContents', 'bytes', sources],
]);
/** A ModelInferRequest's model name and version alone: the other fields are stepped over unread. */
const ModelInferHead = schema([
  [1, 'modelName', 'string'],
  [2, 'modelVersion', 'string'],
]);
/** What a stream needs before a request's turn: its model, id and parameters (a sequence's). */
const ModelInferStreamHead = schema([
  [1, 'modelName', 'string'],
  [2, 'modelVersion', 'string'],
  [3, 'id', 'string'],
  [4, 'parameters', 'map', { schema: ParameterEntry }],
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

const RegionName = schema([[1, 'name', 'string']]);
const SharedMemoryRegister = schema([
  [1, 'name', 'string'],
  [2, 'key', 'string'],
  [3, 'offset', 'uint64'],
  [4, 'byteSize', 'uint64'],
]);

/** Bytes of a string field numbered below 16 (a one-byte tag); an empty one is not written. */
const stringSize = (s) => {
  if (s === undefined || s === '') return 0;
  const n = Buffer.byteLength(s);
  return 1 + varintSize(n) + n;
};

function putString(buf, pos, number, s) {
  if (s === undefined || s === '') return pos;
  buf[pos++] = (number << 3) | WIRE.len;
  const n = Buffer.byteLength(s);
  pos = putVarint(buf, pos, n);
  return pos + buf.write(s, pos);
}

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

/** A StatisticDuration `{ count, ns }`. */
function duration(d) {
  const w = new Writer();
  w.uint(1, d.count);
  w.uint(2, d.ns);
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
  /** A SystemSharedMemoryStatusResponse from shm.js's status list: a map by region name. */
  sharedMemoryStatus(list) {
    const w = new Writer();
    for (const r of list) {
      const status = new Writer();
      status.string(1, r.name);
      status.string(2, r.key);
      status.uint(3, r.offset);
      status.uint(4, r.byte_size);
      const entry = new Writer();
      entry.string(1, r.name);
      entry.message(2, status);
      w.message(1, entry);
    }
    return w.finish();
  },
  /** A ModelStatisticsResponse from statistics.js's `{ model_stats }` (its REST shape). */
  modelStatistics(msg) {
    const w = new Writer();
    for (const m of msg.model_stats) {
      const inner = new Writer();
      inner.string(1, m.name);
      inner.string(2, m.version);
      inner.uint(3, m.last_inference);
      inner.uint(4, m.inference_count);
      inner.uint(5, m.execution_count);
      const s = m.inference_stats;
      const stats = new Writer();
      ['success', 'fail', 'queue', 'compute_input', 'compute_infer', 'compute_output', 'cache_hit', 'cache_miss'].forEach((k, i) => stats.message(i + 1, duration(s[k])));
      inner.message(6, stats);
      for (const b of m.batch_stats) {
        const batch = new Writer();
        batch.uint(1, b.batch_size);
        batch.message(2, duration(b.compute_input));
        batch.message(3, duration(b.compute_infer));
        batch.message(4, duration(b.compute_output));
        inner.message(7, batch);
      }
      w.message(1, inner);
    }
    return w.finish();
  },
  /** `{ modelName, modelVersion, id, outputs: [{ name, datatype, shape, data }] }`, tensors as raw contents. */
  inferResponse(msg) {
    // Sized first, then written into one buffer: this runs once per call.
    const { outputs } = msg;
    const metas = outputs.map((o) => {
      let shape = 0;
      for (const d of o.shape) shape += varintSize(d);
      const size = stringSize(o.name) + stringSize(o.datatype) + (shape > 0 ? 1 + varintSize(shape) + shape : 0);
      return { shape, size };
    });
    let head = stringSize(msg.modelName) + stringSize(msg.modelVersion) + stringSize(msg.id);
    for (const m of metas) head += 1 + varintSize(m.size) + m.size;
    let rawBytes = 0;
    for (const o of outputs) rawBytes += 1 + varintSize(o.data.byteLength) + o.data.byteLength;
    const out = Buffer.allocUnsafe(head + rawBytes);
    let pos = putString(out, 0, 1, msg.modelName);
    pos = putString(out, pos, 2, msg.modelVersion);
    pos = putString(out, pos, 3, msg.id);
    for (let i = 0; i < outputs.length; i++) {
      const o = outputs[i];
      out[pos++] = (5 << 3) | WIRE.len;
      pos = putVarint(out, pos, metas[i].size);
      pos = putString(out, pos, 1, o.name);
      pos = putString(out, pos, 2, o.datatype);
      if (metas[i].shape > 0) {
        out[pos++] = (3 << 3) | WIRE.len;
        pos = putVarint(out, pos, metas[i].shape);
        for (const d of o.shape) pos = putVarint(out, pos, d);
      }
    }
    for (const o of outputs) {
      out[pos++] = (6 << 3) | WIRE.len;
      pos = putVarint(out, pos, o.data.byteLength);
      out.set(new Uint8Array(o.data.buffer, o.data.byteOffset, o.data.byteLength), pos);
      pos += o.data.byteLength;
    }
    return out;
  },
};

module.exports = {
  Writer,
  schema,
  DecodeError,
  decode,
  encoders,
  messages: { InferParameter, ParameterEntry, InferTensorContents, ModelInferRequest, ModelInferHead, ModelInferStreamHead, NameVersion, Empty, RepositoryIndexRequest, RepositoryModelRequest, RegionName, SharedMemoryRegister },
};
