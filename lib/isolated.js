'use strict';

// `isolate: 'process'`: each instance lives in a host child process (src/isolate). Tensors
// cross through a shared region; a crash, a timeout or a memory cap fails the one run the
// child was executing, and the instance starts again. This module keeps the queue: a run is
// handed to a child only when it starts, so a death never fails or repeats a waiting run.

const fs = require('node:fs');
const path = require('node:path');
const { NativeIsolate } = require('./native');
const { ZgcError, fromNative } = require('./errors');
const { toTypedArray, forSource } = require('./values');
const { platformName } = require('./platform');

const RUN = 1;
const SET = 2;
const STORAGE = 3;
const DONE = 0;
const EXITED = 1;
const TIMEOUT = 2;
const MEMORY = 3;

/** Failed starts in a row after which an instance gives up, and the waits between them. */
const START_ATTEMPTS = 5;
const BACKOFF_MS = [10, 50, 250, 1000];
/** How long the JavaScript thread watches for a short run before it hands the wait over. */
const MAX_SPIN_US = 60;
/** Runs shorter than this (smoothed) are waited for on the JavaScript thread, for this long at most per turn. */
const SPIN_BELOW_MS = 0.1;
const DRIVE_MS = 1;
/** Sync calls other than runs (set, storage) are memcpys in the child; this bounds a stuck one. */
const CALL_TIMEOUT_MS = 30000;

const STORAGE_ARRAYS = { f32: Float32Array, f16: Uint16Array, i8: Int8Array, bool: Uint8Array };
const OUTPUT_ARRAYS = { f32: Float32Array, i8: Int8Array, bool: Uint8Array };
const HISTOGRAM_BOUNDS_MS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000];

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

function positive(what, value, { integer = false } = {}) {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !(value > 0) || (integer && !Number.isInteger(value)) || value === Infinity) {
    throw new RangeError(`${what} must be a positive ${integer ? 'integer' : 'number'} of milliseconds, got ${String(value)}`.replace(' of milliseconds', what.endsWith('Mb') ? '' : ' of milliseconds'));
  }
  return value;
}

