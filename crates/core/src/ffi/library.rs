//! The artifact's shared library: opened once, its 15 functions resolved up front, and a safe
//! method for each call that does not take runtime storage (those are in `runtime`).

use super::dylib::{self, BytesFile};
use crate::abi::{self, RawSourceDescriptor, RawTensorDescriptor, SourceFields, TensorFields};
use crate::error::{Error, Result};
use crate::meta::MAX_RANK;
use std::ffi::{c_int, c_void, CStr};
use std::os::raw::c_char;

type FnU32 = unsafe extern "C" fn() -> u32;
type FnU64 = unsafe extern "C" fn() -> u64;
type FnSize = unsafe extern "C" fn() -> usize;
pub(super) type FnInit = unsafe extern "C" fn(*mut c_void, usize) -> c_int;
pub(super) type FnDeinit = unsafe extern "C" fn(*mut c_void);
pub(super) type FnRun = unsafe extern "C" fn(*mut c_void) -> c_int;
type FnSourceDescriptor = unsafe extern "C" fn(usize, *mut RawSourceDescriptor) -> c_int;
pub(super) type FnCopySource = unsafe extern "C" fn(*mut c_void, u32, *const c_void, usize) -> c_int;
pub(super) type FnBindSource = unsafe extern "C" fn(*mut c_void, u32, *mut c_void, usize) -> c_int;
type FnOutputDescriptor = unsafe extern "C" fn(usize, *mut RawTensorDescriptor) -> c_int;
pub(super) type FnCopyOutput = unsafe extern "C" fn(*mut c_void, usize, *mut c_void, usize) -> c_int;

/// Longest source name read; bounds the scan of a name that is not NUL-terminated.
const MAX_NAME: usize = 4096;

pub(super) struct Api {
    abi_version: FnU32,
    fingerprint: FnU64,
    runtime_size: FnSize,
    runtime_alignment: FnSize,
    mutable_bytes: FnSize,
    pub(super) init: FnInit,
    pub(super) deinit: FnDeinit,
    pub(super) run: FnRun,
    source_count: FnSize,
    source_descriptor: FnSourceDescriptor,
    pub(super) copy_source: FnCopySource,
    pub(super) bind_source: FnBindSource,
    output_count: FnSize,
    output_descriptor: FnOutputDescriptor,
    pub(super) copy_output: FnCopyOutput,
}

/// An opened artifact. The function pointers in `api` point into `_library`, which this
/// struct keeps open for as long as it lives; owners share it through an `Arc`.
pub struct ArtifactLibrary {
    pub(super) api: Api,
    pub path: String,
    _library: libloading::Library,
    /// The file a library loaded from bytes came from, dropped after the library (see
    /// `dylib::BytesFile`).
    _bytes: Option<BytesFile>,
}

impl ArtifactLibrary {
    /// Opens a shared library by path and resolves every ABI symbol.
    pub fn open(path: &str) -> Result<ArtifactLibrary> {
        // Checked before dlopen: musl's loader maps a library of another CPU without a word,
        // and its code would then run.
        if let Some(why) = foreign_header(path) {
            return Err(Error::Load { path: path.to_owned(), reason: why });
        }
        // SAFETY: loading runs the library's initialisers. An artifact is trusted code by the
        // ABI's own terms (it runs in the caller's process); everything it *reports* is
        // validated before use, which is what this crate can check.
        let library = unsafe { dylib::open(path, true) }
            .map_err(|e| Error::Load { path: path.to_owned(), reason: load_failure(path, &e) })?;
        // The version is checked before anything else is resolved: another ABI version may
        // export other symbols, and saying so beats naming a missing one.
        let version_fn: FnU32 = get(&library, path, 0)?;
        // SAFETY: `zgc_abi_version` takes no arguments and returns a u32 in every ABI version.
        let found = unsafe { version_fn() };
        if found != abi::ABI_VERSION {
            return Err(Error::AbiVersion { path: path.to_owned(), found });
        }
        let api = resolve(&library, path)?;
        Ok(ArtifactLibrary { api, path: path.to_owned(), _library: library, _bytes: None })
    }

