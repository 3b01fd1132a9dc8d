//! JavaScript TypedArrays seen from native code: borrowed views for the length of one call,
//! and `JsRegion`, a TypedArray lent to an artifact by `bind` and re-checked before every run.

use zgc::ffi::memory::AlignedBuf;
use zgc::ffi::memory::{elements, elements_mut};
use zgc::ffi::runtime::BoundRegion;
use zgc::abi::DType;
use zgc::dtype::{ArrayKind, Elements, ElementsMut};
use napi::bindgen_prelude::{FromNapiValue, Float32Array, Int8Array, ToNapiValue, TypedArray, Uint16Array, Uint8Array};
use napi::{sys, Env, JsValue};
use std::borrow::Cow;

/// Where Node-API names Float16Array (Node 24 and later), its kind number.
const FLOAT16_ARRAY: sys::napi_typedarray_type = 11;
/// The kind `napi_get_typedarray_info` is handed: an engine with a TypedArray kind it has no
/// Node-API number for (Float16Array on Node 22) leaves it as it was, and the usual starting
/// value 0 would read as Int8Array. Nothing is then taken for an array it is not.
const UNREPORTED: sys::napi_typedarray_type = -1;

/// A TypedArray argument of the current native call: its kind as the engine reports it, and
/// where its elements are now.
pub struct JsArray {
    env: sys::napi_env,
    value: sys::napi_value,
    kind: sys::napi_typedarray_type,
    data: *mut u8,
    len: usize,
}

impl JsArray {
    /// `value` as a TypedArray, or `None` when it is not one. `value` must be a live value of
    /// the current call on `env`'s thread.
    pub fn inspect(env: sys::napi_env, value: sys::napi_value) -> Option<JsArray> {
        let (mut kind, mut len, mut data) = (UNREPORTED, 0, std::ptr::null_mut());
        // SAFETY: `value` is live in this call (the caller's contract); a value that is not a
        // TypedArray fails with a status and writes nothing.
        let got = unsafe {
            sys::napi_get_typedarray_info(env, value, &mut kind, &mut len, &mut data, std::ptr::null_mut(), std::ptr::null_mut())
        };
        (got == sys::Status::napi_ok).then_some(JsArray { env, value, kind, data: data.cast(), len })
    }

    /// A TypedArray argument napi-rs already checked, asked again so that its kind is the
    /// engine's own answer (see `UNREPORTED`).
    pub fn of(array: &TypedArray<'_>) -> JsArray {
        let env = array.value().env;
        JsArray::inspect(env, array.raw()).unwrap_or(JsArray { env, value: array.raw(), kind: UNREPORTED, data: std::ptr::null_mut(), len: 0 })
    }

