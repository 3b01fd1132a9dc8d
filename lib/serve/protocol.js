'use strict';

// The Open Inference Protocol's (KServe v2) tensors: a request's JSON header and binary data
// checked against a model's signature and turned into run inputs, and run outputs into a
// response, as JSON numbers or as the binary tensor data extension's raw bytes.

const { randomBytes } = require('node:crypto');
const { tensorJson, tensorJsonAsync, takeInputData } = require('../native');

const DATATYPE = { f32: 'FP32', f16: 'FP16', i8: 'INT8', bool: 'BOOL' };
const ARRAY = { FP32: Float32Array, FP16: Uint16Array, INT8: Int8Array, BOOL: Uint8Array };
const F16_MAX_FINITE_ROUNDING = 65520; // values from here on round to infinity in binary16

const { RequestError } = require('./reasons');

/** A 400 (gRPC INVALID_ARGUMENT): the request itself is wrong. */
const bad = (message) => new RequestError('bad_request', message);
const { listText: shapeText } = require('./elide');
const { classify, bytesTensor } = require('./classification');
const { f16Value } = require('../numbers');

/*
 * NaN, Infinity and -Infinity: JSON has no numbers for them, but Python's json (and so
 * tritonclient) reads and writes them as bare tokens. A request holding one is parsed again
 * with each token outside strings turned into a marker string, which FP32 and FP16 tensor
 * data take as the value and everything else refuses by the token's name.
 */
const MARK = `\u0000zgc-${randomBytes(6).toString('hex')}:`;
const NON_FINITE = new Map([
  [`${MARK}NaN`, NaN],
  [`${MARK}Infinity`, Infinity],
  [`${MARK}-Infinity`, -Infinity],
]);
// Stryker disable next-line ConditionalExpression: a fast path for numbers, which Map.get would also miss
const nonFinite = (v) => (typeof v === 'string' ? NON_FINITE.get(v) : undefined);

/** Arrays and objects nested deeper than this are refused before parsing (a tensor has rank 64 at most). */
const MAX_DEPTH = 256;
/** Values a header may hold outside tensor data, per tensor of the model (name, datatype, a shape of rank 64, parameters). */
const VALUES_PER_TENSOR = 256;
const marker = (token) => `"\\u0000${MARK.slice(1)}${token}"`;
const OBJECT = 0;
const LIST = 1;

/**
 * One pass over a request header's text, in time linear in its length, before JSON.parse:
 * - nesting deeper than MAX_DEPTH is refused;
 * - past `maxValues` values outside `inputs[i].data` (far more than any request of the
 *   model holds), the header is refused: JSON.parse would spend 50 ms on 1 MB of `{},`;
 * - NaN, Infinity and -Infinity are refused outside `inputs[i].data`, naming where, and
 *   with `mark` set, turned into marker strings inside it (JSON has no tokens for them).
 * Gives the text to parse. An unterminated string ends the scan: JSON.parse refuses it.
 */
