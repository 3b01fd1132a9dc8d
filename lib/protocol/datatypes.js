'use strict';

// The protocol's datatypes, named as the package names dtypes (f32, not FP32), with the
// TypedArray each travels in and the bytes it is sent as: little-endian, C order; BYTES as
// each element's 4-byte length then its bytes.

const { f16Values, f16Bits: f16BitsOf, bf16Bits } = require('../numbers');
const { isFloat16Array, f16Bits } = require('../values');

/** By the protocol's name: the package's dtype, its TypedArray, and bytes per element. */
const DATATYPES = {
  BOOL: { dtype: 'bool', Array: Uint8Array, size: 1 },
  UINT8: { dtype: 'u8', Array: Uint8Array, size: 1 },
  UINT16: { dtype: 'u16', Array: Uint16Array, size: 2 },
  UINT32: { dtype: 'u32', Array: Uint32Array, size: 4 },
  UINT64: { dtype: 'u64', Array: BigUint64Array, size: 8 },
  INT8: { dtype: 'i8', Array: Int8Array, size: 1 },
  INT16: { dtype: 'i16', Array: Int16Array, size: 2 },
  INT32: { dtype: 'i32', Array: Int32Array, size: 4 },
  INT64: { dtype: 'i64', Array: BigInt64Array, size: 8 },
  FP16: { dtype: 'f16', Array: Uint16Array, size: 2 },
  BF16: { dtype: 'bf16', Array: Uint16Array, size: 2 },
  FP32: { dtype: 'f32', Array: Float32Array, size: 4 },
  FP64: { dtype: 'f64', Array: Float64Array, size: 8 },
  BYTES: { dtype: 'bytes', Array: null, size: 0 },
};

/** The protocol's datatype of each dtype. */
const PROTOCOL = Object.fromEntries(Object.entries(DATATYPES).map(([k, v]) => [v.dtype, k]));

/** The dtype a model's metadata names, or the protocol's name itself when it is one we do not know. */
const dtypeOf = (datatype) => (DATATYPES[datatype] ? DATATYPES[datatype].dtype : datatype);

const isTyped = (v) => ArrayBuffer.isView(v) && !(v instanceof DataView);
const className = (v) => (v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'object' ? v[Symbol.toStringTag] || (v.constructor && v.constructor.name) || 'an object' : typeof v);

/** What `values` may be for `dtype`, in words for an error. */
function accepted(dtype) {
  if (dtype === 'f16') return 'a Uint16Array of bits, a Float16Array, a Float32Array or Float64Array (rounded), or an array of numbers';
  if (dtype === 'bf16') return 'a Uint16Array of bfloat16 bits';
  if (dtype === 'bytes') return 'an array of strings or Uint8Arrays';
  if (dtype === 'bool') return 'a Uint8Array of 0/1 or an array of booleans';
  const { Array: A } = DATATYPES[PROTOCOL[dtype]];
  return `a ${A.name} or an array of ${A === BigInt64Array || A === BigUint64Array ? 'bigints or safe integers' : 'numbers'}`;
}

/**
 * `values` for an input of `dtype` as the array its bytes are read from (a TypedArray), or an
 * array of Uint8Arrays for bytes. Throws `fail(detail)` when they are not of the dtype.
 */
function toArray(dtype, values, fail) {
  const protocol = PROTOCOL[dtype];
  const { Array: A } = DATATYPES[protocol];
  if (dtype === 'bytes') {
    if (!Array.isArray(values)) throw fail(`expects ${accepted(dtype)}, got ${className(values)}`);
    return values.map((v, i) => {
      if (typeof v === 'string') return Buffer.from(v, 'utf8');
      if (v instanceof Uint8Array || (isTyped(v) && v[Symbol.toStringTag] === 'Uint8Array')) return v;
      throw fail(`element ${i} is ${className(v)}; bytes elements are strings or Uint8Arrays`);
    });
  }
  if (isTyped(values)) {
    const tag = values[Symbol.toStringTag];
    if (dtype === 'f16') {
      if (tag === 'Uint16Array') return values;
      if (isFloat16Array(values)) return f16Bits(values, 'an f16 input');
      if (tag === 'Float32Array' || tag === 'Float64Array') return Uint16Array.from(values, f16BitsOf);
    } else if (tag === A.name) return values;
    throw fail(`expects ${accepted(dtype)}, got a ${tag}`);
  }
  if (!Array.isArray(values)) throw fail(`expects ${accepted(dtype)}, got ${className(values)}`);
  const out = new A(values.length);
  for (let i = 0; i < values.length; i++) out[i] = element(dtype, values[i], i, fail);
  return out;
}

const RANGES = { u8: [0, 255], u16: [0, 65535], u32: [0, 4294967295], i8: [-128, 127], i16: [-32768, 32767], i32: [-2147483648, 2147483647] };
const BIG = { i64: [-(2n ** 63n), 2n ** 63n - 1n], u64: [0n, 2n ** 64n - 1n] };

function element(dtype, v, i, fail) {
  const bad = (rule) => fail(`element ${i} is ${typeof v === 'number' || typeof v === 'bigint' ? String(v) : className(v)}; ${rule}`);
  if (dtype === 'bool') {
    if (v === true || v === 1) return 1;
    if (v === false || v === 0) return 0;
    throw bad('bool values are true, false, 0 or 1');
  }
  if (dtype === 'f32' || dtype === 'f64') {
    if (typeof v !== 'number') throw bad('expected a number');
    return v;
  }
  if (dtype === 'f16') {
    if (typeof v !== 'number') throw bad('expected a number');
    return f16BitsOf(v);
  }
  if (dtype === 'bf16') throw bad('bf16 values are given as a Uint16Array of bits');
  if (BIG[dtype]) {
    const [lo, hi] = BIG[dtype];
    const b = typeof v === 'bigint' ? v : Number.isSafeInteger(v) ? BigInt(v) : null;
    if (b === null || b < lo || b > hi) throw bad(`${dtype} values are bigints (or safe integers) in ${lo}..${hi}`);
    return b;
  }
  const [lo, hi] = RANGES[dtype];
  if (!Number.isInteger(v) || v < lo || v > hi) throw bad(`${dtype} values are integers in ${lo}..${hi}`);
  return v;
}