    /// The array's class, for matching and messages. A kind Node-API has no number for is
    /// named by the array's own `Symbol.toStringTag` (the engine's name for its kind).
    pub fn class_name(&self) -> Cow<'static, str> {
        use sys::TypedarrayType as T;
        Cow::Borrowed(match self.kind {
            T::int8_array => "Int8Array",
            T::uint8_array => "Uint8Array",
            T::uint8_clamped_array => "Uint8ClampedArray",
            T::int16_array => "Int16Array",
            T::uint16_array => "Uint16Array",
            T::int32_array => "Int32Array",
            T::uint32_array => "Uint32Array",
            T::float32_array => "Float32Array",
            T::float64_array => "Float64Array",
            T::bigint64_array => "BigInt64Array",
            T::biguint64_array => "BigUint64Array",
            FLOAT16_ARRAY => "Float16Array",
            _ => return Cow::Owned(string_tag(self.env, self.value).unwrap_or_else(|| "a TypedArray of a kind Node-API does not name".into())),
        })
    }

    /// The kind of array the core reads, or `None` for one it does not.
    pub fn kind(&self) -> Option<ArrayKind> {
        use sys::TypedarrayType as T;
        Some(match self.kind {
            T::float32_array => ArrayKind::F32,
            T::float64_array => ArrayKind::F64,
            T::uint16_array => ArrayKind::U16,
            T::int8_array => ArrayKind::I8,
            T::uint8_array => ArrayKind::U8,
            _ => return None,
        })
    }

    /// Length in elements.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn raw(&self) -> sys::napi_value {
        self.value
    }

    /// Bytes per element of the kinds a dtype takes; `None` for every other kind.
    fn item(&self) -> Option<usize> {
        use sys::TypedarrayType as T;
        match self.kind {
            T::int8_array | T::uint8_array => Some(1),
            T::uint16_array => Some(2),
            T::float32_array => Some(4),
            T::float64_array => Some(8),
            _ => None,
        }
    }

    fn bytes(&self, item: usize) -> &[u8] {
        if self.data.is_null() || self.len == 0 {
            return &[];
        }
        // SAFETY: the engine reported `len` elements of the kind whose size is `item` at `data`
        // for this array, during this synchronous call on the JS thread (no JavaScript runs
        // until it returns, so the buffer cannot be detached or resized meanwhile).
        unsafe { std::slice::from_raw_parts(self.data, self.len * item) }
    }

    fn bytes_mut(&mut self, item: usize) -> &mut [u8] {
        if self.data.is_null() || self.len == 0 {
            return &mut [];
        }
        // SAFETY: as `bytes`; `&mut self` makes this the only slice made from this argument,
        // and the caller drops it before reading another argument that may share memory.
        unsafe { std::slice::from_raw_parts_mut(self.data, self.len * item) }
    }

    /// The elements, or `None` for a kind no dtype takes.
    pub fn view(&self) -> Option<Elements<'_>> {
        use sys::TypedarrayType as T;
        let bytes = self.bytes(self.item()?);
        Some(match self.kind {
            T::float32_array => Elements::F32(elements(bytes)?),
            T::float64_array => Elements::F64(elements(bytes)?),
            T::uint16_array => Elements::U16(elements(bytes)?),
            T::int8_array => Elements::I8(elements(bytes)?),
            T::uint8_array => Elements::U8(bytes),
            _ => return None,
        })
    }

    /// Writable elements, or `None` for a kind no output is written into.
    pub fn view_mut(&mut self) -> Option<ElementsMut<'_>> {
        use sys::TypedarrayType as T;
        let kind = self.kind;
        let item = self.item()?;
        let bytes = self.bytes_mut(item);
        Some(match kind {
            T::float32_array => ElementsMut::F32(elements_mut(bytes)?),
            T::uint16_array => ElementsMut::U16(elements_mut(bytes)?),
            T::int8_array => ElementsMut::I8(elements_mut(bytes)?),
            T::uint8_array => ElementsMut::U8(bytes),
            _ => return None,
        })
    }
}

