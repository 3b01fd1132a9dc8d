'use strict';

// Why the server refuses or fails a request, each reason once: the metrics outcome, the HTTP
// status (0: the client is gone, nothing is sent), the gRPC status name, and headers REST
// sends with it. A request error is made by its reason (`new RequestError('not_found', ...)`);
// lib/serve/outcomes.js reads everything else from here, for REST and gRPC alike.

const REASONS = {
  bad_request: { outcome: 'bad_request', http: 400, grpc: 'INVALID_ARGUMENT' },
  forbidden: { outcome: 'bad_request', http: 403, grpc: 'PERMISSION_DENIED' },
  not_found: { outcome: 'not_found', http: 404, grpc: 'NOT_FOUND' },
  too_large: { outcome: 'too_large', http: 413, grpc: 'RESOURCE_EXHAUSTED' },
  parser_failed: { outcome: 'bad_request', http: 500, grpc: 'INTERNAL' },
  // A model that has no version being served: a request error over REST, as the protocol's
  // ready endpoints say; UNAVAILABLE over gRPC, whose clients retry on it.
  not_ready: { outcome: 'not_ready', http: 400, grpc: 'UNAVAILABLE' },
  over_budget: { outcome: 'over_budget', http: 503, grpc: 'UNAVAILABLE', headers: { 'retry-after': '1', connection: 'close' } },
  shutting_down: { outcome: 'not_ready', http: 503, grpc: 'UNAVAILABLE' },
  unloading: { outcome: 'not_ready', http: 503, grpc: 'UNAVAILABLE', headers: { 'retry-after': '1' } },
  no_instance: { outcome: 'not_ready', http: 503, grpc: 'UNAVAILABLE' },
  queue_full: { outcome: 'queue_full', http: 503, grpc: 'RESOURCE_EXHAUSTED', headers: { 'retry-after': '1' } },
  // Every sequence slot of a model is taken: the client ends one or comes back later.
  sequences_full: { outcome: 'sequences_full', http: 503, grpc: 'RESOURCE_EXHAUSTED', headers: { 'retry-after': '1' } },
  timeout: { outcome: 'timeout', http: 504, grpc: 'DEADLINE_EXCEEDED' },
  canceled: { outcome: 'canceled', http: 0, grpc: 'CANCELLED' },
  bad_input: { outcome: 'bad_request', http: 400, grpc: 'INVALID_ARGUMENT' },
  instance_crashed: { outcome: 'instance_crashed', http: 500, grpc: 'INTERNAL' },
  model_error: { outcome: 'model_error', http: 500, grpc: 'INTERNAL' },
};

/** A request the server refuses, by its reason (a key of REASONS); `headers` add to the reason's. */
class RequestError extends Error {
  constructor(reason, message, headers) {
    if (!Object.hasOwn(REASONS, reason)) throw new TypeError(`no such request error reason: ${String(reason)}`);
    super(message);
    this.reason = reason;
    const own = REASONS[reason].headers;
    this.headers = own === undefined ? headers : { ...own, ...headers };
  }

  /** Its HTTP status, the reason's. */
  get status() {
    return REASONS[this.reason].http;
  }
}

/** A 400 (gRPC INVALID_ARGUMENT): the request itself is wrong. */
const bad = (message) => new RequestError('bad_request', message);

module.exports = { REASONS, RequestError, bad };
