//! Async runs off the caller's thread: a queue of staged runs per runtime (or per pool),
//! drained by one worker thread per instance. A worker that finds work runs it back to back
//! and hands the finished runs over in batches; it sleeps only when the queue is empty, so
//! the next run starts without waiting for JavaScript to settle the last one.
//!
//! What crosses to the caller's thread goes through a `Sink` (napi's threadsafe function in
//! the addon, a channel in the tests): finished runs, and requests for copies of bound storage
//! that only that thread may read. Everything a run may have displaced (an earlier binding,
//! perhaps a JavaScript array) goes back with it, to be dropped there.

use crate::error::{Error, Result};
use crate::instance::{Feed, OutputData};
use crate::offload::{Offload, Policy};
use crate::stats::Stats;
use crate::ffi::runtime::{BoundRegion, Temporary};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

mod worker;

pub use crate::lane::Core;

/// Whether a queue with `waiting` runs takes one more: up to `max_queue` wait beyond the runs
/// the `free` ones of its `instances` start at once. The rule of every queue, in-process or
/// isolated (whose queue JavaScript keeps, and asks here).
pub fn admit(waiting: usize, instances: usize, free: usize, max_queue: usize) -> Result<()> {
    if waiting >= max_queue.saturating_add(free) {
        return Err(Error::QueueFull { waiting, instances, max_queue });
    }
    Ok(())
}

/// What a worker hands the caller's thread.
pub trait Sink<T>: Send + Sync + 'static {
    /// Finished runs. `Err` gives them back when that thread takes nothing more (its
    /// environment is going away); the worker then leaks them rather than drop JavaScript
    /// references on the wrong thread.
    fn deliver(&self, batch: Batch<T>) -> std::result::Result<(), Batch<T>>;
    /// Copies of the caller-owned storage bound to `core`, made on the caller's thread;
    /// blocks until it answers. `None` when it cannot.
    fn snapshot(&self, core: &Arc<Core>) -> Option<Result<Vec<Temporary>>>;
    /// The worker of `lane` is done for good.
    fn worker_exit(&self, lane: usize);
}

/// A run waiting in a queue: inputs staged at call time, and what settles it.
pub struct Job<T> {
    pub token: T,
    /// Non-zero for a run that can be cancelled by `Queue::cancel`.
    pub id: u64,
    /// Runs of a higher priority start before those of a lower one; equal ones in order.
    priority: i32,
    feeds: Vec<Feed<'static>>,
    f16_bits: bool,
    /// Its deadline on an isolated instance (milliseconds).
    timeout_ms: Option<f64>,
    /// An isolated run already sent to the process of lane `going` by an inline call
    /// (`Queue::resume`): that lane's worker waits for it rather than starting one.
    going: Option<usize>,
    /// Copies of caller-owned storage made at the call, for a run that started at once.
    temporary: Option<Vec<Temporary>>,
    submitted: Instant,
    /// It found a worker idle and nothing ahead of it: its wait is the cost of a hop.
    found_idle: bool,
}

/// A finished run.
pub struct Done<T> {
    pub token: T,
    pub result: Result<Vec<OutputData>>,
    /// The instance it ran on, whose `settled` the caller's thread calls.
    pub core: Option<Arc<Core>>,
    pub queue_wait: Duration,
    pub compute: Duration,
    submitted: Instant,
    found_idle: bool,
}

impl<T> Done<T> {
    /// Time beyond the run itself from the call to `now` (when JavaScript takes it), for a run
    /// that found its worker idle: the hop the offload policy weighs.
    pub fn hop(&self, now: Instant) -> Option<Duration> {
        self.found_idle.then(|| now.saturating_duration_since(self.submitted).saturating_sub(self.compute))
    }
}

/// Runs finished by one worker, handed over together.
pub struct Batch<T> {
    pub done: Vec<Done<T>>,
    /// Regions the runs displaced (a JavaScript array among them, perhaps): dropped on the
    /// JavaScript thread.
    pub displaced: Vec<Box<dyn BoundRegion>>,
    /// Instances a closed queue held for its last runs: dropped on the caller's thread too.
    pub pinned: Vec<Arc<Core>>,
}

impl<T> Default for Batch<T> {
    fn default() -> Batch<T> {
        Batch { done: Vec::new(), displaced: Vec::new(), pinned: Vec::new() }
    }
}

