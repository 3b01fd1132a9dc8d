//! The PTO task runtime host library (`docs/pto-host-api.md`): a state machine over
//! its six C functions that refuses every misuse before the library sees it, and one
//! dedicated OS thread per library on which every call runs.
//!
//! - `error`: `PtoError`, with the code, the raw rc and the C function;
//! - `params`: launch parameters and the rules that keep a launch from hanging the device;
//! - `host`: the state machine (device, kernels, runtimes), generic over `HostApi`;
//! - `library`: the real library (`ffi::pto`) as a `HostApi`;
//! - `thread`: the library's own thread and its job queue;
//! - `registry`: the process-wide cache of loaded libraries, which are never unloaded.

mod error;
mod host;
mod library;
mod params;
pub mod registry;
pub mod thread;

pub use error::{PtoError, CODES};
pub use host::{Host, HostApi, RuntimeState};
pub use params::LaunchParams;
pub use thread::HostThread;
