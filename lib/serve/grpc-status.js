'use strict';

// gRPC's status codes, and a failure as the status and message the service sends: the answer
// of lib/serve/outcomes.js, as REST gives it, under gRPC's code.

const { DecodeError } = require('../protocol/pb');
const { outcomeOf } = require('./outcomes');
const { bounded } = require('./elide');

const STATUS = { OK: 0, CANCELLED: 1, UNKNOWN: 2, INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, NOT_FOUND: 5, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, FAILED_PRECONDITION: 9, INTERNAL: 13, UNAVAILABLE: 14 };

// Every message sent back is bounded (lib/serve/elide.js), whatever the request held.
const grpcError = (code, message) => {
  const text = bounded(message);
  return Object.assign(new Error(text), { code, details: text });
};
const notValid = (err) => `the request is not a valid ModelInferRequest: ${err.message}`;

/** A request error or a run's error as a gRPC status, with the message REST gives (lib/serve/outcomes.js). */
function statusOf(err, name, v) {
  if (err instanceof DecodeError) return { outcome: 'bad_request', error: grpcError(STATUS.INVALID_ARGUMENT, notValid(err)) };
  const o = outcomeOf(err, name, v);
  return { outcome: o.outcome, error: grpcError(STATUS[o.grpc], o.message) };
}

module.exports = { STATUS, grpcError, notValid, statusOf };
