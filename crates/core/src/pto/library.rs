//! The PTO host library (`ffi::pto`) as the `HostApi` that `Host` drives, with its load
//! errors named by the path they are about.

use super::{HostApi, LaunchParams, PtoError};
use crate::ffi::memory::AlignedBuf;
use crate::ffi::pto::{OpenError, PtoLibrary};

fn named(path: &str, e: OpenError) -> PtoError {
    match e {
        OpenError::Load(reason) => PtoError::Load { path: path.to_owned(), reason },
        OpenError::MissingSymbol(symbol) => PtoError::MissingSymbol { path: path.to_owned(), symbol },
    }
}

pub fn open(path: &str) -> Result<PtoLibrary, PtoError> {
    PtoLibrary::open(path).map_err(|e| named(path, e))
}

pub fn from_bytes(bytes: &[u8]) -> Result<PtoLibrary, PtoError> {
    PtoLibrary::from_bytes(bytes).map_err(|e| named("<bytes>", e))
}

impl HostApi for PtoLibrary {
    fn runtime_size(&self) -> usize {
        PtoLibrary::runtime_size(self)
    }

    fn set_device(&self, device_id: i32) -> i32 {
        PtoLibrary::set_device(self, device_id)
    }

    fn register_kernel(&self, func_id: i32, binary: &[u8]) -> i32 {
        PtoLibrary::register_kernel(self, func_id, binary)
    }

    fn init_runtime(&self, storage: &mut AlignedBuf) -> i32 {
        PtoLibrary::init_runtime(self, storage)
    }

    fn launch_runtime(&self, storage: &mut AlignedBuf, p: &LaunchParams) -> i32 {
        // `Host` launches only with parameters that passed `LaunchParams::validate`.
        PtoLibrary::launch_runtime(self, storage, p.aicpu_thread_num, p.block_dim, p.device_id, &p.aicpu_binary, &p.aicore_binary)
    }

    fn finalize_runtime(&self, storage: &mut AlignedBuf) -> i32 {
        PtoLibrary::finalize_runtime(self, storage)
    }
}
