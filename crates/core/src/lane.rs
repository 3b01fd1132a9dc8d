//! One instance as the lane of a queue (`executor`): sync calls, inline runs and its worker share it.

use crate::error::{Error, Result};
use crate::instance::Instance;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

/// One runtime instance, as sync calls, inline runs and its worker share it.
pub struct Core {
    pub(crate) instance: Mutex<Instance>,
    /// Async runs of this instance queued or running. Sync calls are refused while any is.
    pub(crate) pending: AtomicUsize,
    /// Whether caller-owned storage is bound: then every async run needs a copy of it,
    /// made on the caller's thread when the run starts.
    pub(crate) caller_storage: AtomicBool,
}

impl Core {
    pub fn new(instance: Instance) -> Arc<Core> {
        Arc::new(Core { instance: Mutex::new(instance), pending: AtomicUsize::new(0), caller_storage: AtomicBool::new(false) })
    }

    /// The instance for a synchronous call: refused while async runs are pending or running.
    pub fn lock(&self) -> Result<MutexGuard<'_, Instance>> {
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
    pub fn lock_unchecked(&self) -> MutexGuard<'_, Instance> {
        match self.instance.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            // Only a worker holds it, and a worker waiting for this holds nothing.
            Err(TryLockError::WouldBlock) => self.lock_wait(),
        }
    }

    pub(crate) fn lock_wait(&self) -> MutexGuard<'_, Instance> {
        self.instance.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Called after anything that changes bindings, on the caller's thread.
    pub fn note_bindings(&self, instance: &Instance) {
        self.caller_storage.store(instance.has_caller_storage(), Ordering::Release);
    }

    /// On the caller's thread, when a finished run of this instance is settled.
    pub fn settled(&self) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
    }
}
