//! The way back to the JavaScript thread: a napi threadsafe function that carries boxed
//! messages to a handler run on that thread, and promises settled there.

use napi::sys;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};

/// What runs on the JavaScript thread for each message: `env` is that thread's.
pub type Handler<M> = Box<dyn Fn(sys::napi_env, M)>;

/// Whether the function may still be called. Node deletes a threadsafe function when its
/// environment is torn down (a worker thread ending, the process exiting), whatever thread
/// counts are still held; an environment cleanup hook closes this gate first, and every call
/// from another thread goes through it, so none reaches a deleted function.
struct Gate {
    open: Mutex<bool>,
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, bool> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Context<M> {
    handler: Handler<M>,
    env: sys::napi_env,
    /// The cleanup hook's share of the gate (`Arc::into_raw`), freed with the context.
    hook: *const Gate,
}

/// A threadsafe function whose messages are `M`. Its raw handle may be used from any thread
/// (that is what Node-API makes it for); `keep_loop` only from the JS thread.
pub struct Tsfn<M> {
    raw: sys::napi_threadsafe_function,
    gate: Arc<Gate>,
    _messages: PhantomData<fn(M)>,
}

// SAFETY: Node-API documents napi_call/acquire/release_threadsafe_function as callable from
// any thread; the handle itself is an opaque pointer Node keeps alive until the thread count
// reaches zero, and every user here holds a count until it stops calling.
unsafe impl<M: Send> Send for Tsfn<M> {}
// SAFETY: as above: the calls taking `&self` from other threads are the thread-safe ones.
unsafe impl<M: Send> Sync for Tsfn<M> {}

unsafe extern "C" fn call_js<M>(env: sys::napi_env, _js_cb: sys::napi_value, context: *mut c_void, data: *mut c_void) {
    // SAFETY: `data` is the Box made in `send`, handed over by Node exactly once.
    let message = unsafe { Box::from_raw(data.cast::<M>()) };
    if env.is_null() {
        // The environment is being torn down: nothing can be settled, and what the message
        // holds may include JavaScript references that must not be dropped now.
        std::mem::forget(message);
        return;
    }
    // SAFETY: `context` is the Context made in `create`, freed only by `finalize`, which
    // Node calls after the last message.
    let context = unsafe { &*context.cast::<Context<M>>() };
    (context.handler)(env, *message);
}

unsafe extern "C" fn close_gate(arg: *mut c_void) {
    // SAFETY: `arg` is the hook's share of the gate, alive until `finalize` frees it, which
    // comes after this hook (hooks run before the function's own teardown, see `create`).
    let gate = unsafe { &*arg.cast::<Gate>() };
    *gate.lock() = false;
}

unsafe extern "C" fn finalize<M>(_env: sys::napi_env, data: *mut c_void, _hint: *mut c_void) {
    // SAFETY: `data` is the Context made in `create`; Node calls this once, after every message.
    let context = unsafe { Box::from_raw(data.cast::<Context<M>>()) };
    // SAFETY: on the JS thread of `env`; removing a hook that already ran does nothing.
    unsafe { sys::napi_remove_env_cleanup_hook(context.env, Some(close_gate), context.hook.cast_mut().cast()) };
    // SAFETY: the hook's share of the gate is still held (it is dropped just below).
    *unsafe { &*context.hook }.lock() = false;
    // SAFETY: the hook's share, made by `Arc::into_raw` in `create`; the hook no longer runs.
    drop(unsafe { Arc::from_raw(context.hook) });
}

impl<M: Send + 'static> Tsfn<M> {
    /// On the JS thread: a threadsafe function held by `threads` users, each of which calls
    /// `release` once when done with it; `handler` runs on this thread for every message.
    pub fn create(env: sys::napi_env, threads: usize, handler: Handler<M>) -> Result<Tsfn<M>, sys::napi_status> {
        let gate = Arc::new(Gate { open: Mutex::new(true) });
        let hook = Arc::into_raw(gate.clone());
        let context = Box::into_raw(Box::new(Context { handler, env, hook }));
        let mut name = std::ptr::null_mut();
        let mut raw = std::ptr::null_mut();
        // SAFETY: called on `env`'s thread; the name is a valid UTF-8 buffer of its length;
        // no JS function is given (allowed with a call_js callback); `context` lives until
        // `finalize`.
        let status = unsafe {
            let named = sys::napi_create_string_utf8(env, c"zgc-runtime".as_ptr(), 11, &mut name);
            if named != sys::Status::napi_ok {
                named
            } else {
                sys::napi_create_threadsafe_function(
                    env,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    name,
                    0,
                    threads,
                    context.cast(),
                    Some(finalize::<M>),
                    context.cast(),
                    Some(call_js::<M>),
                    &mut raw,
                )
            }
        };
        if status != sys::Status::napi_ok {
            // SAFETY: Node did not take `context`, so it is still ours.
            drop(unsafe { Box::from_raw(context) });
            // SAFETY: nor the hook's share, made by `Arc::into_raw` above and never handed out.
            drop(unsafe { Arc::from_raw(hook) });
            return Err(status);
        }
        // Added after the function, so it runs before the function's own teardown (Node runs
        // cleanup hooks in reverse order of addition).
        // SAFETY: `hook` stays valid until `finalize`, which removes the hook first.
        unsafe { sys::napi_add_env_cleanup_hook(env, Some(close_gate), hook.cast_mut().cast()) };
        Ok(Tsfn { raw, gate, _messages: PhantomData })
    }

