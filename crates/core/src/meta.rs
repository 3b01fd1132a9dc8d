//! Checked descriptions of an artifact's sources and outputs. Every rule the ABI states for a
//! descriptor is enforced here, on values `sys` already copied out of the artifact, so a
//! malformed artifact is refused before any of its numbers size or index anything.

use crate::abi::{Binding, DType, Kind, SourceFields, TensorFields};
use crate::error::{Error, Result};
use crate::layout;
use std::collections::HashSet;

/// More axes than this is not a tensor any graph compiler emits; it bounds what `sys` reads.
pub const MAX_RANK: u32 = 64;
/// Bounds the descriptor loops and the tables the runtime keeps per source and output.
pub const MAX_SOURCES: usize = 1 << 16;
pub const MAX_OUTPUTS: usize = 1 << 16;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub offset: usize,
    /// Physical storage extent, in elements.
    pub element_count: usize,
    /// Logical elements: `product(shape)`.
    pub logical_count: usize,
    /// Logical bytes: `logical_count * item size`.
    pub byte_count: usize,
}

impl TensorInfo {
    /// Bytes of physical storage: `element_count * item size` (checked at validation).
    pub fn physical_bytes(&self) -> usize {
        self.element_count * self.dtype.item_size()
    }
    /// Logical C order and physical order coincide: values can be used as storage as they are.
    pub fn is_identity(&self) -> bool {
        self.offset == 0
            && self.element_count == self.logical_count
            && layout::is_c_contiguous(&self.shape, &self.strides)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceInfo {
    pub index: usize,
    pub key: u32,
    pub name: String,
    pub kind: Kind,
    pub binding: Binding,
    pub tensor: TensorInfo,
}

/// Checks one tensor descriptor. `what` names it in messages ("source \"x\"", "output 2").
pub fn validate_tensor(path: &str, what: &str, raw: &TensorFields, contiguous: bool) -> Result<TensorInfo> {
    let bad = |rule: String| Error::invalid(path, what, rule);
    let dtype = DType::from_raw(raw.dtype)
        .ok_or_else(|| bad(format!("unknown dtype {} (expected 1 f32, 2 f16, 3 i8 or 4 bool)", raw.dtype)))?;
    if raw.shape.len() != raw.strides.len() || raw.shape.len() > MAX_RANK as usize {
        return Err(bad(format!("rank {} is not supported", raw.shape.len())));
    }
    let item = dtype.item_size();
    // A zero extent anywhere makes the product 0, however large the others (and however
    // a left-to-right fold would overflow before reaching it).
    let logical_count = if raw.shape.contains(&0) {
        Some(0)
    } else {
        raw.shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }
    .ok_or_else(|| bad(format!("product of shape {:?} overflows", raw.shape)))?;
    let byte_count = logical_count
        .checked_mul(item)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| bad(format!("shape {:?} has more bytes than can be addressed", raw.shape)))?;
    if raw.logical_byte_count != byte_count {
        return Err(bad(format!(
            "logical_byte_count is {} but shape {:?} of {} needs {}",
            raw.logical_byte_count,
            raw.shape,
            dtype.as_str(),
            byte_count
        )));
    }
    raw.element_count
        .checked_mul(item)
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(|| bad(format!("element_count {} has more bytes than can be addressed", raw.element_count)))?;
    let info = TensorInfo {
        dtype,
        shape: raw.shape.clone(),
        strides: raw.strides.clone(),
        offset: raw.offset_elements,
        element_count: raw.element_count,
        logical_count,
        byte_count,
    };
    if contiguous {
        if info.offset != 0 {
            return Err(bad(format!("offset_elements is {} but must be 0 for a C-contiguous tensor", info.offset)));
        }
        if info.element_count != logical_count {
            return Err(bad(format!(
                "element_count is {} but a C-contiguous tensor of shape {:?} has {}",
                info.element_count, info.shape, logical_count
            )));
        }
        if !layout::is_c_contiguous(&info.shape, &info.strides) {
            return Err(bad(format!(
                "strides {:?} are not C-contiguous for shape {:?} (expected {:?})",
                info.strides,
                info.shape,
                layout::c_strides(&info.shape)
            )));
        }
    } else if let Some((low, high)) = layout::physical_range(&info.shape, &info.strides, info.offset) {
        if low < 0 || high >= info.element_count as i128 {
            return Err(bad(format!(
                "layout (shape {:?}, strides {:?}, offset {}) reaches physical elements {}..={} outside its {} elements",
                info.shape, info.strides, info.offset, low, high, info.element_count
            )));
        }
    }
    Ok(info)
}

/// Checks every source descriptor, and the rules that hold across them (unique names and keys).
pub fn validate_sources(path: &str, raws: &[SourceFields]) -> Result<Vec<SourceInfo>> {
    let mut names = HashSet::new();
    let mut keys = HashSet::new();
    let mut out = Vec::with_capacity(raws.len());
    for (index, raw) in raws.iter().enumerate() {
        let unnamed = format!("source #{index}");
        let name = match &raw.name {
            None => return Err(Error::invalid(path, unnamed, "name is NULL")),
            Some(bytes) => String::from_utf8(bytes.clone())
                .map_err(|_| Error::invalid(path, &unnamed, "name is not valid UTF-8"))?,
        };
        let what = format!("source #{index} {name:?}");
        let kind = Kind::from_raw(raw.kind).ok_or_else(|| {
            Error::invalid(path, &what, format!("unknown kind {} (expected 1..=4)", raw.kind))
        })?;
        let binding = Binding::from_raw(raw.binding).ok_or_else(|| {
            Error::invalid(path, &what, format!("unknown binding {} (expected 1 OWNED, 2 BOUND, 3 EMBEDDED)", raw.binding))
        })?;
        let tensor = validate_tensor(path, &what, &raw.tensor, binding == Binding::Owned)?;
        if !names.insert(name.clone()) {
            return Err(Error::invalid(path, &what, "name is used by an earlier source"));
        }
        if !keys.insert(raw.key) {
            return Err(Error::invalid(path, &what, format!("key {} is used by an earlier source", raw.key)));
        }
        out.push(SourceInfo { index, key: raw.key, name, kind, binding, tensor });
    }
    Ok(out)
}

pub fn validate_outputs(path: &str, raws: &[TensorFields]) -> Result<Vec<TensorInfo>> {
    raws.iter()
        .enumerate()
        .map(|(i, raw)| validate_tensor(path, &format!("output {i}"), raw, true))
        .collect()
}

/// The runtime storage request: a power-of-two alignment and a size that can be allocated.
pub fn validate_storage(path: &str, size: usize, alignment: usize) -> Result<()> {
    if alignment == 0 || !alignment.is_power_of_two() {
        return Err(Error::invalid(path, "runtime storage", format!("alignment {alignment} is not a power of two")));
    }
    if std::alloc::Layout::from_size_align(size.max(1), alignment).is_err() {
        return Err(Error::invalid(
            path,
            "runtime storage",
            format!("size {size} with alignment {alignment} cannot be allocated"),
        ));
    }
    Ok(())
}

pub fn validate_count(path: &str, what: &str, count: usize, max: usize) -> Result<()> {
    if count > max {
        return Err(Error::invalid(path, what, format!("count {count} exceeds the supported {max}")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dtype: u32, shape: &[usize], strides: &[isize], offset: usize, count: usize) -> TensorFields {
        // Wrapping: some cases describe shapes whose product overflows on purpose.
        let logical = shape.iter().fold(1usize, |a, &d| a.wrapping_mul(d));
        let item = DType::from_raw(dtype).map_or(1, |d| d.item_size());
        TensorFields {
            dtype,
            element_count: count,
            logical_byte_count: logical.wrapping_mul(item),
            offset_elements: offset,
            shape: shape.to_vec(),
            strides: strides.to_vec(),
        }
    }

    fn source(name: &str, key: u32, binding: u32, t: TensorFields) -> SourceFields {
        SourceFields { key, name: Some(name.as_bytes().to_vec()), kind: 1, binding, tensor: t }
    }

    fn rule(err: Error) -> String {
        match err {
            Error::InvalidArtifact { what, rule, .. } => format!("{what}: {rule}"),
            other => panic!("expected an invalid-artifact error, got {other:?}"),
        }
    }

    #[test]
    fn accepts_contiguous_owned_and_padded_transposed_bound() {
        let owned = source("x", 1, 1, tensor(1, &[2, 3], &[3, 1], 0, 6));
        // A 2x3 view transposed inside 3x4 padded storage, starting at element 1.
        let bound = source("w", 2, 2, tensor(1, &[2, 3], &[1, 4], 1, 12));
        let infos = validate_sources("a.so", &[owned, bound]).unwrap();
        assert!(infos[0].tensor.is_identity());
        assert!(!infos[1].tensor.is_identity());
        assert_eq!(infos[1].tensor.physical_bytes(), 48);
    }

    #[test]
    fn accepts_negative_strides_that_stay_in_range() {
        let t = tensor(1, &[4], &[-1], 3, 4);
        assert!(validate_tensor("a", "s", &t, false).is_ok());
        let t = tensor(1, &[4], &[-1], 2, 4);
        assert!(rule(validate_tensor("a", "s", &t, false).unwrap_err()).contains("-1..=2"));
    }

    #[test]
    fn rank_zero_is_one_element() {
        let t = tensor(3, &[], &[], 0, 1);
        let info = validate_tensor("a", "s", &t, true).unwrap();
        assert_eq!((info.logical_count, info.byte_count), (1, 1));
    }

    #[test]
    fn refuses_each_broken_rule_with_a_message_naming_it() {
        let cases: Vec<(TensorFields, bool, &str)> = vec![
            (tensor(9, &[2], &[1], 0, 2), true, "unknown dtype 9"),
            (tensor(1, &[2, 2], &[1, 2], 0, 4), true, "not C-contiguous"),
            (tensor(1, &[4], &[1], 1, 4), true, "offset_elements is 1"),
            (tensor(1, &[4], &[1], 0, 5), true, "element_count is 5"),
            (tensor(1, &[4], &[2], 0, 6), false, "elements 0..=6 outside its 6 elements"),
            (tensor(1, &[usize::MAX, 3], &[3, 1], 0, 1), false, "overflows"),
            (tensor(1, &[1 << 62], &[1], 0, 1 << 62), false, "more bytes than can be addressed"),
            (
                TensorFields { logical_byte_count: 15, ..tensor(1, &[4], &[1], 0, 4) },
                true,
                "logical_byte_count is 15 but shape [4] of f32 needs 16",
            ),
        ];
        for (t, contiguous, needle) in cases {
            let message = rule(validate_tensor("a", "s", &t, contiguous).unwrap_err());
            assert!(message.contains(needle), "{message:?} lacks {needle:?}");
        }
    }

    #[test]
    fn refuses_bad_names_keys_kinds_and_bindings() {
        let ok = tensor(1, &[1], &[1], 0, 1);
        let mut null = source("a", 1, 1, ok.clone());
        null.name = None;
        assert!(rule(validate_sources("p", &[null]).unwrap_err()).contains("name is NULL"));
        let mut latin1 = source("a", 1, 1, ok.clone());
        latin1.name = Some(vec![0xff, 0x41]);
        assert!(rule(validate_sources("p", &[latin1]).unwrap_err()).contains("UTF-8"));
        let dup_name = [source("a", 1, 1, ok.clone()), source("a", 2, 1, ok.clone())];
        assert!(rule(validate_sources("p", &dup_name).unwrap_err()).contains("name is used"));
        let dup_key = [source("a", 7, 1, ok.clone()), source("b", 7, 1, ok.clone())];
        assert!(rule(validate_sources("p", &dup_key).unwrap_err()).contains("key 7 is used"));
        let mut kind = source("a", 1, 1, ok.clone());
        kind.kind = 5;
        assert!(rule(validate_sources("p", &[kind]).unwrap_err()).contains("unknown kind 5"));
        let binding = source("a", 1, 0, ok);
        assert!(rule(validate_sources("p", &[binding]).unwrap_err()).contains("unknown binding 0"));
    }

    #[test]
    fn storage_needs_power_of_two_alignment_and_an_allocatable_size() {
        assert!(validate_storage("p", 64, 16).is_ok());
        assert!(validate_storage("p", 0, 1).is_ok());
        assert!(rule(validate_storage("p", 64, 24).unwrap_err()).contains("alignment 24"));
        assert!(rule(validate_storage("p", 64, 0).unwrap_err()).contains("alignment 0"));
        assert!(rule(validate_storage("p", usize::MAX, 64).unwrap_err()).contains("cannot be allocated"));
    }

    #[test]
    fn counts_up_to_the_limit_are_accepted_and_one_more_is_refused() {
        assert!(validate_count("p", "source count", MAX_SOURCES, MAX_SOURCES).is_ok());
        assert!(validate_count("p", "source count", 0, MAX_SOURCES).is_ok());
        let message = rule(validate_count("p", "source count", MAX_SOURCES + 1, MAX_SOURCES).unwrap_err());
        assert_eq!(message, format!("source count: count {} exceeds the supported {MAX_SOURCES}", MAX_SOURCES + 1));
    }

    #[test]
    fn identity_needs_offset_zero_no_padding_and_c_order_each_on_its_own() {
        let identity = |t: TensorFields| validate_tensor("a", "s", &t, false).unwrap().is_identity();
        assert!(identity(tensor(1, &[2, 3], &[3, 1], 0, 6)));
        // Each condition broken alone, the other two holding.
        assert!(!identity(tensor(1, &[2, 3], &[3, 1], 1, 7)), "offset");
        assert!(!identity(tensor(1, &[2, 3], &[3, 1], 0, 7)), "padding after the elements");
        assert!(!identity(tensor(1, &[2, 3], &[1, 2], 0, 6)), "transposed");
    }
}
