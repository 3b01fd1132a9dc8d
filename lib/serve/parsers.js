'use strict';

// Large JSON requests parsed off the event loop: a 22 MB body of a million numbers takes
// JSON.parse about 200 ms, during which no other request is answered. Bodies over a size go
// to worker threads that run the same parseInfer (lib/serve/protocol.js) and send back the
// input tensors as transferred TypedArrays, so the event loop only hands the body over.
const os = require('node:os');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { RequestError } = require('./protocol');

/** JSON headers from this size on are parsed in a worker. */
const OFF_THREAD_BYTES = 1 << 20;

function parserPool(size = Math.min(2, os.availableParallelism())) {
  const workers = [];
  const pending = new Map();
  let lastId = 0;
  let closed = false;

  function spawn() {
    const worker = new Worker(path.join(__dirname, 'parse-worker.js'));
    const entry = { worker, busy: 0 };
    worker.on('message', ({ id, request, error }) => {
      const job = pending.get(id);
      pending.delete(id);
      entry.busy--;
      if (error) job.reject(new RequestError(error.status, error.message, error.headers));
      else job.resolve(request);
    });
    worker.on('error', (err) => {
      // A parse cannot throw past the worker's own catch; this is the worker itself failing.
      for (const [id, job] of pending) {
        if (job.entry === entry) {
          pending.delete(id);
          job.reject(err);
        }
      }
      workers.splice(workers.indexOf(entry), 1);
    });
    // Idle parsers never keep a process alive.
    worker.unref();
    workers.push(entry);
    return entry;
  }

  /** parseInfer's result for a body too large to parse on the event loop. */
  function parse(sig, body, headerLength) {
    if (closed) return Promise.reject(new Error('the parser pool is closed'));
    let entry = workers.reduce((best, w) => (best === null || w.busy < best.busy ? w : best), null);
    if (entry === null || (entry.busy > 0 && workers.length < size)) entry = spawn();
    const id = ++lastId;
    entry.busy++;
    // The body is handed over without a copy when it owns its memory (readBody made it).
    const owns = body.byteOffset === 0 && body.byteLength === body.buffer.byteLength;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject, entry });
      entry.worker.postMessage({ id, sig: sig.portable, body, headerLength }, owns ? [body.buffer] : []);
    });
  }

  async function close() {
    closed = true;
    await Promise.all(workers.splice(0).map((w) => w.worker.terminate()));
  }

  return { parse, close, get size() { return workers.length; } };
}

module.exports = { parserPool, OFF_THREAD_BYTES };
