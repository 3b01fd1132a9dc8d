'use strict';

// A ModelInferRequest (decoded by pb.js) checked against a model's signature: each input's
// values from its typed contents or its raw bytes, and the outputs asked for. Pure, so that
// the parser threads (parse-worker.js) run it too.

const { bad } = require('./reasons');
const { placement, shmInput, shmOutput, scheduleOf, sequenceOf, classCountOf } = require('./parameters');
const { ARRAY, inputAs, outputsFor } = require('./signature');
const { listText: shapeText } = require('./elide');

/** The typed-contents field of each datatype (FP16 has none: raw bytes only). */
const CONTENTS = { FP32: 'fp32Contents', INT8: 'intContents', BOOL: 'boolContents' };

/** One input's values from its typed contents, checked as REST checks JSON data. */
function fromContents(input, contents) {
  const field = CONTENTS[input.datatype];
  if (field === undefined) throw bad(`input "${input.name}": ${input.datatype} has no typed contents field; send it in raw_input_contents`);
  const values = contents[field];
  const others = Object.entries(contents).filter(([k, v]) => k !== field && v.length > 0);
  if (others.length > 0) throw bad(`input "${input.name}": ${input.datatype} data goes in ${snake(field)}, got ${others.map(([k]) => snake(k)).join(', ')}`);
  if (values.length !== input.count) throw bad(`input "${input.name}": ${snake(field)} has ${values.length} elements, shape ${shapeText(input.shape)} takes ${input.count}`);
  if (input.datatype === 'INT8') {
    const bad8 = values.findIndex((x) => x < -128 || x > 127);
    if (bad8 >= 0) throw bad(`input "${input.name}": element ${bad8} is ${values[bad8]}, outside INT8's -128..127`);
  }
  return ARRAY[input.datatype].from(values, input.datatype === 'BOOL' ? Number : undefined);
}

const snake = (camel) => camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`).replace(/fp_32/, 'fp32').replace(/int_64/, 'int64');

/** Misaligned raw inputs of up to this many elements are copied element by element. */
const SMALL_COPY = 64;

/** One input's values from its raw bytes (little-endian, row-major), read in place when aligned. */
function fromRaw(input, bytes) {
  const Array_ = ARRAY[input.datatype];
  const need = input.count * Array_.BYTES_PER_ELEMENT;
  if (bytes.byteLength !== need) throw bad(`input "${input.name}": raw_input_contents has ${bytes.byteLength} bytes, ${input.datatype} of shape ${shapeText(input.shape)} takes ${need}`);
  if (bytes.byteOffset % Array_.BYTES_PER_ELEMENT === 0) return new Array_(bytes.buffer, bytes.byteOffset, input.count);
  // Misaligned and small: read as integers (bits kept, NaN payloads too), quicker than a buffer slice.
  if (input.count <= SMALL_COPY && Buffer.isBuffer(bytes)) {
    if (Array_ === Uint16Array) {
      const out = new Uint16Array(input.count);
      for (let k = 0; k < out.length; k++) out[k] = bytes.readUInt16LE(2 * k);
      return out;
    }
    const bits = new Uint32Array(input.count);
    for (let k = 0; k < bits.length; k++) bits[k] = bytes.readUInt32LE(4 * k);
    return new Float32Array(bits.buffer);
  }
  return new Array_(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + need));
}

/** A tensor's parameters map (`[{ key, value }]`) as a plain object of the values set. */
function paramsOf(entries) {
  if (entries.length === 0) return undefined;
  const out = {};
  for (const { key, value } of entries) {
    if (value === undefined) continue;
    out[key] = value.stringParam ?? value.int64Param ?? value.uint64Param ?? value.boolParam ?? value.doubleParam;
  }
  return out;
}

/** Checks a ModelInferRequest against `sig`: the run's inputs and the outputs to send. */
function parseGrpcInfer(sig, msg) {
  const raw = msg.rawInputContents;
  // Inputs in shared memory have no raw entry: the others take theirs in order.
  const places = msg.inputs.map((t) => placement(`input "${t.name}"`, paramsOf(t.parameters)));
  const rawWanted = places.filter((p) => p === undefined).length;
  if (raw.length > 0 && raw.length !== rawWanted) throw bad(`raw_input_contents has ${raw.length} entries for ${rawWanted} inputs: give one per input not in shared memory, in order`);
  const inputs = {};
  const given = new Set();
  const rows = {};
  let shmInputs;
  let rawIndex = 0;
  msg.inputs.forEach((t, i) => {
    let input = sig.byName.get(t.name);
    if (input === undefined) throw bad(`input "${t.name}": the model has no such input (its inputs: ${sig.inputList})`);
    if (given.has(input.name)) throw bad(`input "${input.name}" is given twice`);
    given.add(input.name);
    if (t.datatype !== input.datatype) throw bad(`input "${input.name}": datatype "${t.datatype}" given, the model takes ${input.datatype}`);
    input = inputAs(sig, input, t.shape, rows);
    const hasContents = t.contents !== undefined && Object.values(t.contents).some((v) => v.length > 0);
    if (places[i] !== undefined) {
      if (hasContents) throw bad(`input "${input.name}": has both shared_memory_region and contents`);
      (shmInputs ||= []).push(shmInput(input, places[i]));
    } else if (raw.length > 0) {
      if (hasContents) throw bad(`input "${input.name}": has both contents and raw_input_contents`);
      inputs[input.name] = fromRaw(input, raw[rawIndex++]);
    } else {
      if (t.contents === undefined) throw bad(`input "${input.name}": has neither contents nor raw_input_contents`);
      inputs[input.name] = fromContents(input, t.contents);
    }
  });
  if (msg.inputs.length !== sig.inputs.length) {
    const missing = sig.inputs.filter((x) => !given.has(x.name)).map((x) => `"${x.name}"`);
    throw bad(`input ${missing.join(', ')} ${missing.length > 1 ? 'are' : 'is'} missing (the model takes ${sig.inputList})`);
  }
  const forRows = outputsFor(sig, rows.n);
  let outputs = forRows.outputs;
  let shmOutputs;
  // [{ name, k }] of the outputs answered by their top k classes.
  let classes;
  if (msg.outputs.length > 0) {
    const seen = new Set();
    outputs = msg.outputs.map((r) => {
      const o = forRows.outputByName.get(r.name);
      if (o === undefined) throw bad(`output "${r.name}": the model has no such output (its outputs: ${sig.outputs.map((x) => x.name).join(', ')})`);
      if (seen.has(o.name)) throw bad(`output "${o.name}" is requested twice`);
      seen.add(o.name);
      const params = paramsOf(r.parameters);
      const k = classCountOf(o, params);
      if (k !== undefined) (classes ||= []).push({ name: o.name, k });
      const shm = placement(`output "${o.name}"`, params);
      if (shm !== undefined) (shmOutputs ||= []).push(shmOutput(o, shm));
      return o;
    });
  }
  const params = paramsOf(msg.parameters);
  const { priority, timeoutUs } = scheduleOf(params);
  // rows: a batched model's rows, which a parser thread's caller needs to take its outputs from the signature.
  return { id: msg.id, inputs, outputs, shmInputs, shmOutputs, classes, priority, timeoutUs, rows: rows.n, sequence: sequenceOf(params) };
}

module.exports = { parseGrpcInfer };
