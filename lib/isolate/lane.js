'use strict';

// One isolated instance (a Lane): its host process, the runs handed to it, the inputs it must
// be given again when it starts again, and its own reads and writes of the shared region.

const { NativeIsolate, NativeStats } = require('../native');
const { ZgcError, fromNative } = require('../errors');
const { OUTPUT_ARRAYS, STORAGE_ARRAYS } = require('../describe');
const { f16Values } = require('../numbers');
const { PROTOCOL } = require('./protocol');
const { hostPath, environment } = require('./options');

const { run: RUN, set: SET, storage: STORAGE, done: DONE, timeout: TIMEOUT, memory: MEMORY, markValues: MARK_VALUES, doneWord: DONE_WORD } = PROTOCOL;

/** Failed starts in a row after which an instance gives up, and the waits between them. */
const START_ATTEMPTS = 5;
const BACKOFF_MS = [10, 50, 250, 1000];
/** How long the JavaScript thread watches for a short run before it hands the wait over. */
const MAX_SPIN_US = 60;
/** Runs shorter than this (smoothed) are waited for on the JavaScript thread, for this long at most per turn. */
const SPIN_BELOW_MS = 0.1;
/** Inputs copied into the region by JavaScript when they come as the dtype's own array, whole. */
const FAST_INPUTS = { f32: Float32Array, f16: Uint16Array, i8: Int8Array };
const NATIVE_OUTPUT_BYTES = 65536;
/** A run that has taken this long on an instance has the runs handed behind it taken back. */
const RECLAIM_MS = 1;
/** Sync calls other than runs (set, storage) are memcpys in the child; this bounds a stuck one. */
const CALL_TIMEOUT_MS = 30000;

/** What the instances of one runtime or pool count together. */
class Counters {
  constructor() {
    Object.assign(this, { completed: 0, failed: 0, crashes: 0, restarts: 0, timeouts: 0, memoryKills: 0, aborts: 0, startFailures: 0 });
    /** Latencies, in the core's stats as in-process runs' are. */
    this.latencies = new NativeStats();
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
    const frames = this.native.frameLayout().map(([status, marks, ...slots]) => ({
      status,
      marks,
      inputs: this.sources.map((src, i) => {
        const Class = FAST_INPUTS[src.dtype];
        return Class && src.binding !== 'embedded' ? new Class(this.region, slots[2 * i], src.logicalCount) : null;
      }),
      outputs: this.description.outputs.map((o, j) => new (o.dtype === 'f16' ? Uint16Array : OUTPUT_ARRAYS[o.dtype])(this.region, slots[2 * (n + j)], o.elementCount)),
    }));
    this.fast = { frames, tags: this.sources.map((src) => (FAST_INPUTS[src.dtype] ? FAST_INPUTS[src.dtype].name : null)) };
  }

  frameOf(seq) {
    return this.fast.frames[this.native.frameOf(seq)];
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
      view.byteLength > NATIVE_OUTPUT_BYTES ? this.native.output(seq, j, f16Bits) : this.description.outputs[j].dtype === 'f16' && !f16Bits ? f16Values(view) : view.slice(),
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
    this.counters.latencies.record(code === DONE && !job.aborted, job.handed - job.submitted, computeMs);
    if (job.timing !== undefined) {
      job.timing.queueWaitMs = job.handed - job.submitted;
      job.timing.computeMs = computeMs;
    }
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

module.exports = { Lane, Counters, RUN };
