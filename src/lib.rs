//! The napi-rs binding: a thin layer from JavaScript values to the core
//! (`zgc-runtime-core`, imported as `zgc`). The JavaScript API (`lib/`) wraps these classes;
//! they are not meant to be used directly. By topic:
//! - `errors`: an error's code and detail as they cross (`Code`, `js_err`, `thrown`), and
//!   the code table;
//! - `artifact`: a loaded, checked artifact and its description for JavaScript;
//! - `runtime`: one instance, its staged async inputs, and the run (`run_with`, the fast
//!   functions behind `Runtime.run()`);
//! - `pool`: a pool's queue over several runtimes; `queue`: the async queue that brings runs
//!   back to JavaScript;
//! - `stats`: a queue's latencies as `stats()` reads them;
//! - `pto`: the PTO host library; `json`: exact floats as JSON text.
//! Isolated instances are runtimes too (`NativeArtifact.isolated`): the core's engine runs
//! them in host processes.
//!
//! The raw N-API calls, each `unsafe` with its `SAFETY:` note, are in `js` (TypedArrays lent
//! to an artifact, results as values), `js_fast` (the raw function behind `Runtime.run()`)
//! and `tsfn` (the threadsafe function and promises that bring async runs back);
//! napi-derive's expansions are the only other unsafe code.

mod artifact;
mod errors;
mod pool;
mod runtime;
mod stats;

mod js;
mod js_fast;
mod json;
mod pto;
mod queue;
mod tsfn;
