'use strict';

// ModelInfer over gRPC: the message's bytes counted against the in-flight budget, decoded (a
// large one on a parser thread), run inline for tiny models or queued with the model's timeout
// and the call's cancellation, answered, and counted in the metrics. Synchronous while the
// run is inline: no promise or microtask per call.

const { decode, messages } = require('./pb');
const { RequestError, bad } = require('./reasons');
const { classified } = require('./infer-response');
const { outputsFor } = require('./signature');
const { bytesTensor } = require('./classification');
const { overBudget } = require('./body');
const { OFF_THREAD_BYTES } = require('./parsers');
const { statusOf } = require('./grpc-status');
const { parseGrpcInfer } = require('./grpc-request');
const { resolveVersion, settle } = require('./context');
const { runNow, runTimed } = require('../pool');
const { startTrace, step, runSteps, endTrace } = require('./tracing');
const { admit, deadline, runOptions } = require('./schedule');
const { runOf } = require('./sequences');


/**
 * The run's inputs and outputs from a ModelInferRequest's bytes (grpc-js hands them over
 * undecoded): small ones decoded here, large ones on a parser thread. Contents are capped at
 * the model's largest input before a value is read.
 */
function readRequest(ctx, v, buf) {
  const { parsers } = ctx;
  if (buf.length >= OFF_THREAD_BYTES) return parsers.parse(v.signature, buf, buf.length, 'grpc');
  return parseGrpcInfer(v.signature, decode(messages.ModelInferRequest, buf, 0, buf.length, v.signature.limits));
}

// Synchronous while the run is done inline (tiny models): no promise or microtask per call.
function modelInfer(ctx, call, callback) {
  const { state, budget, repository, metrics } = ctx;
  const started = performance.now();
  state.active++;
  const buf = call.request;
  // The bytes held against the in-flight budget: the message's, and inputs read from shared memory.
  const claim = { bytes: 0 };
  // The client shared memory regions the request reads or writes, held until it is answered.
  let held = null;
  // The decode and the answer's making, in ms: the statistics' compute_input and compute_output.
  let inputMs = 0;
  let outputMs = 0;
  let parseStart = 0;
  // The call's trace, when an OpenTelemetry SDK records it (tracing.js).
  let trace = null;
  let failure;
  const done = (name, v, outcome) => {
    if (trace !== null) endTrace(trace, performance.now(), v === undefined ? undefined : v.version, outcome, failure);
    if (held !== null) ctx.shm.letGo(held);
    budget.release(claim.bytes);
    const label = v !== undefined || repository.models.has(name) ? name : '_unknown';
    metrics.count(label, v === undefined ? '' : v.version, outcome, (performance.now() - started) / 1000, 'grpc', inputMs, outputMs);
    settle(ctx);
  };
  const fail = (err, name, v) => {
    const s = statusOf(err, name, v);
    failure = s.error.details;
    callback(s.error);
    done(name, v, s.outcome);
  };
  let v;
  let name = '';
  let request;
  // Set once the parsed request is admitted (schedule.js), inline or after a parser thread.
  let priority = null;
  try {
    if (state.closed) throw new RequestError('shutting_down', 'the server is shut down');
    // The message is in memory already: it counts against the budget while it is answered.
    if (!budget.claim(buf.length)) throw overBudget(budget);
    claim.bytes = buf.length;
    const head = decode(messages.ModelInferHead, buf);
    name = head.modelName;
    if (name === undefined || name === '') throw bad('model_name is required: a ModelInferRequest names the model to run');
    trace = startTrace(name, 'grpc', started, call.metadata.get('traceparent')[0], call.metadata.get('tracestate')[0]);
    v = resolveVersion(ctx, name, head.modelVersion === undefined || head.modelVersion === '' ? undefined : head.modelVersion);
    parseStart = performance.now();
    request = readRequest(ctx, v, buf);
    if (!(request instanceof Promise) && request.shmInputs === undefined && request.shmOutputs === undefined) {
      const parsed = performance.now();
      inputMs = parsed - parseStart;
      if (trace !== null) step(trace, 'parse', parseStart, parsed);
      // A priority past the model's levels is refused, also for a run that would go inline.
      priority = admit(v, request, name);
      const tensors = request.sequence === undefined ? runNow(v.pool, request.inputs) : undefined;
      if (tensors !== undefined) {
        const answerStart = performance.now();
        if (trace !== null) runSteps(trace, { queueWaitMs: 0, computeMs: answerStart - parsed }, parsed, answerStart);
        answer(callback, v, request, tensors);
        outputMs = performance.now() - answerStart;
        if (trace !== null) step(trace, 'write', answerStart, answerStart + outputMs);
        done(name, v, 'success');
        return;
      }
    }
  } catch (err) {
    fail(err, name, v);
    return;
  }
  Promise.resolve(request)
    .then(async (r) => {
      request = r;
      // Parsed on a thread: its outputs are named, and taken from this thread's signature.
      if (r.outputNames !== undefined) {
        const outputs = outputsFor(v.signature, r.rows).outputByName;
        request.outputs = r.outputNames.map((n) => outputs.get(n));
      }
      if (request.shmInputs !== undefined || request.shmOutputs !== undefined) held = await ctx.shm.stage(request, budget, claim);
      const parsed = performance.now();
      inputMs = parsed - parseStart;
      if (trace !== null) step(trace, 'parse', parseStart, parsed);
      if (priority === null) priority = admit(v, request, name);
      const pending = offloaded(call, v, name, request, priority, trace);
      // The pool has its copy of the inputs now: buffers read from shared memory serve the next request.
      if (request.shmInputs !== undefined) ctx.shm.recycle(request);
      const tensors = await pending;
      if (request.shmOutputs !== undefined) await ctx.shm.deliver(request, held, tensors);
      return tensors;
    })
    .then(
      (tensors) => {
        try {
          const answerStart = performance.now();
          answer(callback, v, request, tensors);
          outputMs = performance.now() - answerStart;
          if (trace !== null) step(trace, 'write', answerStart, answerStart + outputMs);
        } catch (err) {
          fail(err, name, v);
          return;
        }
        done(name, v, 'success');
      },
      (err) => fail(err, name, v),
    );
}