    /// Loads an artifact from bytes without leaving a file behind once it is dropped: an
    /// anonymous memfd on Linux, a temporary file elsewhere.
    pub fn from_bytes(bytes: &[u8], label: &str) -> Result<ArtifactLibrary> {
        let (file, file_path) = dylib::bytes_file(bytes, c"zgc-artifact").map_err(|reason| Error::Load { path: label.to_owned(), reason })?;
        let mut library = ArtifactLibrary::open(&file_path).map_err(|e| relabel(e, label))?;
        library.path = label.to_owned();
        library._bytes = Some(file);
        Ok(library)
    }

    pub fn abi_version(&self) -> u32 {
        // SAFETY: resolved from this library, which `self` keeps loaded; takes no arguments.
        unsafe { (self.api.abi_version)() }
    }
    pub fn fingerprint(&self) -> u64 {
        // SAFETY: as `abi_version`.
        unsafe { (self.api.fingerprint)() }
    }
    pub fn runtime_size(&self) -> usize {
        // SAFETY: as `abi_version`.
        unsafe { (self.api.runtime_size)() }
    }
    pub fn runtime_alignment(&self) -> usize {
        // SAFETY: as `abi_version`.
        unsafe { (self.api.runtime_alignment)() }
    }
    pub fn mutable_bytes(&self) -> usize {
        // SAFETY: as `abi_version`.
        unsafe { (self.api.mutable_bytes)() }
    }
    pub fn source_count(&self) -> usize {
        // SAFETY: as `abi_version`.
        unsafe { (self.api.source_count)() }
    }
    pub fn output_count(&self) -> usize {
        // SAFETY: as `abi_version`.
        unsafe { (self.api.output_count)() }
    }

    /// Reads source `index` and copies out everything its pointers reach.
    pub fn source_descriptor(&self, index: usize) -> Result<SourceFields> {
        let mut raw = RawSourceDescriptor::zeroed();
        // SAFETY: `raw` is a valid, writable SourceDescriptor for the call's duration.
        let status = unsafe { (self.api.source_descriptor)(index, &mut raw) };
        let what = || format!("source #{index}");
        if status != 0 {
            return Err(self.invalid(what(), format!("zgc_executable_get_source_descriptor returned status {status}")));
        }
        let name = if raw.name.is_null() { None } else { Some(self.read_name(raw.name, &what)?) };
        let tensor = self.read_tensor(&raw.tensor, &what)?;
        Ok(SourceFields { key: raw.key, name, kind: raw.kind, binding: raw.binding, tensor })
    }

    pub fn output_descriptor(&self, index: usize) -> Result<TensorFields> {
        let mut raw = RawTensorDescriptor::zeroed();
        // SAFETY: `raw` is a valid, writable TensorDescriptor for the call's duration.
        let status = unsafe { (self.api.output_descriptor)(index, &mut raw) };
        let what = || format!("output {index}");
        if status != 0 {
            return Err(self.invalid(what(), format!("zgc_executable_get_output_descriptor returned status {status}")));
        }
        self.read_tensor(&raw, &what)
    }

    fn read_name(&self, name: *const c_char, what: &dyn Fn() -> String) -> Result<Vec<u8>> {
        let mut len = 0;
        // SAFETY: the descriptor says `name` is NUL-terminated; the scan stops at MAX_NAME so
        // an unterminated name is refused instead of read without end.
        while len < MAX_NAME && unsafe { *name.add(len) } != 0 {
            len += 1;
        }
        if len == MAX_NAME {
            return Err(self.invalid(what(), format!("name is longer than {MAX_NAME} bytes or not NUL-terminated")));
        }
        // SAFETY: a NUL was found at `len`, so this is a valid C string.
        Ok(unsafe { CStr::from_ptr(name) }.to_bytes().to_vec())
    }

    fn read_tensor(&self, raw: &RawTensorDescriptor, what: &dyn Fn() -> String) -> Result<TensorFields> {
        if raw.rank > MAX_RANK {
            return Err(self.invalid(what(), format!("rank {} exceeds the supported {MAX_RANK}", raw.rank)));
        }
        let rank = raw.rank as usize;
        let (shape, strides) = if rank == 0 {
            (Vec::new(), Vec::new())
        } else {
            if raw.shape.is_null() {
                return Err(self.invalid(what(), format!("shape is NULL for rank {rank}")));
            }
            if raw.strides.is_null() {
                return Err(self.invalid(what(), format!("strides is NULL for rank {rank}")));
            }
            // SAFETY: non-NULL and, per the ABI, `rank` entries long; rank is bounded above.
            unsafe {
                (
                    std::slice::from_raw_parts(raw.shape, rank).to_vec(),
                    std::slice::from_raw_parts(raw.strides, rank).to_vec(),
                )
            }
        };
        Ok(TensorFields {
            dtype: raw.dtype,
            element_count: raw.element_count,
            logical_byte_count: raw.logical_byte_count,
            offset_elements: raw.offset_elements,
            shape,
            strides,
        })
    }

