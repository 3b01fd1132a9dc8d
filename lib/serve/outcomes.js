'use strict';

// From a failure to what the server says about it, over REST and gRPC alike: its reason, and
// from the reason (reasons.js) the metrics outcome, the HTTP status, the gRPC status and
// headers. A request error has its reason from where it is made; a run's error is told by its
// stable code. Nothing is read from a message.
const { ZgcError } = require('../errors');
const { REASONS, RequestError } = require('./reasons');

/** The codes of a run's errors that are the request's fault: its inputs. */
const INPUT_CODES = new Set(['ERR_ZGC_VALUE', 'ERR_ZGC_SIZE', 'ERR_ZGC_DTYPE', 'ERR_ZGC_UNKNOWN_SOURCE']);

/** The reason of a run's error, by its code. */
function runReason(code) {
  if (INPUT_CODES.has(code)) return 'bad_input';
  switch (code) {
    case 'ERR_ZGC_QUEUE_FULL':
      return 'queue_full';
    case 'ERR_ZGC_CLOSED':
      return 'unloading';
    case 'ERR_ZGC_INSTANCE_FAILED':
      return 'no_instance';
    case 'ERR_ZGC_TIMEOUT':
      return 'timeout';
    case 'ERR_ZGC_INSTANCE_CRASHED':
    case 'ERR_ZGC_MEMORY_LIMIT':
      return 'instance_crashed';
    default:
      return 'model_error';
  }
}

/**
 * What a run's error of `reason` says. The model's queue and its timeout are the model's
 * (`model "m"`); an instance that fails is its version's (`model "m" version 1`).
 */
function runMessage(reason, err, name, v) {
  const model = `model "${name}"`;
  const where = `${model}${v ? ` version ${v.version}` : ''}`;
  switch (reason) {
    case 'bad_input':
      // In the runtime's words, which name the input as its source.
      return `${model} refused the request's inputs: ${err.message}`;
    case 'queue_full':
      return `${model} has ${v.config.maxQueue} requests waiting already: try again shortly`;
    case 'unloading':
      return `${model} is being unloaded`;
    case 'no_instance':
      return `${where} has no live instance: ${err.message} (${err.code})`;
    case 'timeout':
      return `${model} did not answer within ${v.config.timeoutMs} ms: its instance was stopped and restarts (${err.code})`;
    default:
      return `${where} failed: ${err.message} (${err.code})`;
  }
}

/**
 * What the server answers for `err`, raised while serving model `name` (version `v`, when it
 * was resolved): `{ reason, outcome, http, grpc, message, headers, code }`. `code` is the
 * runtime's error code, which REST also sends, for a run that failed on the server's side.
 */
function outcomeOf(err, name, v) {
  if (err instanceof RequestError) {
    return { reason: err.reason, ...REASONS[err.reason], message: err.message, headers: err.headers };
  }
  if (err instanceof ZgcError) {
    const reason = runReason(err.code);
    const serverSide = reason !== 'bad_input' && reason !== 'queue_full' && reason !== 'unloading';
    return { reason, ...REASONS[reason], message: runMessage(reason, err, name, v), code: serverSide ? err.code : undefined };
  }
  if (err && err.name === 'AbortError') return { reason: 'canceled', ...REASONS.canceled, message: 'the call was cancelled' };
  return { reason: 'model_error', ...REASONS.model_error, message: `internal error: ${err && err.message}` };
}

module.exports = { outcomeOf, REASONS };