/// `value[Symbol.toStringTag]`, which a TypedArray answers with its kind's name; `None` (and
/// no pending exception) when anything on the way fails or throws.
fn string_tag(env: sys::napi_env, value: sys::napi_value) -> Option<String> {
    let ok = |status| status == sys::Status::napi_ok;
    let mut global = std::ptr::null_mut();
    let mut symbol = std::ptr::null_mut();
    let mut tag_key = std::ptr::null_mut();
    let mut tag = std::ptr::null_mut();
    // SAFETY: every value passed on is live in this call's scope on `env`'s thread, and the
    // names are NUL-terminated.
    let found = unsafe {
        ok(sys::napi_get_global(env, &mut global))
            && ok(sys::napi_get_named_property(env, global, c"Symbol".as_ptr(), &mut symbol))
            && ok(sys::napi_get_named_property(env, symbol, c"toStringTag".as_ptr(), &mut tag_key))
            && ok(sys::napi_get_property(env, value, tag_key, &mut tag))
    };
    let mut len = 0;
    // SAFETY: as above; a NULL buffer asks for the length only.
    if !found || !ok(unsafe { sys::napi_get_value_string_utf8(env, tag, std::ptr::null_mut(), 0, &mut len) }) {
        let mut thrown = std::ptr::null_mut();
        // SAFETY: clears an exception a throwing getter may have left; harmless when none is.
        unsafe { sys::napi_get_and_clear_last_exception(env, &mut thrown) };
        return None;
    }
    let mut buf = vec![0u8; len + 1];
    // SAFETY: `buf` has room for `len` bytes and the NUL the call writes.
    let copied = unsafe { sys::napi_get_value_string_utf8(env, tag, buf.as_mut_ptr().cast(), buf.len(), &mut len) };
    ok(copied).then(|| String::from_utf8_lossy(&buf[..len]).into_owned())
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
    pub fn hold(array: &JsArray) -> napi::Result<Option<JsRegion>> {
        use sys::TypedarrayType as T;
        let (env, raw) = (array.env, array.raw());
        // SAFETY: `raw` is the live TypedArray argument of the current call on `env`'s thread;
        // each `from_napi_value` below creates a strong reference of its own to it.
        let held = unsafe {
            match array.kind {
                T::float32_array => Held::F32(Float32Array::from_napi_value(env, raw)?),
                T::uint16_array => Held::U16(Uint16Array::from_napi_value(env, raw)?),
                T::int8_array => Held::I8(Int8Array::from_napi_value(env, raw)?),
                T::uint8_array => Held::U8(Uint8Array::from_napi_value(env, raw)?),
                _ => return Ok(None),
            }
        };
        let bytes = array.item().map_or(&[][..], |item| array.bytes(item));
        Ok(Some(JsRegion { held, env, ptr: bytes.as_ptr().cast_mut(), len: bytes.len() }))
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
    fn caller_owned(&self) -> bool {
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

/// A Node-API status as a Result, `what` naming the call that failed.
pub fn checked(status: sys::napi_status, what: &str) -> napi::Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(napi::Error::new(napi::Status::from(status), what.to_owned()))
    }
}

/// Outputs up to this size are copied into a fresh ArrayBuffer; larger ones hand their vector
/// to an external one (no copy), which costs more to make than a small copy.
const COPY_LIMIT: usize = 4096;

unsafe extern "C" fn release_vec<T>(_env: sys::napi_env, _data: *mut std::ffi::c_void, hint: *mut std::ffi::c_void) {
    // SAFETY: `hint` is the Box made in `typed_array_from` for this buffer; V8 calls this once.
    drop(unsafe { Box::from_raw(hint.cast::<Vec<T>>()) });
}

/// On the JS thread: a new TypedArray of `kind` holding `values`.
fn typed_array_from<T: zgc::ffi::memory::Element>(env: sys::napi_env, kind: sys::napi_typedarray_type, values: Vec<T>) -> napi::Result<sys::napi_value> {
    let bytes = std::mem::size_of_val(values.as_slice());
    if bytes <= COPY_LIMIT {
        return copy_into_new(env, kind, &values);
    }
    let len = values.len();
    let mut boxed = Box::new(values);
    let data = boxed.as_mut_ptr();
    let hint = Box::into_raw(boxed);
    let mut buffer = std::ptr::null_mut();
    // SAFETY: the vector's memory is valid for `bytes` bytes while the Box in `hint` lives,
    // and `release_vec` frees it only when V8 collects the buffer.
    let status = unsafe { sys::napi_create_external_arraybuffer(env, data.cast(), bytes, Some(release_vec::<T>), hint.cast(), &mut buffer) };
    if status != sys::Status::napi_ok {
        // SAFETY: V8 did not take `hint`, so the vector is still ours.
        let values = *unsafe { Box::from_raw(hint) };
        if status == sys::Status::napi_no_external_buffers_allowed {
            return copy_into_new(env, kind, &values);
        }
        return Err(napi::Error::new(napi::Status::from(status), "cannot create an external ArrayBuffer"));
    }
    let mut view = std::ptr::null_mut();
    // SAFETY: `buffer` holds exactly `len` elements of `kind`.
    checked(unsafe { sys::napi_create_typedarray(env, kind, len, buffer, 0, &mut view) }, "cannot create a TypedArray")?;
    Ok(view)
}

fn copy_into_new<T: zgc::ffi::memory::Element>(env: sys::napi_env, kind: sys::napi_typedarray_type, values: &[T]) -> napi::Result<sys::napi_value> {
    let bytes = std::mem::size_of_val(values);
    let (mut buffer, mut data) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: a plain `bytes`-byte ArrayBuffer owned by JavaScript, on `env`'s thread.
    checked(unsafe { sys::napi_create_arraybuffer(env, bytes, &mut data, &mut buffer) }, "cannot create an ArrayBuffer")?;
    if bytes > 0 {
        // SAFETY: `data` is the new buffer's `bytes` writable bytes; `values` has as many.
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr().cast::<u8>(), data.cast::<u8>(), bytes) };
    }
    let mut view = std::ptr::null_mut();
    // SAFETY: `buffer` holds exactly `values.len()` elements of `kind`.
    checked(unsafe { sys::napi_create_typedarray(env, kind, values.len(), buffer, 0, &mut view) }, "cannot create a TypedArray")?;
    Ok(view)
}