    fn invalid(&self, what: String, rule: String) -> Error {
        Error::invalid(&self.path, what, rule)
    }
}

/// libloading's message plus dlerror's, which says what actually went wrong.
/// Another platform's library, told from the file's first bytes (format and CPU only: its C
/// library is named when dlopen fails, since musl loads a glibc library that needs only what
/// musl has).
fn foreign_header(path: &str) -> Option<String> {
    use std::io::Read;
    let mut head = Vec::new();
    // 4 KiB: ELF's and Mach-O's headers are at the start, PE's where the DOS header points (in
    // practice within the first few hundred bytes).
    std::fs::File::open(path).and_then(|f| f.take(4096).read_to_end(&mut head)).ok()?;
    let mut here = crate::binary::this_platform();
    here.libc = None;
    crate::binary::mismatch(&head, &here)
}

/// Why dlopen failed: another platform's library is named as such (what it is, what this
/// platform takes), with the loader's own words after.
pub(crate) fn load_failure(path: &str, e: &libloading::Error) -> String {
    use std::io::Read;
    let loader = with_cause(e);
    // The head of the file holds the ELF headers and, in practice, the dynamic section.
    let mut head = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(64 << 20).read_to_end(&mut head));
    // Windows' loader says "module not found" for a missing dependency and for a missing file alike.
    if let (true, Err(io)) = (cfg!(windows), &read) {
        return match io.kind() {
            std::io::ErrorKind::NotFound => format!("{loader}; no file exists at this path"),
            _ => format!("{loader}; the file itself cannot be opened: {io}"),
        };
    }
    match read.ok().and_then(|_| crate::binary::mismatch(&head, &crate::binary::this_platform())) {
        Some(why) => format!("{why} (the dynamic loader said: {loader})"),
        None => loader,
    }
}

fn with_cause(e: &libloading::Error) -> String {
    match std::error::Error::source(e) {
        Some(cause) => format!("{e}: {cause}"),
        None => e.to_string(),
    }
}

fn relabel(err: Error, label: &str) -> Error {
    match err {
        Error::Load { reason, .. } => Error::Load { path: label.to_owned(), reason },
        Error::MissingSymbol { symbol, .. } => Error::MissingSymbol { path: label.to_owned(), symbol },
        Error::AbiVersion { found, .. } => Error::AbiVersion { path: label.to_owned(), found },
        other => other,
    }
}

fn get<T: Copy>(library: &libloading::Library, path: &str, index: usize) -> Result<T> {
    let name = abi::SYMBOLS[index];
    // SAFETY: `T` is the C signature the ABI gives this symbol (the order of SYMBOLS and of
    // the fields in `resolve` is the same); the pointer is used only while `library` is open.
    unsafe { library.get::<T>(name.as_bytes()) }
        .map(|symbol| *symbol)
        .map_err(|_| Error::MissingSymbol { path: path.to_owned(), symbol: name })
}

fn resolve(library: &libloading::Library, path: &str) -> Result<Api> {
    Ok(Api {
        abi_version: get(library, path, 0)?,
        fingerprint: get(library, path, 1)?,
        runtime_size: get(library, path, 2)?,
        runtime_alignment: get(library, path, 3)?,
        mutable_bytes: get(library, path, 4)?,
        init: get(library, path, 5)?,
        deinit: get(library, path, 6)?,
        run: get(library, path, 7)?,
        source_count: get(library, path, 8)?,
        source_descriptor: get(library, path, 9)?,
        copy_source: get(library, path, 10)?,
        bind_source: get(library, path, 11)?,
        output_count: get(library, path, 12)?,
        output_descriptor: get(library, path, 13)?,
        copy_output: get(library, path, 14)?,
    })
}
