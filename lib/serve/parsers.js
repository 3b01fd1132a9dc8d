'use strict';

// Large JSON requests parsed off the event loop: a 22 MB body of a million numbers takes
// JSON.parse about 200 ms, during which no other request is answered. Bodies over a size go
// to worker threads that run the same parseInfer (lib/serve/infer-request.js) and send back the
// input tensors as transferred TypedArrays, so the event loop only hands the body over.
const os = require('node:os');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { RequestError } = require('./reasons');

/** JSON headers from this size on are parsed in a worker. */
const OFF_THREAD_BYTES = 1 << 20;

/**
 * Up to `size` parser threads, each parsing one body at a time; bodies wait here for a free
 * one. A parse still running after `timeoutMs` is abandoned: its thread is terminated (no
 * other request was handed to it) and a fresh one takes its place.
 */
class ParserPool {
  #size;
  #timeoutMs;
  #workers = [];
  #waiting = [];
  #closed = false;
  #replaced = 0;

  constructor({ size = Math.min(2, os.availableParallelism()), timeoutMs = 5000 } = {}) {
    this.#size = size;
    this.#timeoutMs = timeoutMs;
  }

  get size() {
    return this.#workers.length;
  }

  /** Threads terminated at the parse timeout and replaced. */
  get replaced() {
    return this.#replaced;
  }

  #spawn() {
    const worker = new Worker(path.join(__dirname, 'parse-worker.js'));
    const entry = { worker, job: null, timer: null };
    worker.on('message', ({ request, error }) => {
      const job = this.#finish(entry);
      if (job === null) return;
      if (error) job.reject(new RequestError(error.reason, error.message, error.headers));
      else job.resolve(request);
    });
    worker.on('error', (err) => {
      // A parse cannot throw past the worker's own catch; this is the worker itself failing.
      const job = this.#finish(entry);
      this.#retire(entry);
      if (job !== null) job.reject(new RequestError('parser_failed', `the request could not be parsed: its parser thread failed (${err.message})`));
    });
    // Idle parsers never keep a process alive.
    worker.unref();
    this.#workers.push(entry);
    return entry;
  }

  /** The entry's job, now done; the entry then takes the next waiting one. */
  #finish(entry) {
    const job = entry.job;
    entry.job = null;
    if (entry.timer !== null) clearTimeout(entry.timer);
    entry.timer = null;
    if (this.#workers.includes(entry)) this.#next();
    return job;
  }

  #retire(entry) {
    const at = this.#workers.indexOf(entry);
    if (at >= 0) this.#workers.splice(at, 1);
  }

  #start(entry, job) {
    entry.job = job;
    entry.timer = setTimeout(() => {
      // Overdue: the thread is stopped mid-parse and replaced; the request is refused.
      entry.timer = null;
      entry.job = null;
      this.#retire(entry);
      this.#replaced++;
      entry.worker.terminate();
      job.reject(new RequestError('bad_request', `the request took over ${this.#timeoutMs} ms to parse and was abandoned (the server's parse timeout)`));
      this.#next();
    }, this.#timeoutMs);
    // The body is handed over without a copy when its memory holds nothing else: readBody made
    // it, or grpc-js (a message after its 5-byte frame header).
    const { sig, body, headerLength, kind } = job;
    const before = kind === 'grpc' ? 5 : 0;
    const owns = body.byteOffset <= before && body.byteOffset + body.byteLength === body.buffer.byteLength;
    entry.worker.postMessage({ kind, sig: sig.portable, body, headerLength }, owns ? [body.buffer] : []);
  }

  #next() {
    while (this.#waiting.length > 0 && !this.#closed) {
      let entry = this.#workers.find((w) => w.job === null);
      if (entry === undefined) {
        if (this.#workers.length >= this.#size) return;
        entry = this.#spawn();
      }
      this.#start(entry, this.#waiting.shift());
    }
  }

  /**
   * parseInfer's result for a body too large to parse on the event loop; with `kind` 'grpc',
   * parseGrpcInfer's for a ModelInferRequest's bytes, its outputs as `outputNames`.
   */
  parse(sig, body, headerLength, kind = 'rest') {
    if (this.#closed) return Promise.reject(new Error('the parser pool is closed'));
    return new Promise((resolve, reject) => {
      this.#waiting.push({ sig, body, headerLength, kind, resolve, reject });
      this.#next();
    });
  }

  async close() {
    this.#closed = true;
    for (const job of this.#waiting.splice(0)) job.reject(new RequestError('shutting_down', 'the server is shutting down'));
    await Promise.all(
      this.#workers.splice(0).map((w) => {
        if (w.timer !== null) clearTimeout(w.timer);
        return w.worker.terminate();
      }),
    );
  }
}

const parserPool = (options) => new ParserPool(options);

module.exports = { parserPool, OFF_THREAD_BYTES };
