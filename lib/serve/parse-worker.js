'use strict';

// One parser thread of lib/serve/parsers.js: parseInfer on a body handed over, and the input
// tensors sent back transferred (they are this thread's fresh arrays: nothing here keeps them).
const os = require('node:os');
const { parentPort } = require('node:worker_threads');
const { parseInfer, signatureFromPortable, RequestError } = require('./protocol');

// Below the event loop's priority (on Linux a thread's own): while both cores parse large
// bodies, a small request still gets the CPU as soon as it arrives.
try {
  os.setPriority(os.constants.priority.PRIORITY_BELOW_NORMAL);
} catch {
  // Not permitted here: parsing at normal priority.
}

parentPort.on('message', ({ id, sig, body, headerLength }) => {
  try {
    const request = parseInfer(signatureFromPortable(sig), body, headerLength);
    const buffers = new Set(Object.values(request.inputs).map((a) => a.buffer));
    parentPort.postMessage({ id, request }, [...buffers]);
  } catch (err) {
    const error = err instanceof RequestError ? { status: err.status, message: err.message, headers: err.headers } : { status: 500, message: `the request could not be parsed: ${err.message}` };
    parentPort.postMessage({ id, error });
  }
});
