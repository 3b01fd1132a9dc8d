//! Opening a shared library on each platform, by path or from bytes: the one place that knows
//! dlopen's flags, LoadLibraryEx's, memfd and temporary files.

use std::ffi::CStr;

/// glibc's RTLD_DEEPBIND: the artifact resolves its own symbols before the process's, so a
/// function named like one Node exports (libuv, OpenSSL, V8) stays the artifact's own.
/// musl and macOS have no such flag; Windows resolves each DLL's imports by DLL already.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const RTLD_DEEPBIND: std::ffi::c_int = 0x0008;
#[cfg(all(unix, not(all(target_os = "linux", target_env = "gnu"))))]
const RTLD_DEEPBIND: std::ffi::c_int = 0;

/// Opens the library at `path`, resolving every symbol now and exporting none to the process.
/// `deep_bind` asks that its own symbols win over the process's where the platform can.
///
/// # Safety
/// Loading runs the library's initialisers: the caller vouches for the library as trusted code.
#[cfg(unix)]
pub unsafe fn open(path: &str, deep_bind: bool) -> Result<libloading::Library, libloading::Error> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    let flags = RTLD_NOW | RTLD_LOCAL | if deep_bind { RTLD_DEEPBIND } else { 0 };
    // SAFETY: forwarded to the caller (see above).
    unsafe { Library::open(Some(path), flags) }.map(Into::into)
}

/// Opens the library at `path`; the DLLs it imports are looked for next to it first.
///
/// # Safety
/// As the unix `open`.
#[cfg(windows)]
pub unsafe fn open(path: &str, _deep_bind: bool) -> Result<libloading::Library, libloading::Error> {
    use libloading::os::windows::{Library, LOAD_WITH_ALTERED_SEARCH_PATH};
    // SAFETY: forwarded to the caller (see above).
    unsafe { Library::load_with_flags(path, LOAD_WITH_ALTERED_SEARCH_PATH) }.map(Into::into)
}

/// The file a library loaded from bytes is opened by; it must outlive the library.
///
/// On Linux an anonymous memfd, closed when dropped. glibc's dlopen returns an already loaded
/// library whose name matches, and the name is `/proc/self/fd/N`: were N closed and reused for
/// other bytes while the library is loaded, dlopen would hand back the old library.
#[cfg(target_os = "linux")]
pub struct BytesFile(#[allow(dead_code)] std::fs::File);

/// Elsewhere a new file in the temporary folder, deleted when dropped (Windows cannot delete a
/// loaded DLL: the library is dropped first).
#[cfg(not(target_os = "linux"))]
pub struct BytesFile(std::path::PathBuf);

#[cfg(not(target_os = "linux"))]
impl Drop for BytesFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// `bytes` in a file of their own, and the path to open it by. `name` names it for debuggers.
#[cfg(target_os = "linux")]
pub fn bytes_file(bytes: &[u8], name: &CStr) -> Result<(BytesFile, String), String> {
    use std::ffi::{c_char, c_int, c_uint};
    use std::io::Write;
    use std::os::fd::FromRawFd;
    extern "C" {
        fn memfd_create(name: *const c_char, flags: c_uint) -> c_int;
    }
    const MFD_CLOEXEC: c_uint = 1;
    // SAFETY: `name` is NUL-terminated (a CStr); the call has no other inputs.
    let fd = unsafe { memfd_create(name.as_ptr(), MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!("memfd_create failed: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just returned by memfd_create and nothing else owns it.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(bytes).map_err(|e| format!("writing the memfd failed: {e}"))?;
    Ok((BytesFile(file), format!("/proc/self/fd/{fd}")))
}

#[cfg(not(target_os = "linux"))]
pub fn bytes_file(bytes: &[u8], name: &CStr) -> Result<(BytesFile, String), String> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let file_name = format!("{}-{}-{n}{}", name.to_string_lossy(), std::process::id(), std::env::consts::DLL_SUFFIX);
    let path = std::env::temp_dir().join(file_name);
    // create_new: never reuse a file another process may have left with the same name.
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&path).map_err(|e| format!("creating {} failed: {e}", path.display()))?;
    let owner = BytesFile(path.clone());
    file.write_all(bytes).map_err(|e| format!("writing {} failed: {e}", path.display()))?;
    let shown = path.to_str().ok_or_else(|| format!("the temporary path {} is not UTF-8", path.display()))?.to_owned();
    Ok((owner, shown))
}