/// Finished runs are handed over when the queue runs dry, after any run this long, and at
/// least this often while it does not, so that a long stream of runs still settles promptly.
pub const BATCH_TIME: Duration = Duration::from_millis(1);
pub const BATCH_RUNS: usize = 256;

/// How long an idle worker watches for the next run before it sleeps.
pub const SPIN: Duration = Duration::from_micros(200);

/// The part of a queue that inline runs (on the caller's thread) share with it.
pub struct Shared {
    pub policy: Policy,
    pub stats: Mutex<Stats>,
    /// Runs waiting, mirrored from the queue so that an inline run checks it without a lock.
    waiting: AtomicUsize,
}

impl Shared {
    /// Whether a run may go inline now without overtaking one already queued.
    pub fn nothing_waiting(&self) -> bool {
        self.waiting.load(Ordering::Acquire) == 0
    }

    pub fn record_inline(&self, ok: bool, compute: Duration) -> bool {
        self.stats.lock().unwrap_or_else(|p| p.into_inner()).record(ok, Duration::ZERO, compute);
        self.policy.record_inline(compute)
    }
}

/// Whose runs a queue holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// One runtime's `runAsync`: its runs count as pending on it from the call on.
    Runtime,
    /// A pool: a run counts as pending on the instance that takes it, from then on.
    Pool,
}

struct State<T> {
    jobs: VecDeque<Job<T>>,
    /// Workers running a job now.
    running: usize,
    /// New runs are refused; queued ones still run.
    stopped: bool,
    /// New runs are refused, queued ones were given back, workers end.
    closed: bool,
    started: bool,
    /// Workers started. They end only once the queue is closed, so until then these are the
    /// threads that take its runs.
    workers: usize,
    /// The instances, held by the queue after `close` while runs it reported in flight have
    /// not been taken by a worker: a run the owner accepted as starting must still find them.
    pinned: Vec<Arc<Core>>,
    /// Runs left going waiting for their lane's worker (only it may take them).
    going: usize,
}

impl<T> State<T> {
    /// Instances running a run: taken by their worker, or left going by an inline call.
    fn busy(&self) -> usize {
        self.running + self.going
    }

    /// Runs waiting for an instance (a run left going is running, not waiting).
    fn waiting(&self) -> usize {
        self.jobs.len() - self.going
    }
}

pub struct Queue<T> {
    state: Mutex<State<T>>,
    wake: Condvar,
    lanes: Vec<Weak<Core>>,
    owner: Owner,
    max_queue: usize,
    /// Set with `State::closed`, for spinning workers that hold no lock.
    closing: AtomicBool,
    pub shared: Arc<Shared>,
}

/// How `Queue::figures` describes the queue now.
pub struct Figures {
    /// Runs started or about to start on a free instance.
    pub in_flight: usize,
    /// Runs waiting for an instance.
    pub waiting: usize,
}