/** The bytes `array` (from `toArray`) is sent as. */
function toBytes(dtype, array) {
  if (dtype !== 'bytes') return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
  let n = 0;
  for (const e of array) n += 4 + e.byteLength;
  const out = Buffer.allocUnsafe(n);
  let pos = 0;
  for (const e of array) {
    out.writeUInt32LE(e.byteLength, pos);
    out.set(e, pos + 4);
    pos += 4 + e.byteLength;
  }
  return out;
}

/**
 * An output's data from the bytes it came in (`bytes`, a Uint8Array, maybe a view of a larger
 * buffer): a TypedArray of this realm, or an array of Uint8Arrays for bytes. `f16`: 'float32'
 * (values), 'bits' or 'float16' (the bits, as a Float16Array).
 */
function fromBytes(dtype, bytes, count, f16, fail) {
  if (dtype === 'bytes') return splitBytes(bytes, count, fail);
  const protocol = PROTOCOL[dtype];
  if (protocol === undefined) throw fail(`has datatype ${dtype}, which the protocol does not define`);
  const { Array: A, size } = DATATYPES[protocol];
  if (count !== null && bytes.byteLength !== count * size) throw fail(`came with ${bytes.byteLength} bytes; its shape and ${dtype} make ${count * size}`);
  if (bytes.byteLength % size !== 0) throw fail(`came with ${bytes.byteLength} bytes, not a whole number of ${dtype} elements`);
  const n = bytes.byteLength / size;
  // A view where the bytes are aligned for it; a copy where they are not.
  const data = bytes.byteOffset % size === 0 ? new A(bytes.buffer, bytes.byteOffset, n) : new A(new Uint8Array(bytes).buffer, 0, n);
  if (dtype === 'f16') return f16Output(data, f16);
  return data;
}

function f16Output(bits, f16) {
  if (f16 === 'bits') return bits;
  if (f16 === 'float16') return new globalThis.Float16Array(bits.buffer, bits.byteOffset, bits.length);
  return f16Values(bits);
}

function splitBytes(bytes, count, fail) {
  const out = [];
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let pos = 0;
  while (pos < bytes.byteLength) {
    if (pos + 4 > bytes.byteLength) throw fail(`bytes element ${out.length} is cut short in its length`);
    const n = view.getUint32(pos, true);
    if (pos + 4 + n > bytes.byteLength) throw fail(`bytes element ${out.length} says ${n} bytes; ${bytes.byteLength - pos - 4} are left`);
    // A Uint8Array of this realm (a Buffer is Node's main realm's: not so in a Jest test).
    out.push(new Uint8Array(bytes.buffer, bytes.byteOffset + pos + 4, n));
    pos += 4 + n;
  }
  if (count !== null && out.length !== count) throw fail(`came with ${out.length} bytes elements; its shape makes ${count}`);
  return out;
}

/** JSON `data` of an input: flat, as the protocol takes it. */
function toJson(dtype, array) {
  if (dtype === 'bytes') return array.map((e) => Buffer.from(e.buffer, e.byteOffset, e.byteLength).toString('utf8'));
  if (dtype === 'bool') return Array.from(array, (v) => v !== 0);
  if (dtype === 'f16') return Array.from(f16Values(array));
  if (dtype === 'bf16') return Array.from(array, (b) => new Float32Array(new Uint32Array([b << 16]).buffer)[0]);
  // i64 and u64 stay bigints, written as their digits (lib/client/rest.js: `jsonText`).
  return Array.from(array);
}

/** An output's JSON `data` (flat or nested) as a TypedArray of the dtype. */
function fromJson(dtype, data, count, f16, fail) {
  const flat = Array.isArray(data) ? data.flat(Infinity) : [data];
  if (count !== null && flat.length !== count) throw fail(`came with ${flat.length} values; its shape makes ${count}`);
  // Strings from JSON; byte strings as they came from gRPC's typed contents.
  if (dtype === 'bytes') return flat.map((s) => (ArrayBuffer.isView(s) ? new Uint8Array(s.buffer, s.byteOffset, s.byteLength) : utf8(String(s))));
  const protocol = PROTOCOL[dtype];
  if (protocol === undefined) throw fail(`has datatype ${dtype}, which the protocol does not define`);
  if (dtype === 'f16') return f16Output(Uint16Array.from(flat, f16BitsOf), f16);
  if (dtype === 'bf16') return Uint16Array.from(flat, (v) => bf16Bits(v));
  const { Array: A } = DATATYPES[protocol];
  if (A === BigInt64Array || A === BigUint64Array) return A.from(flat, (v) => BigInt(v));
  return A.from(flat, (v) => (v === true ? 1 : v === false ? 0 : typeof v === 'bigint' ? Number(v) : v));
}

/** A string's UTF-8 bytes in a Uint8Array of this realm, of its own memory. */
function utf8(text) {
  const b = Buffer.from(text, 'utf8');
  const out = new Uint8Array(b.length);
  out.set(b);
  return out;
}

module.exports = { DATATYPES, PROTOCOL, dtypeOf, toArray, toBytes, fromBytes, toJson, fromJson, accepted };
