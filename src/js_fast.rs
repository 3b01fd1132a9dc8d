//! The hot path of `Runtime.run()` as one raw N-API function: napi-rs's class-method glue
//! (argument conversion, borrow tracking) costs more than a tiny graph's whole run, so this
//! module reads the arguments itself and hands the caller safe views of them.
//!
//! A call is `fn(handle, outputCount, pairCount, ...outputs, ...(sourceIndex, values), ...)`;
//! arguments past the pairs are ignored (callers reuse a fixed-length argument array); `handle` is an
//! external made by `create_handle` and checked by its type tag before use.

use crate::js::{checked as status, JsArray};
use zgc::executor::{Core, Shared};
use zgc::Error;
use napi::bindgen_prelude::Unknown;
use napi::{sys, Env};
use std::ffi::c_void;
use std::sync::{Arc, Weak};

/// Marks externals made here, so a foreign external is refused instead of misread.
const HANDLE_TAG: sys::napi_type_tag = sys::napi_type_tag { lower: 0x7a67_632d_7275_6e74, upper: 0x6861_6e64_6c65_0001 };

/// Most arguments a call reads: a handle, two counts, outputs and (index, values) pairs.
pub const MAX_ARGS: usize = 32;

/// What a handle refers to: the runtime's instance and the queue whose policy and figures its
/// inline runs count in. Weak: a handle must not keep a closed runtime alive.
pub struct Target {
    pub core: Weak<Core>,
    pub shared: Weak<Shared>,
}

unsafe extern "C" fn release_handle(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the Box made in `create_handle` for this external; called once.
    drop(unsafe { Box::from_raw(data.cast::<Target>()) });
}


/// An external holding `target`, tagged as ours.
pub fn create_handle(env: &Env, target: Target) -> napi::Result<Unknown<'_>> {
    let raw_env = env.raw();
    let data = Box::into_raw(Box::new(target));
    let mut value = std::ptr::null_mut();
    // SAFETY: `data` stays valid until `release_handle` frees it when the external is collected.
    let created = unsafe { sys::napi_create_external(raw_env, data.cast(), Some(release_handle), std::ptr::null_mut(), &mut value) };
    if created != sys::Status::napi_ok {
        // SAFETY: the external was not created, so nothing else owns `data`.
        drop(unsafe { Box::from_raw(data) });
        return Err(napi::Error::new(napi::Status::from(created), "cannot create a runtime handle"));
    }
    // SAFETY: `value` is the external just created on this thread.
    status(unsafe { sys::napi_type_tag_object(raw_env, value, &HANDLE_TAG) }, "cannot tag a runtime handle")?;
    // SAFETY: as above; the value lives in the current handle scope.
    Ok(unsafe { Unknown::from_raw_unchecked(raw_env, value) })
}

/// What the handle `value` (a live value of the current call) refers to, or `None` when it
/// is not one of ours. Valid for as long as `value` is, which the caller's call bounds.
pub fn handle_target<'a>(env: sys::napi_env, value: sys::napi_value) -> Option<&'a Target> {
    let mut ours = false;
    // SAFETY: `value` is live in the current call on `env`'s thread (the caller's contract).
    let checked = unsafe { sys::napi_check_object_type_tag(env, value, &HANDLE_TAG, &mut ours) };
    if checked != sys::Status::napi_ok || !ours {
        return None;
    }
    let mut data = std::ptr::null_mut();
    // SAFETY: a value carrying our tag is an external made by `create_handle`.
    let got = unsafe { sys::napi_get_value_external(env, value, &mut data) };
    if got != sys::Status::napi_ok || data.is_null() {
        return None;
    }
    // SAFETY: the external's data is a live `Target` until the external is collected, and the
    // external is a value of the current call, so it is not collected during it.
    Some(unsafe { &*data.cast::<Target>() })
}

/// The arguments of one call, read on demand.
pub struct FastArgs {
    env: sys::napi_env,
    argv: [sys::napi_value; MAX_ARGS],
    /// All arguments when there are more than MAX_ARGS (artifacts with many sources).
    spill: Vec<sys::napi_value>,
    argc: usize,
}

impl FastArgs {
    pub fn len(&self) -> usize {
        self.argc
    }

