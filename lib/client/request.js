'use strict';

// From a run's inputs and options to a protocol infer request, and from its response to
// Tensors: the one path both transports share. Inputs are checked against the model's
// metadata before anything is sent, with the errors a local runtime gives.

const { ZgcError } = require('../errors');
const { refuseUnknownKeys } = require('../options');
const { PROTOCOL, dtypeOf, toArray, toBytes, toJson, fromBytes, fromJson } = require('../protocol/datatypes');
const { responseError } = require('./errors');

const RUN_OPTIONS = ['signal', 'timeoutMs', 'priority', 'outputs', 'classification', 'sequence', 'into'];

const count = (shape) => shape.reduce((a, b) => a * b, 1);
const known = (shape) => shape.every((d) => d >= 0);
const shapeText = (shape) => `[${shape.join(', ')}]`;

function sourceError(code, source, detail) {
  return new ZgcError(code, `source ${JSON.stringify(source)}: ${detail}`, { source });
}

/** The dtype of an input a model's metadata does not describe, from its TypedArray. */
const DTYPE_OF_ARRAY = { Float32Array: 'f32', Float64Array: 'f64', Float16Array: 'f16', Int8Array: 'i8', Int16Array: 'i16', Int32Array: 'i32', BigInt64Array: 'i64', Uint8Array: 'u8', Uint16Array: 'u16', Uint32Array: 'u32', BigUint64Array: 'u64' };

function guessedDtype(name, data) {
  if (ArrayBuffer.isView(data) && DTYPE_OF_ARRAY[data[Symbol.toStringTag]]) return DTYPE_OF_ARRAY[data[Symbol.toStringTag]];
  if (Array.isArray(data) && data.length > 0 && data.every((v) => typeof v === 'string' || v instanceof Uint8Array)) return 'bytes';
  if (Array.isArray(data) && data.length > 0 && data.every((v) => typeof v === 'boolean')) return 'bool';
  throw sourceError('ERR_ZGC_DTYPE', name, 'the model\'s metadata does not describe its inputs: give a TypedArray, or { shape, data, dtype }');
}

/** An input a model's metadata does not describe (it lists none): its dtype and shape from the value. */
function undescribed(name, value) {
  const tensor = value !== null && typeof value === 'object' && !ArrayBuffer.isView(value) && !Array.isArray(value);
  const data = tensor ? value.data : value;
  const dtype = tensor && value.dtype !== undefined ? value.dtype : guessedDtype(name, data);
  if (PROTOCOL[dtype] === undefined) throw sourceError('ERR_ZGC_DTYPE', name, `dtype ${JSON.stringify(dtype)} is none of ${Object.keys(PROTOCOL).join(', ')}`);
  const length = data !== null && data !== undefined && typeof data.length === 'number' ? data.length : 1;
  return { name, dtype, shape: tensor && Array.isArray(value.shape) ? value.shape.map(() => -1) : [length] };
}

/** One input `value` for `source` ({ name, dtype, shape }): its datatype, shape and bytes or JSON. */
function inputTensor(source, value, binary) {
  let shape = source.shape;
  let data = value;
  if (value !== null && typeof value === 'object' && !ArrayBuffer.isView(value) && !Array.isArray(value)) {
    if (!Array.isArray(value.shape) || value.data === undefined) throw sourceError('ERR_ZGC_VALUE', source.name, 'a tensor is { shape, data } (and its dtype, when the model does not say)');
    if (value.dtype !== undefined && value.dtype !== source.dtype) throw sourceError('ERR_ZGC_DTYPE', source.name, `the model takes ${source.dtype}, got dtype ${JSON.stringify(value.dtype)}`);
    shape = value.shape;
    data = value.data;
    if (shape.length !== source.shape.length || shape.some((d, i) => !Number.isSafeInteger(d) || d < 0 || (source.shape[i] >= 0 && source.shape[i] !== d))) {
      throw sourceError('ERR_ZGC_SIZE', source.name, `shape ${shapeText(shape)} does not fit the model's ${shapeText(source.shape)}`);
    }
  } else if (!known(shape)) {
    throw sourceError('ERR_ZGC_SIZE', source.name, `the model's shape ${shapeText(shape)} has dimensions of any size: give { shape, data }`);
  }
  if (typeof data === 'number' || typeof data === 'boolean' || typeof data === 'bigint' || typeof data === 'string') data = [data];
  const array = toArray(source.dtype, data, (detail) => sourceError('ERR_ZGC_DTYPE', source.name, detail));
  const n = count(shape);
  if (array.length !== n) throw sourceError('ERR_ZGC_SIZE', source.name, `shape ${shapeText(shape)} holds ${n} elements, got ${array.length}`);
  const tensor = { name: source.name, datatype: PROTOCOL[source.dtype], shape: [...shape], dtype: source.dtype };
  // The bytes are copied when the request is written, before the call returns.
  if (binary) tensor.bytes = toBytes(source.dtype, array);
  else tensor.json = toJson(source.dtype, array);
  return tensor;
}