impl<T: Send + 'static> Queue<T> {
    /// A queue over `lanes` (one worker each, started with the first run). At most `max_queue`
    /// runs wait for a busy instance; a run that finds one free never counts against it.
    pub fn new(lanes: Vec<Weak<Core>>, owner: Owner, max_queue: usize, mode: Offload) -> Arc<Queue<T>> {
        Arc::new(Queue {
            state: Mutex::new(State { jobs: VecDeque::new(), running: 0, stopped: false, closed: false, started: false, workers: 0, pinned: Vec::new(), going: 0 }),
            wake: Condvar::new(),
            lanes,
            owner,
            max_queue,
            closing: AtomicBool::new(false),
            shared: Arc::new(Shared { policy: Policy::new(mode), stats: Mutex::new(Stats::default()), waiting: AtomicUsize::new(0) }),
        })
    }

    fn state(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn lanes(&self) -> usize {
        self.lanes.len()
    }

    /// Queues a run, behind those of its `priority` or higher. `Err` gives the token back with
    /// the reason: closed, or the queue is full. `temporary`: copies of caller-owned
    /// storage, made for a run that starts now.
    #[allow(clippy::too_many_arguments)]
    pub fn submit(
        self: &Arc<Self>,
        token: T,
        id: u64,
        priority: i32,
        feeds: Vec<Feed<'static>>,
        f16_bits: bool,
        timeout_ms: Option<f64>,
        temporary: Option<Vec<Temporary>>,
        sink: &Arc<dyn Sink<T>>,
    ) -> std::result::Result<(), (Error, T)> {
        if let Some(failure) = self.all_failed() {
            return Err((failure, token));
        }
        let mut st = self.state();
        if st.closed || st.stopped {
            return Err((Error::Closed, token));
        }
        let free = self.lanes.len().saturating_sub(st.busy());
        if let Err(e) = admit(st.waiting(), self.lanes.len(), free, self.max_queue) {
            return Err((e, token));
        }
        if self.owner == Owner::Runtime {
            if let Some(core) = self.lanes.first().and_then(Weak::upgrade) {
                core.pending.fetch_add(1, Ordering::AcqRel);
            }
        }
        let found_idle = st.jobs.is_empty() && free > 0;
        let job = Job { token, id, priority, feeds, f16_bits, timeout_ms, going: None, temporary, submitted: Instant::now(), found_idle };
        // Most runs share one priority: a push at the back, with no search.
        match st.jobs.back() {
            // Compared by method, not operator: its only mutant (the guard always true) is equivalent.
            Some(last) if priority.gt(&last.priority) => {
                let at = st.jobs.iter().position(|j| j.priority < priority).unwrap_or(st.jobs.len());
                st.jobs.insert(at, job);
            }
            _ => st.jobs.push_back(job),
        }
        self.shared.waiting.store(st.jobs.len(), Ordering::Release);
        self.start_workers(&mut st, sink);
        drop(st);
        self.wake.notify_one();
        Ok(())
    }

    /// Hands the worker of `lane` the isolated run an inline call left going on it
    /// (`Run::run_within`) to wait for, ahead of anything queued (nothing was: the call ran
    /// inline). `Err` gives the token back once the queue is closed.
    pub fn resume(self: &Arc<Self>, token: T, id: u64, f16_bits: bool, lane: usize, sink: &Arc<dyn Sink<T>>) -> std::result::Result<(), (Error, T)> {
        let mut st = self.state();
        if st.closed {
            return Err((Error::Closed, token));
        }
        // Pending on its instance from now: no sync call takes it while its run goes.
        if let Some(core) = self.lanes.get(lane).and_then(Weak::upgrade) {
            core.pending.fetch_add(1, Ordering::AcqRel);
        }
        let job = Job { token, id, priority: i32::MAX, feeds: Vec::new(), f16_bits, timeout_ms: None, going: Some(lane), temporary: None, submitted: Instant::now(), found_idle: false };
        st.jobs.push_front(job);
        st.going += 1;
        self.shared.waiting.store(st.jobs.len(), Ordering::Release);
        self.start_workers(&mut st, sink);
        drop(st);
        // Only that lane's worker takes it, whichever one wakes.
        self.wake.notify_all();
        Ok(())
    }

    /// The next job the worker of `lane` may take: any but a run left going on another lane.
    fn take(st: &mut State<T>, lane: usize) -> Option<Job<T>> {
        if st.going == 0 {
            return st.jobs.pop_front();
        }
        let at = st.jobs.iter().position(|j| j.going.is_none_or(|l| l == lane))?;
        let job = st.jobs.remove(at)?;
        if job.going.is_some() {
            st.going -= 1;
        }
        Some(job)
    }

    fn start_workers(self: &Arc<Self>, st: &mut State<T>, sink: &Arc<dyn Sink<T>>) {
        if !st.started {
            st.started = true;
            for lane in 0..self.lanes.len() {
                let (queue, worker_sink) = (self.clone(), sink.clone());
                let spawned = std::thread::Builder::new().name("zgc-run".into()).spawn(move || queue.work(lane, worker_sink));
                if spawned.is_ok() {
                    st.workers += 1;
                } else {
                    // No thread for this lane: its share of runs goes to the others, or is
                    // rejected by close(); the sink is told, as if it had ended.
                    sink.worker_exit(lane);
                }
            }
        }
    }

    /// Every instance was given up (isolated ones that would not start again): the first's error.
    fn all_failed(&self) -> Option<Error> {
        let mut first = None;
        for lane in &self.lanes {
            match lane.upgrade().and_then(|core| core.failure()) {
                Some(e) => {
                    first.get_or_insert(e);
                }
                None => return None,
            }
        }
        first
    }

    /// Aborts run `id` if it is running (an isolated instance's process is killed for it);
    /// whether it was.
    pub fn abort_running(&self, id: u64) -> bool {
        if id == 0 {
            return false;
        }
        // A run an inline call left going waits here for its worker, and runs meanwhile.
        let going = self.state().jobs.iter().find(|j| j.id == id).and_then(|j| j.going);
        if let Some(lane) = going {
            return self.lanes.get(lane).and_then(Weak::upgrade).is_some_and(|core| core.abort(id, true));
        }
        self.lanes.iter().filter_map(Weak::upgrade).any(|core| core.abort(id, false))
    }

    /// Takes back a run that has not started; `None` once it has (or never was here).
    pub fn cancel(&self, id: u64) -> Option<Job<T>> {
        let mut st = self.state();
        // A run left going is running: only an abort stops it.
        let at = st.jobs.iter().position(|j| j.id == id && j.going.is_none())?;
        let job = st.jobs.remove(at);
        self.shared.waiting.store(st.jobs.len(), Ordering::Release);
        drop(st);
        if let Some(job) = &job {
            self.unpend(job);
        }
        job
    }

    /// Refuses new runs; queued ones still run (a pool draining before it closes).
    pub fn stop(&self) {
        self.state().stopped = true;
    }

    /// Refuses new runs and gives back every run that is waiting for an instance; workers
    /// finish the run they are in and the runs `figures` counted as starting on a free
    /// instance (those were reported in flight), hand them over, and end.
    pub fn close(&self) -> Vec<Job<T>> {
        let mut st = self.state();
        st.closed = true;
        self.closing.store(true, Ordering::Release);
        let starting = st.jobs.len().min(st.workers.saturating_sub(st.running));
        if starting > 0 {
            st.pinned = self.lanes.iter().filter_map(Weak::upgrade).collect();
        }
        let jobs: Vec<Job<T>> = st.jobs.drain(starting..).collect();
        self.shared.waiting.store(st.jobs.len(), Ordering::Release);
        drop(st);
        self.wake.notify_all();
        for job in &jobs {
            self.unpend(job);
        }
        jobs
    }

    /// A run that will never reach a worker no longer counts as pending on its runtime.
    fn unpend(&self, _job: &Job<T>) {
        if self.owner == Owner::Runtime {
            if let Some(core) = self.lanes.first().and_then(Weak::upgrade) {
                core.settled();
            }
        }
    }

    pub fn closed(&self) -> bool {
        self.state().closed
    }

    pub fn figures(&self) -> Figures {
        let st = self.state();
        let free = self.lanes.len().saturating_sub(st.busy());
        let starting = st.waiting().min(free);
        Figures { in_flight: st.busy() + starting, waiting: st.waiting() - starting }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    struct NoSink;
    impl Sink<u32> for NoSink {
        fn deliver(&self, _batch: Batch<u32>) -> std::result::Result<(), Batch<u32>> {
            Ok(())
        }
        fn snapshot(&self, _core: &Arc<Core>) -> Option<Result<Vec<Temporary>>> {
            None
        }
        fn worker_exit(&self, _lane: usize) {}
    }

    /// Records, for each run delivered, how many runs the queue still counted in flight.
    /// Per batch handed over: its runs, and the runs the queue still counted (in flight or waiting).
    struct Watching(std::sync::OnceLock<Weak<Queue<u32>>>, Mutex<Vec<(usize, usize)>>);
    impl Sink<u32> for Watching {
        fn deliver(&self, batch: Batch<u32>) -> std::result::Result<(), Batch<u32>> {
            let queue = self.0.get().and_then(Weak::upgrade).unwrap();
            let f = queue.figures();
            self.1.lock().unwrap().push((batch.done.len(), f.in_flight + f.waiting));
            Ok(())
        }
        fn snapshot(&self, _core: &Arc<Core>) -> Option<Result<Vec<Temporary>>> {
            None
        }
        fn worker_exit(&self, _lane: usize) {}
    }

    #[test]
    fn a_run_is_out_of_flight_before_its_answer_is_handed_over() {
        // One instance (a lane whose core is gone: each run ends at once, Closed). A batch is
        // handed over straight after its last run, while the worker still holds the queue's
        // attention: the case where a caller who had awaited every run read 1 in flight. How
        // the runs split into batches depends on the machine's speed (BATCH_TIME); at every
        // hand-over the queue counts exactly the runs not handed over yet, whatever the split.
        let queue: Arc<Queue<u32>> = Queue::new(vec![Weak::new()], Owner::Pool, usize::MAX, Offload::Always);
        let watching = Arc::new(Watching(std::sync::OnceLock::new(), Mutex::new(Vec::new())));
        watching.0.set(Arc::downgrade(&queue)).unwrap();
        let sink: Arc<dyn Sink<u32>> = watching.clone();
        queue.state().started = true; // no worker yet: the whole batch waits first
        for token in 0..BATCH_RUNS as u32 {
            queue.submit(token, token as u64, 0, Vec::new(), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
        }
        queue.state().workers = 1;
        let worker = {
            let (queue, sink) = (queue.clone(), sink.clone());
            std::thread::spawn(move || queue.work(0, sink))
        };
        let delivered = || watching.1.lock().unwrap().iter().map(|b| b.0).sum::<usize>();
        let until = Instant::now() + Duration::from_secs(10);
        while delivered() < BATCH_RUNS && Instant::now() < until {
            std::thread::yield_now();
        }
        let mut left = BATCH_RUNS;
        for &(runs, counted) in watching.1.lock().unwrap().iter() {
            left -= runs;
            assert_eq!(counted, left, "runs still counted as a batch of {runs} was handed over");
        }
        assert_eq!(left, 0);
        queue.close();
        worker.join().unwrap();
    }

    #[test]
    fn only_a_run_that_finds_the_queue_empty_and_an_instance_free_measures_a_hop() {
        // No workers start (`started`): the state is set by hand, as a worker would leave it.
        let queue: Arc<Queue<u32>> = Queue::new(vec![Weak::new()], Owner::Pool, usize::MAX, Offload::Always);
        queue.state().started = true;
        let sink: Arc<dyn Sink<u32>> = Arc::new(NoSink);
        let idle = |queue: &Arc<Queue<u32>>, token| {
            queue.submit(token, 0, 0, Vec::new(), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
            queue.state().jobs.pop_back().unwrap().found_idle
        };
        assert!(idle(&queue, 1), "empty queue, free instance");
        queue.state().running = 1;
        assert!(!idle(&queue, 2), "empty queue, but the only instance is busy");
        queue.state().running = 0;
        queue.submit(3, 0, 0, Vec::new(), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
        assert!(!idle(&queue, 4), "a free instance, but a run is waiting ahead");
    }

    #[test]
    fn a_run_waits_behind_those_of_its_priority_or_higher_and_ahead_of_lower_ones() {
        // No workers start (`started`): the queue's order is read as a worker would take it.
        let queue: Arc<Queue<u32>> = Queue::new(vec![Weak::new()], Owner::Pool, usize::MAX, Offload::Always);
        queue.state().started = true;
        let sink: Arc<dyn Sink<u32>> = Arc::new(NoSink);
        for (token, priority) in [(1, 0), (2, 0), (3, 5), (4, -1), (5, 5), (6, 0), (7, 9), (8, -1)] {
            queue.submit(token, 0, priority, Vec::new(), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
        }
        let order: Vec<u32> = queue.state().jobs.iter().map(|j| j.token).collect();
        assert_eq!(order, vec![7, 3, 5, 1, 2, 6, 4, 8]);
        queue.state().jobs.clear();
    }

    #[test]
    fn inline_runs_count_in_the_stats_and_the_policy() {
        let shared = Shared { policy: Policy::new(Offload::Never), stats: Mutex::new(Stats::default()), waiting: AtomicUsize::new(0) };
        assert!(shared.nothing_waiting());
        assert!(shared.record_inline(true, 3 * MS));
        assert!(shared.record_inline(false, MS));
        let stats = shared.stats.lock().unwrap();
        assert_eq!((stats.completed, stats.failed), (1, 1));
        assert_eq!(stats.queue_wait_percentiles(&[100.0]), vec![Some(0)]);
        assert_eq!(stats.compute_percentiles(&[100.0]), vec![Some(3_000_000)]);
        assert_eq!(shared.policy.inline_runs(), 2);
        shared.waiting.store(1, Ordering::Release);
        assert!(!shared.nothing_waiting());
        let auto = Shared { policy: Policy::new(Offload::Auto), stats: Mutex::new(Stats::default()), waiting: AtomicUsize::new(0) };
        assert!(!auto.record_inline(true, 5 * MS), "a 5 ms inline run sends the next away");
    }

    #[test]
    fn a_hop_is_what_a_run_that_found_its_worker_idle_waited_beyond_its_compute() {
        let submitted = Instant::now();
        let done = |found_idle| Done { token: (), result: Ok(Vec::new()), core: None, queue_wait: MS, compute: 3 * MS, submitted, found_idle };
        let later = submitted + 10 * MS;
        assert_eq!(done(true).hop(later), Some(7 * MS));
        assert_eq!(done(false).hop(later), None);
        assert_eq!(done(true).hop(submitted), Some(Duration::ZERO), "never negative");
    }
}
