//! Every PTO failure: misuse refused before the library is called, and non-zero results of
//! the library with their raw integer.

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PtoError {
    #[error("cannot load PTO library {path}: {reason}")]
    Load { path: String, reason: String },
    #[error("PTO library {path} does not export `{symbol}` (needs GetRuntimeSize, InitRuntime, launch_runtime, FinalizeRuntime, RegisterKernel, set_device)")]
    MissingSymbol { path: String, symbol: &'static str },
    /// A call in the wrong state: the library was not called.
    #[error("{operation}: {detail}")]
    State { operation: &'static str, detail: String },
    #[error("{operation}: runtime #{live} of this library is live (initialised, not finalised); finalize it first: the library keeps one runtime's tensors in process-global state, and two corrupt each other")]
    LiveRuntime { operation: &'static str, live: u64 },
    #[error("{operation}: device {asked} asked, but this library's device is {set}; the library honours only the first set_device of the process and would silently use device {set}")]
    Device { operation: &'static str, set: i32, asked: i32 },
    #[error("{operation}: {detail}")]
    InvalidArgument { operation: &'static str, detail: String },
    #[error("{operation} failed with rc {rc}{}", describe_rc(*rc))]
    Failed { operation: &'static str, rc: i32 },
    #[error("FinalizeRuntime reported a validation failure (rc {rc}): the results are wrong or tasks were skipped (a func_id without a registered kernel is skipped silently by launch_runtime)")]
    Validation { rc: i32 },
    #[error("{operation}: cannot allocate {bytes} bytes of 64-byte aligned runtime storage")]
    OutOfMemory { operation: &'static str, bytes: usize },
    #[error("the thread of PTO library {path} has stopped")]
    Stopped { path: String },
}

/// Every `err.code` of the PTO bindings, once. The binding hands it to JavaScript
/// (`ptoErrorCodes()`), and the tests check `lib/pto.d.ts`'s `PtoErrorCode` and every code
/// `lib/pto.js` raises against it.
pub const CODES: &[&str] = &[
    "ERR_PTO_LOAD",
    "ERR_PTO_STATE",
    "ERR_PTO_LIVE_RUNTIME",
    "ERR_PTO_DEVICE",
    "ERR_PTO_INVALID_ARGUMENT",
    "ERR_PTO_FAILED",
    "ERR_PTO_VALIDATION",
    "ERR_PTO_OUT_OF_MEMORY",
    "ERR_PTO_STOPPED",
];

fn describe_rc(rc: i32) -> &'static str {
    match rc {
        -1 => " (the library's own failure code)",
        r if r > 0 => " (a device-runtime error code passed through)",
        _ => "",
    }
}

impl PtoError {
    pub fn code(&self) -> &'static str {
        match self {
            PtoError::Load { .. } | PtoError::MissingSymbol { .. } => "ERR_PTO_LOAD",
            PtoError::State { .. } => "ERR_PTO_STATE",
            PtoError::LiveRuntime { .. } => "ERR_PTO_LIVE_RUNTIME",
            PtoError::Device { .. } => "ERR_PTO_DEVICE",
            PtoError::InvalidArgument { .. } => "ERR_PTO_INVALID_ARGUMENT",
            PtoError::Failed { .. } => "ERR_PTO_FAILED",
            PtoError::Validation { .. } => "ERR_PTO_VALIDATION",
            PtoError::OutOfMemory { .. } => "ERR_PTO_OUT_OF_MEMORY",
            PtoError::Stopped { .. } => "ERR_PTO_STOPPED",
        }
    }

    /// The library's raw result, when it was called and failed.
    pub fn rc(&self) -> Option<i32> {
        match self {
            PtoError::Failed { rc, .. } | PtoError::Validation { rc } => Some(*rc),
            _ => None,
        }
    }

    /// The C function the error is about.
    pub fn operation(&self) -> &'static str {
        match self {
            PtoError::Load { .. } | PtoError::MissingSymbol { .. } | PtoError::Stopped { .. } => "dlopen",
            PtoError::Validation { .. } => "FinalizeRuntime",
            PtoError::State { operation, .. }
            | PtoError::LiveRuntime { operation, .. }
            | PtoError::Device { operation, .. }
            | PtoError::InvalidArgument { operation, .. }
            | PtoError::Failed { operation, .. }
            | PtoError::OutOfMemory { operation, .. } => operation,
        }
    }
}

/// The library's result as a `Result`: every call goes through here, so none is dropped.
pub fn check(operation: &'static str, rc: i32) -> Result<(), PtoError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(PtoError::Failed { operation, rc })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_exactly_the_codes_the_errors_have() {
        let one_of_each = [
            PtoError::Load { path: String::new(), reason: String::new() },
            PtoError::MissingSymbol { path: String::new(), symbol: "set_device" },
            PtoError::State { operation: "launch", detail: String::new() },
            PtoError::LiveRuntime { operation: "initialize", live: 1 },
            PtoError::Device { operation: "set_device", set: 0, asked: 1 },
            PtoError::InvalidArgument { operation: "launch", detail: String::new() },
            PtoError::Failed { operation: "InitRuntime", rc: -1 },
            PtoError::Validation { rc: 1 },
            PtoError::OutOfMemory { operation: "initialize", bytes: 1 },
            PtoError::Stopped { path: String::new() },
        ];
        let mut given: Vec<&str> = one_of_each.iter().map(PtoError::code).collect();
        given.dedup();
        assert_eq!(given, CODES);
    }

    #[test]
    fn a_failure_names_its_call_its_rc_and_what_kind_of_code_it_is() {
        let message = |rc| PtoError::Failed { operation: "InitRuntime", rc }.to_string();
        assert_eq!(message(-1), "InitRuntime failed with rc -1 (the library's own failure code)");
        assert_eq!(message(1), "InitRuntime failed with rc 1 (a device-runtime error code passed through)");
        assert_eq!(message(107002), "InitRuntime failed with rc 107002 (a device-runtime error code passed through)");
        // Neither of the library's two conventions: the bare number.
        assert_eq!(message(-7), "InitRuntime failed with rc -7");
    }

    #[test]
    fn only_library_results_carry_an_rc() {
        assert_eq!(check("set_device", 0), Ok(()));
        let failed = check("set_device", 107002).unwrap_err();
        assert_eq!((failed.rc(), failed.operation(), failed.code()), (Some(107002), "set_device", "ERR_PTO_FAILED"));
        assert_eq!(PtoError::Validation { rc: 3 }.rc(), Some(3));
        assert_eq!(PtoError::State { operation: "launch_runtime", detail: String::new() }.rc(), None);
        assert_eq!(PtoError::Stopped { path: "p.so".into() }.rc(), None);
    }
}
