//! zgc-runtime: load, validate and run ZGC executable artifacts.
//!
//! The core (everything but `node`) is plain Rust, tested with `cargo test`. `node` is the
//! napi-rs binding, built with `--features node`. All `unsafe` is in `sys`.

#![deny(unsafe_code)]

pub mod abi;
pub mod artifact;
pub mod binary;
pub mod dtype;
pub mod error;
pub mod executor;
pub mod instance;
pub mod isolate;
pub mod json;
pub mod layout;
pub mod meta;
pub mod offload;
pub mod pto;
#[allow(unsafe_code)]
pub mod sys;

#[cfg(feature = "node")]
#[allow(unsafe_code)] // napi-derive's expansion; the module itself writes no unsafe block
mod node;

pub use artifact::Artifact;
pub use error::{Error, Result};
pub use instance::Instance;