function scan(text, mark, maxValues) {
  const kinds = new Uint8Array(MAX_DEPTH + 1);
  const index = new Uint32Array(MAX_DEPTH + 1);
  const keyFrom = new Int32Array(MAX_DEPTH + 1);
  const keyTo = new Int32Array(MAX_DEPTH + 1);
  const keyIs = (d, name) => keyTo[d] - keyFrom[d] === name.length && text.startsWith(name, keyFrom[d]);
  // Whether the value starting here (at `depth`) is an input's "data".
  const isData = (d) => d === 3 && kinds[3] === OBJECT && keyIs(3, 'data') && kinds[2] === LIST && kinds[1] === OBJECT && keyIs(1, 'inputs');
  const pieces = [];
  let from = 0;
  let depth = 0;
  // The depth of the data array being read (0: outside data).
  let dataDepth = 0;
  let expectKey = false;
  let values = 0;
  const n = text.length;
  const pathTo = (d) => {
    let path = '';
    for (let k = 1; k <= d; k++) {
      if (kinds[k] === LIST) path += `[${index[k]}]`;
      else {
        const raw = text.slice(keyFrom[k], keyTo[k]);
        let key = raw;
        try {
          key = JSON.parse(`"${raw}"`);
        } catch {
          // Left as sent.
        }
        path += path ? `.${key}` : key;
      }
    }
    return path;
  };
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      const start = i + 1;
      // To the closing quote: an escape takes the character after it.
      for (i++; i < n; i++) {
        const d = text.charCodeAt(i);
        if (d === 92) i++;
        else if (d === 34) break;
      }
      if (expectKey) {
        keyFrom[depth] = start;
        keyTo[depth] = i;
        expectKey = false;
      }
    } else if (c === 91 || c === 123) {
      if (depth === MAX_DEPTH) throw bad(`the request header nests arrays and objects deeper than ${MAX_DEPTH} levels`);
      if (dataDepth === 0 && isData(depth)) dataDepth = depth + 1;
      depth++;
      kinds[depth] = c === 91 ? LIST : OBJECT;
      index[depth] = 0;
      keyFrom[depth] = keyTo[depth] = 0;
      expectKey = c === 123;
      if (dataDepth === 0 && ++values > maxValues) throw tooMany(maxValues);
    } else if (c === 93 || c === 125) {
      if (dataDepth === depth) dataDepth = 0;
      if (depth > 0) depth--;
      expectKey = false;
    } else if (c === 44) {
      if (kinds[depth] === LIST) index[depth]++;
      else expectKey = true;
      if (dataDepth === 0 && ++values > maxValues) throw tooMany(maxValues);
    } else if (c === 78 || c === 73 || c === 45) {
      let token = null;
      if (c === 78 && text.startsWith('NaN', i)) token = 'NaN';
      else if (c === 73 && text.startsWith('Infinity', i)) token = 'Infinity';
      else if (c === 45 && text.startsWith('Infinity', i + 1)) token = '-Infinity';
      // Part of a longer word (NaNa) is no token: JSON.parse refuses the word.
      if (token === null || /[\w$]/.test(text[i - 1] ?? '') || /[\w$]/.test(text[i + token.length] ?? '')) continue;
      if (dataDepth === 0 && !isData(depth)) {
        const path = pathTo(depth);
        throw bad(`${token} at ${path || 'the top level'}: NaN, Infinity and -Infinity are taken only as FP32 and FP16 tensor "data"`);
      }
      if (mark) {
        pieces.push(text.slice(from, i), marker(token));
        from = i + token.length;
      }
      i += token.length - 1;
    }
  }
  if (from === 0) return text;
  pieces.push(text.slice(from));
  return pieces.join('');
}

const tooMany = (max) => bad(`the request header holds more than ${max} values outside tensor data, more than any request of this model needs`);

/** Headers from this size on are scanned before JSON.parse: under it, no text can cost much to parse. */
const SCAN_BYTES = 1 << 12;

/** The header's JSON, with NaN, Infinity and -Infinity read in tensor data. `maxValues`: see scan(). */
function parseJsonWithNonFinite(text, maxValues = Infinity) {
  if (text.length >= SCAN_BYTES) return JSON.parse(scan(text, true, maxValues));
  // Stryker disable BlockStatement,ConditionalExpression: fast paths; text without tokens parses the same marked, and fails the same
  try {
    return JSON.parse(text);
  } catch (err) {
    if (!/NaN|Infinity/.test(text)) throw err;
  }
  // Stryker restore BlockStatement,ConditionalExpression
  return JSON.parse(scan(text, true, maxValues));
}

/*
 * Headers from this size on have the flat number arrays of their inputs' data read natively
 * (takeInputData): JSON.parse would make a JavaScript array of every number first, 115 ms for
 * a request of two million. Each array taken out is in the header as a marker string.
 */
const TAKE_BYTES = 1 << 14;
const DATA_MARK = `${MARK}data:`;
const DATA_MARK_TEXT = `\\u0000${DATA_MARK.slice(1)}`;