/** The isolation options of load() and createPool(), checked. */
function isolationOptions(options, where) {
  const isolate = options.isolate === undefined ? 'none' : options.isolate;
  if (isolate !== 'none' && isolate !== 'process') throw new TypeError(`${where} option isolate must be 'none' or 'process', got ${JSON.stringify(isolate)}`);
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

/** Latencies as `stats()` reports them in-process: recent percentiles and cumulative histograms. */
class Latencies {
  constructor() {
    this.ring = [];
    this.next = 0;
    this.counts = new Array(HISTOGRAM_BOUNDS_MS.length + 1).fill(0);
    this.sum = 0;
  }

  add(ms) {
    if (this.ring.length < 4096) this.ring.push(ms);
    else this.ring[this.next] = ms;
    this.next = (this.next + 1) % 4096;
    let bucket = HISTOGRAM_BOUNDS_MS.findIndex((b) => ms <= b);
    if (bucket < 0) bucket = HISTOGRAM_BOUNDS_MS.length;
    this.counts[bucket]++;
    this.sum += ms;
  }

  percentiles() {
    const sorted = [...this.ring].sort((a, b) => a - b);
    const at = (q) => (sorted.length === 0 ? null : sorted[Math.min(sorted.length, Math.max(1, Math.ceil((q / 100) * sorted.length))) - 1]);
    return { p50: at(50), p90: at(90), p99: at(99) };
  }

  histogram() {
    return { boundsMs: HISTOGRAM_BOUNDS_MS, counts: [...this.counts], sumMs: this.sum, count: this.counts.reduce((a, b) => a + b, 0) };
  }
}

/** What the instances of one runtime or pool count together. */
class Counters {
  constructor() {
    Object.assign(this, { completed: 0, failed: 0, crashes: 0, restarts: 0, timeouts: 0, memoryKills: 0, aborts: 0, startFailures: 0 });
    this.queueWait = new Latencies();
    this.compute = new Latencies();
  }
}

/** One instance: its host child and what must be given again to a new one. */
class Lane {
  constructor(artifactPath, options, counters, index) {
    this.path = artifactPath;
    this.options = options;
    this.counters = counters;
    this.index = index;
    try {
      this.native = NativeIsolate.start(hostPath(), artifactPath, environment(), options.startTimeoutMs);
    } catch (err) {
      throw fromNative(err);
    }
    this.description = this.native.describe();
    this.sources = this.description.sources;
    this.hasState = this.sources.some((s) => s.kind === 'state');
    this.busy = false;
    this.recovering = false;
    this.failure = null;
    this.closed = false;
    /** Per source index: the values last set (replayed into a new child), storage() handed out, bind()s. */
    this.sets = new Map();
    this.storageViews = new Map();
    this.binds = new Map();
    this.region = null;
    this.spinUs = MAX_SPIN_US;
    /** The running job, its command number, and whether the waiter thread waits for it. */
    this.job = null;
    this.seq = 0;
    this.waiting = false;
    /** Recent run time (ms, smoothed): short runs are waited for by spinning. */
    this.computeMs = 0;
    this.onFree = () => {};
    this.onFailed = () => {};
    this.setup = null;
    this.facade = null;
  }

  get available() {
    return !this.busy && !this.recovering && this.failure === null && !this.closed;
  }

  /** Throws unless a synchronous call may use the instance now. */
  ready() {
    if (this.closed) throw new ZgcError('ERR_ZGC_CLOSED', 'runtime is closed');
    if (this.failure) throw this.failure;
    if (this.busy || this.recovering) throw new ZgcError('ERR_ZGC_BUSY', 'runtime is busy with another call; await it before calling synchronously');
  }

  /** Sends `cmd` and waits for it on this thread; a child that dies meanwhile is replaced. */
  callSync(cmd, arg, timeoutMs, recover = true) {
    let seq;
    try {
      seq = this.native.begin(cmd, arg);
    } catch (err) {
      throw fromNative(err);
    }
    const code = this.native.poll(seq, this.spinUs) ? DONE : this.native.waitSync(seq, timeoutMs || 0, this.capBytes());
    if (code !== DONE) {
      const err = this.deathError(code, timeoutMs);
      if (recover) this.recoverNow();
      throw err;
    }
    try {
      this.native.answer();
    } catch (err) {
      throw fromNative(err);
    }
  }

  capBytes() {
    return this.options.maxMemoryMb ? this.options.maxMemoryMb * 1024 * 1024 : 0;
  }

  write(index, array, asStorage = false) {
    try {
      this.native.write(index, array, asStorage);
    } catch (err) {
      this.native.clearMarks();
      throw fromNative(err);
    }
  }

  set(index, array) {
    this.ready();
    this.write(index, array);
    this.callSync(SET, 0, CALL_TIMEOUT_MS);
    // STATE is the artifact's own: a new child starts without it (see docs/isolation.md).
    if (this.sources[index].kind !== 'state') this.sets.set(index, array.slice());
  }

  bind(index, array) {
    this.ready();
    // Checked now, as in-process; copied into the child at each run's start.
    this.write(index, array, true);
    this.native.clearMarks();
    this.binds.set(index, array);
    this.storageViews.delete(index);
  }

  storage(index) {
    this.ready();
    const source = this.sources[index];
    if (source.binding !== 'bound') {
      // The same refusal as in-process (a storage array that no binding takes).
      this.write(index, new STORAGE_ARRAYS[source.dtype](source.elementCount), true);
    }
    if (this.region === null) this.region = this.native.region();
    if (this.region === null) throw new ZgcError('ERR_ZGC_NAPI', 'this host forbids external buffers, which storage() of an isolated runtime needs');
    const [offset, bytes] = this.native.storageSlot(index);
    const Class = STORAGE_ARRAYS[source.dtype];
    const view = new Class(this.region, offset, bytes / Class.BYTES_PER_ELEMENT);
    view.fill(0);
    this.callSync(STORAGE, index, CALL_TIMEOUT_MS);
    this.storageViews.set(index, view);
    this.binds.delete(index);
    this.sets.delete(index);
    return view;
  }

  /** Writes a run's inputs (and bound arrays) into the region. */
  writeInputs(entries) {
    for (const [index, array] of this.binds) this.write(index, array, true);
    for (const [index, array] of entries) this.write(index, array);
  }

  /** The error of a run the child did not finish. */
  deathError(code, timeoutMs, job) {
    const exit = this.native.lastExit();
    const pidText = this.pid ? ` (pid ${this.pid})` : '';
    const stderr = exit.stderr;
    if (job && job.aborted) {
      this.counters.aborts++;
      return job.signal.reason;
    }
    if (code === TIMEOUT) {
      this.counters.timeouts++;
      return new ZgcError('ERR_ZGC_TIMEOUT', `run on the isolated instance of ${this.path} did not finish within timeoutMs ${timeoutMs}; its process was killed and the instance restarts`, { timeoutMs, stderr });
    }
    if (code === MEMORY) {
      this.counters.memoryKills++;
      return new ZgcError(
        'ERR_ZGC_MEMORY_LIMIT',
        `the isolated instance of ${this.path} ${exit.description}, over maxMemoryMb ${this.options.maxMemoryMb}; its process was killed and the instance restarts`,
        { maxMemoryMb: this.options.maxMemoryMb, residentBytes: exit.residentBytes, stderr },
      );
    }
    this.counters.crashes++;
    const tail = stderr ? `; its stderr ends: ${stderr.trim().split('\n').slice(-3).join(' | ')}` : '';
    return new ZgcError(
      'ERR_ZGC_INSTANCE_CRASHED',
      `the isolated instance of ${this.path}${pidText} ${exit.description} during this run; the run failed and the instance restarts${this.hasState ? ' (its STATE is lost)' : ''}${tail}`,
      { signal: exit.signal === undefined ? null : exit.signal, exitCode: exit.exitCode === undefined ? null : exit.exitCode, stderr },
    );
  }

  /** A new child for a dead one, now; on failure, again later with a backoff. */
  recoverNow() {
    this.recovering = true;
    this.attempt = 0;
    this.tryRestart();
  }

  tryRestart() {
    if (this.closed) return;
    try {
      this.native.respawn(environment(), this.options.startTimeoutMs);
      this.replay();
    } catch (err) {
      this.counters.startFailures++;
      this.attempt++;
      if (this.attempt >= START_ATTEMPTS) {
        this.recovering = false;
        this.failure = new ZgcError(
          'ERR_ZGC_INSTANCE_FAILED',
          `the isolated instance of ${this.path} could not be restarted after ${this.attempt} attempts; the last said: ${err.message}`,
          { cause: err },
        );
        this.onFailed(this);
        return;
      }
      const timer = setTimeout(() => this.tryRestart(), BACKOFF_MS[this.attempt - 1]);
      timer.unref();
      return;
    }
    this.counters.restarts++;
    this.recovering = false;
    this.onFree(this);
  }

  /** Gives a new child what the dead one had been given (not its STATE). */
  replay() {
    this.recovering = false;
    this.busy = false;
    try {
      for (const [index, array] of this.sets) {
        this.write(index, array);
        this.callSync(SET, 0, CALL_TIMEOUT_MS, false);
      }
      for (const index of this.storageViews.keys()) this.callSync(STORAGE, index, CALL_TIMEOUT_MS, false);
      if (this.setup) this.setup(this.facade, this.index);
    } finally {
      this.recovering = true;
    }
  }

  get pid() {
    const pid = this.native.pid;
    return pid === null || pid === undefined ? undefined : pid;
  }

  /** Whether the JavaScript thread may spin on this instance's runs: they are short. */
  get spinnable() {
    return this.computeMs < SPIN_BELOW_MS;
  }

  /** Hands `job` to the child (the lane is free); false when its inputs were refused. */
  start(job) {
    this.busy = true;
    job.lane = this;
    job.started = performance.now();
    try {
      this.writeInputs(job.entries);
      this.seq = this.native.begin(RUN, 0);
    } catch (err) {
      this.busy = false;
      this.counters.failed++;
      job.reject(fromNative(err));
      return false;
    }
    this.job = job;
    return true;
  }

  /** Leaves the wait for the running job to the waiter thread; `then` runs once it settled. */
  awaitAsync(then) {
    const job = this.job;
    this.waiting = true;
    const left = job.timeoutMs ? Math.max(1, job.timeoutMs - (performance.now() - job.started)) : 0;
    this.native.wait(this.seq, left, this.capBytes()).then((code) => {
      this.waiting = false;
      this.native.idle();
      this.finish(code);
      then();
    });
  }

  /** Settles the running job by how the wait for it ended. */
  finish(code) {
    const job = this.job;
    this.job = null;
    const computeMs = performance.now() - job.started;
    this.computeMs = this.computeMs * 0.8 + computeMs * 0.2;
    this.counters.queueWait.add(job.started - job.submitted);
    this.counters.compute.add(computeMs);
    if (code === DONE) {
      let tensors;
      try {
        this.native.answer();
        tensors = job.owner.tensorsOf(this.native.outputs(job.owner.f16Bits));
      } catch (err) {
        this.counters.failed++;
        this.busy = false;
        job.reject(fromNative(err));
        return;
      }
      this.counters.completed++;
      this.busy = false;
      job.resolve(tensors);
      return;
    }
    this.counters.failed++;
    const err = this.deathError(code, job.timeoutMs, job);
    job.reject(err);
    this.busy = false;
    this.recoverNow();
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.native.close();
  }
}

/**
 * Runs waiting for a free instance, handed to one as soon as it is free. The JavaScript
 * thread drives the instances in turns: it starts what it can, then watches the running ones
 * for up to DRIVE_MS while their runs are short (a child answers in microseconds, far
 * sooner than a trip through another thread), and leaves the rest to the waiter threads.
 * Runs submitted in one turn of the event loop start together, so a pool keeps all its
 * children busy.
 */
class Dispatch {
  constructor(lanes, maxQueue) {
    this.lanes = lanes;
    this.maxQueue = maxQueue;
    this.queue = [];
    this.stopped = false;
    this.drained = [];
    this.scheduled = false;
    this.driving = false;
    this.drive = this.drive.bind(this);
    for (const lane of lanes) {
      lane.onFree = () => this.schedule();
      lane.onFailed = () => this.failed();
    }
  }

  get inFlight() {
    return this.lanes.filter((l) => l.busy).length;
  }

  submit(job) {
    if (this.stopped) throw new ZgcError('ERR_ZGC_CLOSED', 'runtime is closed');
    const live = this.lanes.filter((l) => l.failure === null);
    if (live.length === 0) throw this.lanes[0].failure;
    const free = this.lanes.filter((l) => l.available).length;
    if (this.queue.length >= this.maxQueue + free) {
      throw new ZgcError('ERR_ZGC_QUEUE_FULL', `queue is full: ${this.queue.length} runs wait for ${this.lanes.length} instance(s) (maxQueue ${this.maxQueue})`);
    }
    if (this.queue.length === 0) {
      const lane = this.lanes.find((l) => l.available);
      if (lane) {
        // Its inputs go into the shared region now: the copy runAsync promises, made once.
        lane.start(job);
        this.schedule();
        return;
      }
    }
    // Waiting: its inputs are copied now, as runAsync promises.
    job.entries = job.entries.map(([index, array]) => [index, array === job.given.get(index) ? array.slice() : array]);
    this.queue.push(job);
    this.schedule();
  }

  schedule() {
    if (!this.scheduled) {
      this.scheduled = true;
      queueMicrotask(this.drive);
    }
  }

  cancel(job) {
    const at = this.queue.indexOf(job);
    if (at < 0) return false;
    this.queue.splice(at, 1);
    this.settle();
    return true;
  }

  drive() {
    this.scheduled = false;
    if (this.driving) return;
    this.driving = true;
    try {
      const until = performance.now() + DRIVE_MS;
      for (;;) {
        while (this.queue.length > 0) {
          const lane = this.lanes.find((l) => l.available);
          if (!lane) break;
          lane.start(this.queue.shift());
        }
        let watching = false;
        let progressed = false;
        for (const lane of this.lanes) {
          if (!lane.busy || lane.waiting || lane.job === null) continue;
          if (lane.native.done(lane.seq)) {
            lane.finish(DONE);
            progressed = true;
          } else if (lane.spinnable && performance.now() < until) {
            watching = true;
          } else {
            lane.awaitAsync(this.drive);
          }
        }
        if (!progressed && !watching) break;
      }
    } finally {
      this.driving = false;
    }
    this.settle();
  }

  failed() {
    if (this.lanes.every((l) => l.failure !== null)) {
      for (const job of this.queue.splice(0)) job.reject(this.lanes[0].failure);
    }
    this.settle();
  }

  /** Resolves `whenSettled` promises once nothing waits or runs. */
  settle() {
    if (this.queue.length === 0 && this.lanes.every((l) => !l.busy && !l.recovering)) {
      for (const resolve of this.drained.splice(0)) resolve();
    }
  }

  whenSettled() {
    return new Promise((resolve) => {
      this.drained.push(resolve);
      this.settle();
    });
  }
}

function infoOf(description) {
  const freeze = (list) => Object.freeze(list.map((item) => Object.freeze(item)));
  return {
    path: description.path,
    abiVersion: description.abiVersion,
    fingerprint: BigInt(description.fingerprintHex),
    fingerprintHex: description.fingerprintHex,
    runtimeSize: description.runtimeSize,
    runtimeAlignment: description.runtimeAlignment,
    mutableBytes: description.mutableBytes,
    internal: description.sources,
    sources: freeze(
      description.sources.map((s) => ({
        key: s.key,
        name: s.name,
        kind: s.kind,
        binding: s.binding,
        dtype: s.dtype,
        shape: Object.freeze(s.shape),
        strides: Object.freeze(s.strides),
        offset: s.offset,
        elementCount: s.elementCount,
        byteCount: s.byteCount,
      })),
    ),
    outputs: freeze(description.outputs.map((o) => ({ dtype: o.dtype, shape: Object.freeze(o.shape), elementCount: o.elementCount, byteCount: o.byteCount }))),
  };
}

function inRealm(array, Class) {
  return array instanceof Class ? array : new Class(array.buffer, array.byteOffset, array.length);
}

/** What a runtime and a pool of isolated instances share: values in, tensors out. */
class Shape {
  constructor(description, f16) {
    this.info = infoOf(description);
    this.byName = new Map(description.sources.map((s, i) => [s.name, i]));
    this.f16Bits = f16 !== 'float32';
    this.float16 = f16 === 'float16';
    const f16Class = this.f16Bits ? Uint16Array : Float32Array;
    this.outputArrays = description.outputs.map((o) => (o.dtype === 'f16' ? f16Class : OUTPUT_ARRAYS[o.dtype]));
  }

  index(name) {
    const index = this.byName.get(name);
    if (index === undefined) {
      const known = [...this.byName.keys()].map((n) => JSON.stringify(n)).join(', ');
      throw new ZgcError('ERR_ZGC_UNKNOWN_SOURCE', `artifact has no source named ${JSON.stringify(String(name))} (its sources: ${known})`, { source: String(name) });
    }
    return index;
  }

  /** `[index, TypedArray]` per input, checked for names and kinds (the child checks the rest). */
  entries(inputs) {
    const given = new Map();
    if (inputs === undefined || inputs === null) return { entries: [], given };
    if (typeof inputs !== 'object') throw new TypeError(`run inputs must be an object of source names to values, got ${typeof inputs}`);
    const entries = Object.keys(inputs).map((name) => {
      const index = this.index(name);
      const array = toTypedArray(this.info.internal[index], inputs[name]);
      if (array === inputs[name]) given.set(index, array);
      return [index, array];
    });
    return { entries, given };
  }

  tensorsOf(arrays) {
    return arrays.map((array, i) => {
      const o = this.info.outputs[i];
      let data = inRealm(array, this.outputArrays[i]);
      if (o.dtype === 'f16' && this.float16) data = new globalThis.Float16Array(data.buffer, data.byteOffset, data.length);
      return { dtype: o.dtype, shape: o.shape, data };
    });
  }

  storageView(source, view) {
    return this.float16 && source.dtype === 'f16' ? new globalThis.Float16Array(view.buffer, view.byteOffset, view.length) : view;
  }
}

function statsOf(counters, dispatch, lanes) {
  return {
    completed: counters.completed,
    failed: counters.failed,
    queueDepth: dispatch.queue.length,
    inFlight: dispatch.inFlight,
    inline: 0,
    offloaded: counters.completed + counters.failed,
    offload: 'process',
    decision: 'process',
    queueWaitMs: counters.queueWait.percentiles(),
    computeMs: counters.compute.percentiles(),
    queueWaitHistogram: counters.queueWait.histogram(),
    computeHistogram: counters.compute.histogram(),
    estimatedComputeMs: null,
    estimatedHopMs: null,
    crashes: counters.crashes,
    restarts: counters.restarts,
    timeouts: counters.timeouts,
    memoryKills: counters.memoryKills,
    aborts: counters.aborts,
    startFailures: counters.startFailures,
    alive: lanes.filter((l) => l.failure === null && !l.closed && !l.recovering).length,
    pids: lanes.map((l) => (l.recovering || l.failure ? null : (l.pid ?? null))),
  };
}

/** Submits a run through `dispatch`; `owner` makes its tensors. */
function submitRun(owner, dispatch, inputs, options, defaults) {
  const signal = options ? options.signal : undefined;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('option signal must be an AbortSignal');
  if (signal && signal.aborted) throw signal.reason;
  const timeoutMs = options && options.timeoutMs !== undefined ? positive('option timeoutMs', options.timeoutMs) : defaults.timeoutMs;
  const { entries, given } = owner.entries(inputs);
  return new Promise((resolve, reject) => {
    const job = { entries, given, timeoutMs, signal, resolve, reject, owner, submitted: performance.now(), lane: null, aborted: false, cleanup: null };
    if (signal) {
      const onAbort = () => {
        if (dispatch.cancel(job)) reject(signal.reason);
        else if (job.lane && job.lane.busy) {
          // Running: the child is killed; its death settles the run with the reason.
          job.aborted = true;
          job.lane.native.kill();
        }
      };
      signal.addEventListener('abort', onAbort, { once: true });
      job.cleanup = () => signal.removeEventListener('abort', onAbort);
      const settle = (fn) => (v) => {
        signal.removeEventListener('abort', onAbort);
        fn(v);
      };
      job.resolve = settle(resolve);
      job.reject = settle(reject);
    }
    dispatch.submit(job);
  });
}

const dispose = Symbol.dispose || Symbol.for('nodejs.dispose');
const asyncDispose = Symbol.asyncDispose || Symbol.for('nodejs.asyncDispose');

/** A runtime whose instance lives in a child process: the API of `Runtime`. */
class IsolatedRuntime {
  #lane;
  #shape;
  #dispatch;
  #counters;
  #options;
  #closed = false;
  #pooled;

  /** @internal Use `load(path, { isolate: 'process' })`. */
  constructor(artifactPath, options, lane, pooled) {
    this.#options = options;
    this.#counters = lane ? lane.counters : new Counters();
    this.#lane = lane || new Lane(artifactPath, options, this.#counters, 0);
    this.#lane.facade = this;
    this.#shape = new Shape(this.#lane.description, options.f16);
    this.#pooled = Boolean(pooled);
    this.#dispatch = pooled ? null : new Dispatch([this.#lane], Infinity);
  }

  get path() { return this.#shape.info.path; }
  get abiVersion() { return this.#shape.info.abiVersion; }
  get fingerprint() { return this.#shape.info.fingerprint; }
  get fingerprintHex() { return this.#shape.info.fingerprintHex; }
  get runtimeSize() { return this.#shape.info.runtimeSize; }
  get runtimeAlignment() { return this.#shape.info.runtimeAlignment; }
  get mutableBytes() { return this.#shape.info.mutableBytes; }
  get sources() { return this.#shape.info.sources; }
  get outputs() { return this.#shape.info.outputs; }
  get closed() { return this.#closed; }
  get offload() { return { mode: this.#options.offload || 'auto', inline: false }; }
  /** `'process'`: this runtime's instance runs in a child process. */
  get isolate() { return 'process'; }
  /** The pid of the instance's process now (it changes when the instance restarts). */
  get pid() { return this.#lane.pid; }

  stats() {
    return statsOf(this.#counters, this.#dispatch || { queue: [], inFlight: this.#lane.busy ? 1 : 0 }, [this.#lane]);
  }

  #open() {
    if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'runtime is closed');
  }

  set(name, values) {
    this.#open();
    const index = this.#shape.index(name);
    this.#lane.set(index, toTypedArray(this.#shape.info.internal[index], values));
  }

  bind(name, storage) {
    this.#open();
    const index = this.#shape.index(name);
    const source = this.#shape.info.internal[index];
    if (!ArrayBuffer.isView(storage) || storage instanceof DataView) {
      throw new ZgcError('ERR_ZGC_DTYPE', `source ${JSON.stringify(source.name)} (${source.dtype}) binds a TypedArray of its physical storage, got ${storage === null ? 'null' : typeof storage}`, {
        source: source.name,
      });
    }
    this.#lane.bind(index, forSource(source, storage));
  }

  storage(name) {
    this.#open();
    const index = this.#shape.index(name);
    const source = this.#shape.info.internal[index];
    return this.#shape.storageView(source, this.#lane.storage(index));
  }

  /** Runs synchronously, blocking on the child (up to `timeoutMs`, after which it is killed). */
  run(inputs, options) {
    this.#open();
    let into;
    let timeoutMs = this.#options.timeoutMs;
    if (options !== undefined && options !== null) {
      if (typeof options !== 'object') throw new TypeError(`run() options must be an object, got ${typeof options}`);
      require('./options').refuseUnknownKeys('run()', options, ['into', 'timeoutMs']);
      into = options.into;
      if (options.timeoutMs !== undefined) timeoutMs = positive('option timeoutMs', options.timeoutMs);
      if (into !== undefined && (!Array.isArray(into) || into.length !== this.#shape.info.outputs.length)) {
        throw new TypeError(`run() option into must be an array of ${this.#shape.info.outputs.length} TypedArrays, one per output`);
      }
    }
    const lane = this.#lane;
    lane.ready();
    const { entries } = this.#shape.entries(inputs);
    lane.writeInputs(entries);
    const started = performance.now();
    try {
      lane.busy = true;
      try {
        lane.callSync(RUN, 0, timeoutMs);
      } finally {
        lane.busy = false;
      }
    } catch (err) {
      this.#counters.failed++;
      throw err;
    }
    this.#counters.compute.add(performance.now() - started);
    this.#counters.completed++;
    const tensors = this.#shape.tensorsOf(lane.native.outputs(this.#shape.f16Bits));
    if (into === undefined) return tensors;
    return tensors.map((t, i) => {
      const target = into[i];
      if (!ArrayBuffer.isView(target) || target.length !== t.data.length) throw new TypeError(`run() option into[${i}] must be a TypedArray of ${t.data.length} elements`);
      target.set(t.data);
      return Object.freeze({ dtype: t.dtype, shape: t.shape, data: target });
    });
  }

  runAsync(inputs, options) {
    try {
      this.#open();
      if (options !== undefined && options !== null) require('./options').refuseUnknownKeys('runAsync()', options, ['signal', 'timeoutMs']);
      if (this.#pooled) throw new ZgcError('ERR_ZGC_BUSY', 'a pool runtime runs through pool.run()');
      return submitRun(this.#shape, this.#dispatch, inputs, options, this.#options);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  output(index) {
    this.#open();
    if (!Number.isInteger(index) || index < 0 || index >= this.#shape.info.outputs.length) {
      throw new RangeError(`output index ${String(index)} is out of range: the artifact has ${this.#shape.info.outputs.length} outputs`);
    }
    return this.#shape.tensorsOf([this.#lane.native.output(index, this.#shape.f16Bits)])[0];
  }

  /** Ends the child. Runs waiting reject with ERR_ZGC_CLOSED; one in flight ends with it. */
  close() {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#dispatch) {
      this.#dispatch.stopped = true;
      for (const job of this.#dispatch.queue.splice(0)) job.reject(new ZgcError('ERR_ZGC_CLOSED', 'runtime is closed'));
    }
    const lane = this.#lane;
    if (lane.busy) {
      // Let the run in flight finish, then end the child.
      const previous = lane.onFree;
      lane.onFree = () => {
        previous(lane);
        lane.close();
      };
      lane.recovering = false;
    } else {
      lane.close();
    }
  }

  [dispose]() {
    this.close();
  }
}

/** A pool of isolated instances: the API of `Pool`. */
class IsolatedPool {
  #lanes;
  #runtimes;
  #dispatch;
  #counters = new Counters();
  #shape;
  #options;
  #closed = false;
  #done = null;

  constructor(artifactPath, size, maxQueue, setup, options) {
    this.#options = options;
    this.#lanes = [];
    this.#runtimes = [];
    try {
      for (let i = 0; i < size; i++) {
        const lane = new Lane(artifactPath, options, this.#counters, i);
        this.#lanes.push(lane);
        const rt = new IsolatedRuntime(artifactPath, options, lane, true);
        this.#runtimes.push(rt);
        if (setup) setup(rt, i);
        lane.setup = setup || null;
      }
    } catch (err) {
      for (const lane of this.#lanes) lane.close();
      throw err;
    }
    this.#shape = new Shape(this.#lanes[0].description, options.f16);
    this.#dispatch = new Dispatch(this.#lanes, maxQueue);
  }

  get size() { return this.#lanes.length; }
  get pending() { return this.#dispatch.queue.length; }
  get inFlight() { return this.#dispatch.inFlight; }
  get closed() { return this.#closed; }
  get runtimes() { return this.#runtimes; }
  get isolate() { return 'process'; }

  stats() {
    return statsOf(this.#counters, this.#dispatch, this.#lanes);
  }

  /** @internal The server's inline path (lib/pool.js): an isolated run never goes inline. */
  [Symbol.for('zgc.poolRunNow')]() {
    if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'pool is closed');
    return undefined;
  }

  run(inputs, options) {
    try {
      if (this.#closed) throw new ZgcError('ERR_ZGC_CLOSED', 'pool is closed');
      if (options !== undefined && options !== null) require('./options').refuseUnknownKeys('pool.run()', options, ['signal', 'timeoutMs']);
      return submitRun(this.#shape, this.#dispatch, inputs, options, this.#options);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Refuses new runs, lets queued and running ones finish, then ends every child. */
  close() {
    if (this.#done === null) {
      this.#closed = true;
      this.#dispatch.stopped = true;
      this.#done = this.#dispatch.whenSettled().then(() => {
        for (const lane of this.#lanes) lane.close();
      });
    }
    return this.#done;
  }

  [asyncDispose]() {
    return this.close();
  }
}

module.exports = { IsolatedRuntime, IsolatedPool, isolationOptions, hostPath };
