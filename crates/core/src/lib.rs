//! zgc-runtime-core: load, validate and run ZGC executable artifacts, in plain Rust.
//!
//! The Node.js binding (the root crate, `src/`) and the host program of isolated instances
//! (`crates/host`) are built on it; nothing here knows JavaScript. Every `unsafe` block is in
//! `ffi`, and the crate denies `unsafe_code` everywhere else.

#![deny(unsafe_code)]

pub mod abi;
mod artifact;
pub mod binary;
pub mod dtype;
pub mod engine;
pub mod error;
pub mod executor;
#[allow(unsafe_code)]
pub mod ffi;
#[cfg(target_os = "linux")]
pub mod host;
pub mod instance;
pub mod isolate;
pub mod lane;
pub mod layout;
pub mod meta;
pub mod offload;
pub mod pto;
pub mod run;
pub mod stats;

pub use artifact::{Artifact, Description};
pub use error::{Error, Result};
pub use instance::Instance;
