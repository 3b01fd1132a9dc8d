//! Every `unsafe` block of the core lives under this module (`lib.rs` denies `unsafe_code`
//! everywhere else). Each submodule turns one kind of raw resource into a safe owner, and
//! imports nothing above the plain descriptions (`abi`, `meta`, `binary`, `error`):
//!
//! - `dylib`: opening a shared library on each platform, by path or from bytes;
//! - `library`: the artifact's shared library and its 15 C functions;
//! - `memory`: aligned allocations and byte/element views of them;
//! - `runtime`: a live runtime instance inside caller storage, and the storage bound to it;
//! - `process`: the shared region, control socket and host child of isolated instances;
//! - `pto`: the PTO host library and its six C functions.

mod dylib;
pub(crate) mod library;
pub mod memory;
// memfd, pidfd, the parent-death signal and /proc: isolation runs on Linux only.
#[cfg(target_os = "linux")]
pub mod process;
pub mod pto;
pub mod runtime;
