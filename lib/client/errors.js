'use strict';

// A server's refusal, or a failed connection, as a ZgcError: its code from the HTTP status or
// the gRPC code, with `status` (that number), `server` (the address) and the server's words.

const { ZgcError } = require('../errors');

/** gRPC status codes (grpc/status.h). */
const GRPC = { OK: 0, CANCELLED: 1, UNKNOWN: 2, INVALID_ARGUMENT: 3, DEADLINE_EXCEEDED: 4, NOT_FOUND: 5, ALREADY_EXISTS: 6, PERMISSION_DENIED: 7, RESOURCE_EXHAUSTED: 8, FAILED_PRECONDITION: 9, ABORTED: 10, OUT_OF_RANGE: 11, UNIMPLEMENTED: 12, INTERNAL: 13, UNAVAILABLE: 14, DATA_LOSS: 15, UNAUTHENTICATED: 16 };

function httpCode(status) {
  if (status === 400 || status === 413 || status === 415 || status === 422) return 'ERR_ZGC_REMOTE_INVALID';
  if (status === 404) return 'ERR_ZGC_REMOTE_NOT_FOUND';
  if (status === 503 || status === 429) return 'ERR_ZGC_REMOTE_UNAVAILABLE';
  if (status === 504 || status === 408) return 'ERR_ZGC_REMOTE_TIMEOUT';
  return 'ERR_ZGC_REMOTE';
}

function grpcCode(code) {
  if (code === GRPC.INVALID_ARGUMENT || code === GRPC.OUT_OF_RANGE || code === GRPC.FAILED_PRECONDITION) return 'ERR_ZGC_REMOTE_INVALID';
  if (code === GRPC.NOT_FOUND) return 'ERR_ZGC_REMOTE_NOT_FOUND';
  if (code === GRPC.UNAVAILABLE || code === GRPC.RESOURCE_EXHAUSTED) return 'ERR_ZGC_REMOTE_UNAVAILABLE';
  if (code === GRPC.DEADLINE_EXCEEDED) return 'ERR_ZGC_REMOTE_TIMEOUT';
  return 'ERR_ZGC_REMOTE';
}

/** A refusal the server answered with HTTP `status` and `message`. */
function httpError(server, status, message, retryAfterMs) {
  const fields = { status, server };
  if (retryAfterMs !== undefined) fields.retryAfterMs = retryAfterMs;
  return new ZgcError(httpCode(status), `${server}: ${message || `HTTP ${status}`}`, fields);
}

/** A refusal the server answered with gRPC `code` and `details`. */
function grpcError(server, code, details) {
  return new ZgcError(grpcCode(code), `${server}: ${details || `gRPC status ${code}`}`, { status: code, server });
}

/**
 * A connection that failed: `sent` says whether the request may have reached the server (a
 * refused connection never did: it may go to another server whatever it was).
 */
function connectionError(server, cause, sent) {
  const what = cause && cause.code ? `${cause.code}: ${cause.message}` : String(cause && cause.message);
  return new ZgcError('ERR_ZGC_CONNECTION', `${server}: ${sent ? 'the connection was lost' : 'could not connect'} (${what})`, { server, sent, cause });
}

function timeoutError(server, ms) {
  return new ZgcError('ERR_ZGC_REMOTE_TIMEOUT', `${server}: no answer within timeoutMs ${ms}`, { server, timeoutMs: ms });
}

/** A response that does not read as the protocol's. */
function responseError(server, detail) {
  return new ZgcError('ERR_ZGC_REMOTE', `${server}: the response ${detail}`, { server });
}

module.exports = { GRPC, httpError, grpcError, connectionError, timeoutError, responseError };
