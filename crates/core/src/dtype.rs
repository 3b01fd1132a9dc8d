//! The four ABI dtypes as callers hand them over: which kind of array each takes and gives
//! (`ArrayKind`, named in messages as the TypedArray users know), and the conversions between
//! them (f16 <-> f32 through `half`, bool checked to be 0 or 1).

use crate::abi::DType;
use crate::error::{Error, Result};
use crate::ffi::memory::{bytes_of, bytes_of_mut};
use half::slice::{HalfBitsSliceExt, HalfFloatSliceExt};
use std::borrow::Cow;

/// A borrowed run of elements, typed as the caller's array it came from.
#[derive(Clone, Copy, Debug)]
pub enum Elements<'a> {
    F32(&'a [f32]),
    /// Taken by f16 sources only: rounding f64 straight to f16 avoids rounding twice.
    F64(&'a [f64]),
    U16(&'a [u16]),
    I8(&'a [i8]),
    U8(&'a [u8]),
}

#[derive(Debug)]
pub enum ElementsMut<'a> {
    F32(&'a mut [f32]),
    U16(&'a mut [u16]),
    I8(&'a mut [i8]),
    U8(&'a mut [u8]),
}

/// The element type of a caller's array, as the binding found it: what the core reads and
/// writes, and what its messages name.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ArrayKind {
    F32,
    F64,
    U16,
    I8,
    U8,
}

impl ArrayKind {
    /// The array's name in messages: the TypedArray class the package's users hand over.
    pub fn name(self) -> &'static str {
        match self {
            ArrayKind::F32 => "Float32Array",
            ArrayKind::F64 => "Float64Array",
            ArrayKind::U16 => "Uint16Array",
            ArrayKind::I8 => "Int8Array",
            ArrayKind::U8 => "Uint8Array",
        }
    }
}

/// The kind of array a source or output dtype uses for its storage form.
pub fn storage_kind(dtype: DType) -> ArrayKind {
    match dtype {
        DType::F32 => ArrayKind::F32,
        DType::F16 => ArrayKind::U16,
        DType::I8 => ArrayKind::I8,
        DType::Bool => ArrayKind::U8,
    }
}

/// What `set`/`run` accept for a dtype, for messages.
pub fn value_arrays(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "a Float32Array or Float64Array (rounded to f16), a Uint16Array of f16 bits or a Float16Array",
        DType::F32 => "a Float32Array",
        DType::I8 => "an Int8Array",
        DType::Bool => "a Uint8Array of 0 and 1",
    }
}

// No is_empty: nothing asks, and an empty run of elements is just one of length 0.
#[allow(clippy::len_without_is_empty)]
impl Elements<'_> {
    pub fn len(&self) -> usize {
        match self {
            Elements::F32(v) => v.len(),
            Elements::F64(v) => v.len(),
            Elements::U16(v) => v.len(),
            Elements::I8(v) => v.len(),
            Elements::U8(v) => v.len(),
        }
    }
    pub fn kind(&self) -> ArrayKind {
        match self {
            Elements::F32(_) => ArrayKind::F32,
            Elements::F64(_) => ArrayKind::F64,
            Elements::U16(_) => ArrayKind::U16,
            Elements::I8(_) => ArrayKind::I8,
            Elements::U8(_) => ArrayKind::U8,
        }
    }
    /// The elements' bytes, as the platform holds them.
    pub fn bytes(&self) -> &[u8] {
        match *self {
            Elements::F32(v) => bytes_of(v),
            Elements::F64(v) => bytes_of(v),
            Elements::U16(v) => bytes_of(v),
            Elements::I8(v) => bytes_of(v),
            Elements::U8(v) => v,
        }
    }
}

#[allow(clippy::len_without_is_empty)]
impl ElementsMut<'_> {
    pub fn len(&self) -> usize {
        match self {
            ElementsMut::F32(v) => v.len(),
            ElementsMut::U16(v) => v.len(),
            ElementsMut::I8(v) => v.len(),
            ElementsMut::U8(v) => v.len(),
        }
    }
    pub fn kind(&self) -> ArrayKind {
        match self {
            ElementsMut::F32(_) => ArrayKind::F32,
            ElementsMut::U16(_) => ArrayKind::U16,
            ElementsMut::I8(_) => ArrayKind::I8,
            ElementsMut::U8(_) => ArrayKind::U8,
        }
    }
}

pub fn check_bool(name: &str, values: &[u8]) -> Result<()> {
    match values.iter().position(|&b| b > 1) {
        None => Ok(()),
        Some(at) => Err(Error::Value {
            name: name.to_owned(),
            detail: format!("bool element {at} is {}; bool values must be 0 or 1", values[at]),
        }),
    }
}

/// Logical values in the dtype's storage bytes: borrowed where the array already is that,
/// converted (f32 -> f16, round to nearest even) where it is not.
pub fn to_storage<'a>(name: &str, dtype: DType, values: Elements<'a>) -> Result<Cow<'a, [u8]>> {
    match (dtype, values) {
        (DType::F32, Elements::F32(v)) => Ok(Cow::Borrowed(bytes_of(v))),
        (DType::F16, Elements::U16(v)) => Ok(Cow::Borrowed(bytes_of(v))),
        (DType::F16, Elements::F32(v)) => {
            let mut bits = vec![0u16; v.len()];
            bits.reinterpret_cast_mut::<half::f16>().convert_from_f32_slice(v);
            Ok(Cow::Owned(bytes_of(&bits).to_vec()))
        }
        (DType::F16, Elements::F64(v)) => {
            let mut bits = vec![0u16; v.len()];
            bits.reinterpret_cast_mut::<half::f16>().convert_from_f64_slice(v);
            Ok(Cow::Owned(bytes_of(&bits).to_vec()))
        }
        (DType::I8, Elements::I8(v)) => Ok(Cow::Borrowed(bytes_of(v))),
        (DType::Bool, Elements::U8(v)) => {
            check_bool(name, v)?;
            Ok(Cow::Borrowed(v))
        }
        (dtype, given) => Err(Error::DType {
            name: name.to_owned(),
            dtype: dtype.as_str(),
            expected: value_arrays(dtype).to_owned(),
            given: given.kind().name().to_owned(),
        }),
    }
}

