'use strict';

// A request's parameters, Triton's: its schedule (priority, timeout), its sequence, where
// shared memory holds a tensor, and how many classes an output's classification asks for.

const { bad } = require('./reasons');
const { listText: shapeText } = require('./elide');
const { describe } = require('./json-header');

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

module.exports = { scheduleOf, sequenceOf, placement, classCountOf, shmInput, shmOutput, shmOutputsOf };