/** The protocol request of `runAsync(inputs, options)` on `model` (a RemoteModel's description). */
function buildRequest(model, inputs, options, binary) {
  if (options !== undefined && options !== null) refuseUnknownKeys('runAsync()', options, RUN_OPTIONS);
  const o = options || {};
  if (inputs === null || typeof inputs !== 'object') throw new TypeError(`runAsync() inputs must be an object of input names to values, got ${inputs === null ? 'null' : typeof inputs}`);
  const described = model.sources.length > 0;
  const tensors = Object.keys(inputs).map((name) => {
    const source = described ? model.sources.find((s) => s.name === name) : undescribed(name, inputs[name]);
    if (source === undefined) throw sourceError('ERR_ZGC_UNKNOWN_SOURCE', name, `model ${JSON.stringify(model.name)} has no such input (its inputs: ${model.sources.map((s) => s.name).join(', ')})`);
    return inputTensor(source, inputs[name], binary);
  });
  const parameters = {};
  if (o.priority !== undefined) {
    if (!Number.isSafeInteger(o.priority) || o.priority < 0) throw new RangeError(`runAsync() option priority must be a non-negative integer (the server's level: 1 is the highest), got ${String(o.priority)}`);
    parameters.priority = o.priority;
  }
  if (o.timeoutMs !== undefined) {
    if (typeof o.timeoutMs !== 'number' || !(o.timeoutMs > 0) || !Number.isFinite(o.timeoutMs)) throw new RangeError(`runAsync() option timeoutMs must be a finite number > 0, got ${String(o.timeoutMs)}`);
    parameters.timeout = Math.ceil(o.timeoutMs * 1000);
  }
  if (o.sequence !== undefined) Object.assign(parameters, sequenceParameters(o.sequence));
  let wanted = model.outputs;
  if (o.outputs !== undefined) {
    if (!Array.isArray(o.outputs) || o.outputs.length === 0) throw new TypeError('runAsync() option outputs must be a non-empty array of output names');
    wanted = o.outputs.map((name) => {
      // A model whose metadata lists no outputs takes any name; the response says its dtype.
      const out = model.outputs.length === 0 && typeof name === 'string' ? { name, dtype: undefined } : model.outputs.find((x) => x.name === name);
      if (out === undefined) throw new ZgcError('ERR_ZGC_OUTPUT_INDEX', `model ${JSON.stringify(model.name)} has no output ${JSON.stringify(name)} (its outputs: ${model.outputs.map((x) => x.name).join(', ')})`);
      return out;
    });
  }
  const classCount = o.classification;
  if (classCount !== undefined && (!Number.isSafeInteger(classCount) || classCount < 1)) throw new RangeError(`runAsync() option classification must be an integer >= 1 (the top classes wanted), got ${String(classCount)}`);
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw new TypeError('runAsync() option signal must be an AbortSignal');
  const outputs = o.outputs !== undefined || classCount !== undefined ? wanted.map((x) => ({ name: x.name, classCount })) : undefined;
  if (o.into !== undefined && (!Array.isArray(o.into) || o.into.length !== wanted.length)) throw new TypeError(`runAsync() option into must be an array of ${wanted.length} TypedArrays, one per output`);
  return { request: { inputs: tensors, outputs, parameters }, wanted, classified: classCount !== undefined, asked: o.outputs !== undefined };
}

/** A sequence's parameters: `{ id, start, end }` (id a safe integer or a string). */
function sequenceParameters(sequence) {
  if (sequence === null || typeof sequence !== 'object') throw new TypeError('runAsync() option sequence must be { id, start?, end? }');
  refuseUnknownKeys('runAsync() option sequence', sequence, ['id', 'start', 'end']);
  const { id, start, end } = sequence;
  if (!(typeof id === 'string' && id.length > 0) && !(Number.isSafeInteger(id) && id > 0) && !(typeof id === 'bigint' && id > 0n)) throw new TypeError(`a sequence id is an integer > 0 or a non-empty string, got ${String(id)}`);
  const p = { sequence_id: id };
  if (start) p.sequence_start = true;
  if (end) p.sequence_end = true;
  return p;
}

/**
 * The Tensors of a response, in the order asked (the model's output order by default), each
 * `{ name, dtype, shape, data }`; written into `into` when given.
 */
function readResponse(server, response, wanted, { f16, into, classified, asked }) {
  const byName = new Map(response.outputs.map((o) => [o.name, o]));
  // Not asked for by name, an output a model did not give (an optional one) is left out.
  // A model whose metadata lists no outputs gives those the response has, in its order.
  const listed = wanted.length > 0 ? wanted : response.outputs.map((o) => ({ name: o.name, dtype: dtypeOf(o.datatype) }));
  const given = asked || into !== undefined ? listed : listed.filter((w) => byName.has(w.name));
  return given.map((w, i) => {
    const o = byName.get(w.name);
    if (o === undefined) throw responseError(server, `has no output ${JSON.stringify(w.name)}`);
    const dtype = w.dtype === undefined || PROTOCOL[w.dtype] === o.datatype || classified ? dtypeOf(o.datatype) : null;
    if (dtype === null) throw responseError(server, `gives output ${JSON.stringify(o.name)} as ${o.datatype}; the model's metadata says ${PROTOCOL[w.dtype]}`);
    const shape = (o.shape || []).map(Number);
    const fail = (detail) => responseError(server, `output ${JSON.stringify(o.name)} ${detail}`);
    const n = count(shape);
    const data = o.bytes !== undefined ? fromBytes(dtype, o.bytes, n, f16, fail) : fromJson(dtype, o.data, n, f16, fail);
    if (into === undefined) return { name: o.name, dtype, shape, data };
    return { name: o.name, dtype, shape, data: copyInto(into[i], data, o.name) };
  });
}

function copyInto(target, data, name) {
  if (!ArrayBuffer.isView(target) || target[Symbol.toStringTag] !== data[Symbol.toStringTag] || target.length !== data.length) {
    const what = ArrayBuffer.isView(target) ? `a ${target[Symbol.toStringTag]} of ${target.length}` : typeof target;
    throw new ZgcError('ERR_ZGC_SIZE', `into for output ${JSON.stringify(name)} must be a ${data[Symbol.toStringTag]} of ${data.length} elements, got ${what}`);
  }
  target.set(data);
  return target;
}

module.exports = { buildRequest, readResponse, sequenceParameters, RUN_OPTIONS };