/// Where an output of `dtype` is written: straight into the target's bytes, or (f16 into a
/// Float32Array) through `scratch` and a decode.
pub enum OutputTarget<'a> {
    Direct(&'a mut [u8]),
    DecodeF16(&'a mut [f32]),
}

pub fn output_target<'a>(what: impl FnOnce() -> String, dtype: DType, target: ElementsMut<'a>) -> Result<OutputTarget<'a>> {
    match (dtype, target) {
        (DType::F32, ElementsMut::F32(v)) => Ok(OutputTarget::Direct(bytes_of_mut(v))),
        (DType::F16, ElementsMut::U16(v)) => Ok(OutputTarget::Direct(bytes_of_mut(v))),
        (DType::F16, ElementsMut::F32(v)) => Ok(OutputTarget::DecodeF16(v)),
        (DType::I8, ElementsMut::I8(v)) => Ok(OutputTarget::Direct(bytes_of_mut(v))),
        (DType::Bool, ElementsMut::U8(v)) => Ok(OutputTarget::Direct(bytes_of_mut(v))),
        (dtype, given) => Err(Error::DType { name: what(), dtype: dtype.as_str(), expected: output_arrays(dtype).to_owned(), given: given.kind().name().to_owned() }),
    }
}

/// What an output of `dtype` can be copied into, for messages.
pub fn output_arrays(dtype: DType) -> &'static str {
    match dtype {
        DType::F16 => "a Float32Array (values), a Uint16Array (f16 bits) or a Float16Array",
        DType::F32 => "a Float32Array",
        DType::I8 => "an Int8Array",
        DType::Bool => "a Uint8Array",
    }
}

/// The refusal of `given` as the array output `index` (of `dtype`) is copied into.
pub fn output_error(index: usize, dtype: DType, given: String) -> Error {
    Error::DType { name: format!("output {index}"), dtype: dtype.as_str(), expected: output_arrays(dtype).to_owned(), given }
}

