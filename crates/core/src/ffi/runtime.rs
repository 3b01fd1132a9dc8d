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
    /// False once the memory may have been freed or moved (a detached JavaScript buffer).
    fn is_live(&mut self) -> bool;
    /// True for memory the caller owns (a JavaScript array): it is read only on the caller's
    /// thread, and a run on another thread gets a copy instead (`snapshot_caller_owned`,
    /// `run_detached`).
    fn caller_owned(&self) -> bool {
        false
    }
    /// Storage the runtime allocated and packed itself, which it may reuse for a later
    /// packing once no binding refers to it.
    fn into_packed(self: Box<Self>) -> Option<AlignedBuf> {
        None
    }
    /// The length of such storage; `None` for any other region.
    fn packed_len(&self) -> Option<usize> {
        None
    }
}

/// Runtime-owned storage that JavaScript may also view (an external ArrayBuffer holds one
/// clone of the `Arc`): neither side can free it while the other still uses it.
pub struct SharedStorage(pub Arc<AlignedBuf>);

// SAFETY: the allocation lives as long as any clone of the Arc, and this value holds one.
unsafe impl BoundRegion for SharedStorage {
    fn as_ptr(&self) -> *mut u8 {
        self.0.as_ptr()
    }
    fn byte_len(&self) -> usize {
        self.0.len()
    }
    fn is_live(&mut self) -> bool {
        true
    }
}

/// A copy of caller-owned bound storage standing in for it during one off-thread run.
pub struct Temporary {
    slot: usize,
    key: u32,
    copy: AlignedBuf,
}

impl Temporary {
    /// The source slot it stands in for.
    pub fn slot(&self) -> usize {
        self.slot
    }

    pub fn bytes(&self) -> &[u8] {
        self.copy.as_bytes()
    }
}

/// On the caller's thread: a copy of every caller-owned region of `regions` (by source slot).
/// `Err(Ok(slot))`: the region in `slot` is gone; `Err(Err(bytes))`: no memory for a copy.
pub fn snapshot_regions(regions: &mut [Option<Box<dyn BoundRegion>>], keys: &[u32], alignment: usize) -> std::result::Result<Vec<Temporary>, std::result::Result<usize, usize>> {
    let mut copies = Vec::new();
    for (slot, region) in regions.iter_mut().enumerate() {
        let Some(region) = region else { continue };
        if !region.caller_owned() {
            continue;
        }
        if !region.is_live() {
            return Err(Ok(slot));
        }
        let mut copy = AlignedBuf::zeroed(region.byte_len(), alignment).ok_or(Err(region.byte_len()))?;
        // SAFETY: on the caller's thread (the caller's contract), with `is_live` just true, the
        // region is readable for `byte_len` bytes, and no JavaScript runs during the copy.
        let bytes = unsafe { std::slice::from_raw_parts(region.as_ptr().cast_const(), region.byte_len()) };
        copy.as_bytes_mut().copy_from_slice(bytes);
        copies.push(Temporary { slot, key: keys[slot], copy });
    }
    Ok(copies)
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
    fn into_packed(self: Box<Self>) -> Option<AlignedBuf> {
        Some(*self)
    }
    fn packed_len(&self) -> Option<usize> {
        Some(self.len())
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
    /// the slot is bound again or the runtime is dropped, and hands back the region it
    /// displaced; on failure the earlier binding stays and `region` comes back with the status.
    pub fn bind(&mut self, slot: usize, key: u32, region: Box<dyn BoundRegion>) -> Result<Option<Box<dyn BoundRegion>>, (i32, Box<dyn BoundRegion>)> {
        // SAFETY: `rt` is a live runtime; `region` is valid for `byte_len` bytes (BoundRegion's
        // contract), and is stored below so that it outlives every later `run` that reads it.
        let status = unsafe {
            (self.library.api.bind_source)(self.rt(), key, region.as_ptr().cast::<c_void>(), region.byte_len())
        };
        if status == 0 {
            Ok(self.bound[slot].replace(region))
        } else {
            Err((status, region))
        }
    }

    pub fn has_caller_owned(&self) -> bool {
        self.bound.iter().flatten().any(|r| r.caller_owned())
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

    /// On the caller's thread: a copy of every caller-owned region. `Err(Ok(slot))`: the region
    /// in `slot` is gone; `Err(Err(bytes))`: no memory for a copy.
    pub fn snapshot_caller_owned(&mut self, keys: &[u32], alignment: usize) -> std::result::Result<Vec<Temporary>, std::result::Result<usize, usize>> {
        snapshot_regions(&mut self.bound, keys, alignment)
    }

    /// Runs with each `Temporary` bound in place of its caller-owned region, then binds the
    /// regions again (a pointer hand-back: their memory is not read here). Safe on any thread.
    /// `Err(slot)`: a caller-owned region has no stand-in; `Ok(Err((slot, status)))`: the
    /// artifact refused a stand-in; `Ok(Ok(status))`: the run's status.
    pub fn run_detached(&mut self, temporary: &[Temporary]) -> std::result::Result<std::result::Result<i32, (usize, i32)>, usize> {
        for (slot, region) in self.bound.iter_mut().enumerate() {
            let Some(region) = region else { continue };
            let covered = if region.caller_owned() { temporary.iter().any(|t| t.slot == slot) } else { region.is_live() };
            if !covered {
                return Err(slot);
            }
        }
        let rt = self.rt();
        let bind = |key: u32, ptr: *mut u8, len: usize| {
            // SAFETY: `rt` is live; `ptr` is either a stand-in copy that outlives the run (the
            // caller keeps `temporary`) or, when restoring, the region this runtime keeps.
            unsafe { (self.library.api.bind_source)(rt, key, ptr.cast::<c_void>(), len) }
        };
        // A slot whose caller-owned region was displaced since the copy (storage lent for this
        // run) keeps what is bound now.
        let stand_ins: Vec<&Temporary> = temporary.iter().filter(|t| self.bound[t.slot].as_ref().is_some_and(|r| r.caller_owned())).collect();
        let mut done = 0;
        let mut refused = None;
        for t in &stand_ins {
            let status = bind(t.key, t.copy.as_ptr(), t.copy.len());
            if status != 0 {
                refused = Some((t.slot, status));
                break;
            }
            done += 1;
        }
        let outcome = match refused {
            Some(refusal) => Err(refusal),
            // SAFETY: `rt` is live; every region it reads is a stand-in copy owned by the caller
            // or a region that is not caller-owned and was just found live.
            None => Ok(unsafe { (self.library.api.run)(rt) }),
        };
        for t in &stand_ins[..done] {
            let original = self.bound[t.slot].as_ref().expect("a caller-owned region is bound here");
            bind(t.key, original.as_ptr(), original.byte_len());
        }
        Ok(outcome)
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
