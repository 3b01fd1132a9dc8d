'use strict';

// `isolate: 'process'`: each instance lives in a host child process (crates/core/src/isolate). Tensors
// cross through a shared region; a crash, a timeout or a memory cap fails the one run the
// child was executing, and the instance starts again. This module keeps the queue: a run is
// handed to a child only when it starts, so a death never fails or repeats a waiting run.

const fs = require('node:fs');
const path = require('node:path');
const { NativeIsolate } = require('./native');
const { ZgcError, fromNative } = require('./errors');
const { toTypedArray, forSource } = require('./values');
const { platformName, hostName } = require('./platform');
const { OUTPUT_ARRAYS, STORAGE_ARRAYS, infoOf, asFloat16, inRealm } = require('./describe');

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
/** Inputs copied into the region by JavaScript when they come as the dtype's own array, whole. */
const FAST_INPUTS = { f32: Float32Array, f16: Uint16Array, i8: Int8Array };
const MARK_VALUES = 1;
const NATIVE_OUTPUT_BYTES = 65536;
/** A run that has taken this long on an instance has the runs handed behind it taken back. */
const RECLAIM_MS = 1;
const DONE_WORD = 64 / 4;
/** Sync calls other than runs (set, storage) are memcpys in the child; this bounds a stuck one. */
const CALL_TIMEOUT_MS = 30000;

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
  if (isolate === 'process' && NativeIsolate === undefined) {
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
    this.recovering = false;
    this.failure = null;
    this.closed = false;
    /** Per source index: the values last set (replayed into a new child), storage() handed out, bind()s. */
    this.sets = new Map();
    this.storageViews = new Map();
    this.binds = new Map();
    this.spinUs = MAX_SPIN_US;
    this.mapRegion();
    /** Runs handed to the child, oldest (the one it executes) first: `{ job, seq }`. */
    this.inflight = [];
    this.frames = this.native.frames;
    /** Whether the waiter thread waits for the oldest; when the last one finished; the last run's number. */
    this.waiting = false;
    this.lastDone = 0;
    this.lastSeq = 0;
    this.issued = 0;
    /** A sync call is in progress (the instance is the caller's until it returns). */
    this.calling = false;
    this.closeWhenIdle = false;
    this.onRequeue = () => {};
    /** Recent run time (ms, smoothed): short runs are waited for by spinning. */
    this.computeMs = 0;
    this.onFree = () => {};
    this.onFailed = () => {};
    this.setup = null;
    this.facade = null;
  }

  /**
   * Views of the shared region, so that a run's common inputs and its outputs are copied by
   * JavaScript itself (one typed-array copy each, no native call); the rest goes through the
   * native checks. Without external buffers (Electron), everything does.
   */
  mapRegion() {
    this.region = this.native.region();
    this.fast = null;
    if (this.region === null) return;
    this.u32 = new Uint32Array(this.region);
    const n = this.sources.length;
    const frames = this.native.frameLayout().map(([header, marks, ...slots]) => ({
      status: (header + 8) / 4,
      marks: marks / 4,
      inputs: this.sources.map((src, i) => {
        const Class = FAST_INPUTS[src.dtype];
        return Class && src.binding !== 'embedded' ? new Class(this.region, slots[2 * i], src.logicalCount) : null;
      }),
      outputs: this.description.outputs.map((o, j) => new (o.dtype === 'f16' ? Uint16Array : OUTPUT_ARRAYS[o.dtype])(this.region, slots[2 * (n + j)], o.elementCount)),
    }));
    this.fast = { frames, tags: this.sources.map((src) => (FAST_INPUTS[src.dtype] ? FAST_INPUTS[src.dtype].name : null)) };
  }

  frameOf(seq) {
    return this.fast.frames[(seq - 1) % this.fast.frames.length];
  }

  get busy() {
    return this.inflight.length > 0 || this.calling;
  }

  /** Commands the child has been given and not finished (taken-back ones included). */
  get outstanding() {
    return this.fast === null ? this.inflight.length : (this.issued - Atomics.load(this.u32, DONE_WORD)) >>> 0;
  }

  /** When the run the child executes now started. */
  get headStarted() {
    return Math.max(this.inflight[0].job.handed, this.lastDone);
  }

  /**
   * Whether it can take another run now: a free frame, and either idle or busy with short
   * runs (a run handed behind a long one would wait for it while another instance is free).
   */
  get available() {
    if (this.calling || this.recovering || this.failure !== null || this.closed) return false;
    if (this.inflight.length === 0) return this.outstanding < this.frames;
    // The next command's frame must be free of every run not collected yet (the oldest one
    // handed over bounds them) and of commands taken back that the child has not passed.
    const span = (this.issued + 1 - this.inflight[0].seq) >>> 0;
    return span < this.frames && this.outstanding < this.frames && this.spinnable && performance.now() - this.headStarted < RECLAIM_MS;
  }

  /** Takes back the runs handed over behind one that has run for RECLAIM_MS: they go to the queue again. */
  reclaimBehind() {
    if (this.inflight.length < 2 || performance.now() - this.headStarted < RECLAIM_MS) return;
    const back = [];
    for (let k = this.inflight.length - 1; k >= 1; k--) {
      if (this.native.reclaim(this.inflight[k].seq)) back.unshift(this.inflight.splice(k, 1)[0].job);
    }
    if (back.length > 0) this.onRequeue(back);
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
      this.issued = seq;
    } catch (err) {
      throw fromNative(err);
    }
    const code = this.native.poll(seq, this.spinUs) ? DONE : this.native.waitSync(seq, timeoutMs || 0, this.capBytes());
    if (code !== DONE) {
      const err = this.deathError(code, timeoutMs);
      if (recover) this.recoverNow();
      throw err;
    }
    this.lastSeq = seq;
    try {
      this.native.answer(seq);
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

  /** Writes a run's inputs (and bound arrays) into the frame of the next command. */
  writeInputs(entries) {
    for (const [index, array] of this.binds) this.write(index, array, true);
    const fast = this.fast;
    if (fast === null) {
      for (const [index, array] of entries) this.write(index, array);
      return;
    }
    const frame = this.frameOf(this.native.nextSeq);
    for (let k = 0; k < entries.length; k++) {
      const [index, array] = entries[k];
      const view = frame.inputs[index];
      if (view !== null && array.length === view.length && array[Symbol.toStringTag] === fast.tags[index]) {
        view.set(array);
        this.u32[frame.marks + index] = MARK_VALUES;
      } else {
        this.write(index, array);
      }
    }
  }

  /** Whether command `seq` is done (the counts wrap). */
  isDone(seq) {
    return this.fast === null ? this.native.done(seq) : ((Atomics.load(this.u32, DONE_WORD) - seq) | 0) >= 0;
  }

  /** Outputs of run `seq`: copies of its frame's slots (f16 decoded unless bits are asked for). */
  outputsOf(seq, f16Bits) {
    if (this.fast === null) return this.native.outputs(seq, f16Bits);
    const frame = this.frameOf(seq);
    if (this.u32[frame.status] !== 0) this.native.answer(seq);
    // Large outputs as the in-process runtime makes them (a native vector behind an external
    // buffer, which reuses freed pages); small ones copied here, without a native call.
    return frame.outputs.map((view, j) =>
      view.byteLength > NATIVE_OUTPUT_BYTES ? this.native.output(seq, j, f16Bits) : this.description.outputs[j].dtype === 'f16' && !f16Bits ? decodeF16(view) : view.slice(),
    );
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
      this.issued = 0;
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

  /** Hands `job` to the child (a frame is free); false when its inputs were refused. */
  start(job) {
    job.lane = this;
    job.handed = performance.now();
    if (this.inflight.length === 0) this.lastDone = job.handed;
    let seq;
    try {
      this.writeInputs(job.entries);
      seq = this.native.begin(RUN, 0);
      this.issued = seq;
    } catch (err) {
      this.native.clearMarks();
      this.counters.failed++;
      job.reject(fromNative(err));
      return false;
    }
    this.inflight.push({ job, seq });
    return true;
  }

  /** Settles every run the child has finished, oldest first; whether any was. */
  collect() {
    let any = false;
    while (this.inflight.length > 0 && this.isDone(this.inflight[0].seq)) {
      this.finish(DONE);
      any = true;
    }
    return any;
  }

  /** Leaves the wait for the oldest run to the waiter thread; `then` runs once it settled. */
  awaitAsync(then) {
    const { job, seq } = this.inflight[0];
    this.waiting = true;
    // The oldest run started when the one before it finished (or when it was handed over).
    const startedAt = Math.max(job.handed, this.lastDone);
    const left = job.timeoutMs ? Math.max(1, job.timeoutMs - (performance.now() - startedAt)) : 0;
    if (this.inflight.length > 1) {
      // Runs behind a long one go back to the queue if it is still running by then.
      const timer = setTimeout(() => {
        if (this.inflight[0] && this.inflight[0].seq === seq) this.reclaimBehind();
      }, RECLAIM_MS + 1);
      timer.unref();
    }
    this.native.wait(seq, left, this.capBytes()).then((code) => {
      this.waiting = false;
      this.native.idle();
      if (code === DONE) this.collect();
      else this.finish(code);
      then();
    });
  }

  /** Settles the oldest run by how the wait for it ended. */
  finish(code) {
    const { job, seq } = this.inflight.shift();
    const now = performance.now();
    const computeMs = now - Math.max(job.handed, this.lastDone);
    this.lastDone = now;
    this.computeMs = this.computeMs * 0.8 + computeMs * 0.2;
    this.counters.queueWait.add(job.handed - job.submitted);
    this.counters.compute.add(computeMs);
    if (code === DONE) {
      this.lastSeq = seq;
      if (job.aborted) {
        // Aborted after it was handed over, before it started: it ran, its result is dropped.
        this.counters.aborts++;
        this.counters.failed++;
        job.reject(job.signal.reason);
        return;
      }
      let tensors;
      try {
        tensors = job.owner.tensorsOf(this.outputsOf(seq, job.owner.f16Bits));
      } catch (err) {
        this.counters.failed++;
        job.reject(fromNative(err));
        return;
      }
      this.counters.completed++;
      job.resolve(tensors);
      return;
    }
    this.counters.failed++;
    job.reject(this.deathError(code, job.timeoutMs, job));
    // The runs handed over behind it never started: they go back to the queue, first.
    const behind = this.inflight.splice(0).map((entry) => entry.job);
    if (behind.length > 0) this.onRequeue(behind);
    this.recoverNow();
  }

  close() {
    if (this.closed) return;
    this.closed = true;
    this.native.close();
    // The mapping goes once no view of it is left (storage() views keep it, as they must).
    this.region = null;
    this.u32 = null;
    this.fast = null;
    this.storageViews.clear();
    this.binds.clear();
    this.sets.clear();
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
      lane.onRequeue = (jobs) => {
        if (this.stopped && lane.closeWhenIdle) {
          for (const job of jobs) job.reject(new ZgcError('ERR_ZGC_CLOSED', 'runtime is closed'));
          return;
        }
        this.queue.unshift(...jobs);
        this.schedule();
      };
    }
  }

  get inFlight() {
    return this.lanes.reduce((n, l) => n + l.inflight.length, 0);
  }

  submit(job) {
    if (this.stopped) throw new ZgcError('ERR_ZGC_CLOSED', 'runtime is closed');
    const live = this.lanes.filter((l) => l.failure === null);
    if (live.length === 0) throw this.lanes[0].failure;
    const free = this.lanes.filter((l) => l.inflight.length === 0 && l.available).length;
    if (this.queue.length >= this.maxQueue + free) {
      throw new ZgcError('ERR_ZGC_QUEUE_FULL', `queue is full: ${this.queue.length} runs wait for ${this.lanes.length} instance(s) (maxQueue ${this.maxQueue})`);
    }
    if (this.queue.length === 0) {
      const lane = this.lanes.find((l) => l.inflight.length === 0 && l.available);
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
        // Waiting runs to the instance with the fewest handed over (several per instance
        // run back to back in its process, without a wake-up between them).
        while (this.queue.length > 0) {
          let lane = null;
          for (const l of this.lanes) if (l.available && (lane === null || l.inflight.length < lane.inflight.length)) lane = l;
          if (lane === null) break;
          lane.start(this.queue.shift());
        }
        let watching = false;
        let progressed = false;
        for (const lane of this.lanes) {
          if (lane.inflight.length === 0 || lane.waiting) continue;
          if (lane.collect()) progressed = true;
          if (lane.inflight.length === 0 || lane.recovering) continue;
          lane.reclaimBehind();
          if (lane.spinnable && performance.now() < until) watching = true;
          else lane.awaitAsync(this.drive);
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
    for (const lane of this.lanes) if (lane.closeWhenIdle && lane.inflight.length === 0) lane.close();
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

let f16Table = null;

/** f16 bits to values, by a table of all 65,536 (made once). */
function decodeF16(bits) {
  if (f16Table === null) {
    f16Table = new Float32Array(65536);
    for (let b = 0; b < 65536; b++) {
      const e = (b >> 10) & 0x1f;
      const m = b & 0x3ff;
      const v = e === 0 ? m * 2 ** -24 : e === 31 ? (m ? NaN : Infinity) : (1 + m / 1024) * 2 ** (e - 15);
      f16Table[b] = b & 0x8000 ? -v : v;
    }
  }
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = f16Table[bits[i]];
  return out;
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
      if (o.dtype === 'f16' && this.float16) data = asFloat16(data);
      return { dtype: o.dtype, shape: o.shape, data };
    });
  }

  storageView(source, view) {
    return this.float16 && source.dtype === 'f16' ? asFloat16(view) : view;
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
        else if (job.lane) {
          const at = job.lane.inflight.findIndex((entry) => entry.job === job);
          if (at < 0) return;
          job.aborted = true;
          // Running: the child is killed, and its death settles the run with the reason.
          // Handed over behind another: its result is dropped when it is done.
          if (at === 0) job.lane.native.kill();
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
    return statsOf(this.#counters, this.#dispatch || { queue: [], inFlight: this.#lane.inflight.length }, [this.#lane]);
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
      lane.calling = true;
      try {
        lane.callSync(RUN, 0, timeoutMs);
      } finally {
        lane.calling = false;
      }
    } catch (err) {
      this.#counters.failed++;
      throw err;
    }
    this.#counters.compute.add(performance.now() - started);
    this.#counters.completed++;
    const tensors = this.#shape.tensorsOf(lane.outputsOf(lane.lastSeq, this.#shape.f16Bits));
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
    return this.#shape.tensorsOf([this.#lane.native.output(this.#lane.lastSeq, index, this.#shape.f16Bits)])[0];
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
    // Runs handed to the child finish first (as in-process, a started run is not cut off).
    if (lane.busy) lane.closeWhenIdle = true;
    else lane.close();
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
