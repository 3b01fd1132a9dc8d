//! A caller's memory for the core's tests (the host crate's tests share `mod.rs`, not this).

/// Memory a caller lends, as a JavaScript array is: read only on the caller's thread.
pub struct Lent(pub zgc_runtime_core::ffi::memory::AlignedBuf);

// SAFETY: the pointer and length are those of the buffer this value owns.
unsafe impl zgc_runtime_core::ffi::runtime::BoundRegion for Lent {
    fn as_ptr(&self) -> *mut u8 {
        self.0.as_ptr()
    }
    fn byte_len(&self) -> usize {
        self.0.len()
    }
    fn is_live(&mut self) -> bool {
        true
    }
    fn caller_owned(&self) -> bool {
        true
    }
}
