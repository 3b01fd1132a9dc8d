//! One error type for the whole core. `code()` is the stable `err.code` that JavaScript sees,
//! and `detail()` the properties beside it (`status`, `operation`, `source`), which the binding
//! sets on the thrown object: nothing is read back out of a message.

use crate::abi;

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    #[error("cannot load artifact {path}: {reason}")]
    Load { path: String, reason: String },
    #[error("artifact {path} does not export the ZGC symbol `{symbol}`")]
    MissingSymbol { path: String, symbol: &'static str },
    #[error("artifact {path} reports ZGC ABI version {found}; this runtime supports version {}", abi::ABI_VERSION)]
    AbiVersion { path: String, found: u32 },
    #[error("invalid artifact {path}: {what}: {rule}")]
    InvalidArtifact { path: String, what: String, rule: String },
    #[error("artifact has no source named {name:?} (its sources: {known})")]
    UnknownSource { name: String, known: String },
    #[error("source {name:?} is embedded in the artifact and cannot be set or bound")]
    Embedded { name: String },
    #[error("source {name:?} is {binding}, not bound: use set() or run() inputs to give it values")]
    NotBound { name: String, binding: &'static str },
    #[error("source {name:?} ({dtype}) expects {expected}, got {given}")]
    DType { name: String, dtype: &'static str, expected: String, given: String },
    #[error("source {name:?} expects {expected}, got {given}")]
    Size { name: String, expected: String, given: String },
    #[error("source {name:?}: {detail}")]
    Value { name: String, detail: String },
    #[error("storage bound to source {name:?} was detached, transferred or shrunk; bind it again")]
    Detached { name: String },
    #[error("source {name:?}: bound storage at address {address:#x} is not aligned to {alignment} bytes")]
    Alignment { name: String, address: usize, alignment: usize },
    #[error("cannot allocate {bytes} bytes aligned to {alignment} for {what}")]
    OutOfMemory { what: String, bytes: usize, alignment: usize },
    /// `source_name`: the source the call was about, when it was about one (also in `context`).
    #[error("{operation} returned {} (status {status}){}", status_label(*status), context_suffix(context))]
    Status { operation: &'static str, status: i32, context: String, source_name: Option<String> },
    #[error("runtime is closed")]
    Closed,
    #[error("runtime is busy with another call; await it before calling synchronously")]
    Busy,
    #[error("queue is full: {waiting} runs wait for {instances} instance(s) (maxQueue {max_queue})")]
    QueueFull { waiting: usize, instances: usize, max_queue: usize },
    #[error("output index {index} is out of range: the artifact has {count} outputs")]
    OutputIndex { index: i64, count: usize },
    /// An error the isolated instance's host process reported, with the code and detail it
    /// had there.
    #[error("{message}")]
    Remote { code: &'static str, message: String, detail: Detail },
    /// The host process of an isolated instance could not be started or spoke out of turn.
    #[error("isolated instance of {path}: {reason}")]
    Host { path: String, reason: String },
    /// A run an isolated instance's process did not finish: it crashed, or was killed at the
    /// run's deadline or its memory cap. The instance starts again.
    #[error("{message}")]
    Fault { message: String, fault: Box<Fault> },
    /// An isolated instance whose process would not start again, given up.
    #[error("the isolated instance of {path} could not be restarted after {attempts} attempts; the last said: {last}")]
    InstanceFailed { path: String, attempts: u32, last: String },
    /// A run of an isolated instance aborted by its caller while it ran (JavaScript rejects
    /// it with the signal's reason).
    #[error("the run was aborted while it ran; its process was killed and the instance restarts")]
    Aborted,
}

/// A number as the caller gave it (milliseconds, megabytes), compared by its bits.
#[derive(Debug, Clone, Copy)]
pub struct Number(pub f64);

impl PartialEq for Number {
    fn eq(&self, other: &Number) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for Number {}

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// How an isolated instance's process ended a run, as its error's properties.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// It died: by `signal` (its name), or exiting with `exit_code`.
    Crashed { signal: Option<&'static str>, exit_code: Option<i32>, stderr: String },
    /// It passed the run's `timeoutMs`, and was killed.
    Timeout { timeout_ms: Number, stderr: String },
    /// Its resident memory passed `maxMemoryMb`, and it was killed.
    Memory { max_memory_mb: Number, resident_bytes: u64, stderr: String },
}

/// What an error is about beyond its code and message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Detail {
    /// The status an artifact call returned.
    pub status: Option<i32>,
    /// The C function that returned it.
    pub operation: Option<String>,
    /// The source the error is about, by name.
    pub source: Option<String>,
    /// How an isolated instance's process ended the run.
    pub fault: Option<Box<Fault>>,
}

fn status_label(status: i32) -> &'static str {
    abi::status_name(status).unwrap_or("an unknown status")
}

fn context_suffix(context: &str) -> String {
    if context.is_empty() {
        String::new()
    } else {
        format!(" for {context}")
    }
}

impl Error {
    pub fn code(&self) -> &'static str {
        match self {
            Error::Load { .. } | Error::MissingSymbol { .. } => "ERR_ZGC_LOAD",
            Error::AbiVersion { .. } => "ERR_ZGC_ABI_VERSION",
            Error::InvalidArtifact { .. } => "ERR_ZGC_INVALID_ARTIFACT",
            Error::UnknownSource { .. } => "ERR_ZGC_UNKNOWN_SOURCE",
            Error::Embedded { .. } => "ERR_ZGC_EMBEDDED",
            Error::NotBound { .. } => "ERR_ZGC_NOT_BOUND",
            Error::DType { .. } => "ERR_ZGC_DTYPE",
            Error::Size { .. } => "ERR_ZGC_SIZE",
            Error::Value { .. } => "ERR_ZGC_VALUE",
            Error::Detached { .. } => "ERR_ZGC_DETACHED",
            Error::Alignment { .. } => "ERR_ZGC_ALIGNMENT",
            Error::OutOfMemory { .. } => "ERR_ZGC_OUT_OF_MEMORY",
            Error::Closed => "ERR_ZGC_CLOSED",
            Error::Busy => "ERR_ZGC_BUSY",
            Error::QueueFull { .. } => "ERR_ZGC_QUEUE_FULL",
            Error::OutputIndex { .. } => "ERR_ZGC_OUTPUT_INDEX",
            Error::Status { status, .. } => status_code(*status),
            Error::Remote { code, .. } => code,
            Error::Host { .. } => "ERR_ZGC_INSTANCE_START",
            Error::Fault { fault, .. } => match **fault {
                Fault::Crashed { .. } => "ERR_ZGC_INSTANCE_CRASHED",
                Fault::Timeout { .. } => "ERR_ZGC_TIMEOUT",
                Fault::Memory { .. } => "ERR_ZGC_MEMORY_LIMIT",
            },
            Error::InstanceFailed { .. } => "ERR_ZGC_INSTANCE_FAILED",
            Error::Aborted => "ERR_ZGC_ABORTED",
        }
    }

    pub fn detail(&self) -> Detail {
        let named = |name: &String| Detail { source: Some(name.clone()), ..Detail::default() };
        match self {
            Error::UnknownSource { name, .. }
            | Error::Embedded { name }
            | Error::NotBound { name, .. }
            | Error::DType { name, .. }
            | Error::Size { name, .. }
            | Error::Value { name, .. }
            | Error::Detached { name }
            | Error::Alignment { name, .. } => named(name),
            Error::Status { operation, status, source_name, .. } => {
                Detail { status: Some(*status), operation: Some((*operation).to_owned()), source: source_name.clone(), fault: None }
            }
            Error::Remote { detail, .. } => detail.clone(),
            Error::Fault { fault, .. } => Detail { fault: Some(fault.clone()), ..Detail::default() },
            _ => Detail::default(),
        }
    }

    /// The static code matching `code` as a host process sent it (codes are all static here).
    pub fn known_code(code: &str) -> &'static str {
        CODES.iter().find(|c| **c == code).copied().unwrap_or("ERR_ZGC_INSTANCE")
    }

    pub(crate) fn invalid(path: &str, what: impl Into<String>, rule: impl Into<String>) -> Error {
        Error::InvalidArtifact { path: path.to_owned(), what: what.into(), rule: rule.into() }
    }
}

/// Every `err.code` the package gives, once: the core's, one per artifact status, and those
/// only JavaScript raises (the loader's and isolation's). The binding hands it to JavaScript
/// (`errorCodes()`), and the tests check `index.d.ts`'s `ZgcErrorCode`, the table in
/// docs/api.md and every code `lib/` raises against it.
pub const CODES: &[&str] = &[
    // The core (`Error::code`).
    "ERR_ZGC_LOAD",
    "ERR_ZGC_ABI_VERSION",
    "ERR_ZGC_INVALID_ARTIFACT",
    "ERR_ZGC_UNKNOWN_SOURCE",
    "ERR_ZGC_EMBEDDED",
    "ERR_ZGC_NOT_BOUND",
    "ERR_ZGC_DTYPE",
    "ERR_ZGC_SIZE",
    "ERR_ZGC_VALUE",
    "ERR_ZGC_DETACHED",
    "ERR_ZGC_ALIGNMENT",
    "ERR_ZGC_OUT_OF_MEMORY",
    "ERR_ZGC_CLOSED",
    "ERR_ZGC_BUSY",
    "ERR_ZGC_QUEUE_FULL",
    "ERR_ZGC_OUTPUT_INDEX",
    "ERR_ZGC_INSTANCE_START",
    // The artifact's statuses, and one it does not define. (OUT_OF_MEMORY, status 10, is the
    // core's code above.)
    STATUS_CODES[1],
    STATUS_CODES[2],
    STATUS_CODES[3],
    STATUS_CODES[4],
    STATUS_CODES[5],
    STATUS_CODES[6],
    STATUS_CODES[7],
    STATUS_CODES[8],
    STATUS_CODES[9],
    "ERR_ZGC_UNKNOWN_STATUS",
    // The binding: a N-API call failed.
    "ERR_ZGC_NAPI",
    // JavaScript: no addon loads (lib/native.js).
    "ERR_ZGC_NATIVE_MISSING",
    // Isolated instances (`isolate::instance`).
    "ERR_ZGC_INSTANCE_CRASHED",
    "ERR_ZGC_TIMEOUT",
    "ERR_ZGC_MEMORY_LIMIT",
    "ERR_ZGC_INSTANCE_FAILED",
    // A run aborted while it ran on an isolated instance: JavaScript rejects it with the
    // signal's reason, so user code never sees this one.
    "ERR_ZGC_ABORTED",
    // JavaScript: a batcher's variants that are not one graph in several batch sizes (lib/batcher.js).
    "ERR_ZGC_BATCH_VARIANTS",
    // JavaScript: a sequence that cannot be made, such as over OWNED state (lib/sequence.js).
    "ERR_ZGC_SEQUENCE",
    // A host process of another version sent a code this side does not know.
    "ERR_ZGC_INSTANCE",
    // JavaScript: the protocol client (lib/client/), a server's refusal or a lost connection.
    "ERR_ZGC_REMOTE",
    "ERR_ZGC_REMOTE_INVALID",
    "ERR_ZGC_REMOTE_NOT_FOUND",
    "ERR_ZGC_REMOTE_UNAVAILABLE",
    "ERR_ZGC_REMOTE_TIMEOUT",
    "ERR_ZGC_CONNECTION",
];

/// `ERR_ZGC_<STATUS NAME>` for the statuses the ABI defines, by value.
const STATUS_CODES: [&str; 11] = [
    "ERR_ZGC_OK",
    "ERR_ZGC_INVALID_ARGUMENT",
    "ERR_ZGC_INVALID_RUNTIME_STORAGE",
    "ERR_ZGC_INVALID_SOURCE",
    "ERR_ZGC_INVALID_OUTPUT",
    "ERR_ZGC_SIZE_MISMATCH",
    "ERR_ZGC_ALIGNMENT_MISMATCH",
    "ERR_ZGC_INCOMPATIBLE_BINDING",
    "ERR_ZGC_MISSING_BINDING",
    "ERR_ZGC_BUFFER_TOO_SMALL",
    "ERR_ZGC_OUT_OF_MEMORY",
];

/// `ERR_ZGC_<STATUS NAME>` for the statuses the ABI defines, else `ERR_ZGC_UNKNOWN_STATUS`.
fn status_code(status: i32) -> &'static str {
    match abi::status_name(status) {
        Some(_) => STATUS_CODES[status as usize],
        None => "ERR_ZGC_UNKNOWN_STATUS",
    }
}

