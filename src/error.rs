//! One error type for the whole core. `code()` is the stable `err.code` that JavaScript sees.

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
    #[error("{operation} returned {} (status {status}){}", status_label(*status), context_suffix(context))]
    Status { operation: &'static str, status: i32, context: String },
    #[error("runtime is closed")]
    Closed,
    #[error("runtime is busy with another call; await it before calling synchronously")]
    Busy,
    #[error("queue is full: {waiting} runs wait for {instances} instance(s) (maxQueue {max_queue})")]
    QueueFull { waiting: usize, instances: usize, max_queue: usize },
    #[error("output index {index} is out of range: the artifact has {count} outputs")]
    OutputIndex { index: i64, count: usize },
    /// An error the isolated instance's host process reported, with the code it had there.
    #[error("{message}")]
    Remote { code: &'static str, message: String },
    /// The host process of an isolated instance could not be started or spoke out of turn.
    #[error("isolated instance of {path}: {reason}")]
    Host { path: String, reason: String },
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
        }
    }

    /// The static code matching `code` as a host process sent it (codes are all static here).
    pub fn known_code(code: &str) -> &'static str {
        const CODES: [&str; 20] = [
            "ERR_ZGC_LOAD", "ERR_ZGC_ABI_VERSION", "ERR_ZGC_INVALID_ARTIFACT", "ERR_ZGC_UNKNOWN_SOURCE", "ERR_ZGC_EMBEDDED",
            "ERR_ZGC_NOT_BOUND", "ERR_ZGC_DTYPE", "ERR_ZGC_SIZE", "ERR_ZGC_VALUE", "ERR_ZGC_DETACHED", "ERR_ZGC_ALIGNMENT",
            "ERR_ZGC_OUT_OF_MEMORY", "ERR_ZGC_CLOSED", "ERR_ZGC_BUSY", "ERR_ZGC_QUEUE_FULL", "ERR_ZGC_OUTPUT_INDEX",
            "ERR_ZGC_INSTANCE_START", "ERR_ZGC_NAPI", "ERR_ZGC_INVALID_ARGUMENT", "ERR_ZGC_MISSING_BINDING",
        ];
        if let Some(c) = CODES.iter().find(|c| **c == code) {
            return c;
        }
        (0..11).map(status_code).find(|c| *c == code).unwrap_or("ERR_ZGC_INSTANCE")
    }

    pub(crate) fn invalid(path: &str, what: impl Into<String>, rule: impl Into<String>) -> Error {
        Error::InvalidArtifact { path: path.to_owned(), what: what.into(), rule: rule.into() }
    }
}

/// `ERR_ZGC_<STATUS NAME>` for the statuses the ABI defines.
fn status_code(status: i32) -> &'static str {
    const CODES: [&str; 11] = [
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
    match abi::status_name(status) {
        Some(_) => CODES[status as usize],
        None => "ERR_ZGC_UNKNOWN_STATUS",
    }
}

/// Every artifact call's status goes through here.
pub fn check(status: i32, operation: &'static str, context: impl FnOnce() -> String) -> Result<()> {
    if status == 0 {
        Ok(())
    } else {
        Err(Error::Status { operation, status, context: context() })
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
    fn context_names_the_source() {
        let err = check(5, "zgc_runtime_copy_source", || "source \"x\"".into()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "zgc_runtime_copy_source returned SIZE_MISMATCH (status 5) for source \"x\""
        );
    }
}
