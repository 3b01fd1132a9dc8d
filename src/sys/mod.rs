//! Every `unsafe` block of the crate lives under this module (`lib.rs` denies `unsafe_code`
//! everywhere else). Each submodule turns one kind of raw resource into a safe owner:
//!
//! - `dylib`: opening a shared library on each platform, by path or from bytes;
//! - `library`: the artifact's shared library and its 15 C functions;
//! - `memory`: aligned allocations and byte/element views of them;
//! - `process`: the shared region, control socket and host child of isolated instances;
//! - `runtime`: a live runtime instance inside caller storage, and the storage bound to it;
//! - `pto_library`: the PTO host library and its six C functions;
//! - `js` (feature `node`): JavaScript TypedArrays whose memory is lent to an artifact;
//! - `js_fast` (feature `node`): the raw N-API function behind `Runtime.run()`;
//! - `tsfn` (feature `node`): the threadsafe function and promises that bring async runs back.

pub mod dylib;
pub mod library;
pub mod memory;
// memfd, pidfd, the parent-death signal and /proc: isolation runs on Linux only.
#[cfg(target_os = "linux")]
pub mod process;
pub mod pto_library;
pub mod runtime;
#[cfg(feature = "node")]
pub mod js;
#[cfg(feature = "node")]
pub mod js_fast;
#[cfg(feature = "node")]
pub mod tsfn;
