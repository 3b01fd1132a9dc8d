//! One instance as the lane of a queue (`executor`): sync calls, inline runs and its worker share it.

use crate::engine::Engine;
use crate::error::{Error, Result};
#[cfg(target_os = "linux")]
use crate::isolate::instance::Control;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

/// One runtime instance, as sync calls, inline runs and its worker share it.
pub struct Core {
    pub(crate) instance: Mutex<Engine>,
    /// An isolated instance's counts, state and abort, read without the lock.
    #[cfg(target_os = "linux")]
    control: Option<Arc<Control>>,
    /// The async run its worker is running now (its id; 0: none or not cancellable).
    running: AtomicU64,
    /// The next sync run's deadline on an isolated instance (f64 bits of milliseconds; 0: none).
    run_timeout: AtomicU64,
    /// Async runs of this instance queued or running. Sync calls are refused while any is.
    pub(crate) pending: AtomicUsize,
    /// Whether caller-owned storage is bound: then every async run needs a copy of it,
    /// made on the caller's thread when the run starts.
    pub(crate) caller_storage: AtomicBool,
}

impl Core {
    pub fn new(engine: Engine) -> Arc<Core> {
        #[cfg(target_os = "linux")]
        let control = match &engine {
            Engine::Isolated(i) => Some(i.control().clone()),
            Engine::Local(_) => None,
        };
        Arc::new(Core {
            instance: Mutex::new(engine),
            #[cfg(target_os = "linux")]
            control,
            running: AtomicU64::new(0),
            run_timeout: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            caller_storage: AtomicBool::new(false),
        })
    }

    /// Whether its instance runs in a host process (a run may then hang until its deadline).
    pub fn isolated(&self) -> bool {
        #[cfg(target_os = "linux")]
        return self.control.is_some();
        #[cfg(not(target_os = "linux"))]
        false
    }

    #[cfg(target_os = "linux")]
    pub fn control(&self) -> Option<&Arc<Control>> {
        self.control.as_ref()
    }

    /// An isolated instance given up for good: why.
    pub fn failure(&self) -> Option<Error> {
        #[cfg(target_os = "linux")]
        if let Some(c) = &self.control {
            return c.failure();
        }
        None
    }

    /// An isolated instance whose process is to start again: how long until it is due.
    pub fn restart_wait(&self) -> Option<std::time::Duration> {
        #[cfg(target_os = "linux")]
        if self.control.as_ref().is_some_and(|c| c.restarting()) {
            let mut engine = self.lock_wait();
            let isolated = engine.isolated()?;
            isolated.restart_if_due();
            return isolated.restart_due();
        }
        None
    }

    /// Sets the deadline of the next sync run (an isolated instance's `run({ timeoutMs })`).
    pub fn set_run_timeout(&self, timeout_ms: Option<f64>) {
        self.run_timeout.store(timeout_ms.filter(|ms| *ms > 0.0).map_or(0, f64::to_bits), Ordering::Release);
    }

    /// The next sync run's deadline, once.
    pub fn take_run_timeout(&self) -> Option<f64> {
        if self.run_timeout.load(Ordering::Relaxed) == 0 {
            return None;
        }
        match self.run_timeout.swap(0, Ordering::AcqRel) {
            0 => None,
            bits => Some(f64::from_bits(bits)),
        }
    }

    /// Its worker starts run `id` (0: none).
    pub(crate) fn started(&self, id: u64) {
        self.running.store(id, Ordering::Release);
    }

    /// Aborts run `id` if its worker is running it, or (`going`) if it is the run an inline
    /// call left going in its process: an isolated instance's process is killed for it
    /// (in-process, a started run cannot be stopped). Whether it was that run.
    pub fn abort(&self, id: u64, going: bool) -> bool {
        if id == 0 || !(going || self.running.load(Ordering::Acquire) == id) {
            return false;
        }
        #[cfg(target_os = "linux")]
        if let Some(c) = &self.control {
            c.abort();
            return true;
        }
        false
    }

    /// The instance for a synchronous call: refused while async runs are pending or running.
    pub fn lock(&self) -> Result<MutexGuard<'_, Engine>> {
        if self.pending() > 0 {
            return Err(Error::Busy);
        }
        match self.instance.try_lock() {
            Ok(guard) => Ok(guard),
            // A panic inside an earlier call left no broken invariant the instance relies on.
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(Error::Busy),
        }
    }

    /// The instance whatever is pending, for the caller's thread's part of an async run
    /// (a copy of bound storage while its worker waits): never blocks.
    pub fn lock_unchecked(&self) -> MutexGuard<'_, Engine> {
        match self.instance.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            // Only a worker holds it, and a worker waiting for this holds nothing.
            Err(TryLockError::WouldBlock) => self.lock_wait(),
        }
    }

    pub(crate) fn lock_wait(&self) -> MutexGuard<'_, Engine> {
        self.instance.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Called after anything that changes bindings, on the caller's thread.
    pub fn note_bindings(&self, instance: &Engine) {
        self.caller_storage.store(instance.has_caller_storage(), Ordering::Release);
    }

    /// On the caller's thread, when a finished run of this instance is settled.
    pub fn settled(&self) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }
}
