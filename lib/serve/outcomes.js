'use strict';

// One map from a failure to what the server says about it, over REST and gRPC alike: the
// metrics outcome, the HTTP status, the gRPC status and the message. A request error names its
// reason where it is made (`RequestError.reason`); a run's error is told by its stable code.
// Nothing is read from a message.
const { ZgcError } = require('../errors');
const { RequestError } = require('./protocol');

/**
 * Each reason: the `outcome` label of the request metrics, the HTTP status (0: the client is
 * gone, nothing is sent), the gRPC status name, and headers REST sends with it.
 */
const REASONS = {
  bad_request: { outcome: 'bad_request', http: 400, grpc: 'INVALID_ARGUMENT' },
  forbidden: { outcome: 'bad_request', http: 403, grpc: 'PERMISSION_DENIED' },
  not_found: { outcome: 'not_found', http: 404, grpc: 'NOT_FOUND' },
  too_large: { outcome: 'too_large', http: 413, grpc: 'RESOURCE_EXHAUSTED' },
  parser_failed: { outcome: 'bad_request', http: 500, grpc: 'INTERNAL' },
  // A model that has no version being served: a request error over REST, as the protocol's
  // ready endpoints say; UNAVAILABLE over gRPC, whose clients retry on it.
  not_ready: { outcome: 'not_ready', http: 400, grpc: 'UNAVAILABLE' },
  over_budget: { outcome: 'over_budget', http: 503, grpc: 'UNAVAILABLE' },
  shutting_down: { outcome: 'not_ready', http: 503, grpc: 'UNAVAILABLE' },
  unloading: { outcome: 'not_ready', http: 503, grpc: 'UNAVAILABLE', headers: { 'retry-after': '1' } },
  no_instance: { outcome: 'not_ready', http: 503, grpc: 'UNAVAILABLE' },
  queue_full: { outcome: 'queue_full', http: 503, grpc: 'RESOURCE_EXHAUSTED', headers: { 'retry-after': '1' } },
  timeout: { outcome: 'timeout', http: 504, grpc: 'DEADLINE_EXCEEDED' },
  canceled: { outcome: 'canceled', http: 0, grpc: 'CANCELLED' },
  bad_input: { outcome: 'bad_request', http: 400, grpc: 'INVALID_ARGUMENT' },
  instance_crashed: { outcome: 'instance_crashed', http: 500, grpc: 'INTERNAL' },
  model_error: { outcome: 'model_error', http: 500, grpc: 'INTERNAL' },
};

/** A request error's reason when its maker gave none, by its HTTP status. */
const BY_STATUS = { 0: 'canceled', 400: 'bad_request', 403: 'forbidden', 404: 'not_found', 413: 'too_large', 500: 'parser_failed', 503: 'shutting_down', 504: 'timeout' };

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
      return err.message.replace(/^source /, 'input ');
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
    const reason = err.reason ?? (err.overBudget ? 'over_budget' : BY_STATUS[err.status] ?? 'bad_request');
    return { reason, ...REASONS[reason], http: err.status, message: err.message, headers: err.headers };
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
