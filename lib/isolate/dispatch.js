'use strict';

// The queue of an isolated runtime or pool: runs wait here and are handed to a lane (an
// instance) only when it can start them, so a death never fails or repeats a waiting run.

const { ZgcError, fromNative } = require('../errors');
const { admit } = require('../native');
const { positive } = require('./options');
const { priorityOf } = require('../options');

/** How long one turn of the event loop watches the running lanes for short runs. */
const DRIVE_MS = 1;

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
    try {
      admit(this.queue.length, this.lanes.length, free, this.maxQueue);
    } catch (err) {
      throw fromNative(err);
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
    // Behind the runs of its priority or higher, ahead of lower ones.
    const last = this.queue[this.queue.length - 1];
    if (last === undefined || last.priority >= job.priority) this.queue.push(job);
    else this.queue.splice(this.queue.findIndex((j) => j.priority < job.priority), 0, job);
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

/** Submits a run through `dispatch`; `owner` makes its tensors. */
function submitRun(owner, dispatch, inputs, options, defaults, timing = undefined) {
  const signal = options ? options.signal : undefined;
  if (signal !== undefined && !(signal instanceof AbortSignal)) throw new TypeError('option signal must be an AbortSignal');
  if (signal && signal.aborted) throw signal.reason;
  const timeoutMs = options && options.timeoutMs !== undefined ? positive('option timeoutMs', options.timeoutMs) : defaults.timeoutMs;
  const priority = priorityOf('pool.run()', options);
  const { entries, given } = owner.entries(inputs);
  return new Promise((resolve, reject) => {
    const job = { entries, given, timeoutMs, signal, priority, timing, resolve, reject, owner, submitted: performance.now(), lane: null, aborted: false, cleanup: null };
    if (signal) {
      const onAbort = () => {
        if (dispatch.cancel(job)) reject(signal.reason);
        else if (job.lane) {
          const at = job.lane.inflight.findIndex((entry) => entry.job === job);
          if (at < 0) return;
          job.aborted = true;
          // Running: the child is killed, and its death settles the run with the reason.
          // Handed over behind another, or already finished in the child (not yet collected):
          // its result is dropped when it is collected, and the run behind it is not killed.
          if (at === 0) job.lane.native.killUnlessDone(job.lane.inflight[0].seq);
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

module.exports = { Dispatch, submitRun };