/** The request header, and the arrays taken out of it (null when none were). */
function readHeader(body, headerLength, maxValues = Infinity) {
  if (headerLength >= TAKE_BYTES) {
    const taken = takeInputData(body, headerLength, DATA_MARK_TEXT);
    if (taken !== null) {
      try {
        return { header: parseJsonWithNonFinite(taken.header.toString('utf8'), maxValues), arrays: taken.arrays };
      } catch {
        // Refused either way: read whole again, so that the error is the one of the text as sent.
      }
    }
  }
  return { header: parseJsonWithNonFinite(Buffer.from(body.buffer, body.byteOffset, headerLength).toString('utf8'), maxValues), arrays: null };
}

const describe = (v) => {
  const token = nonFinite(v);
  if (token !== undefined) return String(token);
  return v === null ? 'null' : Array.isArray(v) ? 'an array' : typeof v === 'string' ? JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v) : typeof v === 'object' ? 'an object' : String(v);
};

/**
 * What the protocol shows of a model version: its INPUT sources, and its outputs under the
 * names its config gives (default `output_<index>`).
 */
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
  // A gRPC request's contents are capped at the largest input before a value is read (lib/serve/pb.js).
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

/**
 * JSON `data` (flat, or nested as the shape is) as a TypedArray of the input's datatype. The
 * array is the input's scratch, reused: a run copies its inputs before run() returns.
 */
function fromJson(input, data, arrays) {
  if (arrays !== null && typeof data === 'string' && data.startsWith(DATA_MARK)) return fromTaken(input, arrays[Number(data.slice(DATA_MARK.length))]);
  const n = input.count;
  const out = input.scratch || (input.scratch = input.datatype === 'FP16' ? new Float64Array(n) : new ARRAY[input.datatype](n));
  // The branches below admit exactly n values: flat of length n, nested as the shape, or a scalar.
  let k = 0;
  const put = (v) => {
    out[k] = valueOf(input, v, k);
    k++;
  };
  if (!Array.isArray(data)) {
    if (input.shape.length === 0) put(data);
    else throw bad(`input "${input.name}": "data" must be an array, got ${describe(data)}`);
  } else if (data.length === n && !Array.isArray(data[0])) {
    for (let i = 0; i < n; i++) put(data[i]);
  } else if (Array.isArray(data[0])) {
    walk(input, data, 0, put);
  } else {
    throw bad(`input "${input.name}": "data" has ${data.length} elements, shape ${shapeText(input.shape)} takes ${n}`);
  }
  return out;
}

/** A flat array read natively (as doubles, as JSON.parse reads them), checked as valueOf checks each value. */
function fromTaken(input, values) {
  const n = input.count;
  if (values.length !== n) throw bad(`input "${input.name}": "data" has ${values.length} elements, shape ${shapeText(input.shape)} takes ${n}`);
  const at = (i, what) => bad(`input "${input.name}": element ${i} is ${describe(values[i])}${what}`);
  switch (input.datatype) {
    case 'BOOL':
      for (let i = 0; i < n; i++) if (values[i] !== 0 && values[i] !== 1) throw at(i, '; BOOL takes true or false');
      return new Uint8Array(values);
    case 'INT8':
      for (let i = 0; i < n; i++) if (!Number.isInteger(values[i]) || values[i] < -128 || values[i] > 127) throw at(i, '; INT8 takes integers from -128 to 127');
      return new Int8Array(values);
    case 'FP16':
      for (let i = 0; i < n; i++) if (Math.abs(values[i]) >= F16_MAX_FINITE_ROUNDING && Number.isFinite(values[i])) throw at(i, ", beyond FP16's largest finite value 65504");
      // A copy the engine owns, which a parser thread can transfer (the native array's memory is not).
      return values.slice();
    default: {
      const out = new Float32Array(values);
      for (let i = 0; i < n; i++) if (!Number.isFinite(out[i]) && Number.isFinite(values[i])) throw at(i, ", beyond FP32's largest finite value");
      return out;
    }
  }
}

function walk(input, data, axis, put) {
  const dim = input.shape[axis];
  if (!Array.isArray(data) || data.length !== dim) {
    throw bad(`input "${input.name}": nested "data" does not match shape ${shapeText(input.shape)} at axis ${axis} (expected ${dim} entries, got ${Array.isArray(data) ? data.length : describe(data)})`);
  }
  if (axis === input.shape.length - 1) {
    for (const v of data) put(v);
  } else {
    for (const row of data) walk(input, row, axis + 1, put);
  }
}

