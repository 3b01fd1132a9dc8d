'use strict';

// What load() and createPool() open: the path resolved, the load options checked, and the
// artifact, loaded here (a path or its bytes) or run by host processes (`isolate: 'process'`).

const os = require('node:os');
const path = require('node:path');
const fs = require('node:fs');
const { NativeArtifact } = require('./native');
const { fromNative } = require('./errors');
const { hostName } = require('./platform');
const { refuseUnknownKeys } = require('./options');
const { isolationOptions, openIsolated } = require('./isolation');

/** `~` expanded and made absolute, symlinks resolved where the file exists (as Python's resolve()). */
function resolvePath(p) {
  let expanded = p;
  // `~\` too on Windows, as Python's expanduser takes it there.
  if (p === '~' || p.startsWith('~/') || p.startsWith(`~${path.sep}`)) expanded = path.join(os.homedir(), p.slice(1));
  const absolute = path.resolve(expanded);
  try {
    return fs.realpathSync(absolute);
  } catch {
    return absolute;
  }
}

const OFFLOAD = ['auto', 'always', 'never'];
/** Run options only an isolated instance has, refused in-process with the reason. */
const IN_PROCESS_ONLY = { timeoutMs: "needs isolate: 'process' (an in-process run cannot be stopped midway; see docs/isolation.md)" };
const LOAD_OPTIONS = ['f16', 'offload', 'isolate', 'timeoutMs', 'maxMemoryMb', 'startTimeoutMs'];

function checkOptions(options) {
  if (options === undefined) return { f16: 'float32', offload: 'auto' };
  if (typeof options !== 'object' || options === null) throw new TypeError('load options must be an object');
  refuseUnknownKeys('load()', options, LOAD_OPTIONS);
  const offload = options.offload === undefined ? 'auto' : options.offload;
  if (!OFFLOAD.includes(offload)) throw new TypeError(`option offload must be 'auto', 'always' or 'never', got ${JSON.stringify(offload)}`);
  const f16 = options.f16 === undefined ? 'float32' : options.f16;
  if (f16 !== 'float32' && f16 !== 'bits' && f16 !== 'float16') {
    throw new TypeError(`load option f16 must be 'float32', 'bits' or 'float16', got ${JSON.stringify(f16)}`);
  }
  if (f16 === 'float16' && typeof globalThis.Float16Array !== 'function') {
    throw new TypeError(
      `load option f16: 'float16' needs a global Float16Array, and ${hostName()} has none (Node 24 and later, Bun and Deno have it; Node 22 behind --js-float16array); use 'float32' or 'bits'`,
    );
  }
  return { f16, offload };
}


/** Opens an artifact (path or bytes) and validates it: the shared step of `load` and pools. */
function openArtifact(artifact) {
  try {
    if (typeof artifact === 'string') return { native: NativeArtifact.open(resolvePath(artifact)), fromBytes: false, users: 0 };
    if (artifact instanceof Uint8Array) {
      return { native: NativeArtifact.fromBytes(artifact, `<${artifact.length} bytes>`), fromBytes: true, users: 0 };
    }
  } catch (err) {
    throw fromNative(err);
  }
  throw new TypeError(`load() takes a path string or a Uint8Array of library bytes, got ${artifact === null ? 'null' : typeof artifact}`);
}

/**
 * The artifact `load()` or `createPool()` (`where`) runs, with the isolation its `options` ask
 * for: `{ native, fromBytes, users, isolated }`, which its runtimes share.
 */
function open(artifact, options, where) {
  const isolation = isolationOptions(options, where);
  if (isolation.isolate !== 'process') return openArtifact(artifact);
  if (typeof artifact !== 'string') {
    throw new TypeError(`${where} with isolate: 'process' takes a path: each instance's process loads the artifact from its file`);
  }
  return openIsolated(resolvePath(artifact), isolation);
}

module.exports = { IN_PROCESS_ONLY, checkOptions, openArtifact, open, resolvePath };
