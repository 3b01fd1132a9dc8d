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
function parserPool({ size = Math.min(2, os.availableParallelism()), timeoutMs = 5000 } = {}) {
  const workers = [];
  const waiting = [];
  let closed = false;
  let replaced = 0;

  function spawn() {
    const worker = new Worker(path.join(__dirname, 'parse-worker.js'));
    const entry = { worker, job: null, timer: null };
    worker.on('message', ({ request, error }) => {
      const job = finish(entry);
      if (job === null) return;
      if (error) job.reject(new RequestError(error.reason, error.message, error.headers));
      else job.resolve(request);
    });
    worker.on('error', (err) => {
      // A parse cannot throw past the worker's own catch; this is the worker itself failing.
      const job = finish(entry);
      retire(entry);
      if (job !== null) job.reject(new RequestError('parser_failed', `the request could not be parsed: its parser thread failed (${err.message})`));
    });
    // Idle parsers never keep a process alive.
    worker.unref();
    workers.push(entry);
    return entry;
  }

  /** The entry's job, now done; the entry then takes the next waiting one. */
  function finish(entry) {
    const job = entry.job;
    entry.job = null;
    if (entry.timer !== null) clearTimeout(entry.timer);
    entry.timer = null;
    if (workers.includes(entry)) next();
    return job;
  }

  function retire(entry) {
    const at = workers.indexOf(entry);
    if (at >= 0) workers.splice(at, 1);
  }

  function start(entry, job) {
    entry.job = job;
    entry.timer = setTimeout(() => {
      // Overdue: the thread is stopped mid-parse and replaced; the request is refused.
      entry.timer = null;
      entry.job = null;
      retire(entry);
      replaced++;
      entry.worker.terminate();
      job.reject(new RequestError('bad_request', `the request took over ${timeoutMs} ms to parse and was abandoned (the server's parse timeout)`));
      next();
    }, timeoutMs);
    // The body is handed over without a copy when its memory holds nothing else: readBody made
    // it, or grpc-js (a message after its 5-byte frame header).
    const { sig, body, headerLength, kind } = job;
    const before = kind === 'grpc' ? 5 : 0;
    const owns = body.byteOffset <= before && body.byteOffset + body.byteLength === body.buffer.byteLength;
    entry.worker.postMessage({ kind, sig: sig.portable, body, headerLength }, owns ? [body.buffer] : []);
  }

  function next() {
    while (waiting.length > 0 && !closed) {
      let entry = workers.find((w) => w.job === null);
      if (entry === undefined) {
        if (workers.length >= size) return;
        entry = spawn();
      }
      start(entry, waiting.shift());
    }
  }

  /**
   * parseInfer's result for a body too large to parse on the event loop; with `kind` 'grpc',
   * parseGrpcInfer's for a ModelInferRequest's bytes, its outputs as `outputNames`.
   */
  function parse(sig, body, headerLength, kind = 'rest') {
    if (closed) return Promise.reject(new Error('the parser pool is closed'));
    return new Promise((resolve, reject) => {
      waiting.push({ sig, body, headerLength, kind, resolve, reject });
      next();
    });
  }

  async function close() {
    closed = true;
    for (const job of waiting.splice(0)) job.reject(new RequestError('shutting_down', 'the server is shutting down'));
    await Promise.all(
      workers.splice(0).map((w) => {
        if (w.timer !== null) clearTimeout(w.timer);
        return w.worker.terminate();
      }),
    );
  }

  return {
    parse,
    close,
    get size() {
      return workers.length;
    },
    /** Threads terminated at the parse timeout and replaced. */
    get replaced() {
      return replaced;
    },
  };
}

module.exports = { parserPool, OFF_THREAD_BYTES };