pub fn decode_f16(bits: &[u16], out: &mut [f32]) {
    bits.reinterpret_cast::<half::f16>().convert_to_f32_slice(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent f16 reference: decode every bit pattern by the IEEE 754 formula.
    fn f16_value(bits: u16) -> f32 {
        let sign = if bits & 0x8000 != 0 { -1.0f64 } else { 1.0 };
        let exp = ((bits >> 10) & 0x1f) as i32;
        let frac = (bits & 0x3ff) as f64;
        let v = match exp {
            0 => sign * frac * 2f64.powi(-24),
            31 if frac == 0.0 => sign * f64::INFINITY,
            31 => f64::NAN,
            e => sign * (1.0 + frac / 1024.0) * 2f64.powi(e - 15),
        };
        v as f32
    }

    #[test]
    fn f16_decode_is_exact_for_all_65536_patterns() {
        let bits: Vec<u16> = (0..=u16::MAX).collect();
        let mut out = vec![0f32; bits.len()];
        decode_f16(&bits, &mut out);
        for (&b, &v) in bits.iter().zip(&out) {
            let want = f16_value(b);
            assert!(want.is_nan() && v.is_nan() || want.to_bits() == v.to_bits(), "bits {b:#06x}");
        }
    }

    #[test]
    fn f32_to_f16_rounds_to_nearest_even() {
        // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties go to the even mantissa (1.0);
        // 1 + 3 * 2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: ties go to 1 + 2^-9.
        let v = [1.0 + 2f32.powi(-11), 1.0 + 3.0 * 2f32.powi(-11), 65520.0, -0.0];
        let bytes = to_storage("x", DType::F16, Elements::F32(&v)).unwrap();
        let bits: Vec<u16> = bytes.chunks(2).map(|c| u16::from_ne_bytes([c[0], c[1]])).collect();
        assert_eq!(bits, vec![0x3c00, 0x3c02, 0x7c00, 0x8000]);
    }

    #[test]
    fn each_dtype_names_its_arrays() {
        let all = [DType::F32, DType::F16, DType::I8, DType::Bool];
        assert_eq!(all.map(|d| storage_kind(d).name()), ["Float32Array", "Uint16Array", "Int8Array", "Uint8Array"]);
        assert_eq!(all.map(output_arrays), ["a Float32Array", "a Float32Array (values), a Uint16Array (f16 bits) or a Float16Array", "an Int8Array", "a Uint8Array"]);
        assert_eq!(value_arrays(DType::F16), "a Float32Array or Float64Array (rounded to f16), a Uint16Array of f16 bits or a Float16Array");
        let (mut a, mut b, mut c, mut d) = ([0f32; 1], [0u16; 1], [0i8; 1], [0u8; 1]);
        let kinds = [ElementsMut::F32(&mut a), ElementsMut::U16(&mut b), ElementsMut::I8(&mut c), ElementsMut::U8(&mut d)].map(|e| e.kind());
        assert_eq!(kinds, [ArrayKind::F32, ArrayKind::U16, ArrayKind::I8, ArrayKind::U8]);
        let (e, f) = ([0f64; 2], [0u8; 3]);
        let values = [Elements::F32(&a), Elements::F64(&e), Elements::U16(&b), Elements::I8(&c), Elements::U8(&f)];
        assert_eq!(values.map(|v| v.kind().name()), ["Float32Array", "Float64Array", "Uint16Array", "Int8Array", "Uint8Array"]);
        assert_eq!(values.map(|v| v.bytes().len()), [4, 16, 2, 1, 3]);
    }

    #[test]
    fn an_output_refuses_a_wrong_target_by_both_names() {
        let mut q = [0i8; 4];
        let err = output_target(|| "output 2".into(), DType::F32, ElementsMut::I8(&mut q)).err().unwrap();
        assert_eq!(err.code(), "ERR_ZGC_DTYPE");
        assert_eq!(err.to_string(), "source \"output 2\" (f32) expects a Float32Array, got Int8Array");
        let err = output_error(1, DType::F16, "Int16Array".into());
        assert_eq!(err.to_string(), "source \"output 1\" (f16) expects a Float32Array (values), a Uint16Array (f16 bits) or a Float16Array, got Int16Array");
        let mut f = [0f32; 2];
        assert!(matches!(output_target(|| unreachable!(), DType::F16, ElementsMut::F32(&mut f)), Ok(OutputTarget::DecodeF16(_))));
    }

    #[test]
    fn wrong_arrays_and_bad_bools_are_refused_by_name() {
        let err = to_storage("w", DType::F32, Elements::I8(&[1])).unwrap_err();
        assert_eq!(err.code(), "ERR_ZGC_DTYPE");
        assert_eq!(err.to_string(), "source \"w\" (f32) expects a Float32Array, got Int8Array");
        let err = to_storage("m", DType::Bool, Elements::U8(&[0, 1, 2])).unwrap_err();
        assert_eq!(err.code(), "ERR_ZGC_VALUE");
        assert!(err.to_string().contains("bool element 2 is 2"));
        assert!(matches!(to_storage("m", DType::Bool, Elements::U8(&[0, 1])), Ok(Cow::Borrowed(_))));
    }
}
