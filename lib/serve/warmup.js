'use strict';

// Model warmup, as Triton's model_warmup: config.json's "warmup" names requests (each input
// zeros, random values or a .npy file; a count) that every instance runs before the version
// serves, so that no client's request is the first, slow one, and offload 'auto' has taken
// its measurements. A failed warmup keeps the version from serving, with the reason.

const fs = require('node:fs');
const { parseNpy } = require('../npy');

/** The inputs' arrays of one datatype, as the pools take them (FP16 as its bits). */
const ARRAYS = { FP32: Float32Array, FP16: Uint16Array, INT8: Int8Array, BOOL: Uint8Array };
const NPY_DTYPE = { FP32: 'f32', FP16: 'f16', INT8: 'i8', BOOL: 'bool' };

/** "warmup" as config.json gives it, checked: `[{ name, count, inputs }]`. */
function checkWarmup(value, where) {
  if (value === undefined) return [];
  const rule = '"warmup" must be an array of { "name", "count", "inputs": { input: "zeros" | "random" | { "file": "x.npy" } } }';
  if (!Array.isArray(value)) throw new Error(`${where}: ${rule}`);
  return value.map((w, i) => {
    if (w === null || typeof w !== 'object' || Array.isArray(w)) throw new Error(`${where}: ${rule}; entry ${i} is ${JSON.stringify(w)}`);
    const name = w.name ?? `warmup ${i}`;
    const count = w.count ?? 1;
    if (typeof name !== 'string') throw new Error(`${where}: warmup ${i}: "name" must be a string`);
    if (!Number.isSafeInteger(count) || count < 1) throw new Error(`${where}: warmup "${name}": "count" must be a positive integer, got ${JSON.stringify(count)}`);
    const inputs = w.inputs === undefined ? {} : w.inputs;
    if (inputs === null || typeof inputs !== 'object' || Array.isArray(inputs)) throw new Error(`${where}: warmup "${name}": "inputs" must be an object of input name -> "zeros", "random" or { "file" }`);
    for (const [input, spec] of Object.entries(inputs)) {
      const ok = spec === 'zeros' || spec === 'random' || (spec !== null && typeof spec === 'object' && typeof spec.file === 'string' && Object.keys(spec).length === 1);
      if (!ok) throw new Error(`${where}: warmup "${name}": input "${input}" must be "zeros", "random" or { "file": "x.npy" }, got ${JSON.stringify(spec)}`);
    }
    return { name, count, inputs };
  });
}

/** Random values of `input`'s datatype: small floats, any INT8, 0 or 1 for BOOL (seeded: the same at every load). */
function randomValues(input, seed) {
  let state = seed >>> 0 || 1;
  const next = () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
  const out = new ARRAYS[input.datatype](input.count);
  for (let i = 0; i < out.length; i++) {
    const r = next();
    if (input.datatype === 'FP32') out[i] = r * 2 - 1;
    // An f16 below 1 in magnitude: a sign, a biased exponent under 15 and any mantissa.
    else if (input.datatype === 'FP16') out[i] = ((r < 0.5 ? 0x8000 : 0) | (Math.floor(next() * 15) << 10) | Math.floor(next() * 1024)) & 0xffff;
    else if (input.datatype === 'INT8') out[i] = Math.floor(r * 256) - 128;
    else out[i] = r < 0.5 ? 0 : 1;
  }
  return out;
}

/**
 * The warmup requests of one version, their inputs made now: `[{ name, count, inputs }]`.
 * `find(file)` locates a .npy file as parameter files are found. Inputs not named are zeros.
 * A batched model's request has the rows of its .npy files (the same in each), else one row.
 */
function warmupPlan(warmup, signature, find) {
  const { maxBatch } = signature;
  return warmup.map(({ name, count, inputs }) => {
    for (const given of Object.keys(inputs)) {
      if (!signature.byName.has(given)) throw new Error(`warmup "${name}" names input "${given}", which the model has not (its inputs: ${signature.inputList})`);
    }
    const arrays = {};
    // The files first: a batched model's request takes its rows from them.
    const rows = { n: undefined, first: undefined };
    for (const input of signature.inputs) {
      const spec = inputs[input.name];
      if (spec === undefined || typeof spec === 'string') continue;
      const file = find(spec.file);
      const npy = parseNpy(fs.readFileSync(file), file);
      if (npy.dtype !== NPY_DTYPE[input.datatype]) throw new Error(`warmup "${name}": ${file} holds ${npy.dtype}, input "${input.name}" is ${input.datatype}`);
      const fits = npy.shape.length === input.shape.length && npy.shape.every((d, i) => (maxBatch !== undefined && i === 0 ? d >= 1 && d <= maxBatch : d === input.shape[i]));
      if (!fits) throw new Error(`warmup "${name}": ${file} has shape (${npy.shape.join(', ')}), input "${input.name}" has shape (${input.shape.join(', ')})${maxBatch === undefined ? '' : ` (-1: 1 to ${maxBatch} rows)`}`);
      if (maxBatch !== undefined) {
        if (rows.n !== undefined && npy.shape[0] !== rows.n) throw new Error(`warmup "${name}": ${file} has ${npy.shape[0]} rows, ${rows.first} has ${rows.n}: every input of a request has the same rows`);
        rows.n = npy.shape[0];
        rows.first = file;
      }
      arrays[input.name] = npy.data;
    }
    const n = rows.n ?? 1;
    signature.inputs.forEach((input, k) => {
      const spec = inputs[input.name] ?? 'zeros';
      const sized = { ...input, count: input.count * n };
      if (spec === 'zeros') arrays[input.name] = new ARRAYS[input.datatype](sized.count);
      else if (spec === 'random') arrays[input.name] = randomValues(sized, 0x9e3779b9 + k);
    });
    return { name, count, inputs: arrays };
  });
}

/**
 * Runs each warmup request `count` times on every instance of `version`'s pool at once (a
 * sequence model's as the first run of a sequence of its own, which it then ends). Rejects
 * with the first failure, naming the request.
 */
async function warmUp(version, plan) {
  const once = (inputs) => {
    if (version.sequences === undefined) return version.pool.run(inputs);
    const seq = version.pool.sequence({ ...version.sequences.startOptions, waitMs: 60000 });
    return seq.run(inputs).finally(() => seq.close());
  };
  for (const { name, count, inputs } of plan) {
    for (let c = 0; c < count; c++) {
      try {
        await Promise.all(Array.from({ length: version.pool.size }, () => once(inputs)));
      } catch (err) {
        throw new Error(`warmup "${name}" failed: ${err.message}${err.code ? ` (${err.code})` : ''}`);
      }
    }
  }
}

module.exports = { checkWarmup, warmupPlan, warmUp, randomValues };
