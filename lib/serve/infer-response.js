'use strict';

// An infer response: run outputs as JSON numbers or as the binary tensor data extension's raw
// bytes, classified when asked, or left in the client's shared memory.

const { tensorJson, tensorJsonAsync } = require('../native');
const { classify, bytesTensor } = require('./classification');
const { f16Value } = require('../numbers');

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

module.exports = { formatInfer, classified, jsonData };
