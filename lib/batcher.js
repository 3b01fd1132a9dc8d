'use strict';

// createBatcher: a dynamic batcher over batch variants, as Triton's dynamic batcher and
// MLServer's adaptive batching do it. A variant is the same graph compiled for one batch size;
// the first dimension of each of its INPUTs and outputs is the batch. Requests of a few rows
// each wait in one queue. When an instance is free, the waiting requests go, in arrival order,
// as one run of the smallest variant that holds their rows: their rows are concatenated and
// the rest filled with zeros. Each request gets its own rows of every output, copied out, so
// that no answer holds another's rows or the padding. A request waits at most
// `maxQueueDelayMs` for others to join it, and never past its own deadline.

const { createPool } = require('./pool');
const { ZgcError } = require('./errors');
const { refuseUnknownKeys, priorityOf } = require('./options');
const { toTypedArray, isFloat16Array } = require('./values');
const { f16Values } = require('./numbers');

const asyncDispose = Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose');

/** The array each dtype's rows are gathered into: f16 as doubles, which the runtime rounds once. */
const BATCH_ARRAYS = { f32: Float32Array, f16: Float64Array, i8: Int8Array, bool: Uint8Array };
/** What a request may give for each dtype, once plain arrays are made typed (by tag: any realm). */
const ACCEPTED = {
  f32: ['Float32Array'],
  f16: ['Float16Array', 'Uint16Array', 'Float32Array', 'Float64Array'],
  i8: ['Int8Array'],
  bool: ['Uint8Array'],
};

const POOL_OPTIONS = ['f16', 'offload', 'isolate', 'timeoutMs', 'maxMemoryMb', 'startTimeoutMs'];

function variantError(message) {
  return new ZgcError('ERR_ZGC_BATCH_VARIANTS', message);
}

/** `[[size, artifact], ...]` from `{ 1: path, 8: path }` or a Map, by size. */
function variantList(variants) {
  const entries = variants instanceof Map ? [...variants] : variants !== null && typeof variants === 'object' ? Object.entries(variants) : null;
  if (entries === null || entries.length === 0) throw new TypeError('createBatcher() takes its variants as { batchSize: artifact, ... } (an object or a Map) with at least one entry');
  const list = entries.map(([key, artifact]) => {
    const size = Number(key);
    if (!Number.isSafeInteger(size) || size < 1 || String(size) !== String(key)) throw new RangeError(`createBatcher() variant batch sizes are positive integers, got ${JSON.stringify(String(key))}`);
    return [size, artifact];
  });
  return list.sort((a, b) => a[0] - b[0]);
}

/** The rows' layout of one variant: each INPUT's and output's shape past the batch dimension. */
function layoutOf(size, runtime, artifact) {
  const where = `the batch-${size} variant (${typeof artifact === 'string' ? artifact : 'bytes'})`;
  const state = runtime.sources.find((s) => s.kind === 'state');
  if (state !== undefined) throw variantError(`${where} has a STATE source "${state.name}": a batch would mix the requests' state`);
  const rowsOf = (what, t) => {
    if (t.shape.length === 0 || t.shape[0] !== size) throw variantError(`${where}: ${what} "${t.name}" has shape [${t.shape.join(', ')}], whose first dimension should be the batch size ${size}`);
    return { name: t.name, dtype: t.dtype, rowShape: t.shape.slice(1), rowCount: t.shape.slice(1).reduce((a, b) => a * b, 1) };
  };
  const inputs = runtime.sources.filter((s) => s.kind === 'input').map((s) => rowsOf('input', s));
  if (inputs.length === 0) throw variantError(`${where} has no INPUT source to batch`);
  const outputs = runtime.outputs.map((o, i) => rowsOf('output', { ...o, name: o.name ?? `output ${i}` }));
  return { inputs, outputs };
}

