'use strict';

// Every limit the server keeps, in one table: its createServer option, CLI flag and config
// key, kind, default and what it bounds. The CLI, createServer, `--help` and docs/serving.md
// all read from here, so that a limit cannot exist in one place and be missing in another.
// Nothing here needs the native addon: the CLI reads it before any addon is built.

const fs = require('node:fs');
const os = require('node:os');
const { parseSize, SIZE_RULE } = require('../options');

/**
 * The default in-flight budget: an eighth of the memory this process may use (the cgroup's
 * limit where one is set), at least 256 MiB and at most 2 GiB.
 */
function defaultInflightBytes() {
  const constrained = typeof process.constrainedMemory === 'function' ? process.constrainedMemory() : 0;
  const memory = constrained > 0 && constrained < os.totalmem() ? constrained : os.totalmem();
  return Math.min(2 ** 31, Math.max(2 ** 28, Math.floor(memory / 8)));
}

/** Three quarters of the process's open-file limit (read on Linux), at most 4096. */
function defaultMaxConnections() {
  try {
    const m = /^Max open files\s+(\d+)/m.exec(fs.readFileSync('/proc/self/limits', 'utf8'));
    if (m) return Math.max(16, Math.min(4096, Math.floor(Number(m[1]) * 0.75)));
  } catch {
    // No /proc here.
  }
  return 1024;
}

/**
 * kind: 'size' (bytes, or "64m"), 'ms' or 'count'. min: the smallest value taken (0 turns the
 * limit off where `off` says so).
 */
const LIMITS = [
  { key: 'maxBody', flag: '--max-body', kind: 'size', min: 1, default: () => 64 * 1024 * 1024, shown: '64m', what: 'a larger request body is a 413 (gRPC: the largest message)' },
  { key: 'maxInflightBytes', flag: '--max-inflight-bytes', kind: 'size', min: 1, default: defaultInflightBytes, shown: "an eighth of memory (the cgroup's limit where set), from 256m to 2g", what: 'bytes of request bodies all requests being answered may hold; past it a request is a 503 with Retry-After before its body is read' },
  { key: 'headersTimeoutMs', flag: '--headers-timeout-ms', kind: 'ms', min: 1, default: () => 10000, shown: '10000', what: "a client that has not sent a request's headers by then gets a 408 and is disconnected" },
  { key: 'requestTimeoutMs', flag: '--request-timeout-ms', kind: 'ms', min: 0, off: true, default: () => 60000, shown: '60000', what: 'the time to receive a whole request, headers and body (0: none)' },
  { key: 'keepAliveTimeoutMs', flag: '--keep-alive-timeout-ms', kind: 'ms', min: 0, default: () => 5000, shown: '5000', what: 'an idle keep-alive connection is closed after this' },
  { key: 'maxConnections', flag: '--max-connections', kind: 'count', min: 1, default: defaultMaxConnections, shown: "three quarters of the open-file limit, at most 4096", what: 'connections open at once, HTTP and gRPC together; when full, an idle keep-alive connection is closed for a new one, else the new one gets a 503' },
  { key: 'parseTimeoutMs', flag: '--parse-timeout-ms', kind: 'ms', min: 1, default: () => 5000, shown: '5000', what: 'a large JSON request still parsing by then is a 400, and its parser thread is replaced' },
  { key: 'grpcMaxConcurrentStreams', flag: '--grpc-max-concurrent-streams', kind: 'count', min: 1, default: () => 100, shown: '100', what: 'gRPC calls at once on one HTTP/2 connection' },
  { key: 'grpcHandshakeTimeoutMs', flag: '--grpc-handshake-timeout-ms', kind: 'ms', min: 1, default: () => 10000, shown: '10000', what: "a gRPC connection that has not sent HTTP/2's preface and settings by then is closed" },
  { key: 'grpcIdleTimeoutMs', flag: '--grpc-idle-timeout-ms', kind: 'ms', min: 0, off: true, default: () => 300000, shown: '300000', what: 'a gRPC connection without calls for this long is closed (0: never)' },
];

/** Who may load and unload models, as Triton's --model-control-mode: none, poll (files watched) or explicit (the repository API). */
const MODEL_CONTROL = ['none', 'poll', 'explicit'];

const BY_KEY = new Map(LIMITS.map((l) => [l.key, l]));

/** The rule a limit's value must follow, for error messages. */
const ruleOf = (limit) => (limit.kind === 'size' ? `${SIZE_RULE}, at least ${limit.min} byte` : `an integer >= ${limit.min}`);

/** A limit's value from a number or text (a size may carry a unit); null when it is not one. */
function valueOf(limit, value) {
  let n;
  if (limit.kind === 'size') n = parseSize(value);
  else if (typeof value === 'number') n = value;
  // Number('') is 0: an empty value is a mistake, not a zero.
  else if (typeof value === 'string' && /^\s*\d+\s*$/.test(value)) n = Number(value);
  else return null;
  return Number.isSafeInteger(n) && n >= limit.min ? n : null;
}

/** Every limit of `options` checked, the others at their defaults. `where` names the option's source in messages. */
function resolveLimits(options, where) {
  const out = {};
  for (const limit of LIMITS) {
    const given = options[limit.key];
    if (given === undefined) {
      out[limit.key] = limit.default();
      continue;
    }
    const n = valueOf(limit, given);
    if (n === null) throw new RangeError(`${where(limit)} must be ${ruleOf(limit)}, got ${JSON.stringify(given)}`);
    out[limit.key] = n;
  }
  if (out.requestTimeoutMs > 0 && out.headersTimeoutMs > out.requestTimeoutMs) {
    throw new RangeError(`${where(BY_KEY.get('headersTimeoutMs'))} (${out.headersTimeoutMs}) must not exceed ${where(BY_KEY.get('requestTimeoutMs'))} (${out.requestTimeoutMs})`);
  }
  return out;
}

/** The --help lines of the limits. */
const helpLines = () =>
  LIMITS.map((l) => {
    const here = l.shown === String(l.default()) || l.shown === '64m' ? '' : `; here ${l.kind === 'size' ? `${Math.round(l.default() / 2 ** 20)}m` : l.default()}`;
    return `    ${`${l.flag} ${l.kind === 'size' ? 'SIZE' : 'N'}`.padEnd(34)}${l.what} [${l.shown}${here}]`;
  }).join('\n');

module.exports = { MODEL_CONTROL, LIMITS, BY_KEY, resolveLimits, valueOf, ruleOf, helpLines };
