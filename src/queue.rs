//! The JavaScript-thread side of an async-run queue (`executor::Queue`): hands staged runs in,
//! and settles their promises from the batches its workers send back through one threadsafe
//! function. Shared by a runtime's own `runAsync` queue and a pool's.

use crate::errors::{error_value, Code};
use zgc::error::{Error, Result};
use zgc::executor::{Batch, Core, Owner, Queue, Shared, Sink};
use zgc::instance::Feed;
use zgc::offload::Offload;
use crate::js;
use zgc::ffi::runtime::Temporary;
use crate::tsfn::{Deferred, Tsfn};
use napi::sys;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::mpsc::{sync_channel, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Weak};
use std::time::Instant;

/// What workers send to the JavaScript thread.
pub enum Message {
    Batch(Batch<Deferred>),
    /// Copies of the JavaScript-owned storage bound to `core`, for a run about to start.
    Snapshot { core: Arc<Core>, reply: SyncSender<Result<Vec<Temporary>>> },
}

struct NodeSink(Tsfn<Message>);

impl Sink<Deferred> for NodeSink {
    fn deliver(&self, batch: Batch<Deferred>) -> std::result::Result<(), Batch<Deferred>> {
        self.0.send(Message::Batch(batch)).map_err(|m| match m {
            Message::Batch(b) => b,
            Message::Snapshot { .. } => unreachable!("a batch was sent"),
        })
    }

    fn snapshot(&self, core: &Arc<Core>) -> Option<Result<Vec<Temporary>>> {
        let (reply, answer) = sync_channel(1);
        self.0.send(Message::Snapshot { core: core.clone(), reply }).ok()?;
        // A message sent just before the environment went away is never answered (nor
        // dropped): stop waiting once the gate is closed.
        loop {
            match answer.recv_timeout(std::time::Duration::from_millis(20)) {
                Ok(copies) => return Some(copies),
                Err(RecvTimeoutError::Timeout) if self.0.open() => continue,
                Err(_) => return None,
            }
        }
    }

    fn worker_exit(&self, _lane: usize) {
        self.0.release();
    }
}

/// One queue as the JavaScript thread sees it.
pub struct Lanes {
    pub queue: Arc<Queue<Deferred>>,
    /// Made with the first run: the threadsafe function, which the JavaScript side holds one
    /// count of (and each worker one) until the queue is closed and settled.
    sink: RefCell<Option<Arc<NodeSink>>>,
    /// Runs handed in and not settled yet: while any is, the event loop is kept alive.
    outstanding: Cell<usize>,
    /// The JavaScript side gave up its count: the function may be gone.
    released: Cell<bool>,
    /// Promises of `when_settled`, resolved when nothing is outstanding.
    settled_waiters: RefCell<Vec<Deferred>>,
}

impl Lanes {
    pub fn new(lanes: Vec<Weak<Core>>, owner: Owner, max_queue: usize, mode: Offload) -> Rc<Lanes> {
        Rc::new(Lanes {
            queue: Queue::new(lanes, owner, max_queue, mode),
            sink: RefCell::new(None),
            outstanding: Cell::new(0),
            released: Cell::new(false),
            settled_waiters: RefCell::new(Vec::new()),
        })
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.queue.shared
    }

    fn sink(self: &Rc<Self>, env: sys::napi_env) -> napi::Result<Arc<NodeSink>, Code> {
        if let Some(sink) = self.sink.borrow().as_ref() {
            return Ok(sink.clone());
        }
        let lanes = self.clone();
        let handler = Box::new(move |env: sys::napi_env, message: Message| lanes.receive(env, message));
        let tsfn = Tsfn::create(env, 1 + self.queue.lanes(), handler)
            .map_err(|status| napi::Error::new(Code::of("ERR_ZGC_NAPI"), format!("cannot create a threadsafe function (status {status})")))?;
        let sink = Arc::new(NodeSink(tsfn));
        *self.sink.borrow_mut() = Some(sink.clone());
        Ok(sink)
    }

