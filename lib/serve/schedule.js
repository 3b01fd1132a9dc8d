'use strict';

// Triton's schedule policy for one request: its `priority` among the model's levels, and the
// deadline its `timeout` sets, which the model's timeoutMs caps (a client can shorten the
// wait, never lengthen it). Unlike Triton's, the deadline covers the run as well as the queue.

const { RequestError } = require('./reasons');
const { checkSequenceRequest } = require('./sequences');

/** Below every level a request names: where requests without one wait, unless the model sets a default. */
const LOWEST = -(2 ** 31);

/**
 * The pool priority (higher runs first) of a request at Triton's level `level` (1 is the
 * highest; 0 or none, the model's `defaultPriorityLevel`). A level past the model's
 * `priorityLevels` (when set) is refused.
 */
function poolPriority(config, level, name) {
  const levels = config.priorityLevels;
  if (levels > 0 && level > levels) throw new RequestError('bad_request', `parameter "priority" is ${level}: model "${name}" has priority levels 1 to ${levels} (1 is the highest)`);
  const effective = level === undefined || level === 0 ? config.defaultPriorityLevel : level;
  if (effective === 0) return LOWEST;
  // Levels past 2^31 all rank lowest but one.
  return -Math.min(effective, 2 ** 31 - 1);
}

/** `{ ms, message }`: when the request is given up (0: never) and what its 504 says. */
function deadline(config, timeoutUs, name) {
  const modelMs = config.timeoutMs;
  const requestMs = (timeoutUs ?? 0) / 1000;
  if (requestMs > 0 && (modelMs === 0 || requestMs < modelMs)) {
    return { ms: requestMs, message: `model "${name}" did not answer within the request's timeout of ${timeoutUs} µs` };
  }
  return { ms: modelMs, message: `model "${name}" did not answer within ${modelMs} ms` };
}

/**
 * The options of a queued run: its abort signal and pool priority, and for a batched version
 * its deadline too, so that the batcher never holds it for others past it.
 */
function runOptions(pool, signal, priority, limit) {
  if (limit.ms > 0 && pool.batcher !== undefined) return { signal, priority, timeoutMs: limit.ms };
  return { signal, priority };
}

/**
 * A parsed request of version `v` admitted, before any run (inline ones too): its priority
 * level and its sequence parameters checked. Returns its pool priority.
 */
function admit(v, request, name) {
  const priority = poolPriority(v.config, request.priority, name);
  checkSequenceRequest(v, request.sequence, name);
  return priority;
}

module.exports = { admit, poolPriority, deadline, runOptions, LOWEST };
