'use strict';

// One parser thread of lib/serve/parsers.js: parseInfer on a body handed over, and the input
// tensors sent back transferred (they are this thread's fresh arrays: nothing here keeps them).
const os = require('node:os');
const { parentPort } = require('node:worker_threads');
const { RequestError } = require('./reasons');
const { parseInfer } = require('./infer-request');
const { signatureFromPortable } = require('./signature');
const { decode, messages, DecodeError } = require('../protocol/pb');
const { parseGrpcInfer } = require('./grpc-request');
const { notValid } = require('./grpc-status');

// Below the event loop's priority (on Linux a thread's own): while both cores parse large
// bodies, a small request still gets the CPU as soon as it arrives.
try {
  os.setPriority(os.constants.priority.PRIORITY_BELOW_NORMAL);
} catch {
  // Not permitted here: parsing at normal priority.
}

parentPort.on('message', ({ kind, sig, body, headerLength }) => {
  try {
    const signature = signatureFromPortable(sig);
    let request;
    if (kind === 'grpc') {
      const { outputs, ...rest } = parseGrpcInfer(signature, decode(messages.ModelInferRequest, body, 0, body.length, signature.limits));
      request = { ...rest, outputNames: outputs.map((o) => o.name) };
    } else {
      request = parseInfer(signature, body, headerLength);
    }
    // Inputs read in place are views of the body: each buffer goes once.
    const buffers = new Set(Object.values(request.inputs).map((a) => a.buffer));
    parentPort.postMessage({ request }, [...buffers]);
  } catch (err) {
    let error;
    if (err instanceof RequestError) error = { reason: err.reason, message: err.message, headers: err.headers };
    else if (err instanceof DecodeError) error = { reason: 'bad_request', message: notValid(err) };
    else error = { reason: 'parser_failed', message: `the request could not be parsed: ${err.message}` };
    parentPort.postMessage({ error });
  }
});
