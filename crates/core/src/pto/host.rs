//! The state machine of one PTO library: its device, its kernels and its runtimes. Every
//! misuse is refused here, before the library is called; every call's result is checked.
//! A `Host` lives on its library's thread (see `thread`), so it needs no locks.

use super::error::check;
use super::{LaunchParams, PtoError};
use crate::ffi::memory::AlignedBuf;
use std::collections::HashMap;

/// The Runtime storage alignment the upstream build's vector stores need.
pub use crate::ffi::pto::RUNTIME_ALIGNMENT;

/// The six C functions. Implementations may assume `Host`'s ordering: `init_runtime` only on
/// fresh storage of at least `runtime_size()` bytes, aligned to `RUNTIME_ALIGNMENT`;
/// `launch_runtime` and `finalize_runtime` only on storage `init_runtime` succeeded on and
/// that was not finalised since.
pub trait HostApi {
    fn runtime_size(&self) -> usize;
    fn set_device(&self, device_id: i32) -> i32;
    fn register_kernel(&self, func_id: i32, binary: &[u8]) -> i32;
    fn init_runtime(&self, storage: &mut AlignedBuf) -> i32;
    fn launch_runtime(&self, storage: &mut AlignedBuf, params: &LaunchParams) -> i32;
    fn finalize_runtime(&self, storage: &mut AlignedBuf) -> i32;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeState {
    Created,
    Initialized,
    Launched,
    Finalized,
}

impl RuntimeState {
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeState::Created => "created",
            RuntimeState::Initialized => "initialized",
            RuntimeState::Launched => "launched",
            RuntimeState::Finalized => "finalized",
        }
    }
}

struct Slot {
    state: RuntimeState,
    /// Holds the placement-new'd Runtime from a successful InitRuntime until FinalizeRuntime
    /// returns; never moved (a heap allocation) and never freed while the library uses it.
    storage: Option<AlignedBuf>,
}

pub struct Host<A: HostApi> {
    api: A,
    runtime_size: usize,
    device: Option<i32>,
    live: Option<u64>,
    runtimes: HashMap<u64, Slot>,
    /// Registered kernel bytes, and whether a launch has committed them (the library ignores
    /// a later registration of the same func_id).
    kernels: HashMap<i32, (Vec<u8>, bool)>,
}

impl<A: HostApi> Host<A> {
    pub fn new(api: A) -> Host<A> {
        let runtime_size = api.runtime_size();
        Host { api, runtime_size, device: None, live: None, runtimes: HashMap::new(), kernels: HashMap::new() }
    }

    pub fn runtime_size(&self) -> usize {
        self.runtime_size
    }

    pub fn device(&self) -> Option<i32> {
        self.device
    }

    pub fn api(&self) -> &A {
        &self.api
    }

    pub fn state(&self, runtime: u64) -> RuntimeState {
        self.runtimes.get(&runtime).map_or(RuntimeState::Created, |s| s.state)
    }

    /// The first call selects the device; the same id again is a no-op; another id is refused,
    /// where the library would silently keep the first.
    pub fn set_device(&mut self, device_id: i32) -> Result<(), PtoError> {
        if device_id < 0 {
            return Err(PtoError::InvalidArgument { operation: "set_device", detail: format!("device id must be >= 0, got {device_id}") });
        }
        match self.device {
            Some(set) if set == device_id => Ok(()),
            Some(set) => Err(PtoError::Device { operation: "set_device", set, asked: device_id }),
            None => {
                check("set_device", self.api.set_device(device_id))?;
                self.device = Some(device_id);
                Ok(())
            }
        }
    }

    /// Registering the bytes a launch already committed is a no-op; other bytes for a
    /// committed func_id are refused, where the library would silently keep the old ones.
    pub fn register_kernel(&mut self, func_id: i32, binary: Vec<u8>) -> Result<(), PtoError> {
        let bad = |detail: String| Err(PtoError::InvalidArgument { operation: "RegisterKernel", detail });
        if func_id < 0 {
            return bad(format!("funcId must be >= 0, got {func_id}"));
        }
        if binary.is_empty() {
            return bad(format!("the binary of kernel {func_id} is empty"));
        }
        if let Some((committed, true)) = self.kernels.get(&func_id) {
            if *committed == binary {
                return Ok(());
            }
            return Err(PtoError::State {
                operation: "RegisterKernel",
                detail: format!("kernel {func_id} was committed to the device by a launch; the library ignores new bytes for it"),
            });
        }
        check("RegisterKernel", self.api.register_kernel(func_id, &binary))?;
        self.kernels.insert(func_id, (binary, false));
        Ok(())
    }

