//! The PTO host library's six C functions, resolved at load and wrapped one safe method each.
//! Used only on the library's own thread, by `pto::Host`, which enforces the call order
//! (`pto::library` makes this the `HostApi` it drives).

use super::dylib::{self, BytesFile};
use super::memory::AlignedBuf;
use std::ffi::{c_int, c_void};

/// The alignment InitRuntime needs for its `Runtime` storage.
pub const RUNTIME_ALIGNMENT: usize = 64;

/// Why a library did not open; `pto` names the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    Load(String),
    MissingSymbol(&'static str),
}

type FnSize = unsafe extern "C" fn() -> usize;
type FnRuntime = unsafe extern "C" fn(*mut c_void) -> c_int;
type FnLaunch = unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, *const u8, usize, *const u8, usize) -> c_int;
type FnRegister = unsafe extern "C" fn(c_int, *const u8, usize) -> c_int;
type FnDevice = unsafe extern "C" fn(c_int) -> c_int;

pub struct PtoLibrary {
    init_runtime: FnRuntime,
    launch_runtime: FnLaunch,
    finalize_runtime: FnRuntime,
    register_kernel: FnRegister,
    set_device: FnDevice,
    size: usize,
    _library: libloading::Library,
    /// Dropped after the library loaded from it (see `dylib::BytesFile`).
    _bytes: Option<BytesFile>,
}

impl PtoLibrary {
    pub fn open(path: &str) -> Result<PtoLibrary, OpenError> {
        // No RTLD_DEEPBIND: the upstream library is C++, and a deep-bound libstdc++ user
        // gets its own copies of the standard streams.
        // SAFETY: loading runs the library's initialisers; the host library is trusted code
        // (it drives the device from this process). Its results are all checked.
        let library = unsafe { dylib::open(path, false) }
            .map_err(|e| OpenError::Load(std::error::Error::source(&e).map_or_else(|| e.to_string(), |c| format!("{e}: {c}"))))?;
        fn get<T: Copy>(library: &libloading::Library, symbol: &'static str) -> Result<T, OpenError> {
            // SAFETY: each call below names `T` as the C signature the spec gives `symbol`;
            // the pointer is used only while the library, owned next to it, stays loaded.
            unsafe { library.get::<T>(symbol.as_bytes()) }
                .map(|s| *s)
                .map_err(|_| OpenError::MissingSymbol(symbol))
        }
        let get_runtime_size: FnSize = get(&library, "GetRuntimeSize")?;
        let lib = PtoLibrary {
            init_runtime: get(&library, "InitRuntime")?,
            launch_runtime: get(&library, "launch_runtime")?,
            finalize_runtime: get(&library, "FinalizeRuntime")?,
            register_kernel: get(&library, "RegisterKernel")?,
            set_device: get(&library, "set_device")?,
            // SAFETY: takes no arguments and returns sizeof(Runtime).
            size: unsafe { get_runtime_size() },
            _library: library,
            _bytes: None,
        };
        Ok(lib)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<PtoLibrary, OpenError> {
        let (file, file_path) = dylib::bytes_file(bytes, c"zgc-pto-library").map_err(OpenError::Load)?;
        let mut library = PtoLibrary::open(&file_path)?;
        library._bytes = Some(file);
        Ok(library)
    }

    /// Storage InitRuntime may construct a Runtime in: big enough and 64-byte aligned.
    fn fits(&self, storage: &AlignedBuf) -> bool {
        storage.len() >= self.size && storage.as_ptr() as usize % RUNTIME_ALIGNMENT == 0
    }
}

/// The library's code for a NULL or unusable argument, returned without calling it.
const REFUSED: i32 = -1;

/// Each returns the library's rc; storage that does not fit is refused with its own code.
impl PtoLibrary {
    pub fn runtime_size(&self) -> usize {
        self.size
    }

    pub fn set_device(&self, device_id: i32) -> i32 {
        // SAFETY: takes a plain int.
        unsafe { (self.set_device)(device_id) }
    }

    pub fn register_kernel(&self, func_id: i32, binary: &[u8]) -> i32 {
        // SAFETY: `binary` is valid for `len` bytes during the call; the library copies it.
        unsafe { (self.register_kernel)(func_id, binary.as_ptr(), binary.len()) }
    }

    pub fn init_runtime(&self, storage: &mut AlignedBuf) -> i32 {
        if !self.fits(storage) {
            return REFUSED;
        }
        // SAFETY: writable, at least sizeof(Runtime) bytes, 64-byte aligned; `Host` keeps it
        // alive and unmoved (a heap block) until FinalizeRuntime returns.
        unsafe { (self.init_runtime)(storage.as_ptr().cast()) }
    }

    /// `threads` is the AICPU thread count; the caller has checked every value against the
    /// limits that keep a launch from hanging the device (`pto::LaunchParams::validate`).
    pub fn launch_runtime(&self, storage: &mut AlignedBuf, threads: i32, block_dim: i32, device_id: i32, aicpu: &[u8], aicore: &[u8]) -> i32 {
        if !self.fits(storage) {
            return REFUSED;
        }
        // SAFETY: `storage` holds a Runtime InitRuntime constructed (`Host` calls this only
        // then); both binaries are valid for their lengths during the call.
        unsafe {
            (self.launch_runtime)(
                storage.as_ptr().cast(),
                threads,
                block_dim,
                device_id,
                aicpu.as_ptr(),
                aicpu.len(),
                aicore.as_ptr(),
                aicore.len(),
            )
        }
    }

    pub fn finalize_runtime(&self, storage: &mut AlignedBuf) -> i32 {
        if !self.fits(storage) {
            return REFUSED;
        }
        // SAFETY: as launch_runtime: a constructed Runtime, finalised once (`Host` moves the
        // runtime to Finalized and frees the storage only after this returns).
        unsafe { (self.finalize_runtime)(storage.as_ptr().cast()) }
    }
}
