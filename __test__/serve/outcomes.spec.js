'use strict';

// lib/serve/outcomes.js: one answer per failure, for REST and gRPC alike.
const { outcomeOf } = require('../../lib/serve/outcomes');
const { RequestError } = require('../../lib/serve/reasons');
const { ZgcError } = require('../../lib/errors');

const v = { version: '3', config: { maxQueue: 7, timeoutMs: 250 } };
const pick = ({ outcome, http, grpc, message, code, headers }) => ({ outcome, http, grpc, message, code, headers });
const reasonOf = (err, v2) => outcomeOf(err, 'm', v2).reason;

describe('request errors: by the reason they are made with, from one table', () => {
  test.each([
    ['bad_request', 400, 'bad_request', 'INVALID_ARGUMENT'],
    ['forbidden', 403, 'bad_request', 'PERMISSION_DENIED'],
    ['not_found', 404, 'not_found', 'NOT_FOUND'],
    ['too_large', 413, 'too_large', 'RESOURCE_EXHAUSTED'],
    ['parser_failed', 500, 'bad_request', 'INTERNAL'],
    ['not_ready', 400, 'not_ready', 'UNAVAILABLE'],
    ['shutting_down', 503, 'not_ready', 'UNAVAILABLE'],
    ['timeout', 504, 'timeout', 'DEADLINE_EXCEEDED'],
    ['canceled', 0, 'canceled', 'CANCELLED'],
  ])('%s: HTTP %d, outcome %s, gRPC %s', (reason, http, outcome, grpc) => {
    const headers = { connection: 'close' };
    const err = new RequestError(reason, 'why', headers);
    expect(err.status).toBe(http);
    expect(pick(outcomeOf(err, 'm'))).toEqual({ outcome, http, grpc, message: 'why', code: undefined, headers });
  });

  test("a reason's own headers come with it, and the maker's add to them", () => {
    expect(pick(outcomeOf(new RequestError('over_budget', 'full'), 'm'))).toEqual({ outcome: 'over_budget', http: 503, grpc: 'UNAVAILABLE', message: 'full', code: undefined, headers: { 'retry-after': '1', connection: 'close' } });
    expect(new RequestError('queue_full', 'x', { connection: 'close' }).headers).toEqual({ 'retry-after': '1', connection: 'close' });
  });

  test('a full sequence table is its own outcome: 503 with retry-after, RESOURCE_EXHAUSTED', () => {
    expect(pick(outcomeOf(new RequestError('sequences_full', 'all taken'), 'm'))).toEqual({ outcome: 'sequences_full', http: 503, grpc: 'RESOURCE_EXHAUSTED', message: 'all taken', code: undefined, headers: { 'retry-after': '1' } });
  });

  test('a request error with no known reason cannot be made', () => {
    expect(() => new RequestError(400, 'x')).toThrow(TypeError);
    expect(() => new RequestError('teapot', 'x')).toThrow('no such request error reason: teapot');
  });
});