/// On the JS thread: an output of a finished run as the TypedArray its dtype comes back as.
pub fn output_value(env: sys::napi_env, data: zgc::instance::OutputData) -> napi::Result<sys::napi_value> {
    use zgc::instance::OutputData;
    use sys::TypedarrayType as T;
    match data {
        OutputData::F32(v) => typed_array_from(env, T::float32_array, v),
        OutputData::U16(v) => typed_array_from(env, T::uint16_array, v),
        OutputData::I8(v) => typed_array_from(env, T::int8_array, v),
        OutputData::U8(v) => typed_array_from(env, T::uint8_array, v),
    }
}

/// On the JS thread: a new array of `len` holes.
pub fn create_array(env: sys::napi_env, len: usize, out: &mut sys::napi_value) -> sys::napi_status {
    // SAFETY: called on `env`'s thread with an out-pointer to the caller's local.
    unsafe { sys::napi_create_array_with_length(env, len, out) }
}

/// On the JS thread: `object[key] = value`, a number.
pub fn set_number(env: sys::napi_env, object: sys::napi_value, key: &std::ffi::CStr, value: f64) -> sys::napi_status {
    let mut number = std::ptr::null_mut();
    // SAFETY: on `env`'s thread, with an out-pointer to a local.
    let status = unsafe { sys::napi_create_double(env, value, &mut number) };
    if status != sys::Status::napi_ok {
        return status;
    }
    // SAFETY: `object` is live in the current scope on this thread; `key` is NUL-terminated.
    unsafe { sys::napi_set_named_property(env, object, key.as_ptr(), number) }
}

/// On the JS thread: `array[index] = value`.
pub fn set_element(env: sys::napi_env, array: sys::napi_value, index: u32, value: sys::napi_value) -> sys::napi_status {
    // SAFETY: both values are live in the current scope on `env`'s thread.
    unsafe { sys::napi_set_element(env, array, index, value) }
}

/// On the JS thread: the `Error` for `e`: its `code` and message, and its detail (`status`,
/// `operation`, `source`) as properties, each only when the error has it.
pub fn error_value(env: sys::napi_env, e: &zgc::Error) -> sys::napi_value {
    with_detail(env, error_object(env, e.code(), &e.to_string()), &e.detail())
}

/// `error` with `detail`'s fields set on it.
pub fn with_detail(env: sys::napi_env, error: sys::napi_value, detail: &zgc::error::Detail) -> sys::napi_value {
    let set = |key: &std::ffi::CStr, value: sys::napi_value| {
        // SAFETY: `error` is an object made on this thread; `key` is NUL-terminated.
        unsafe { sys::napi_set_named_property(env, error, key.as_ptr(), value) };
    };
    let string = |text: &str| {
        let mut value = std::ptr::null_mut();
        // SAFETY: valid UTF-8 of the given length; the out-pointer is a local.
        unsafe { sys::napi_create_string_utf8(env, text.as_ptr().cast(), text.len() as isize, &mut value) };
        value
    };
    if let Some(status) = detail.status {
        let mut value = std::ptr::null_mut();
        // SAFETY: plain number creation; the out-pointer is a local.
        unsafe { sys::napi_create_int32(env, status, &mut value) };
        set(c"status", value);
    }
    if let Some(operation) = &detail.operation {
        set(c"operation", string(operation));
    }
    if let Some(source) = &detail.source {
        set(c"source", string(source));
    }
    if let Some(fault) = &detail.fault {
        let number = |n: f64| {
            let mut value = std::ptr::null_mut();
            // SAFETY: plain number creation; the out-pointer is a local.
            unsafe { sys::napi_create_double(env, n, &mut value) };
            value
        };
        let null = || {
            let mut value = std::ptr::null_mut();
            // SAFETY: reads the null singleton; the out-pointer is a local.
            unsafe { sys::napi_get_null(env, &mut value) };
            value
        };
        use zgc::error::Fault;
        match &**fault {
            Fault::Crashed { signal, exit_code, stderr } => {
                set(c"signal", signal.map_or_else(null, string));
                set(c"exitCode", exit_code.map_or_else(null, |c| number(f64::from(c))));
                set(c"stderr", string(stderr));
            }
            Fault::Timeout { timeout_ms, stderr } => {
                set(c"timeoutMs", number(timeout_ms.0));
                set(c"stderr", string(stderr));
            }
            Fault::Memory { max_memory_mb, resident_bytes, stderr } => {
                set(c"maxMemoryMb", number(max_memory_mb.0));
                set(c"residentBytes", number(*resident_bytes as f64));
                set(c"stderr", string(stderr));
            }
        }
    }
    error
}