function valueOf(input, v, index) {
  switch (input.datatype) {
    case 'BOOL':
      if (v === true || v === 1) return 1;
      if (v === false || v === 0) return 0;
      throw bad(`input "${input.name}": element ${index} is ${describe(v)}; BOOL takes true or false`);
    case 'INT8':
      if (!Number.isInteger(v) || v < -128 || v > 127) throw bad(`input "${input.name}": element ${index} is ${describe(v)}; INT8 takes integers from -128 to 127`);
      return v;
    case 'FP16': {
      const token = nonFinite(v);
      if (token !== undefined) return token;
      if (typeof v !== 'number') throw bad(`input "${input.name}": element ${index} is ${describe(v)}; FP16 takes numbers`);
      if (Math.abs(v) >= F16_MAX_FINITE_ROUNDING) throw bad(`input "${input.name}": element ${index} is ${v}, beyond FP16's largest finite value 65504`);
      return v;
    }
    default: {
      const token = nonFinite(v);
      if (token !== undefined) return token;
      if (typeof v !== 'number') throw bad(`input "${input.name}": element ${index} is ${describe(v)}; FP32 takes numbers`);
      if (!Number.isFinite(Math.fround(v))) throw bad(`input "${input.name}": element ${index} is ${v}, beyond FP32's largest finite value`);
      return v;
    }
  }
}

/** `size` bytes of the binary section at `offset`, as the input's TypedArray (copied when misaligned). */
function fromBinary(input, body, offset, size) {
  const Array_ = ARRAY[input.datatype];
  const need = input.count * Array_.BYTES_PER_ELEMENT;
  if (size !== need) throw bad(`input "${input.name}": binary_data_size is ${size} bytes, ${input.datatype} of shape ${shapeText(input.shape)} takes ${need}`);
  const at = body.byteOffset + offset;
  if (at % Array_.BYTES_PER_ELEMENT === 0) return new Array_(body.buffer, at, input.count);
  return new Array_(body.buffer.slice(at, at + size));
}

/**
 * Checks an infer request against `sig` and gives the run inputs and what to send back.
 * `body` holds the whole request; the JSON header is its first `headerLength` bytes.
 */