/** Raw contents of an output written into shared memory: empty, so that the others keep their places. */
const NO_BYTES = new Uint8Array(0);

function answer(callback, v, request, tensors) {
  const inShm = request.shmOutputs === undefined ? null : new Set(request.shmOutputs.map((o) => o.name));
  const outputs = request.outputs.map((o) => ({ name: o.name, datatype: o.datatype, shape: o.shape, data: inShm !== null && inShm.has(o.name) ? NO_BYTES : tensors[o.index].data }));
  // Outputs asked for as their top classes: BYTES strings, length-prefixed.
  if (request.classes !== undefined) {
    for (const { name, k } of request.classes) {
      const at = request.outputs.findIndex((o) => o.name === name);
      const o = request.outputs[at];
      const { shape, strings } = classified(o, tensors[o.index].data, k, v.signature.labels);
      outputs[at] = { name, datatype: 'BYTES', shape, data: bytesTensor(strings) };
    }
  }
  callback(null, { modelName: v.model.name, modelVersion: v.version, id: request.id, outputs });
}

/**
 * A run on the pool's instances at the request's priority, cancelled with the call and limited
 * by its deadline (the model's timeoutMs, or the request's shorter timeout).
 */
async function offloaded(call, v, name, request, priority, trace) {
  const limit = deadline(v.config, request.timeoutUs, name);
  const controller = new AbortController();
  const onCancel = () => controller.abort(Object.assign(new Error('the call was cancelled'), { name: 'AbortError' }));
  call.once('cancelled', onCancel);
  let timer = null;
  const options = runOptions(v.pool, controller.signal, priority, limit);
  const submitted = trace === null ? 0 : performance.now();
  const timing = trace === null ? undefined : {};
  const run = runOf(v, request, options, () => runTimed(v.pool, request.inputs, options, timing));
  const limited = limit.ms > 0
    ? Promise.race([run, new Promise((_, reject) => {
        timer = setTimeout(() => {
          const err = new RequestError('timeout', limit.message);
          controller.abort(err);
          reject(err);
        }, limit.ms);
      })])
    : run;
  try {
    return await limited;
  } finally {
    if (timer !== null) clearTimeout(timer);
    call.off('cancelled', onCancel);
    if (timing !== undefined) runSteps(trace, timing, submitted, performance.now());
  }
}

module.exports = { modelInfer };
