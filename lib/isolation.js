'use strict';

// `isolate: 'process'`: the options of load() and createPool(), and what starting a host
// process needs (its program, the environment it gets). The instances themselves are
// runtimes like any other: the core's engine runs them in their processes
// (crates/core/src/isolate/instance.rs), through the same queue, workers and stats.

const fs = require('node:fs');
const path = require('node:path');
const native = require('./native');
const { ZgcError, fromNative } = require('./errors');
const { platformName, hostName } = require('./platform');

/** The host program: next to the package (built from source), else in the platform package. */
function hostPath() {
  if (process.env.ZGC_RUNTIME_HOST) return process.env.ZGC_RUNTIME_HOST;
  const name = `zgc-runtime-host.${platformName()}`;
  const local = path.join(__dirname, '..', name);
  if (fs.existsSync(local)) return local;
  // The installed package: the loader of the addon resolves the platform package the same way.
  try {
    return require.resolve(`zgc-runtime-${platformName()}/${name}`);
  } catch {
    throw new ZgcError(
      'ERR_ZGC_NATIVE_MISSING',
      `isolate: 'process' needs the host program ${name}, which is neither next to the package nor in zgc-runtime-${platformName()}; build it with: npx zgc-runtime build-from-source`,
    );
  }
}

/** The environment the calling code sees (in Jest, the test's own `process.env`), for a child. */
function environment() {
  return Object.entries(process.env).flatMap(([k, v]) => (v === undefined || k.includes('=') ? [] : [`${k}=${v}`]));
}

function positive(what, value) {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !(value > 0) || value === Infinity) {
    const unit = what.endsWith('Mb') ? '' : ' of milliseconds';
    throw new RangeError(`${what} must be a positive number${unit}, got ${String(value)}`);
  }
  return value;
}

/** The isolation options of load() and createPool(), checked. */
function isolationOptions(options, where) {
  const isolate = options.isolate === undefined ? 'none' : options.isolate;
  if (isolate !== 'none' && isolate !== 'process') throw new TypeError(`${where} option isolate must be 'none' or 'process', got ${JSON.stringify(isolate)}`);
  // The addon has isolation only where it was built with it: Linux (memfd, pidfd, the parent-death signal).
  if (isolate === 'process' && !native.hasIsolation()) {
    throw new ZgcError(
      'ERR_ZGC_INSTANCE_START',
      `${where} option isolate: 'process' runs on Linux only, and this is ${platformName()} (${hostName()}): leave isolate out to run in-process (see docs/isolation.md)`,
    );
  }
  const timeoutMs = positive('option timeoutMs', options.timeoutMs);
  const maxMemoryMb = positive('option maxMemoryMb', options.maxMemoryMb);
  const startTimeoutMs = positive('option startTimeoutMs', options.startTimeoutMs);
  if (isolate === 'none') {
    for (const [key, value] of [['timeoutMs', timeoutMs], ['maxMemoryMb', maxMemoryMb], ['startTimeoutMs', startTimeoutMs]]) {
      if (value !== undefined) {
        throw new TypeError(`${where} option ${key} needs isolate: 'process': an in-process run cannot be stopped or capped midway (see docs/isolation.md)`);
      }
    }
  }
  return { isolate, timeoutMs, maxMemoryMb, startTimeoutMs: startTimeoutMs || 30000 };
}

/**
 * The artifact at `path` run by host processes, as `openArtifact` gives one loaded here: its
 * first instance's process is started now, and describes it.
 */
function openIsolated(artifactPath, isolation) {
  const options = { host: hostPath(), env: environment(), startTimeoutMs: isolation.startTimeoutMs, timeoutMs: isolation.timeoutMs, maxMemoryMb: isolation.maxMemoryMb };
  try {
    return { native: native.NativeArtifact.isolated(artifactPath, options), fromBytes: false, users: 0, isolated: true };
  } catch (err) {
    throw fromNative(err);
  }
}

module.exports = { hostPath, environment, positive, isolationOptions, openIsolated };