    /// From any thread: queues `message` for the handler. `Err` gives it back when the
    /// function no longer takes calls (its environment is closing).
    pub fn send(&self, message: M) -> Result<(), M> {
        let open = self.gate.lock();
        if !*open {
            return Err(message);
        }
        let data = Box::into_raw(Box::new(message));
        // SAFETY: the gate is open (and held), so the environment is not torn down and Node has
        // not deleted the function; the caller holds a thread count.
        let status = unsafe { sys::napi_call_threadsafe_function(self.raw, data.cast(), sys::ThreadsafeFunctionCallMode::nonblocking) };
        if status == sys::Status::napi_ok {
            Ok(())
        } else {
            // SAFETY: the call failed, so Node did not take `data`.
            Err(*unsafe { Box::from_raw(data) })
        }
    }

    /// Gives up one thread count; the last one lets Node finalise the function.
    pub fn release(&self) {
        let open = self.gate.lock();
        if *open {
            // SAFETY: the gate is open (see `send`); the caller gives up a count it holds, once.
            unsafe { sys::napi_release_threadsafe_function(self.raw, sys::ThreadsafeFunctionReleaseMode::release) };
        }
    }

    /// Whether calls still reach the JavaScript thread.
    pub fn open(&self) -> bool {
        *self.gate.lock()
    }

    /// On the JS thread: whether pending messages keep the event loop alive.
    pub fn keep_loop(&self, env: sys::napi_env, keep: bool) {
        // SAFETY: called on `env`'s thread while a count is held (the JS side's own).
        unsafe {
            if keep {
                sys::napi_ref_threadsafe_function(env, self.raw);
            } else {
                sys::napi_unref_threadsafe_function(env, self.raw);
            }
        }
    }
}

/// A promise's resolver, settled on the JS thread that made it.
pub struct Deferred(sys::napi_deferred);

// SAFETY: the handle is only moved across threads inside queued runs; it is settled (used)
// only by `resolve`/`reject`, which take the `env` of the JS thread that created it and are
// called from that thread's threadsafe-function handler or its own methods.
unsafe impl Send for Deferred {}

impl Deferred {
    /// On the JS thread: a new promise and its resolver.
    pub fn new(env: sys::napi_env) -> Result<(Deferred, sys::napi_value), sys::napi_status> {
        let (mut deferred, mut promise) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: called on `env`'s thread with out-pointers to locals.
        let status = unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) };
        if status == sys::Status::napi_ok {
            Ok((Deferred(deferred), promise))
        } else {
            Err(status)
        }
    }

    pub fn resolve(self, env: sys::napi_env, value: sys::napi_value) {
        // SAFETY: on the JS thread of `env` (this type's contract); a deferred is settled once,
        // which taking `self` guarantees.
        unsafe { sys::napi_resolve_deferred(env, self.0, value) };
    }

    pub fn reject(self, env: sys::napi_env, value: sys::napi_value) {
        // SAFETY: as `resolve`.
        unsafe { sys::napi_reject_deferred(env, self.0, value) };
    }
}