    pub fn initialize(&mut self, runtime: u64) -> Result<(), PtoError> {
        const OP: &str = "InitRuntime";
        match self.state(runtime) {
            RuntimeState::Created => {}
            RuntimeState::Finalized => return Err(finalized(OP)),
            _ => return Err(PtoError::State { operation: OP, detail: "the runtime is already initialised".into() }),
        }
        if self.device.is_none() {
            return Err(PtoError::State { operation: OP, detail: "setDevice() must come first: InitRuntime allocates device memory".into() });
        }
        if let Some(live) = self.live {
            return Err(PtoError::LiveRuntime { operation: OP, live });
        }
        let bytes = self.runtime_size;
        let mut storage = AlignedBuf::zeroed(bytes.max(1), RUNTIME_ALIGNMENT).ok_or(PtoError::OutOfMemory { operation: OP, bytes })?;
        check(OP, self.api.init_runtime(&mut storage))?;
        self.runtimes.insert(runtime, Slot { state: RuntimeState::Initialized, storage: Some(storage) });
        self.live = Some(runtime);
        Ok(())
    }

    pub fn launch(&mut self, runtime: u64, params: &LaunchParams) -> Result<(), PtoError> {
        const OP: &str = "launch_runtime";
        match self.state(runtime) {
            RuntimeState::Initialized => {}
            RuntimeState::Created => return Err(PtoError::State { operation: OP, detail: "initialize() must come before launch()".into() }),
            RuntimeState::Launched => {
                return Err(PtoError::State { operation: OP, detail: "the runtime was already launched; finalize it and create a new one".into() })
            }
            RuntimeState::Finalized => return Err(finalized(OP)),
        }
        params.validate(self.device.expect("an initialised runtime implies a device"))?;
        let slot = self.runtimes.get_mut(&runtime).expect("an initialised runtime has a slot");
        let storage = slot.storage.as_mut().expect("an initialised runtime has storage");
        check(OP, self.api.launch_runtime(storage, params))?;
        slot.state = RuntimeState::Launched;
        for (_, committed) in self.kernels.values_mut() {
            *committed = true;
        }
        Ok(())
    }

    /// Runs FinalizeRuntime (the library's validation) and frees the storage after it returns.
    /// A non-zero result is `Validation`: never dropped.
    pub fn finalize(&mut self, runtime: u64) -> Result<(), PtoError> {
        const OP: &str = "FinalizeRuntime";
        match self.state(runtime) {
            RuntimeState::Initialized | RuntimeState::Launched => {}
            RuntimeState::Created => return Err(PtoError::State { operation: OP, detail: "the runtime was never initialised".into() }),
            RuntimeState::Finalized => return Err(PtoError::State { operation: OP, detail: "the runtime is already finalised".into() }),
        }
        let slot = self.runtimes.get_mut(&runtime).expect("an initialised runtime has a slot");
        let mut storage = slot.storage.take().expect("an initialised runtime has storage");
        let rc = self.api.finalize_runtime(&mut storage);
        drop(storage);
        slot.state = RuntimeState::Finalized;
        self.live = None;
        if rc != 0 {
            return Err(PtoError::Validation { rc });
        }
        Ok(())
    }

    /// The runtime's handle is gone: a live runtime is finalised first, so its storage is
    /// never freed under the library.
    pub fn drop_runtime(&mut self, runtime: u64) -> Option<Result<(), PtoError>> {
        let outcome = match self.state(runtime) {
            RuntimeState::Initialized | RuntimeState::Launched => Some(self.finalize(runtime)),
            _ => None,
        };
        self.runtimes.remove(&runtime);
        outcome
    }
}

