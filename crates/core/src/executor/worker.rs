//! A queue's workers: one thread per instance, taking the next run as soon as its instance
//! is free, running runs back to back and handing the finished ones over in batches.

use super::*;
use crate::engine::Engine;
use crate::run::{Input, Run};

impl<T: Send + 'static> Queue<T> {
    /// One worker: runs jobs for the instance of `lane` until the queue is closed and empty.
    pub(super) fn work(self: Arc<Self>, lane: usize, sink: Arc<dyn Sink<T>>) {
        let mut batch = Batch::default();
        let mut first_done: Option<Instant> = None;
        let mut spun = false;
        let mut st = self.state();
        loop {
            if !st.jobs.is_empty() {
                if let Some(core) = self.lanes[lane].upgrade() {
                    // An isolated instance starting again takes no run until it has started;
                    // one given up takes none, and its worker leaves the others the queue.
                    if let Some(failure) = core.failure() {
                        st.workers -= 1;
                        if st.workers == 0 {
                            for job in st.jobs.drain(..).collect::<Vec<_>>() {
                                self.unpend(&job);
                                batch.done.push(Done { token: job.token, result: Err(failure.clone()), core: None, queue_wait: job.submitted.elapsed(), compute: Duration::ZERO, submitted: job.submitted, found_idle: false });
                            }
                            self.shared.waiting.store(0, Ordering::Release);
                        }
                        drop(st);
                        hand_over(&*sink, std::mem::take(&mut batch));
                        sink.worker_exit(lane);
                        return;
                    }
                    drop(st);
                    let wait = core.restart_wait();
                    drop(core);
                    if let Some(wait) = wait {
                        std::thread::sleep(wait.min(Duration::from_millis(10)));
                        st = self.state();
                        continue;
                    }
                    st = self.state();
                    if st.jobs.is_empty() {
                        continue;
                    }
                }
            }
            let Some(job) = Self::take(&mut st, lane) else {
                if !batch.done.is_empty() {
                    // Nothing left to run: hand over what is finished before sleeping.
                    drop(st);
                    hand_over(&*sink, std::mem::take(&mut batch));
                    first_done = None;
                    st = self.state();
                    continue;
                }
                if st.closed {
                    break;
                }
                // Only runs left going on other lanes wait: nothing to watch for.
                if !spun && st.jobs.is_empty() {
                    // Waking a sleeping thread costs tens of microseconds on a virtual
                    // machine; the next run of a stream usually comes sooner, so watch for it
                    // first (yielding, so that a busy JavaScript thread loses nothing).
                    drop(st);
                    self.spin_for_work();
                    spun = true;
                    st = self.state();
                    continue;
                }
                spun = false;
                st = self.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                continue;
            };
            st.running += 1;
            spun = false;
            self.shared.waiting.store(st.jobs.len(), Ordering::Release);
            // Taken under the lock, so that the pins of a closed queue go only once every run
            // it kept holds its instance; the last reference then ends on the JavaScript
            // thread, with the run's `Done`.
            let core = self.lanes[lane].upgrade();
            if st.jobs.is_empty() {
                batch.pinned.append(&mut st.pinned);
            }
            drop(st);

            // An isolated run may hang until its deadline: when its wait goes to sleep, the
            // runs finished before it go, rather than after it.
            let Batch { done: finished, displaced, .. } = &mut batch;
            let mut idle = || {
                if !finished.is_empty() {
                    hand_over(&*sink, Batch { done: std::mem::take(finished), displaced: Vec::new(), pinned: Vec::new() });
                }
            };
            let done = self.run(core, job, &*sink, displaced, &mut idle);
            if batch.done.is_empty() {
                first_done = None;
            }
            // No longer in flight before anyone can see its answer: a caller that has awaited
            // every run then reads in flight 0 (the worker did this after handing over, and a
            // quick reader saw 1). The lock is kept for the next job unless a batch goes now.
            st = self.state();
            st.running -= 1;
            first_done.get_or_insert_with(Instant::now);
            // A run as long as the batch time goes at once: the next may be as long, and the
            // finished ones would wait for it.
            let long = done.compute >= BATCH_TIME;
            batch.done.push(done);
            if long || batch.done.len() >= BATCH_RUNS || first_done.is_some_and(|t| t.elapsed() >= BATCH_TIME) {
                drop(st);
                hand_over(&*sink, std::mem::take(&mut batch));
                first_done = None;
                st = self.state();
            }
        }
        drop(st);
        sink.worker_exit(lane);
    }

    /// Watches for a queued run for up to `SPIN` before the worker sleeps (the caller then looks
    /// at the queue again, and sleeps if it is still empty).
    fn spin_for_work(&self) {
        let until = Instant::now() + SPIN;
        let mut turns = 0u32;
        while self.shared.waiting.load(Ordering::Acquire) == 0 && !self.closing.load(Ordering::Acquire) && Instant::now() < until {
            turns = turns.wrapping_add(1);
            if turns.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }

    fn run(&self, core: Option<Arc<Core>>, job: Job<T>, sink: &dyn Sink<T>, displaced: &mut Vec<Box<dyn BoundRegion>>, idle: &mut dyn FnMut()) -> Done<T> {
        let started = Instant::now();
        let queue_wait = started.saturating_duration_since(job.submitted);
        let result = match &core {
            None => Err(Error::Closed),
            Some(core) => {
                if self.owner == Owner::Pool && job.going.is_none() {
                    core.pending.fetch_add(1, Ordering::AcqRel);
                }
                let temporary = match job.temporary {
                    Some(copies) => Ok(copies),
                    // Its inputs went in with the inline call.
                    None if job.going.is_some() => Ok(Vec::new()),
                    None if core.caller_storage.load(Ordering::Acquire) => sink.snapshot(core).unwrap_or(Err(Error::Closed)),
                    None => Ok(Vec::new()),
                };
                temporary.and_then(|temporary| {
                    let mut engine = core.lock_wait();
                    core.started(job.id);
                    let done = if job.going.is_some() { engine.finish(job.f16_bits, idle) } else { run_staged(&mut engine, job.feeds, &temporary, job.f16_bits, job.timeout_ms, displaced, idle) };
                    core.started(0);
                    done
                })
            }
        };
        Done { token: job.token, result, core, queue_wait, compute: started.elapsed(), submitted: job.submitted, found_idle: job.found_idle }
    }
}

/// Applies staged inputs, runs with `temporary` standing in for caller-owned storage, and
/// copies the outputs out. Displaced regions are kept for the caller's thread.
/// Storage lent for the run (`Feed::Lend`) is bound for it alone: the instance's own binding
/// comes back after it, whether the run succeeded or not.
#[allow(clippy::too_many_arguments)]
fn run_staged(
    engine: &mut Engine,
    feeds: Vec<Feed<'static>>,
    temporary: &[Temporary],
    f16_bits: bool,
    timeout_ms: Option<f64>,
    displaced: &mut Vec<Box<dyn BoundRegion>>,
    idle: &mut dyn FnMut(),
) -> Result<Vec<OutputData>> {
    let mut run = Run::off_thread(engine, displaced).timeout(timeout_ms).idle(idle);
    for feed in feeds {
        run.input(feed.index(), Input::Staged(feed))?;
    }
    run.run_detached(temporary)?.read(f16_bits)
}

fn hand_over<T: 'static>(sink: &dyn Sink<T>, batch: Batch<T>) {
    if let Err(batch) = sink.deliver(batch) {
        // The caller's thread is gone: what the runs hold may include its references.
        std::mem::forget(batch);
    }
}