describe("a run's errors: by their code", () => {
  const run = (code, message = 'm1') => pick(outcomeOf(new ZgcError(code, message), 'net', v));

  test.each(['ERR_ZGC_VALUE', 'ERR_ZGC_SIZE', 'ERR_ZGC_DTYPE', 'ERR_ZGC_UNKNOWN_SOURCE'])("%s is the request's fault: 400, naming the model, in the runtime's words whole", (code) => {
    expect(run(code, 'source "a" expects 4 elements')).toEqual({ outcome: 'bad_request', http: 400, grpc: 'INVALID_ARGUMENT', message: 'model "net" refused the request\'s inputs: source "a" expects 4 elements', code: undefined, headers: undefined });
  });

  test('a full queue: 503 with retry-after, RESOURCE_EXHAUSTED', () => {
    expect(run('ERR_ZGC_QUEUE_FULL')).toEqual({ outcome: 'queue_full', http: 503, grpc: 'RESOURCE_EXHAUSTED', message: 'model "net" has 7 requests waiting already: try again shortly', code: undefined, headers: { 'retry-after': '1' } });
  });

  test('a model being unloaded: 503 with retry-after, UNAVAILABLE', () => {
    expect(run('ERR_ZGC_CLOSED')).toEqual({ outcome: 'not_ready', http: 503, grpc: 'UNAVAILABLE', message: 'model "net" is being unloaded', code: undefined, headers: { 'retry-after': '1' } });
  });

  test('an isolated run past its timeout: 504, DEADLINE_EXCEEDED, with the code', () => {
    expect(run('ERR_ZGC_TIMEOUT')).toEqual({ outcome: 'timeout', http: 504, grpc: 'DEADLINE_EXCEEDED', message: 'model "net" did not answer within 250 ms: its instance was stopped and restarts (ERR_ZGC_TIMEOUT)', code: 'ERR_ZGC_TIMEOUT', headers: undefined });
  });

  test('no live instance: 503, UNAVAILABLE, naming the version', () => {
    expect(run('ERR_ZGC_INSTANCE_FAILED', 'gave up')).toEqual({ outcome: 'not_ready', http: 503, grpc: 'UNAVAILABLE', message: 'model "net" version 3 has no live instance: gave up (ERR_ZGC_INSTANCE_FAILED)', code: 'ERR_ZGC_INSTANCE_FAILED', headers: undefined });
  });

  test.each([
    ['ERR_ZGC_INSTANCE_CRASHED', 'instance_crashed'],
    ['ERR_ZGC_MEMORY_LIMIT', 'instance_crashed'],
    ['ERR_ZGC_MISSING_BINDING', 'model_error'],
    ['ERR_ZGC_BUSY', 'model_error'],
  ])('%s: 500, INTERNAL, outcome %s', (code, outcome) => {
    expect(run(code, 'boom')).toEqual({ outcome, http: 500, grpc: 'INTERNAL', message: `model "net" version 3 failed: boom (${code})`, code, headers: undefined });
  });

  test('before a version is resolved, the model alone is named', () => {
    expect(pick(outcomeOf(new ZgcError('ERR_ZGC_LOAD', 'x'), 'net')).message).toBe('model "net" failed: x (ERR_ZGC_LOAD)');
  });
});

describe('anything else', () => {
  test('an aborted call is canceled', () => {
    const abort = Object.assign(new Error('stop'), { name: 'AbortError' });
    expect(pick(outcomeOf(abort, 'm'))).toMatchObject({ outcome: 'canceled', http: 0, grpc: 'CANCELLED', message: 'the call was cancelled' });
  });

  test('an unexpected error is an internal one', () => {
    expect(pick(outcomeOf(new TypeError('x is undefined'), 'm'))).toEqual({ outcome: 'model_error', http: 500, grpc: 'INTERNAL', message: 'internal error: x is undefined', code: undefined, headers: undefined });
    expect(outcomeOf(undefined, 'm').message).toBe('internal error: undefined');
  });
});

test('each answer names its reason', () => {
  expect(reasonOf(new RequestError('bad_request', 'x'))).toBe('bad_request');
  expect(reasonOf(new RequestError('not_ready', 'x'))).toBe('not_ready');
  expect(reasonOf(new RequestError('over_budget', 'x'))).toBe('over_budget');
  expect(reasonOf(new ZgcError('ERR_ZGC_SIZE', 'x'), v)).toBe('bad_input');
  expect(reasonOf(new ZgcError('ERR_ZGC_CLOSED', 'x'), v)).toBe('unloading');
  expect(reasonOf(new ZgcError('ERR_ZGC_TIMEOUT', 'x'), v)).toBe('timeout');
  expect(reasonOf(new ZgcError('ERR_ZGC_INSTANCE_FAILED', 'x'), v)).toBe('no_instance');
  expect(reasonOf(new ZgcError('ERR_ZGC_QUEUE_FULL', 'x'), v)).toBe('queue_full');
  expect(reasonOf(new ZgcError('ERR_ZGC_MEMORY_LIMIT', 'x'), v)).toBe('instance_crashed');
  expect(reasonOf(new ZgcError('ERR_ZGC_LOAD', 'x'), v)).toBe('model_error');
  expect(reasonOf(Object.assign(new Error('x'), { name: 'AbortError' }))).toBe('canceled');
  expect(reasonOf(new Error('x'))).toBe('model_error');
});
