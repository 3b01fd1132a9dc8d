//! Aligned, zeroed allocations, and byte <-> element views that check alignment and size.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

/// A zero-initialised allocation of `len` bytes aligned to `align` (a power of two).
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    align: usize,
}

// SAFETY: `AlignedBuf` owns its allocation exclusively, like a `Box<[u8]>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `None` when the layout is invalid or the allocator has no memory: never an abort.
    pub fn zeroed(len: usize, align: usize) -> Option<AlignedBuf> {
        let align = align.max(1);
        if len == 0 {
            // An aligned, non-NULL address that owns nothing, as `Vec` uses for empty storage.
            let ptr = NonNull::new(align as *mut u8)?;
            Layout::from_size_align(0, align).ok()?;
            return Some(AlignedBuf { ptr, len, align });
        }
        let layout = Layout::from_size_align(len, align).ok()?;
        // SAFETY: `layout` has a non-zero size, as `alloc_zeroed` requires.
        let raw = unsafe { alloc::alloc_zeroed(layout) };
        NonNull::new(raw).map(|ptr| AlignedBuf { ptr, len, align })
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: `ptr` is valid and initialised (zeroed) for `len` bytes while `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `as_bytes`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.len > 0 {
            // SAFETY: allocated in `zeroed` with exactly this size and alignment.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), Layout::from_size_align_unchecked(self.len, self.align)) }
        }
    }
}

/// Element types whose every bit pattern is a valid value and that have no padding, so that
/// bytes and elements can be viewed as each other.
pub trait Element: Copy + Default + sealed::Sealed + 'static {}
impl Element for u8 {}
impl Element for i8 {}
impl Element for u16 {}
impl Element for f32 {}
impl Element for f64 {}

mod sealed {
    pub trait Sealed {}
    impl Sealed for u8 {}
    impl Sealed for i8 {}
    impl Sealed for u16 {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
}

/// `None` when `bytes` is not aligned to `T` or not a whole number of `T`.
pub fn elements<T: Element>(bytes: &[u8]) -> Option<&[T]> {
    let size = std::mem::size_of::<T>();
    if bytes.len() % size != 0 || (bytes.as_ptr() as usize) % std::mem::align_of::<T>() != 0 {
        return None;
    }
    // SAFETY: alignment and length were checked above, and `Element` types accept any bits.
    Some(unsafe { std::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size) })
}

pub fn elements_mut<T: Element>(bytes: &mut [u8]) -> Option<&mut [T]> {
    let size = std::mem::size_of::<T>();
    if bytes.len() % size != 0 || (bytes.as_ptr() as usize) % std::mem::align_of::<T>() != 0 {
        return None;
    }
    // SAFETY: as `elements`; the unique borrow of `bytes` moves to the result.
    Some(unsafe { std::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), bytes.len() / size) })
}

pub fn bytes_of<T: Element>(values: &[T]) -> &[u8] {
    // SAFETY: `Element` types have no padding, so every byte of the slice is initialised.
    unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) }
}

pub fn bytes_of_mut<T: Element>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: as `bytes_of`; and any bytes written are a valid `T` (`Element`).
    unsafe { std::slice::from_raw_parts_mut(values.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(values)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_zeroed_and_refuse_impossible_layouts() {
        for align in [1, 8, 64, 4096] {
            let buf = AlignedBuf::zeroed(100, align).unwrap();
            assert_eq!(buf.as_ptr() as usize % align, 0);
            assert!(buf.as_bytes().iter().all(|&b| b == 0));
        }
        let empty = AlignedBuf::zeroed(0, 64).unwrap();
        assert_eq!(empty.as_ptr() as usize % 64, 0);
        assert!(AlignedBuf::zeroed(usize::MAX - 10, 64).is_none());
        assert!(AlignedBuf::zeroed(1 << 62, 64).is_none());
    }

    #[test]
    fn element_views_check_alignment_and_length() {
        let mut buf = AlignedBuf::zeroed(16, 8).unwrap();
        elements_mut::<f32>(buf.as_bytes_mut()).unwrap()[1] = 1.5;
        assert_eq!(elements::<f32>(buf.as_bytes()).unwrap(), &[0.0, 1.5, 0.0, 0.0]);
        assert!(elements::<f32>(&buf.as_bytes()[1..5]).is_none());
        assert!(elements::<u16>(&buf.as_bytes()[..3]).is_none());
        assert_eq!(bytes_of(&[1.5f32]), 1.5f32.to_ne_bytes());
    }
}