    /// Queues a run and returns its promise. `temporary`: copies of JavaScript-owned storage
    /// already made for a run that starts now.
    #[allow(clippy::too_many_arguments)]
    pub fn submit(self: &Rc<Self>, env: sys::napi_env, feeds: Vec<Feed<'static>>, f16_bits: bool, id: u64, priority: i32, timeout_ms: Option<f64>, temporary: Option<Vec<Temporary>>) -> napi::Result<sys::napi_value, Code> {
        self.promise(env, |queue, deferred, sink| queue.submit(deferred, id, priority, feeds, f16_bits, timeout_ms, temporary, sink))
    }

    /// The promise of the isolated run an inline call left going on `lane` (see
    /// `Queue::resume`).
    pub fn resume(self: &Rc<Self>, env: sys::napi_env, f16_bits: bool, id: u64, lane: usize) -> napi::Result<sys::napi_value, Code> {
        self.promise(env, |queue, deferred, sink| queue.resume(deferred, id, f16_bits, lane, sink))
    }

    /// A promise that `hand` gives the queue to settle: kept count of (and the event loop alive
    /// for) once the queue took it, rejected now if it did not.
    fn promise(
        self: &Rc<Self>,
        env: sys::napi_env,
        hand: impl FnOnce(&Arc<Queue<Deferred>>, Deferred, &Arc<dyn Sink<Deferred>>) -> std::result::Result<(), (Error, Deferred)>,
    ) -> napi::Result<sys::napi_value, Code> {
        let (deferred, promise) = new_promise(env)?;
        let sink = self.sink(env)?;
        let dyn_sink: Arc<dyn Sink<Deferred>> = sink.clone();
        match hand(&self.queue, deferred, &dyn_sink) {
            Ok(()) => {
                if self.outstanding.get() == 0 {
                    sink.0.keep_loop(env, true);
                }
                self.outstanding.set(self.outstanding.get() + 1);
            }
            Err((e, deferred)) => deferred.reject(env, error_value(env, &e)),
        }
        Ok(promise)
    }

    /// Rejects the queued run `id` with `reason` if it has not started; one an isolated
    /// instance is running is aborted (its process killed; it rejects ERR_ZGC_ABORTED).
    pub fn cancel(&self, env: sys::napi_env, id: u64, reason: sys::napi_value) -> bool {
        match self.queue.cancel(id) {
            Some(job) => {
                job.token.reject(env, reason);
                self.settled_one(env);
                true
            }
            None => {
                self.queue.abort_running(id);
                false
            }
        }
    }

    /// Refuses new runs and rejects queued ones with ERR_ZGC_CLOSED; runs in flight finish.
    pub fn close(&self, env: sys::napi_env) {
        for job in self.queue.close() {
            job.token.reject(env, error_value(env, &Error::Closed));
            self.settled_one(env);
        }
        self.release_if_done(env);
    }

    /// Refuses new runs; those handed in still run and settle.
    pub fn stop(&self) {
        self.queue.stop();
    }

    /// A promise resolved once every run handed in has settled.
    pub fn when_settled(&self, env: sys::napi_env) -> napi::Result<sys::napi_value, Code> {
        let (deferred, promise) = new_promise(env)?;
        if self.outstanding.get() == 0 {
            deferred.resolve(env, undefined(env));
        } else {
            self.settled_waiters.borrow_mut().push(deferred);
        }
        Ok(promise)
    }

    /// The owner was collected without close(): end the workers (nothing can be pending,
    /// since a pending run's promise keeps the owner reachable) and give up the JS count.
    pub fn abandon(&self) {
        for job in self.queue.close() {
            std::mem::forget(job); // no JavaScript thread to settle it on
        }
        if !self.released.replace(true) {
            if let Some(sink) = self.sink.borrow().as_ref() {
                sink.0.release();
            }
        }
    }