function parseInfer(sig, body, headerLength) {
  let header;
  let arrays;
  try {
    ({ header, arrays } = readHeader(body, headerLength, VALUES_PER_TENSOR * (1 + sig.inputs.length + sig.outputs.length)));
  } catch (err) {
    if (err instanceof RequestError) throw err;
    throw bad(`the request header is not JSON: ${err.message}`);
  }
  if (header === null || typeof header !== 'object' || Array.isArray(header)) throw bad(`the request must be a JSON object, got ${describe(header)}`);
  const { id, inputs, outputs, parameters } = header;
  if (id !== undefined && typeof id !== 'string') throw bad(`"id" must be a string, got ${describe(id)}`);
  if (!Array.isArray(inputs)) throw bad(`"inputs" must be an array of tensors, got ${describe(inputs)}`);
  const binaryOutput = parameters !== null && typeof parameters === 'object' && parameters.binary_data_output === true;
  const runInputs = {};
  const given = new Set();
  const rows = {};
  let shmInputs;
  let offset = headerLength;
  for (let i = 0; i < inputs.length; i++) {
    const t = inputs[i];
    if (t === null || typeof t !== 'object') throw bad(`inputs[${i}] must be a tensor object, got ${describe(t)}`);
    let input = sig.byName.get(t.name);
    if (input === undefined) {
      if (typeof t.name !== 'string') throw bad(`inputs[${i}]: "name" must be a string, got ${describe(t.name)}`);
      throw bad(`input "${t.name}": the model has no such input (its inputs: ${sig.inputList})`);
    }
    if (given.has(input.name)) throw bad(`input "${input.name}" is given twice`);
    given.add(input.name);
    if (t.datatype !== input.datatype) throw bad(`input "${input.name}": datatype ${describe(t.datatype)} given, the model takes ${input.datatype}`);
    input = inputAs(sig, input, t.shape, rows);
    const size = t.parameters !== null && typeof t.parameters === 'object' ? t.parameters.binary_data_size : undefined;
    const place = placement(`input "${input.name}"`, t.parameters);
    if (place !== undefined) {
      if (t.data !== undefined || size !== undefined) throw bad(`input "${input.name}": has both shared_memory_region and ${t.data !== undefined ? '"data"' : 'binary_data_size'}`);
      (shmInputs ||= []).push(shmInput(input, place));
    } else if (size !== undefined) {
      if (!Number.isSafeInteger(size) || size < 0) throw bad(`input "${input.name}": binary_data_size must be a non-negative integer, got ${describe(size)}`);
      if (t.data !== undefined) throw bad(`input "${input.name}": has both "data" and binary_data_size`);
      if (offset + size > body.length) throw bad(`input "${input.name}": binary_data_size ${size} runs past the end of the request's binary data (${body.length - offset} bytes left)`);
      runInputs[input.name] = fromBinary(input, body, offset, size);
      offset += size;
    } else {
      if (t.data === undefined) throw bad(`input "${input.name}": has neither "data" nor binary_data_size`);
      runInputs[input.name] = fromJson(input, t.data, arrays);
    }
  }
  if (offset !== body.length) throw bad(`the request has ${body.length - offset} bytes of binary data that no input's binary_data_size accounts for`);
  if (inputs.length !== sig.inputs.length) {
    const missing = sig.inputs.filter((x) => !given.has(x.name)).map((x) => `"${x.name}"`);
    throw bad(`input ${missing.join(', ')} ${missing.length > 1 ? 'are' : 'is'} missing (the model takes ${sig.inputList})`);
  }
  const wanted = requested(outputsFor(sig, rows.n), outputs, binaryOutput);
  const shmOutputs = shmOutputsOf(wanted);
  const { priority, timeoutUs } = scheduleOf(parameters);
  return { id, inputs: runInputs, outputs: wanted, shmInputs, shmOutputs, priority, timeoutUs, sequence: sequenceOf(parameters) };
}

/**
 * A request's schedule parameters, Triton's: `priority` (1 is the highest; 0 or none, the
 * model's default) and `timeout` (microseconds; 0 or none, the model's). Undefined when not given.
 */
function scheduleOf(params) {
  if (params === null || typeof params !== 'object') return {};
  const { priority, timeout } = params;
  if (priority !== undefined && (!Number.isSafeInteger(priority) || priority < 0)) throw bad(`parameter "priority" must be a non-negative integer (1 is the highest; 0, the model's default), got ${describe(priority)}`);
  if (timeout !== undefined && (!Number.isSafeInteger(timeout) || timeout < 0)) throw bad(`parameter "timeout" must be a non-negative integer of microseconds, got ${describe(timeout)}`);
  return { priority, timeoutUs: timeout };
}

/** A request's sequence parameters, Triton's: `{ id, start, end }`, or undefined when it names none (an id of 0 or ""). */
function sequenceOf(params) {
  if (params === null || typeof params !== 'object') return undefined;
  const { sequence_id: id, sequence_start: start = false, sequence_end: end = false } = params;
  if (id === undefined || id === 0 || id === '') {
    if (start !== false || end !== false) throw bad('parameters "sequence_start" and "sequence_end" need a "sequence_id"');
    return undefined;
  }
  if (!(Number.isSafeInteger(id) && id > 0) && typeof id !== 'string') throw bad(`parameter "sequence_id" must be a positive integer or a string, got ${JSON.stringify(id)}`);
  if (typeof id === 'string' && id.length > 256) throw bad(`parameter "sequence_id" is a string of ${id.length} characters; at most 256`);
  if (typeof start !== 'boolean' || typeof end !== 'boolean') throw bad('parameters "sequence_start" and "sequence_end" must be booleans');
  return { id, start, end };
}

/**
 * Where a tensor's parameters place it in client shared memory (`shared_memory_region`,
 * `shared_memory_offset`, `shared_memory_byte_size`): `{ region, offset, byteSize }`, or
 * undefined when they name no region. The region itself is looked up when the request runs.
 */
