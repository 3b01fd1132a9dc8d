//! A live runtime instance: caller storage in which `zgc_runtime_init` succeeded, the
//! storage bound to its BOUND sources, and the calls that take it. `deinit` runs exactly
//! once, on drop, and only for an instance whose `init` succeeded.

use super::library::ArtifactLibrary;
use super::memory::AlignedBuf;
use crate::error::{Error, Result};
use std::ffi::c_void;
use std::sync::Arc;

/// Memory lent to an artifact by `bind_source`.
///
/// # Safety
/// An implementor guarantees that `as_ptr()` is valid for reads and writes of `byte_len()`
/// bytes for as long as the value lives **and** `is_live()` last returned true. The
/// artifact reads it only inside `run`, which asks `is_live()` first.
pub unsafe trait BoundRegion: Send {
    fn as_ptr(&self) -> *mut u8;
    fn byte_len(&self) -> usize;
    /// False once the memory may have been freed or moved (a detached JS buffer).
    fn is_live(&mut self) -> bool;
}

// SAFETY: an `AlignedBuf` owns its allocation until it is dropped, and never moves it.
unsafe impl BoundRegion for AlignedBuf {
    fn as_ptr(&self) -> *mut u8 {
        AlignedBuf::as_ptr(self)
    }
    fn byte_len(&self) -> usize {
        self.len()
    }
    fn is_live(&mut self) -> bool {
        true
    }
}

pub struct LiveRuntime {
    // Field order matters only through `Drop::drop`, which deinitialises first.
    storage: AlignedBuf,
    bound: Vec<Option<Box<dyn BoundRegion>>>,
    library: Arc<ArtifactLibrary>,
}

impl LiveRuntime {
    /// Allocates `size` bytes aligned to `alignment` and initialises a runtime in them.
    /// `slots` is the number of sources (one binding slot each).
    pub fn init(library: Arc<ArtifactLibrary>, size: usize, alignment: usize, slots: usize) -> Result<LiveRuntime> {
        let mut storage = AlignedBuf::zeroed(size, alignment).ok_or_else(|| Error::OutOfMemory {
            what: "runtime storage".into(),
            bytes: size,
            alignment,
        })?;
        // SAFETY: `storage` is `size` writable bytes aligned as the artifact asked, and it
        // outlives the instance (owned by the returned value, freed after `deinit`).
        let status = unsafe { (library.api.init)(storage.as_bytes_mut().as_mut_ptr().cast::<c_void>(), size) };
        // On failure no LiveRuntime exists, so `deinit` is never called for this storage.
        crate::error::check(status, "zgc_runtime_init", String::new)?;
        Ok(LiveRuntime { storage, bound: (0..slots).map(|_| None).collect(), library })
    }

    fn rt(&self) -> *mut c_void {
        self.storage.as_ptr().cast::<c_void>()
    }

    pub fn copy_source(&mut self, key: u32, bytes: &[u8]) -> i32 {
        // SAFETY: `rt` is a live runtime; `bytes` is readable for its length during the call
        // and the ABI says the artifact copies it (it keeps no pointer to it).
        unsafe { (self.library.api.copy_source)(self.rt(), key, bytes.as_ptr().cast::<c_void>(), bytes.len()) }
    }

    /// Binds `region` to the source in `slot`. On success the runtime keeps `region` until
    /// the slot is bound again or the runtime is dropped; on failure the earlier binding stays.
    pub fn bind(&mut self, slot: usize, key: u32, region: Box<dyn BoundRegion>) -> i32 {
        // SAFETY: `rt` is a live runtime; `region` is valid for `byte_len` bytes (BoundRegion's
        // contract), and is stored below so that it outlives every later `run` that reads it.
        let status = unsafe {
            (self.library.api.bind_source)(self.rt(), key, region.as_ptr().cast::<c_void>(), region.byte_len())
        };
        if status == 0 {
            self.bound[slot] = Some(region);
        }
        status
    }

    pub fn is_bound(&self, slot: usize) -> bool {
        self.bound.get(slot).is_some_and(Option::is_some)
    }

    /// Runs the graph, after checking that all bound memory is still there.
    /// `Err(slot)`: the storage bound in `slot` is gone, and nothing was run.
    pub fn run(&mut self) -> std::result::Result<i32, usize> {
        for (slot, region) in self.bound.iter_mut().enumerate() {
            if let Some(region) = region {
                if !region.is_live() {
                    return Err(slot);
                }
            }
        }
        // SAFETY: `rt` is a live runtime and every region bound to it was just found live.
        Ok(unsafe { (self.library.api.run)(self.rt()) })
    }

    pub fn copy_output(&mut self, index: usize, out: &mut [u8]) -> i32 {
        // SAFETY: `rt` is a live runtime; `out` is writable for its length during the call.
        unsafe { (self.library.api.copy_output)(self.rt(), index, out.as_mut_ptr().cast::<c_void>(), out.len()) }
    }
}

impl Drop for LiveRuntime {
    fn drop(&mut self) {
        // SAFETY: `init` succeeded for this storage (no LiveRuntime exists otherwise) and this
        // is the only `deinit`; the storage and bound regions are freed after it returns.
        unsafe { (self.library.api.deinit)(self.rt()) };
    }
}