const same = (a, b) => a.name === b.name && a.dtype === b.dtype && a.rowShape.join() === b.rowShape.join();
const describeRows = (t) => `${t.name} ${t.dtype} [batch${t.rowShape.map((d) => `, ${d}`).join('')}]`;

class Batcher {
  #variants;
  #largest;
  #target;
  #maxDelay;
  #instances;
  #maxQueue;
  #inputs;
  #outputs;
  #queue = [];
  #waitingRows = 0;
  #running = 0;
  #timer = null;
  #timerAt = Infinity;
  #closed = false;
  #closing = null;
  #idle = null;
  /** The last batch's run, in ms: how early a request with a deadline must go. */
  #lastRunMs = 0;
  #isolate;
  #figures = { batches: 0, rows: 0, paddedRows: 0, bySize: new Map(), byRows: new Map() };

  constructor(variants, options = {}) {
    if (typeof options !== 'object' || options === null) throw new TypeError('createBatcher options must be an object');
    refuseUnknownKeys('createBatcher()', options, ['maxQueueDelayMs', 'preferredBatchSizes', 'instances', 'maxQueue', 'setup', ...POOL_OPTIONS]);
    const list = variantList(variants);
    const { maxQueueDelayMs = 0, instances = 1, maxQueue = 1024, preferredBatchSizes, setup } = options;
    if (typeof maxQueueDelayMs !== 'number' || !(maxQueueDelayMs >= 0) || !Number.isFinite(maxQueueDelayMs)) throw new RangeError(`createBatcher option maxQueueDelayMs must be a finite number >= 0, got ${String(maxQueueDelayMs)}`);
    if (!Number.isInteger(instances) || instances < 1) throw new RangeError(`createBatcher option instances must be a positive integer, got ${String(instances)}`);
    if (!Number.isInteger(maxQueue) || maxQueue < 1) throw new RangeError(`createBatcher option maxQueue must be a positive integer, got ${String(maxQueue)}`);
    if (setup !== undefined && typeof setup !== 'function') throw new TypeError('createBatcher option setup must be a function');
    const sizes = list.map(([size]) => size);
    this.#largest = sizes[sizes.length - 1];
    this.#target = this.#largest;
    if (preferredBatchSizes !== undefined) {
      if (!Array.isArray(preferredBatchSizes) || preferredBatchSizes.length === 0) throw new TypeError('createBatcher option preferredBatchSizes must be a non-empty array of variant batch sizes');
      for (const p of preferredBatchSizes) {
        if (!sizes.includes(p)) throw new RangeError(`createBatcher option preferredBatchSizes: ${String(p)} is not a variant's batch size (they are ${sizes.join(', ')})`);
      }
      this.#target = Math.max(...preferredBatchSizes);
    }
    this.#maxDelay = maxQueueDelayMs;
    this.#instances = instances;
    this.#maxQueue = maxQueue;
    this.#isolate = options.isolate === 'process' ? 'process' : undefined;
    const poolOptions = { size: instances };
    for (const key of POOL_OPTIONS) if (options[key] !== undefined) poolOptions[key] = options[key];
    this.#variants = [];
    try {
      for (const [size, artifact] of list) {
        const pool = createPool(artifact, setup === undefined ? poolOptions : { ...poolOptions, setup: (rt, i) => setup(rt, i, size) });
        this.#variants.push({ size, pool });
        const layout = layoutOf(size, pool.runtimes[0], artifact);
        if (this.#inputs === undefined) {
          this.#inputs = layout.inputs;
          this.#outputs = layout.outputs;
          continue;
        }
        const first = `the batch-${sizes[0]} variant`;
        const mismatch = (what, mine, theirs) =>
          variantError(`the batch-${size} variant's ${what} (${mine.map(describeRows).join('; ')}) are not ${first}'s (${theirs.map(describeRows).join('; ')}): variants must be one graph`);
        if (layout.inputs.length !== this.#inputs.length || layout.inputs.some((t, i) => !same(t, this.#inputs[i]))) throw mismatch('inputs', layout.inputs, this.#inputs);
        if (layout.outputs.length !== this.#outputs.length || layout.outputs.some((t, i) => !same(t, this.#outputs[i]))) throw mismatch('outputs', layout.outputs, this.#outputs);
      }
    } catch (err) {
      for (const { pool } of this.#variants) pool.close();
      throw err;
    }
  }

  /** The variants' batch sizes, smallest first. */
  get batchSizes() {
    return this.#variants.map((v) => v.size);
  }
  /** Each INPUT's dtype and shape of one row (its shape past the batch dimension). */
  get inputs() {
    return this.#inputs.map(({ name, dtype, rowShape }) => ({ name, dtype, rowShape: [...rowShape] }));
  }
  get outputs() {
    return this.#outputs.map(({ name, dtype, rowShape }) => ({ name, dtype, rowShape: [...rowShape] }));
  }
  /** Rows waiting to be run. */
  get pending() {
    return this.#waitingRows;
  }
  /** Batches that may run at once (`instances`). */
  get size() {
    return this.#instances;
  }
  /** 'process' when the variants' instances are isolated. */
  get isolate() {
    return this.#isolate;
  }
  get closed() {
    return this.#closed;
  }

  /** Batches run, rows run, rows of zeros padded, runs by variant batch size and by the rows they held. */
  stats() {
    const f = this.#figures;
    // Integer keys: an object lists them in ascending order.
    return { batches: f.batches, rows: f.rows, paddedRows: f.paddedRows, runsBySize: Object.fromEntries(f.bySize), runsByRows: Object.fromEntries(f.byRows), pendingRows: this.#waitingRows, running: this.#running };
  }

  /** Each variant's pool's `stats()`, by batch size. */
  variantStats() {
    return Object.fromEntries(this.#variants.map((v) => [v.size, v.pool.stats()]));
  }

  /**
   * Runs one request's rows (each INPUT's values for `rows` rows, C order) batched with others;
   * resolves its rows of every output. `timeoutMs`: the request is not held past it, and
   * rejects ERR_ZGC_TIMEOUT if its answer has not come by then.
   */
  run(inputs, options) {
    try {
      if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'batcher is closed');
      if (options !== undefined && options !== null) refuseUnknownKeys('batcher.run()', options, ['signal', 'timeoutMs', 'priority']);
      const signal = options == null ? undefined : options.signal;
      if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('batcher.run option signal must be an AbortSignal');
      const timeoutMs = options == null ? undefined : options.timeoutMs;
      if (timeoutMs !== undefined && (typeof timeoutMs !== 'number' || !(timeoutMs > 0))) throw new RangeError(`batcher.run option timeoutMs must be a number > 0, got ${String(timeoutMs)}`);
      const priority = priorityOf('batcher.run()', options);
      if (signal && signal.aborted) throw signal.reason;
      const { values, rows } = this.#rowsOf(inputs);
      if (this.#queue.length >= this.#maxQueue) throw new ZgcError('ERR_ZGC_QUEUE_FULL', `batcher queue is full: ${this.#queue.length} requests wait (maxQueue ${this.#maxQueue})`);
      return new Promise((resolve, reject) => {
        const request = { values, rows, resolve, reject, priority, arrived: performance.now(), deadline: Infinity, margin: 0, settled: false, timer: null, signal, onAbort: null };
        if (timeoutMs !== undefined) {
          request.deadline = request.arrived + timeoutMs;
          request.margin = timeoutMs / 10;
          request.timer = setTimeout(() => this.#giveUp(request, new ZgcError('ERR_ZGC_TIMEOUT', `the batched run did not answer within timeoutMs ${timeoutMs}`, { timeoutMs })), timeoutMs);
        }
        if (signal) {
          request.onAbort = () => this.#giveUp(request, signal.reason);
          signal.addEventListener('abort', request.onAbort, { once: true });
        }
        // Higher priority first, in arrival order within one priority.
        let at = this.#queue.length;
        while (at > 0 && this.#queue[at - 1].priority < priority) at--;
        this.#queue.splice(at, 0, request);
        this.#waitingRows += rows;
        this.#pump();
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Each INPUT's values as the batch array's kind, and the rows they hold (the same for all). */
  #rowsOf(inputs) {
    if (inputs === null || typeof inputs !== 'object') throw new TypeError(`batcher.run() inputs must be an object of input names to values, got ${inputs === null ? 'null' : typeof inputs}`);
    for (const name of Object.keys(inputs)) {
      if (!this.#inputs.some((t) => t.name === name)) {
        throw new ZgcError('ERR_ZGC_UNKNOWN_SOURCE', `the batched graph has no INPUT named ${JSON.stringify(name)} (its inputs: ${this.#inputs.map((t) => t.name).join(', ')})`, { source: name });
      }
    }
    let rows;
    let first;
    const values = this.#inputs.map((t) => {
      if (!Object.hasOwn(inputs, t.name)) throw new ZgcError('ERR_ZGC_VALUE', `input "${t.name}" is missing: a batched run takes every INPUT (${this.#inputs.map(describeRows).join('; ')})`, { source: t.name });
      const given = inputs[t.name];
      const count = ArrayBuffer.isView(given) || Array.isArray(given) ? given.length : 1;
      const array = toTypedArray({ name: t.name, dtype: t.dtype, logicalCount: count, shape: [count] }, given);
      const tag = isFloat16Array(array) ? 'Float16Array' : array[Symbol.toStringTag];
      if (!ACCEPTED[t.dtype].includes(tag)) throw new ZgcError('ERR_ZGC_DTYPE', `input "${t.name}" (${t.dtype}) takes ${ACCEPTED[t.dtype].join(', ')} or plain numbers, got ${tag}`, { source: t.name });
      const n = array.length / t.rowCount;
      if (!Number.isInteger(n) || n < 1) {
        throw new ZgcError('ERR_ZGC_SIZE', `input "${t.name}" has ${array.length} elements, which is not a whole number of rows of ${t.rowCount} (shape [rows${t.rowShape.map((d) => `, ${d}`).join('')}])`, { source: t.name });
      }
      if (rows === undefined) {
        rows = n;
        first = t.name;
      } else if (n !== rows) {
        throw new ZgcError('ERR_ZGC_SIZE', `input "${t.name}" has ${n} rows and input "${first}" ${rows}: every input of a request has the same rows`, { source: t.name });
      }
      if (tag === 'Uint16Array' && t.dtype === 'f16') return f16Values(array);
      // Copied at the call, as pool.run() does: the batch is gathered later, and the caller
      // (serve, with buffers read from shared memory) may reuse its arrays meanwhile.
      return array === given ? array.slice() : array;
    });
    if (rows > this.#largest) {
      throw new ZgcError('ERR_ZGC_SIZE', `the request has ${rows} rows, more than the largest variant's batch of ${this.#largest}: split it, or add a larger variant`, { source: first });
    }
    return { values, rows };
  }

  /** Ends a request before its answer: out of the queue if it waits, its answer dropped if it runs. */
  #giveUp(request, reason) {
    if (request.settled) return;
    const at = this.#queue.indexOf(request);
    if (at >= 0) {
      this.#queue.splice(at, 1);
      this.#waitingRows -= request.rows;
    }
    this.#settle(request, reason, undefined);
    this.#pump();
  }

  #settle(request, err, tensors) {
    if (request.settled) return;
    request.settled = true;
    if (request.timer !== null) clearTimeout(request.timer);
    if (request.onAbort !== null) request.signal.removeEventListener('abort', request.onAbort);
    if (err === undefined) request.resolve(tensors);
    else request.reject(err);
  }

  /** Starts batches while an instance is free and the waiting rows should go now. */
  #pump() {
    while (this.#running < this.#instances && this.#queue.length > 0) {
      const goAt = this.#goAt();
      if (goAt > performance.now()) {
        this.#arm(goAt);
        return;
      }
      this.#dispatch();
    }
    if (this.#queue.length === 0) this.#disarm();
    if (this.#running === 0 && this.#queue.length === 0 && this.#idle !== null) this.#idle();
  }

  /**
   * When the waiting rows go: now if they fill the target batch or the batcher closes; else
   * once the oldest has waited maxQueueDelayMs, or earlier when a request's deadline comes
   * within twice the last batch's run time (or a tenth of its timeout) of then.
   */
  #goAt() {
    if (this.#closing !== null || this.#waitingRows >= this.#target) return 0;
    let at = Infinity;
    for (const r of this.#queue) at = Math.min(at, r.arrived + this.#maxDelay, r.deadline - Math.max(2 * this.#lastRunMs, r.margin));
    return at;
  }

  #arm(at) {
    if (this.#timer !== null && this.#timerAt <= at) return;
    this.#disarm();
    this.#timerAt = at;
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#timerAt = Infinity;
      this.#pump();
    }, Math.max(0, at - performance.now()));
  }

  #disarm() {
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    this.#timerAt = Infinity;
  }

  /** One run of the smallest variant that holds the requests at the front of the queue. */
  #dispatch() {
    const taken = [];
    let rows = 0;
    while (this.#queue.length > 0 && rows + this.#queue[0].rows <= this.#largest) {
      const r = this.#queue.shift();
      taken.push(r);
      rows += r.rows;
    }
    this.#waitingRows -= rows;
    const variant = this.#variants.find((v) => v.size >= rows);
    const batch = {};
    this.#inputs.forEach((t, i) => {
      const into = new BATCH_ARRAYS[t.dtype](variant.size * t.rowCount);
      let at = 0;
      for (const r of taken) {
        into.set(r.values[i], at);
        at += r.values[i].length;
      }
      batch[t.name] = into;
    });
    const f = this.#figures;
    f.batches++;
    f.rows += rows;
    f.paddedRows += variant.size - rows;
    f.bySize.set(variant.size, (f.bySize.get(variant.size) || 0) + 1);
    f.byRows.set(rows, (f.byRows.get(rows) || 0) + 1);
    this.#running++;
    const started = performance.now();
    variant.pool.run(batch).then(
      (tensors) => {
        let row = 0;
        for (const r of taken) {
          if (!r.settled) this.#settle(r, undefined, tensors.map((t, i) => this.#rowsOut(t, i, row, r.rows)));
          row += r.rows;
        }
      },
      (err) => {
        for (const r of taken) this.#settle(r, err, undefined);
      },
    ).finally(() => {
      this.#lastRunMs = performance.now() - started;
      this.#running--;
      this.#pump();
    });
  }

  /** Output `i`'s rows `from` to `from + rows`: a copy, so that no answer holds the batch's memory. */
  #rowsOut(tensor, i, from, rows) {
    const n = this.#outputs[i].rowCount;
    return Object.freeze({ dtype: tensor.dtype, shape: [rows, ...this.#outputs[i].rowShape], data: tensor.data.slice(from * n, (from + rows) * n) });
  }

  /** Refuses new runs, runs what waits at once (no delay), then closes every variant's pool. */
  close() {
    if (this.#closing !== null) return this.#closing;
    this.#closed = true;
    this.#closing = new Promise((resolve) => {
      this.#idle = resolve;
    }).then(() => Promise.all(this.#variants.map((v) => v.pool.close()))).then(() => undefined);
    this.#pump();
    return this.#closing;
  }

  [asyncDispose]() {
    return this.close();
  }
}

/** A dynamic batcher over batch variants of one graph: `{ 1: 'm.so', 8: 'm_b8.so' }`. */
function createBatcher(variants, options) {
  return new Batcher(variants, options);
}

module.exports = { Batcher, createBatcher };
