'use strict';

// An infer request's body (its JSON header and binary data) checked against a model's
// signature and turned into run inputs, with the outputs it asks for.

const { RequestError, bad } = require('./reasons');
const { listText: shapeText } = require('./elide');
const { readHeader, describe, nonFinite, DATA_MARK, VALUES_PER_TENSOR } = require('./json-header');
const { ARRAY, inputAs, outputsFor } = require('./signature');
const { classCountOf, placement, scheduleOf, sequenceOf, shmInput, shmOutputsOf } = require('./parameters');

const F16_MAX_FINITE_ROUNDING = 65520; // values from here on round to infinity in binary16

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

module.exports = { parseInfer };