function placement(what, params) {
  if (params === null || typeof params !== 'object') return undefined;
  const region = params.shared_memory_region;
  if (region === undefined) {
    if (params.shared_memory_byte_size !== undefined || params.shared_memory_offset !== undefined) throw bad(`${what}: shared_memory_byte_size and shared_memory_offset need shared_memory_region`);
    return undefined;
  }
  if (typeof region !== 'string' || region === '') throw bad(`${what}: shared_memory_region must be a region's name, got ${describe(region)}`);
  const byteSize = params.shared_memory_byte_size;
  if (!Number.isSafeInteger(byteSize) || byteSize < 0) throw bad(`${what}: shared_memory_byte_size must be a non-negative integer, got ${describe(byteSize)}`);
  const offset = params.shared_memory_offset === undefined ? 0 : params.shared_memory_offset;
  if (!Number.isSafeInteger(offset) || offset < 0) throw bad(`${what}: shared_memory_offset must be a non-negative integer, got ${describe(offset)}`);
  return { region, offset, byteSize };
}

/** The class count a requested output's parameters ask for (`classification`), or undefined. */
function classCountOf(output, params) {
  if (params === null || typeof params !== 'object' || params.classification === undefined) return undefined;
  const k = params.classification;
  if (!Number.isSafeInteger(k) || k < 0) throw bad(`output "${output.name}": classification must be a non-negative integer (the number of classes), got ${describe(k)}`);
  if (k === 0) return undefined;
  if (output.datatype === 'BOOL') throw bad(`output "${output.name}": classification needs numbers, the output is BOOL`);
  if (output.shape.length === 0) throw bad(`output "${output.name}": classification needs at least one dimension, the output is a scalar`);
  if (params.shared_memory_region !== undefined) throw bad(`output "${output.name}": classification answers strings, which do not go into shared memory`);
  return k;
}

/** An input read from shared memory: its size must be the tensor's, as Triton requires. */
function shmInput(input, place) {
  if (place.byteSize !== input.bytes) throw bad(`input "${input.name}": shared_memory_byte_size is ${place.byteSize} bytes, ${input.datatype} of shape ${shapeText(input.shape)} takes ${input.bytes}`);
  return { name: input.name, datatype: input.datatype, count: input.count, ...place };
}

/** An output written into shared memory: it must fit in the size given. */
function shmOutput(output, place) {
  if (place.byteSize < output.bytes) throw bad(`output "${output.name}": shared_memory_byte_size is ${place.byteSize} bytes, ${output.datatype} of shape ${shapeText(output.shape)} takes ${output.bytes}`);
  return { name: output.name, index: output.index, ...place };
}

function shmOutputsOf(wanted) {
  let list;
  for (const { output, shm } of wanted) if (shm !== undefined) (list ||= []).push(shmOutput(output, shm));
  return list;
}

/** The outputs to send, each with whether it goes as binary data. */
function requested(sig, outputs, binaryOutput) {
  if (outputs === undefined) return sig.outputs.map((o) => ({ output: o, binary: binaryOutput }));
  if (!Array.isArray(outputs)) throw bad(`"outputs" must be an array of requested outputs, got ${describe(outputs)}`);
  const seen = new Set();
  return outputs.map((r, i) => {
    const output = sig.outputByName.get(r?.name);
    if (output === undefined) {
      const name = r !== null && typeof r === 'object' ? r.name : r;
      throw bad(`outputs[${i}]: the model has no output ${describe(name)} (its outputs: ${sig.outputs.map((o) => o.name).join(', ')})`);
    }
    if (seen.has(output.name)) throw bad(`output "${output.name}" is requested twice`);
    seen.add(output.name);
    const p = r.parameters;
    const classes = classCountOf(output, p);
    const shm = placement(`output "${output.name}"`, p);
    if (shm !== undefined) return { output, binary: false, shm };
    const binary = p !== null && typeof p === 'object' && p.binary_data !== undefined ? p.binary_data === true : binaryOutput;
    return classes === undefined ? { output, binary } : { output, binary, classes };
  });
}

/** Outputs of more elements than this are written on a libuv pool thread, not the event loop. */
const ASYNC_JSON_ELEMENTS = 1 << 16;