fn finalized(operation: &'static str) -> PtoError {
    PtoError::State { operation, detail: "the runtime was finalised; create a new one".into() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Records the calls that reach the "library", and answers with scripted results.
    #[derive(Default)]
    struct Recorder {
        calls: RefCell<Vec<String>>,
        rc: RefCell<HashMap<&'static str, i32>>,
    }
    impl Recorder {
        fn answer(&self, name: &'static str, call: String) -> i32 {
            self.calls.borrow_mut().push(call);
            self.rc.borrow().get(name).copied().unwrap_or(0)
        }
    }
    impl HostApi for Recorder {
        fn runtime_size(&self) -> usize {
            1000
        }
        fn set_device(&self, id: i32) -> i32 {
            self.answer("set_device", format!("set_device({id})"))
        }
        fn register_kernel(&self, id: i32, bin: &[u8]) -> i32 {
            self.answer("RegisterKernel", format!("RegisterKernel({id}, {bin:?})"))
        }
        fn init_runtime(&self, s: &mut AlignedBuf) -> i32 {
            assert_eq!(s.as_ptr() as usize % RUNTIME_ALIGNMENT, 0);
            assert!(s.len() >= 1000);
            self.answer("InitRuntime", "InitRuntime".into())
        }
        fn launch_runtime(&self, _s: &mut AlignedBuf, p: &LaunchParams) -> i32 {
            self.answer("launch_runtime", format!("launch_runtime({}, {})", p.aicpu_thread_num, p.block_dim))
        }
        fn finalize_runtime(&self, _s: &mut AlignedBuf) -> i32 {
            self.answer("FinalizeRuntime", "FinalizeRuntime".into())
        }
    }

    fn launch_params() -> LaunchParams {
        LaunchParams { aicpu_thread_num: 1, block_dim: 2, device_id: 0, aicpu_binary: vec![1], aicore_binary: vec![2] }
    }

    fn calls(host: &Host<Recorder>) -> Vec<String> {
        host.api.calls.borrow_mut().drain(..).collect()
    }

    #[test]
    fn the_happy_path_calls_the_library_in_order() {
        let mut host = Host::new(Recorder::default());
        host.set_device(0).unwrap();
        host.register_kernel(0, b"add".to_vec()).unwrap();
        host.initialize(1).unwrap();
        assert_eq!(host.state(1), RuntimeState::Initialized);
        host.launch(1, &launch_params()).unwrap();
        assert_eq!(host.state(1), RuntimeState::Launched);
        host.finalize(1).unwrap();
        assert_eq!(host.state(1), RuntimeState::Finalized);
        assert_eq!(calls(&host), ["set_device(0)", "RegisterKernel(0, [97, 100, 100])", "InitRuntime", "launch_runtime(1, 2)", "FinalizeRuntime"]);
    }

    #[test]
    fn misuse_is_refused_without_calling_the_library() {
        let mut host = Host::new(Recorder::default());
        assert_eq!(host.initialize(1).unwrap_err().code(), "ERR_PTO_STATE"); // before setDevice
        host.set_device(2).unwrap();
        calls(&host);
        assert_eq!(host.set_device(2), Ok(()));
        assert_eq!(host.set_device(3), Err(PtoError::Device { operation: "set_device", set: 2, asked: 3 }));
        assert_eq!(host.launch(1, &launch_params()).unwrap_err().code(), "ERR_PTO_STATE"); // before initialize
        assert_eq!(host.finalize(1).unwrap_err().code(), "ERR_PTO_STATE");
        assert_eq!(host.register_kernel(0, vec![]).unwrap_err().code(), "ERR_PTO_INVALID_ARGUMENT");
        host.initialize(1).unwrap();
        assert_eq!(calls(&host), ["InitRuntime"]);
        assert_eq!(host.initialize(1).unwrap_err().code(), "ERR_PTO_STATE");
        assert_eq!(host.initialize(2), Err(PtoError::LiveRuntime { operation: "InitRuntime", live: 1 }));
        let mut hanging = launch_params();
        hanging.block_dim = 3;
        hanging.aicpu_thread_num = 2;
        assert_eq!(host.launch(1, &hanging).unwrap_err().code(), "ERR_PTO_INVALID_ARGUMENT");
        let mut elsewhere = launch_params();
        elsewhere.device_id = 0;
        assert_eq!(host.launch(1, &elsewhere).unwrap_err().code(), "ERR_PTO_DEVICE");
        assert_eq!(calls(&host), Vec::<String>::new());
        let mut on_device = launch_params();
        on_device.device_id = 2;
        host.launch(1, &on_device).unwrap();
        assert_eq!(host.launch(1, &on_device).unwrap_err().code(), "ERR_PTO_STATE");
        host.finalize(1).unwrap();
        calls(&host);
        assert_eq!(host.finalize(1).unwrap_err().code(), "ERR_PTO_STATE");
        assert_eq!(host.launch(1, &on_device).unwrap_err().code(), "ERR_PTO_STATE");
        assert_eq!(host.initialize(1).unwrap_err().code(), "ERR_PTO_STATE");
        assert_eq!(calls(&host), Vec::<String>::new());
        host.initialize(2).unwrap(); // the live one was finalised
    }

    #[test]
    fn library_failures_carry_their_rc_and_finalize_failure_is_validation() {
        let mut host = Host::new(Recorder::default());
        host.api.rc.borrow_mut().insert("set_device", 107002);
        assert_eq!(host.set_device(0), Err(PtoError::Failed { operation: "set_device", rc: 107002 }));
        assert_eq!(host.device(), None);
        host.api.rc.borrow_mut().clear();
        host.set_device(0).unwrap();
        host.api.rc.borrow_mut().insert("InitRuntime", -1);
        assert_eq!(host.initialize(1), Err(PtoError::Failed { operation: "InitRuntime", rc: -1 }));
        assert_eq!(host.state(1), RuntimeState::Created);
        host.api.rc.borrow_mut().clear();
        host.initialize(1).unwrap();
        host.launch(1, &launch_params()).unwrap();
        host.api.rc.borrow_mut().insert("FinalizeRuntime", -1);
        let err = host.finalize(1).unwrap_err();
        assert_eq!((err.code(), err.rc(), err.operation()), ("ERR_PTO_VALIDATION", Some(-1), "FinalizeRuntime"));
        assert_eq!(host.state(1), RuntimeState::Finalized);
    }

    #[test]
    fn committed_kernels_accept_the_same_bytes_and_refuse_others() {
        let mut host = Host::new(Recorder::default());
        host.set_device(0).unwrap();
        host.register_kernel(1, b"mul".to_vec()).unwrap();
        host.register_kernel(1, b"add".to_vec()).unwrap(); // not committed yet: replaced
        host.initialize(1).unwrap();
        host.launch(1, &launch_params()).unwrap();
        calls(&host);
        assert_eq!(host.register_kernel(1, b"add".to_vec()), Ok(()));
        assert_eq!(host.register_kernel(1, b"mul".to_vec()).unwrap_err().code(), "ERR_PTO_STATE");
        assert_eq!(calls(&host), Vec::<String>::new());
    }

    #[test]
    fn a_dropped_live_runtime_is_finalised_before_its_storage_goes() {
        let mut host = Host::new(Recorder::default());
        host.set_device(0).unwrap();
        host.initialize(7).unwrap();
        calls(&host);
        assert_eq!(host.drop_runtime(7), Some(Ok(())));
        assert_eq!(calls(&host), ["FinalizeRuntime"]);
        assert_eq!(host.drop_runtime(8), None);
        host.initialize(9).unwrap(); // no longer live
    }

    #[test]
    fn the_device_and_each_state_are_reported_as_javascript_sees_them() {
        let mut host = Host::new(Recorder::default());
        assert_eq!(host.device(), None);
        host.set_device(5).unwrap();
        assert_eq!(host.device(), Some(5));
        let mut names = vec![host.state(1).as_str()];
        host.initialize(1).unwrap();
        names.push(host.state(1).as_str());
        let mut on_device = launch_params();
        on_device.device_id = 5;
        host.launch(1, &on_device).unwrap();
        names.push(host.state(1).as_str());
        host.finalize(1).unwrap();
        names.push(host.state(1).as_str());
        assert_eq!(names, ["created", "initialized", "launched", "finalized"]);
    }

    #[test]
    fn a_finalised_runtime_says_so_to_each_call_rather_than_seeming_busy() {
        let mut host = Host::new(Recorder::default());
        host.set_device(0).unwrap();
        host.initialize(1).unwrap();
        host.finalize(1).unwrap();
        let finalised = "the runtime was finalised; create a new one".to_string();
        assert_eq!(host.initialize(1), Err(PtoError::State { operation: "InitRuntime", detail: finalised.clone() }));
        assert_eq!(host.launch(1, &launch_params()), Err(PtoError::State { operation: "launch_runtime", detail: finalised }));
    }
}
