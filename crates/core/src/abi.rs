//! The ZGC executable ABI, version 1, as plain Rust types (`docs/abi.md`).
//! Nothing here calls into an artifact: `sys` does, and `validate` turns what it reads
//! into the checked `meta` types.

use std::os::raw::c_char;

pub const ABI_VERSION: u32 = 1;

/// The C layout of `TensorDescriptor`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawTensorDescriptor {
    pub dtype: u32,
    pub rank: u32,
    pub element_count: usize,
    pub logical_byte_count: usize,
    pub offset_elements: usize,
    pub shape: *const usize,
    pub strides: *const isize,
}

/// The C layout of `SourceDescriptor`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawSourceDescriptor {
    pub key: u32,
    pub name: *const c_char,
    pub kind: u32,
    pub binding: u32,
    pub tensor: RawTensorDescriptor,
}

impl RawTensorDescriptor {
    pub const fn zeroed() -> Self {
        RawTensorDescriptor {
            dtype: 0,
            rank: 0,
            element_count: 0,
            logical_byte_count: 0,
            offset_elements: 0,
            shape: std::ptr::null(),
            strides: std::ptr::null(),
        }
    }
}

impl RawSourceDescriptor {
    pub const fn zeroed() -> Self {
        RawSourceDescriptor {
            key: 0,
            name: std::ptr::null(),
            kind: 0,
            binding: 0,
            tensor: RawTensorDescriptor::zeroed(),
        }
    }
}

/// A tensor descriptor after `sys` copied its shape and strides out of the artifact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorFields {
    pub dtype: u32,
    pub element_count: usize,
    pub logical_byte_count: usize,
    pub offset_elements: usize,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
}

/// A source descriptor after `sys` copied its name bytes out of the artifact
/// (`None`: the name pointer was NULL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFields {
    pub key: u32,
    pub name: Option<Vec<u8>>,
    pub kind: u32,
    pub binding: u32,
    pub tensor: TensorFields,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    I8,
    Bool,
}

impl DType {
    pub fn from_raw(raw: u32) -> Option<DType> {
        match raw {
            1 => Some(DType::F32),
            2 => Some(DType::F16),
            3 => Some(DType::I8),
            4 => Some(DType::Bool),
            _ => None,
        }
    }
    pub fn item_size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 => 2,
            DType::I8 | DType::Bool => 1,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::I8 => "i8",
            DType::Bool => "bool",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Input,
    Parameter,
    Constant,
    State,
}

impl Kind {
    pub fn from_raw(raw: u32) -> Option<Kind> {
        match raw {
            1 => Some(Kind::Input),
            2 => Some(Kind::Parameter),
            3 => Some(Kind::Constant),
            4 => Some(Kind::State),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Input => "input",
            Kind::Parameter => "parameter",
            Kind::Constant => "constant",
            Kind::State => "state",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    Owned,
    Bound,
    Embedded,
}

impl Binding {
    pub fn from_raw(raw: u32) -> Option<Binding> {
        match raw {
            1 => Some(Binding::Owned),
            2 => Some(Binding::Bound),
            3 => Some(Binding::Embedded),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Binding::Owned => "owned",
            Binding::Bound => "bound",
            Binding::Embedded => "embedded",
        }
    }
}

/// Status names in code order; index = status value.
pub const STATUS_NAMES: [&str; 11] = [
    "OK",
    "INVALID_ARGUMENT",
    "INVALID_RUNTIME_STORAGE",
    "INVALID_SOURCE",
    "INVALID_OUTPUT",
    "SIZE_MISMATCH",
    "ALIGNMENT_MISMATCH",
    "INCOMPATIBLE_BINDING",
    "MISSING_BINDING",
    "BUFFER_TOO_SMALL",
    "OUT_OF_MEMORY",
];

/// The name of a non-OK status, or `None` for a value the ABI does not define.
pub fn status_name(status: i32) -> Option<&'static str> {
    usize::try_from(status)
        .ok()
        .filter(|&s| s > 0)
        .and_then(|s| STATUS_NAMES.get(s).copied())
}

/// Every symbol an artifact must export, in the order `sys` resolves them.
pub const SYMBOLS: [&str; 15] = [
    "zgc_abi_version",
    "zgc_executable_structural_fingerprint",
    "zgc_runtime_size",
    "zgc_runtime_alignment",
    "zgc_runtime_mutable_bytes",
    "zgc_runtime_init",
    "zgc_runtime_deinit",
    "zgc_runtime_run",
    "zgc_executable_source_count",
    "zgc_executable_get_source_descriptor",
    "zgc_runtime_copy_source",
    "zgc_runtime_bind_source",
    "zgc_executable_output_count",
    "zgc_executable_get_output_descriptor",
    "zgc_runtime_copy_output",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_layout_matches_the_spec_on_lp64() {
        // u32, u32, then five pointer-sized fields: 8 + 5 * 8.
        assert_eq!(std::mem::size_of::<RawTensorDescriptor>(), 48);
        // key u32, name pointer (aligned to 8), kind u32, binding u32, tensor.
        assert_eq!(std::mem::size_of::<RawSourceDescriptor>(), 8 + 8 + 8 + 48);
        assert_eq!(std::mem::offset_of!(RawSourceDescriptor, tensor), 24);
    }

    #[test]
    fn statuses_have_names_and_unknown_ones_do_not() {
        assert_eq!(status_name(8), Some("MISSING_BINDING"));
        assert_eq!(status_name(10), Some("OUT_OF_MEMORY"));
        assert_eq!(status_name(0), None);
        assert_eq!(status_name(11), None);
        assert_eq!(status_name(-3), None);
    }

    #[test]
    fn enums_round_trip_and_reject_unknown_values() {
        for raw in 1..=4 {
            assert!(DType::from_raw(raw).is_some());
            assert!(Kind::from_raw(raw).is_some());
        }
        assert!(DType::from_raw(0).is_none() && DType::from_raw(5).is_none());
        assert!(Binding::from_raw(4).is_none() && Kind::from_raw(0).is_none());
        assert_eq!(DType::F16.item_size(), 2);
    }

    #[test]
    fn kinds_and_bindings_have_the_names_javascript_shows() {
        let kinds: Vec<_> = (1..=4).map(|raw| Kind::from_raw(raw).unwrap().as_str()).collect();
        assert_eq!(kinds, ["input", "parameter", "constant", "state"]);
        let bindings: Vec<_> = (1..=3).map(|raw| Binding::from_raw(raw).unwrap().as_str()).collect();
        assert_eq!(bindings, ["owned", "bound", "embedded"]);
    }
}