    fn settled_one(&self, env: sys::napi_env) {
        let left = self.outstanding.get() - 1;
        self.outstanding.set(left);
        if left == 0 {
            if let Some(sink) = self.sink.borrow().as_ref() {
                if !self.released.get() {
                    sink.0.keep_loop(env, false);
                }
            }
            self.release_if_done(env);
            for waiter in self.settled_waiters.take() {
                waiter.resolve(env, undefined(env));
            }
        }
    }

    /// Once closed and settled, the JavaScript side gives up its count of the function.
    fn release_if_done(&self, _env: sys::napi_env) {
        if self.outstanding.get() == 0 && self.queue.closed() && !self.released.get() {
            self.released.set(true);
            if let Some(sink) = self.sink.borrow().as_ref() {
                sink.0.release();
            }
        }
    }

    /// On the JavaScript thread, for every message the workers send.
    fn receive(&self, env: sys::napi_env, message: Message) {
        match message {
            Message::Snapshot { core, reply } => {
                // The worker waits for this and holds no lock meanwhile.
                let copies = core.lock_unchecked().snapshot_caller_storage();
                let _ = reply.send(copies);
            }
            Message::Batch(batch) => {
                let now = Instant::now();
                let shared = self.shared().clone();
                {
                    let mut stats = shared.stats.lock().unwrap_or_else(|p| p.into_inner());
                    for done in &batch.done {
                        stats.record(done.result.is_ok(), done.queue_wait, done.compute);
                        shared.policy.record_offloaded(done.compute, done.hop(now));
                    }
                }
                for done in batch.done {
                    if let Some(core) = &done.core {
                        core.settled();
                    }
                    match done.result {
                        Ok(outputs) => match outputs_value(env, outputs) {
                            Ok(value) => {
                                // The run's own times, for whoever traces it (serve's spans).
                                js::set_number(env, value, c"queueWaitMs", done.queue_wait.as_secs_f64() * 1e3);
                                js::set_number(env, value, c"computeMs", done.compute.as_secs_f64() * 1e3);
                                done.token.resolve(env, value)
                            }
                            Err(e) => done.token.reject(env, error_value(env, &Error::Value { name: "outputs".into(), detail: e.reason.clone() })),
                        },
                        Err(e) => done.token.reject(env, error_value(env, &e)),
                    }
                    // `done.core` drops here, on this thread: if close() let go first, the
                    // instance (and any JavaScript array bound to it) is released now.
                    self.settled_one(env);
                }
                drop(batch.displaced);
                drop(batch.pinned);
            }
        }
    }
}

impl Drop for Lanes {
    fn drop(&mut self) {
        // Only reached once the function is finalised (its handler held a share), or when it
        // was never made.
        let _ = self.queue.close();
    }
}

/// A run's outputs as a JavaScript array of TypedArrays.
fn outputs_value(env: sys::napi_env, outputs: Vec<zgc::instance::OutputData>) -> napi::Result<sys::napi_value> {
    let mut array = std::ptr::null_mut();
    // NAPI calls on the JS thread with out-pointers to locals.
    if napi_ok(js::create_array(env, outputs.len(), &mut array)) {
        for (i, data) in outputs.into_iter().enumerate() {
            let value = js::output_value(env, data)?;
            if !napi_ok(js::set_element(env, array, i as u32, value)) {
                return Err(napi::Error::from_reason("cannot fill the outputs array"));
            }
        }
        Ok(array)
    } else {
        Err(napi::Error::from_reason("cannot create the outputs array"))
    }
}

fn new_promise(env: sys::napi_env) -> napi::Result<(Deferred, sys::napi_value), Code> {
    Deferred::new(env).map_err(|s| napi::Error::new(Code::of("ERR_ZGC_NAPI"), format!("cannot create a promise (status {s})")))
}

fn undefined(env: sys::napi_env) -> sys::napi_value {
    js::undefined(env)
}

fn napi_ok(status: sys::napi_status) -> bool {
    status == sys::Status::napi_ok
}