/// On the JS thread, in a method about to return: throws `error` (napi-rs then sees the
/// exception pending and throws nothing more).
pub fn throw(env: sys::napi_env, error: sys::napi_value) {
    // SAFETY: `env` is the calling method's, on its own thread, and `error` a value made there.
    unsafe { sys::napi_throw(env, error) };
}

/// On the JS thread: an `Error` with `code` and `message`, as napi-rs makes for thrown errors.
pub fn error_object(env: sys::napi_env, code: &str, message: &str) -> sys::napi_value {
    let (mut code_value, mut message_value, mut error) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: the strings are valid UTF-8 of the given lengths; all out-pointers are locals.
    unsafe {
        sys::napi_create_string_utf8(env, code.as_ptr().cast(), code.len() as isize, &mut code_value);
        sys::napi_create_string_utf8(env, message.as_ptr().cast(), message.len() as isize, &mut message_value);
        sys::napi_create_error(env, code_value, message_value, &mut error);
    }
    error
}

/// On the JS thread: `undefined`.
pub fn undefined(env: sys::napi_env) -> sys::napi_value {
    let mut value = std::ptr::null_mut();
    // SAFETY: called on `env`'s thread with an out-pointer to a local.
    unsafe { sys::napi_get_undefined(env, &mut value) };
    value
}

#[cfg(target_os = "linux")]
unsafe extern "C" fn release_region(_env: sys::napi_env, _data: *mut std::ffi::c_void, hint: *mut std::ffi::c_void) {
    // SAFETY: `hint` is the Box made in `region_buffer` for this buffer; V8 calls this once.
    drop(unsafe { Box::from_raw(hint.cast::<std::sync::Arc<zgc::ffi::process::SharedRegion>>()) });
}

#[cfg(target_os = "linux")]
/// On the JS thread: an external ArrayBuffer over an isolated instance's shared region. Its
/// finalizer holds a share of the mapping, so no view outlives it; `None` where the host
/// forbids external buffers.
pub fn region_buffer(env: sys::napi_env, region: &std::sync::Arc<zgc::ffi::process::SharedRegion>) -> napi::Result<Option<sys::napi_value>> {
    let hint = Box::into_raw(Box::new(region.clone()));
    let mut buffer = std::ptr::null_mut();
    // SAFETY: the mapping is valid for `len` bytes while the Arc in `hint` lives, and
    // `release_region` drops that Arc only when V8 collects the buffer.
    let status = unsafe { sys::napi_create_external_arraybuffer(env, region.as_ptr().cast(), region.len(), Some(release_region), hint.cast(), &mut buffer) };
    if status == sys::Status::napi_ok {
        return Ok(Some(buffer));
    }
    // SAFETY: V8 did not take `hint` (the call failed), so it is still ours to drop.
    drop(unsafe { Box::from_raw(hint) });
    if status == sys::Status::napi_no_external_buffers_allowed {
        return Ok(None);
    }
    Err(napi::Error::new(napi::Status::from(status), "cannot create an external ArrayBuffer"))
}

/// `value` as the `Unknown` napi-derive returns, for a value made by a raw call here.
pub fn unknown<'env>(env: &'env Env, value: sys::napi_value) -> napi::bindgen_prelude::Unknown<'env> {
    // SAFETY: `value` was made in the current call's scope on `env`'s thread.
    unsafe { napi::bindgen_prelude::Unknown::from_raw_unchecked(env.raw(), value) }
}