    fn arg(&self, i: usize) -> Option<sys::napi_value> {
        if i >= self.argc {
            None
        } else if self.spill.is_empty() {
            Some(self.argv[i])
        } else {
            Some(self.spill[i])
        }
    }

    /// The runtime behind a handle argument; `Err(Closed)` once it is closed.
    pub fn target(&self, i: usize) -> Result<(Arc<Core>, Option<Arc<Shared>>), Error> {
        let bad = || Error::Value { name: "handle".into(), detail: "not a runtime handle".into() };
        let target = handle_target(self.env, self.arg(i).ok_or_else(bad)?).ok_or_else(bad)?;
        Ok((target.core.upgrade().ok_or(Error::Closed)?, target.shared.upgrade()))
    }

    pub fn u32(&self, i: usize) -> Option<u32> {
        let value = self.arg(i)?;
        let mut out = 0;
        // SAFETY: an argument of the current call; a non-number fails with a status.
        let got = unsafe { sys::napi_get_value_uint32(self.env, value, &mut out) };
        (got == sys::Status::napi_ok).then_some(out)
    }

    /// A TypedArray argument, or `None` when it is not one.
    pub fn array(&self, i: usize) -> Option<JsArray> {
        JsArray::inspect(self.env, self.arg(i)?)
    }
}

/// What a fast function does with its arguments: `Some(n)` returns `n` to JavaScript,
/// `None` returns `undefined` (no value is made: the common, cheapest case).
pub type Handler = fn(&FastArgs) -> Result<Option<u32>, Error>;

unsafe extern "C" fn call(env: sys::napi_env, info: sys::napi_callback_info) -> sys::napi_value {
    let mut args = FastArgs { env, argv: [std::ptr::null_mut(); MAX_ARGS], spill: Vec::new(), argc: MAX_ARGS };
    let mut data = std::ptr::null_mut();
    // SAFETY: `info` is this callback's own; `argv` has room for `argc` values.
    let mut got = unsafe { sys::napi_get_cb_info(env, info, &mut args.argc, args.argv.as_mut_ptr(), std::ptr::null_mut(), &mut data) };
    if got == sys::Status::napi_ok && args.argc > MAX_ARGS {
        // More arguments than room (napi_get_cb_info reported the true count): read them all.
        args.spill = vec![std::ptr::null_mut(); args.argc];
        // SAFETY: as above, with room for all `argc` values.
        got = unsafe { sys::napi_get_cb_info(env, info, &mut args.argc, args.spill.as_mut_ptr(), std::ptr::null_mut(), &mut data) };
    }
    let outcome = if got != sys::Status::napi_ok {
        Err(Error::Value { name: "arguments".into(), detail: "cannot read the call's arguments".into() })
    } else {
        // SAFETY: `data` is the `Handler` given to `create_function` for this function.
        let handler: Handler = unsafe { std::mem::transmute::<*mut c_void, Handler>(data) };
        handler(&args)
    };
    match outcome {
        Ok(None) => std::ptr::null_mut(), // undefined
        Ok(Some(n)) => {
            let mut value = std::ptr::null_mut();
            // SAFETY: plain number creation on this call's thread; NULL (undefined) on failure.
            unsafe { sys::napi_create_uint32(env, n, &mut value) };
            value
        }
        Err(e) => {
            // SAFETY: an error object made on this call's thread.
            unsafe { sys::napi_throw(env, crate::js::error_value(env, &e)) };
            std::ptr::null_mut() // the pending exception
        }
    }
}

/// A JavaScript function that runs `handler` on its arguments.
pub fn create_function<'env>(env: &'env Env, name: &str, handler: Handler) -> napi::Result<Unknown<'env>> {
    let mut value = std::ptr::null_mut();
    // SAFETY: `name` is valid for `name.len()` bytes during the call; `handler` is a plain fn
    // pointer, valid for the life of the module, passed through as the callback's data.
    let created = unsafe {
        sys::napi_create_function(env.raw(), name.as_ptr().cast(), name.len() as isize, Some(call), handler as *mut c_void, &mut value)
    };
    status(created, "cannot create a function")?;
    // SAFETY: `value` is the function just created, in the current scope.
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
}