/// Every artifact call's status goes through here (or `check_source`).
pub fn check(status: i32, operation: &'static str, context: impl FnOnce() -> String) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(Error::Status { operation, status, context: context(), source_name: None })
    }
}

/// `check` for a call about one source, which the error then names.
pub fn check_source(status: i32, operation: &'static str, name: &str) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(Error::Status { operation, status, context: format!("source {name:?}"), source_name: Some(name.to_owned()) })
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_codes_follow_the_status_names() {
        for (value, name) in abi::STATUS_NAMES.iter().enumerate().skip(1) {
            let err = check(value as i32, "zgc_runtime_run", String::new).unwrap_err();
            assert_eq!(err.code(), format!("ERR_ZGC_{name}"));
            assert!(err.to_string().contains(&format!("(status {value})")), "{err}");
        }
        let unknown = check(42, "zgc_runtime_run", String::new).unwrap_err();
        assert_eq!(unknown.code(), "ERR_ZGC_UNKNOWN_STATUS");
        assert_eq!(
            unknown.to_string(),
            "zgc_runtime_run returned an unknown status (status 42)"
        );
        assert_eq!(check(-1, "x", String::new).unwrap_err().code(), "ERR_ZGC_UNKNOWN_STATUS");
        assert!(check(0, "x", || unreachable!()).is_ok());
    }

    #[test]
    fn every_code_is_in_the_table_once() {
        let mut codes: Vec<&str> = CODES.to_vec();
        codes.sort();
        codes.dedup();
        assert_eq!(codes.len(), CODES.len(), "a code is listed twice");
        for status in 1..11 {
            assert!(CODES.contains(&status_code(status)), "{}", status_code(status));
        }
        assert!(CODES.contains(&status_code(99)));
        for code in CODES {
            assert_eq!(Error::known_code(code), *code);
        }
        assert_eq!(Error::known_code("ERR_SOMETHING_ELSE"), "ERR_ZGC_INSTANCE");
        let (s, n) = (String::new, || "n".to_owned());
        let every = [
            Error::Load { path: s(), reason: s() },
            Error::MissingSymbol { path: s(), symbol: "x" },
            Error::AbiVersion { path: s(), found: 2 },
            Error::invalid("p", "w", "r"),
            Error::UnknownSource { name: n(), known: s() },
            Error::Embedded { name: n() },
            Error::NotBound { name: n(), binding: "OWNED" },
            Error::DType { name: n(), dtype: "f32", expected: s(), given: s() },
            Error::Size { name: n(), expected: s(), given: s() },
            Error::Value { name: n(), detail: s() },
            Error::Detached { name: n() },
            Error::Alignment { name: n(), address: 1, alignment: 64 },
            Error::OutOfMemory { what: s(), bytes: 1, alignment: 64 },
            Error::Closed,
            Error::Busy,
            Error::QueueFull { waiting: 1, instances: 1, max_queue: 1 },
            Error::OutputIndex { index: 9, count: 1 },
            Error::Host { path: s(), reason: s() },
            Error::Fault { message: s(), fault: Box::new(Fault::Crashed { signal: None, exit_code: Some(1), stderr: s() }) },
            Error::Fault { message: s(), fault: Box::new(Fault::Timeout { timeout_ms: Number(1.0), stderr: s() }) },
            Error::Fault { message: s(), fault: Box::new(Fault::Memory { max_memory_mb: Number(1.0), resident_bytes: 1, stderr: s() }) },
            Error::InstanceFailed { path: s(), attempts: 5, last: s() },
            Error::Aborted,
        ];
        for e in every {
            assert!(CODES.contains(&e.code()), "{}", e.code());
        }
    }

    #[test]
    fn context_names_the_source() {
        let err = check_source(5, "zgc_runtime_copy_source", "x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "zgc_runtime_copy_source returned SIZE_MISMATCH (status 5) for source \"x\""
        );
        assert_eq!(
            err.detail(),
            Detail { status: Some(5), operation: Some("zgc_runtime_copy_source".into()), source: Some("x".into()), fault: None }
        );
        assert!(check_source(0, "x", "y").is_ok());
    }

    #[test]
    fn detail_names_the_source_and_nothing_else_where_there_is_none() {
        let size = Error::Size { name: "a".into(), expected: "3".into(), given: "2".into() };
        assert_eq!(size.detail(), Detail { source: Some("a".into()), ..Detail::default() });
        assert_eq!(Error::UnknownSource { name: "n".into(), known: String::new() }.detail().source.as_deref(), Some("n"));
        assert_eq!(Error::Closed.detail(), Detail::default());
        let run = check(8, "zgc_runtime_run", || "unbound source(s) \"a\"".into()).unwrap_err();
        assert_eq!(run.detail(), Detail { status: Some(8), operation: Some("zgc_runtime_run".into()), source: None, fault: None });
        let remote = Error::Remote { code: "ERR_ZGC_SIZE", message: "m".into(), detail: size.detail() };
        assert_eq!(remote.detail(), size.detail());
    }
}
