'use strict';

// A model's signature as requests see it: its inputs and outputs with the protocol's
// datatypes, their shapes (a batched model's first dimension -1), and a request's input
// checked against them.

const { bad } = require('./reasons');
const { listText: shapeText } = require('./elide');
const { describe } = require('./json-header');

/** The protocol's datatype of each ZGC dtype, and the TypedArray a request's values of it make. */
const DATATYPE = { f32: 'FP32', f16: 'FP16', i8: 'INT8', bool: 'BOOL' };
const ARRAY = { FP32: Float32Array, FP16: Uint16Array, INT8: Int8Array, BOOL: Uint8Array };

/** The JSON of an output up to its data. */
const outputPrefix = (name, datatype, shape) => `{"name":${JSON.stringify(name)},"datatype":"${datatype}","shape":${JSON.stringify(shape)},`;

/**
 * A model's inputs and outputs as requests see them. `maxBatch`: the model is served by a
 * dynamic batcher whose largest variant takes that many rows; its first dimensions are then
 * -1 (any rows, as Triton shows a batch dimension), and each input's and output's `count`
 * and `bytes` are of one row.
 */
function signatureOf(runtime, outputNames, maxBatch) {
  const batched = maxBatch !== undefined;
  const shapeOf = (t) => (batched ? [-1, ...t.shape.slice(1)] : t.shape); // frozen, as all metadata of a runtime
  const perRow = (t, n) => (batched ? n / t.shape[0] : n);
  const inputs = runtime.sources
    .filter((s) => s.kind === 'input')
    .map((s) => ({ name: s.name, datatype: DATATYPE[s.dtype], shape: shapeOf(s), count: perRow(s, s.shape.reduce((a, b) => a * b, 1)), bytes: perRow(s, s.byteCount) }));
  const outputs = runtime.outputs.map((o, index) => {
    const name = outputNames ? outputNames[index] : `output_${index}`;
    const shape = shapeOf(o);
    // Written once; a batched output's is written per request, with its rows.
    const prefix = batched ? undefined : outputPrefix(name, DATATYPE[o.dtype], shape);
    return { name, datatype: DATATYPE[o.dtype], shape, index, prefix, bytes: perRow(o, o.byteCount) };
  });
  const inputList = inputs.map((i) => i.name).join(', ');
  // What a parser thread is sent: plain data, without the scratch arrays.
  const portable = { inputs, outputs, inputList, maxBatch };
  return { ...signatureFromPortable(portable), portable };
}

/** A signature from its portable form (in a parser thread), with scratch arrays of its own. */
function signatureFromPortable({ inputs, outputs, inputList, maxBatch }) {
  const own = inputs.map((i) => ({ ...i, scratch: null }));
  // A gRPC request's contents are capped at the largest input before a value is read (lib/protocol/pb.js).
  const limits = { elements: own.reduce((m, i) => Math.max(m, i.count), 0) * (maxBatch ?? 1) };
  return { inputs: own, outputs, byName: new Map(own.map((i) => [i.name, i])), outputByName: new Map(outputs.map((o) => [o.name, o])), inputList, limits, maxBatch };
}

/**
 * The input as this request gives it: the model's own, or for a batched model one of `rows`
 * rows (its first dimension), checked against the largest variant and the other inputs'
 * rows (`rows.n`, set by the first input).
 */
function inputAs(sig, input, given, rows) {
  checkShape(input, given, sig.maxBatch);
  if (sig.maxBatch === undefined) return input;
  const n = given[0];
  if (n < 1 || n > sig.maxBatch) throw bad(`input "${input.name}": ${n} rows given, the model takes 1 to ${sig.maxBatch} (its largest batch variant)`);
  if (rows.n === undefined) {
    rows.n = n;
    rows.first = input.name;
  } else if (n !== rows.n) {
    throw bad(`input "${input.name}": ${n} rows given, input "${rows.first}" has ${rows.n}: every input of a request has the same rows`);
  }
  return { ...input, shape: given.slice(), count: input.count * n, bytes: input.bytes * n, scratch: null };
}

/** For a batched model, the signature's outputs as a request of `n` rows gets them; else the signature. */
function outputsFor(sig, n) {
  if (sig.maxBatch === undefined) return sig;
  const outputs = sig.outputs.map((o) => {
    const shape = [n, ...o.shape.slice(1)];
    return { ...o, shape, bytes: o.bytes * n, prefix: outputPrefix(o.name, o.datatype, shape) };
  });
  return { outputs, outputByName: new Map(outputs.map((o) => [o.name, o])) };
}

function checkShape(input, given, maxBatch) {
  if (!Array.isArray(given)) throw bad(`input "${input.name}": "shape" must be an array of integers, got ${describe(given)}`);
  // A batched model's first dimension is the request's rows, checked by the caller.
  const batched = maxBatch !== undefined;
  const same = given.length === input.shape.length && given.every((d, i) => (batched && i === 0 ? Number.isSafeInteger(d) : d === input.shape[i]));
  if (!same) {
    if (!given.every((d) => Number.isInteger(d) && d >= 0)) throw bad(`input "${input.name}": "shape" must be an array of non-negative integers, got ${shapeText(given)}`);
    throw bad(`input "${input.name}": shape ${shapeText(given)} given, the model takes ${shapeText(input.shape)}${batched ? ` (-1: 1 to ${maxBatch} rows)` : ''}`);
  }
}

module.exports = { DATATYPE, ARRAY, signatureOf, signatureFromPortable, inputAs, outputsFor };
