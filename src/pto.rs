//! napi glue for the PTO host library: each call becomes a job on the library's own thread
//! (`pto::thread`) and a Promise settled from there. Results come back as a `PtoOutcome`,
//! which `lib/pto.js` turns into a value or a `PtoError` with its code, rc and operation.

use crate::errors::{thrown, Code, Thrown};
use zgc::pto::registry::{self, Library};
use zgc::pto::{Host, LaunchParams, PtoError};
use zgc::ffi::pto::PtoLibrary;
use napi::bindgen_prelude::{Object, Uint8Array};
use napi::Env;
use napi_derive::napi;

fn load_err(e: PtoError) -> napi::Error<Code> {
    napi::Error::new(Code::of(e.code()), e.to_string())
}

#[napi(object)]
pub struct PtoOutcome {
    /// `ERR_PTO_*` when the call failed.
    pub code: Option<String>,
    pub message: Option<String>,
    /// The library's raw result, when it was called and failed.
    pub rc: Option<i32>,
    pub operation: Option<String>,
    /// The runtime's state after the call (runtime calls only).
    pub state: Option<String>,
    /// The library's device after the call.
    pub device: Option<i32>,
}

type Resolver = Box<dyn FnOnce(Env) -> napi::Result<PtoOutcome> + Send>;

/// Queues `job` on the library's thread; the Promise resolves with its outcome.
fn settle<'env>(
    env: &'env Env,
    library: &Library,
    runtime: Option<u64>,
    job: impl FnOnce(&mut Host<PtoLibrary>) -> Result<(), PtoError> + Send + 'static,
) -> napi::Result<Object<'env>> {
    let (deferred, promise) = env.create_deferred::<PtoOutcome, Resolver>()?;
    library
        .submit(move |host| {
            // Settle even if the job panics: an unsettled deferred would hang its caller.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&mut *host))).unwrap_or_else(|_| {
                Err(PtoError::State { operation: "zgc-runtime", detail: "internal error: the call panicked on the library thread".into() })
            });
            let state = runtime.map(|r| host.state(r).as_str().to_owned());
            let device = host.device();
            let outcome = match result {
                Ok(()) => PtoOutcome { code: None, message: None, rc: None, operation: None, state, device },
                Err(e) => PtoOutcome {
                    code: Some(e.code().to_owned()),
                    message: Some(e.to_string()),
                    rc: e.rc(),
                    operation: Some(e.operation().to_owned()),
                    state,
                    device,
                },
            };
            deferred.resolve(Box::new(move |_| Ok(outcome)));
        })
        .map_err(|e| napi::Error::from_reason(e.to_string()))?;
    Ok(promise)
}

#[napi]
pub struct NativePtoLibrary {
    library: Library,
    path: Option<String>,
}

#[napi]
impl NativePtoLibrary {
    /// The process's one copy of the library at `path`.
    #[napi(factory)]
    pub fn open(env: &Env, path: String) -> Result<NativePtoLibrary, Thrown> {
        (|| {
            let library = registry::load_path(&path).map_err(load_err)?;
            Ok(NativePtoLibrary { path: Some(library.label.clone()), library })
        })()
        .map_err(thrown(env))
    }

    /// A new copy of the library from its bytes, loaded from an anonymous memfd.
    #[napi(factory)]
    pub fn from_bytes(env: &Env, bytes: Uint8Array) -> Result<NativePtoLibrary, Thrown> {
        (|| {
            let library = registry::load_bytes(bytes.to_vec()).map_err(load_err)?;
            Ok(NativePtoLibrary { library, path: None })
        })()
        .map_err(thrown(env))
    }

    #[napi(getter)]
    pub fn path(&self) -> Option<String> {
        self.path.clone()
    }

    #[napi(getter)]
    pub fn runtime_size(&self) -> f64 {
        self.library.runtime_size as f64
    }

    #[napi]
    pub fn set_device<'env>(&self, env: &'env Env, device_id: i32) -> napi::Result<Object<'env>> {
        settle(env, &self.library, None, move |h| h.set_device(device_id))
    }

    /// The bytes are copied now: the caller may reuse its buffer at once.
    #[napi]
    pub fn register_kernel<'env>(&self, env: &'env Env, func_id: i32, binary: Uint8Array) -> napi::Result<Object<'env>> {
        let binary = binary.to_vec();
        settle(env, &self.library, None, move |h| h.register_kernel(func_id, binary))
    }

    #[napi]
    pub fn create_runtime(&self, id: f64) -> NativePtoRuntime {
        NativePtoRuntime { library: self.library.clone(), id: id as u64 }
    }

    /// Which OS thread runs this library's calls (tests compare it with the fixture's record).
    #[napi(getter)]
    pub fn thread_id(&self) -> i64 {
        self.library.tid
    }
}

/// A runtime of one library. Its storage lives on the library's thread; dropping this handle
/// (GC of the JS object) finalises a live runtime there before the storage is freed.
#[napi]
pub struct NativePtoRuntime {
    library: Library,
    id: u64,
}

#[napi]
impl NativePtoRuntime {
    #[napi]
    pub fn initialize<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let id = self.id;
        settle(env, &self.library, Some(id), move |h| h.initialize(id))
    }

    /// The binaries are copied now. Without `device_id`, the library's device.
    #[napi]
    pub fn launch<'env>(
        &self,
        env: &'env Env,
        aicpu_thread_num: i32,
        block_dim: i32,
        device_id: Option<i32>,
        aicpu_binary: Uint8Array,
        aicore_binary: Uint8Array,
    ) -> napi::Result<Object<'env>> {
        let id = self.id;
        let mut params = LaunchParams { aicpu_thread_num, block_dim, device_id: -1, aicpu_binary: aicpu_binary.to_vec(), aicore_binary: aicore_binary.to_vec() };
        settle(env, &self.library, Some(id), move |h| {
            // No id: the library's own device, as of this point in the call order.
            params.device_id = device_id.or(h.device()).unwrap_or(-1);
            h.launch(id, &params)
        })
    }

    #[napi]
    pub fn finalize<'env>(&self, env: &'env Env) -> napi::Result<Object<'env>> {
        let id = self.id;
        settle(env, &self.library, Some(id), move |h| h.finalize(id))
    }
}

impl Drop for NativePtoRuntime {
    fn drop(&mut self) {
        let id = self.id;
        // A stopped thread has no storage left to free.
        let _ = self.library.submit(move |h| {
            if let Some(Err(e)) = h.drop_runtime(id) {
                eprintln!("zgc-runtime: PTO runtime #{id} was collected unfinalised; FinalizeRuntime on its behalf failed: {e}");
            }
        });
    }
}

/// Every `err.code` of the PTO bindings (`zgc::pto::CODES`), for `lib/pto.js`'s tests.
#[napi]
pub fn pto_error_codes() -> Vec<String> {
    zgc::pto::CODES.iter().map(|c| (*c).to_owned()).collect()
}
