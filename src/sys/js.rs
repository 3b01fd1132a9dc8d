//! JavaScript TypedArrays seen from native code: borrowed views for the length of one call,
//! and `JsRegion`, a TypedArray lent to an artifact by `bind` and re-checked before every run.

use super::memory::{elements, elements_mut};
use super::runtime::BoundRegion;
use crate::abi::DType;
use crate::dtype::{Elements, ElementsMut};
use super::memory::AlignedBuf;
use napi::bindgen_prelude::{
    FromNapiValue, Float32Array, Int8Array, ToNapiValue, TypedArray, TypedArrayType, Uint16Array, Uint8Array,
};
use napi::{sys, Env, JsValue};

/// The JavaScript class name of a TypedArray, for messages.
pub fn class_name(array: &TypedArray<'_>) -> &'static str {
    match array.typed_array_type {
        TypedArrayType::Int8 => "Int8Array",
        TypedArrayType::Uint8 => "Uint8Array",
        TypedArrayType::Uint8Clamped => "Uint8ClampedArray",
        TypedArrayType::Int16 => "Int16Array",
        TypedArrayType::Uint16 => "Uint16Array",
        TypedArrayType::Int32 => "Int32Array",
        TypedArrayType::Uint32 => "Uint32Array",
        TypedArrayType::Float32 => "Float32Array",
        TypedArrayType::Float64 => "Float64Array",
        TypedArrayType::BigInt64 => "BigInt64Array",
        TypedArrayType::BigUint64 => "BigUint64Array",
        _ => "TypedArray",
    }
}

/// The elements of a TypedArray argument, or `None` for a kind no dtype uses.
pub fn view<'a>(array: &'a TypedArray<'_>) -> Option<Elements<'a>> {
    let bytes: &[u8] = &array.arraybuffer;
    Some(match array.typed_array_type {
        TypedArrayType::Float32 => Elements::F32(elements(bytes)?),
        TypedArrayType::Float64 => Elements::F64(elements(bytes)?),
        TypedArrayType::Uint16 => Elements::U16(elements(bytes)?),
        TypedArrayType::Int8 => Elements::I8(elements(bytes)?),
        TypedArrayType::Uint8 => Elements::U8(bytes),
        _ => return None,
    })
}

/// Writable elements of a TypedArray argument, for the duration of one native call.
pub fn view_mut<'a>(array: &'a mut TypedArray<'_>) -> Option<ElementsMut<'a>> {
    let kind = array.typed_array_type;
    // SAFETY: we are inside a synchronous native call on the JS thread, so no JavaScript runs
    // while the slice lives, and no other Rust reference to this memory exists (the only one
    // is `array`, borrowed mutably for the same lifetime).
    let bytes = unsafe { array.arraybuffer.as_mut() };
    Some(match kind {
        TypedArrayType::Float32 => ElementsMut::F32(elements_mut(bytes)?),
        TypedArrayType::Uint16 => ElementsMut::U16(elements_mut(bytes)?),
        TypedArrayType::Int8 => ElementsMut::I8(elements_mut(bytes)?),
        TypedArrayType::Uint8 => ElementsMut::U8(bytes),
        _ => return None,
    })
}

/// A strong reference to the array: it keeps the array (and so its buffer) from being
/// collected, and is released when dropped.
enum Held {
    F32(Float32Array),
    U16(Uint16Array),
    I8(Int8Array),
    U8(Uint8Array),
}

/// A TypedArray's memory lent to an artifact.
pub struct JsRegion {
    held: Held,
    env: sys::napi_env,
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a JsRegion is created, checked and dropped only on the JS thread of its `env`: the
// instance that owns it is reachable only from that thread's JavaScript object. `Send` is
// required by `BoundRegion` so that instances without JS regions can move to worker threads.
unsafe impl Send for JsRegion {}

impl JsRegion {
    /// Holds `array` and records where its elements are now. `None` for a kind no dtype binds.
    pub fn hold(env: &Env, array: &TypedArray<'_>) -> napi::Result<Option<JsRegion>> {
        let raw = array.raw();
        // SAFETY: `raw` is the live TypedArray argument of the current call on `env`'s thread;
        // each `from_napi_value` below creates a strong reference of its own to it.
        let held = unsafe {
            match array.typed_array_type {
                TypedArrayType::Float32 => Held::F32(Float32Array::from_napi_value(env.raw(), raw)?),
                TypedArrayType::Uint16 => Held::U16(Uint16Array::from_napi_value(env.raw(), raw)?),
                TypedArrayType::Int8 => Held::I8(Int8Array::from_napi_value(env.raw(), raw)?),
                TypedArrayType::Uint8 => Held::U8(Uint8Array::from_napi_value(env.raw(), raw)?),
                _ => return Ok(None),
            }
        };
        let bytes: &[u8] = &array.arraybuffer;
        Ok(Some(JsRegion { held, env: env.raw(), ptr: bytes.as_ptr().cast_mut(), len: bytes.len() }))
    }

    /// Where the array's elements are now, by asking the engine again.
    fn current(&mut self) -> napi::Result<(*const u8, usize)> {
        // SAFETY: called on `env`'s thread while the reference in `held` is alive; the
        // `&mut` conversion returns the referenced value without releasing the reference.
        unsafe {
            let value = match &mut self.held {
                Held::F32(a) => ToNapiValue::to_napi_value(self.env, a)?,
                Held::U16(a) => ToNapiValue::to_napi_value(self.env, a)?,
                Held::I8(a) => ToNapiValue::to_napi_value(self.env, a)?,
                Held::U8(a) => ToNapiValue::to_napi_value(self.env, a)?,
            };
            let info = TypedArray::from_napi_value(self.env, value)?;
            let bytes: &[u8] = &info.arraybuffer;
            Ok((bytes.as_ptr(), bytes.len()))
        }
    }
}

// SAFETY: the strong reference in `held` keeps the array and its buffer from being collected
// while the region lives. What it cannot stop is JavaScript detaching (transfer) or shrinking
// (resizable ArrayBuffer) the buffer; `is_live` detects both by asking the engine for the
// array's current data pointer and length, and `LiveRuntime::run` asks before every run.
unsafe impl BoundRegion for JsRegion {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn is_live(&mut self) -> bool {
        matches!(self.current(), Ok((ptr, len)) if ptr == self.ptr.cast_const() && len >= self.len)
    }
    fn js_owned(&self) -> bool {
        true
    }
}

/// A view of runtime-owned storage for JavaScript (`Runtime.storage()`).
pub enum ExternalView<'env> {
    /// An external ArrayBuffer over the storage: the buffer's finalizer holds a share of it.
    Shared(napi::bindgen_prelude::Unknown<'env>, std::sync::Arc<AlignedBuf>),
    /// The host forbids external buffers (Electron): a plain JavaScript array to bind instead.
    Copied(TypedArray<'env>),
}

/// Setting this variable makes `external_view` behave as on a host without external buffers,
/// so that the fallback is tested where external buffers exist.
pub const NO_EXTERNAL_BUFFERS_VAR: &str = "ZGC_RUNTIME_NO_EXTERNAL_BUFFERS";

unsafe extern "C" fn release_shared(_env: sys::napi_env, _data: *mut std::ffi::c_void, hint: *mut std::ffi::c_void) {
    // SAFETY: `hint` is the Box made in `external_view` for this buffer; V8 calls this once.
    drop(unsafe { Box::from_raw(hint.cast::<std::sync::Arc<AlignedBuf>>()) });
}

pub fn external_view<'env>(env: &'env Env, storage: std::sync::Arc<AlignedBuf>, dtype: DType) -> napi::Result<ExternalView<'env>> {
    let (kind, item) = match dtype {
        DType::F32 => (sys::TypedarrayType::float32_array, 4),
        DType::F16 => (sys::TypedarrayType::uint16_array, 2),
        DType::I8 => (sys::TypedarrayType::int8_array, 1),
        DType::Bool => (sys::TypedarrayType::uint8_array, 1),
    };
    let len = storage.len();
    let raw_env = env.raw();
    let mut buffer = std::ptr::null_mut();
    let mut shared = None;
    if len > 0 && std::env::var_os(NO_EXTERNAL_BUFFERS_VAR).is_none() {
        let hint = Box::into_raw(Box::new(storage.clone()));
        // SAFETY: the memory is valid for `len` bytes for as long as the Arc in `hint` lives,
        // and `release_shared` drops that Arc only when V8 collects the buffer.
        let status = unsafe {
            sys::napi_create_external_arraybuffer(raw_env, storage.as_ptr().cast(), len, Some(release_shared), hint.cast(), &mut buffer)
        };
        if status == sys::Status::napi_ok {
            shared = Some(storage);
        } else {
            // SAFETY: V8 did not take `hint` (the call failed), so it is still ours to drop.
            drop(unsafe { Box::from_raw(hint) });
            if status != sys::Status::napi_no_external_buffers_allowed {
                return Err(napi::Error::new(napi::Status::from(status), "cannot create an external ArrayBuffer"));
            }
        }
    }
    if shared.is_none() {
        let mut data = std::ptr::null_mut();
        // SAFETY: plain allocation of a `len`-byte ArrayBuffer owned by JavaScript.
        let status = unsafe { sys::napi_create_arraybuffer(raw_env, len, &mut data, &mut buffer) };
        if status != sys::Status::napi_ok {
            return Err(napi::Error::new(napi::Status::from(status), "cannot create an ArrayBuffer"));
        }
    }
    let mut view = std::ptr::null_mut();
    // SAFETY: `buffer` is the ArrayBuffer just created, `len / item` elements of `kind` fit it.
    let status = unsafe { sys::napi_create_typedarray(raw_env, kind, len / item, buffer, 0, &mut view) };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::new(napi::Status::from(status), "cannot create a TypedArray"));
    }
    // SAFETY: `view` is a live TypedArray value of this call's scope on `env`.
    unsafe {
        Ok(match shared {
            Some(shared) => ExternalView::Shared(napi::bindgen_prelude::Unknown::from_raw_unchecked(raw_env, view), shared),
            None => ExternalView::Copied(TypedArray::from_napi_value(raw_env, view)?),
        })
    }
}