/**
 * An output's `data` as JSON text: FP32 and FP16 as each value's shortest decimal that reads
 * back to the same f32 or f16, with NaN, Infinity and -Infinity as Python's json writes them.
 * A Promise of it for large float outputs.
 */
function jsonData(datatype, data) {
  if (datatype === 'BOOL') return JSON.stringify(Array.from(data, (v) => v !== 0));
  if (datatype === 'INT8') {
    // A loop: TypedArray.join is several times slower on short arrays.
    let text = '[';
    for (let i = 0; i < data.length; i++) text += i === 0 ? `${data[i]}` : `,${data[i]}`;
    return `${text}]`;
  }
  return data.length > ASYNC_JSON_ELEMENTS ? tensorJsonAsync(data) : tensorJson(data);
}

/**
 * The response to an infer: `{ head, chunks }`, the JSON header and the binary outputs that
 * follow it (none for an all-JSON response). `tensors` are the run's outputs by index. A
 * Promise of it when a large float output is written off the event loop; its head is then a
 * Buffer of the UTF-8 text, as that output's text came.
 */
function formatInfer(modelName, version, id, wanted, tensors, labels) {
  const parts = [];
  const chunks = [];
  let pending = false;
  for (let i = 0; i < wanted.length; i++) {
    const { output, binary, shm, classes } = wanted[i];
    const data = tensors[output.index].data;
    if (classes !== undefined) {
      const { shape, strings } = classified(output, data, classes, labels);
      const prefix = `{"name":${JSON.stringify(output.name)},"datatype":"BYTES","shape":${JSON.stringify(shape)},`;
      if (binary) {
        const bytes = bytesTensor(strings);
        parts.push(`${prefix}"parameters":{"binary_data_size":${bytes.length}}}`);
        chunks.push(bytes);
      } else parts.push(prefix, '"data":', JSON.stringify(strings), '}');
    } else if (shm !== undefined) {
      // Written into the client's region already: the answer says where.
      const at = shm.offset === 0 ? '' : `,"shared_memory_offset":${shm.offset}`;
      parts.push(`${output.prefix}"parameters":{"shared_memory_region":${JSON.stringify(shm.region)},"shared_memory_byte_size":${data.byteLength}${at}}}`);
    } else if (binary) {
      parts.push(`${output.prefix}"parameters":{"binary_data_size":${data.byteLength}}}`);
      chunks.push(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
    } else {
      const text = jsonData(output.datatype, data);
      pending = pending || typeof text !== 'string';
      parts.push(output.prefix, '"data":', text, '}');
    }
  }
  const idPart = id === undefined ? '' : `"id":${JSON.stringify(id)},`;
  const start = `{"model_name":${JSON.stringify(modelName)},"model_version":${JSON.stringify(version)},${idPart}"outputs":[`;
  // Each output is prefix + 4 parts (JSON) or 1 part (binary); commas go between outputs.
  const ordered = (texts) => {
    const pieces = [start];
    for (let i = 0, k = 0; i < wanted.length; i++) {
      if (i > 0) pieces.push(',');
      const n = wanted[i].binary || wanted[i].shm !== undefined ? 1 : 4;
      for (let j = 0; j < n; j++) pieces.push(texts[k++]);
    }
    pieces.push(']}');
    return pieces;
  };
  const join = (texts) => ({ head: ordered(texts).join(''), chunks });
  const joinBytes = (texts) => ({ head: Buffer.concat(ordered(texts).map((p) => (typeof p === 'string' ? Buffer.from(p) : p))), chunks });
  return pending ? Promise.all(parts).then(joinBytes) : join(parts);
}

/** An output's top classes: `{ shape, strings }` (FP16 values are decoded from their bits). */
function classified(output, data, k, labels) {
  const decode = output.datatype === 'FP16' ? f16Value : Number;
  return classify(data, output.shape, k, labels === undefined ? undefined : labels.get(output.name), decode);
}

module.exports = { bad, sequenceOf, classified, classCountOf, DATATYPE, RequestError, signatureOf, signatureFromPortable, inputAs, outputsFor, parseInfer, formatInfer, readHeader, placement, shmInput, shmOutput, scheduleOf, ARRAY, TAKE_BYTES };
