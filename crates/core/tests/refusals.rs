//! What an instance refuses and how it words it, through the core alone: zero-copy binding
//! of runtime storage (kind, size, alignment, binding), unbound sources named on run, output
//! targets of the wrong length, and f16 outputs as bits or values.

mod common;

use std::sync::Arc;
use zgc_runtime_core::dtype::{ArrayKind, Elements, ElementsMut};
use zgc_runtime_core::instance::OutputData;
use zgc_runtime_core::ffi::memory::AlignedBuf;
use zgc_runtime_core::ffi::runtime::BoundRegion;
use zgc_runtime_core::{Artifact, Instance};

fn dtypes() -> Arc<Artifact> {
    Arc::new(Artifact::open(&common::build("dtypes", "dtypes.c", &[])).unwrap())
}

/// `values` as f32 physical storage of `len` elements, in a runtime-owned aligned buffer.
fn storage(values: &[f32]) -> Box<AlignedBuf> {
    let mut buf = AlignedBuf::zeroed(values.len() * 4, 64).unwrap();
    for (chunk, v) in buf.as_bytes_mut().chunks_exact_mut(4).zip(values) {
        chunk.copy_from_slice(&v.to_ne_bytes());
    }
    Box::new(buf)
}

/// Memory one byte past an aligned buffer's start: misaligned for any item wider than a byte.
struct Misaligned(AlignedBuf);

// SAFETY: the pointer is inside the buffer this value owns, `byte_len` bytes from its end.
unsafe impl BoundRegion for Misaligned {
    fn as_ptr(&self) -> *mut u8 {
        self.0.as_ptr().wrapping_add(1)
    }
    fn byte_len(&self) -> usize {
        self.0.len() - 1
    }
    fn is_live(&mut self) -> bool {
        true
    }
}

#[test]
fn binding_storage_is_checked_for_kind_size_alignment_and_binding() {
    let artifact = dtypes();
    let idx = |n: &str| artifact.source_index(n).unwrap();
    let mut rt = Instance::new(artifact.clone()).unwrap();
    // wt: f32 [2, 3] transposed, 6 physical elements.
    let err = rt.bind(idx("wt"), ArrayKind::I8, storage(&[0.0; 6])).unwrap_err();
    assert_eq!(err.code(), "ERR_ZGC_DTYPE");
    assert_eq!(err.to_string(), "source \"wt\" (f32) expects a Float32Array of physical storage, got Int8Array");
    let err = rt.bind(idx("qb"), ArrayKind::U8, storage(&[0.0; 1])).unwrap_err();
    assert_eq!(err.to_string(), "source \"qb\" (i8) expects an Int8Array of physical storage, got Uint8Array");
    let err = rt.bind(idx("wt"), ArrayKind::F32, storage(&[0.0; 5])).unwrap_err();
    assert_eq!(err.code(), "ERR_ZGC_SIZE");
    assert_eq!(err.to_string(), "source \"wt\" expects 6 elements of physical storage (elementCount), got 5 elements");
    let err = rt.bind(idx("wt"), ArrayKind::F32, Box::new(Misaligned(AlignedBuf::zeroed(25, 64).unwrap()))).unwrap_err();
    assert_eq!(err.code(), "ERR_ZGC_ALIGNMENT");
    assert!(err.to_string().contains("is not aligned to 4 bytes"), "{err}");
    let err = rt.bind(idx("x"), ArrayKind::F32, storage(&[0.0; 6])).unwrap_err();
    assert_eq!((err.code(), err.to_string()), ("ERR_ZGC_NOT_BOUND", "source \"x\" is owned, not bound: use set() or run() inputs to give it values".into()));
    let err = rt.bind(idx("k"), ArrayKind::F32, storage(&[0.0; 3])).unwrap_err();
    assert_eq!(err.code(), "ERR_ZGC_EMBEDDED");
    // A good binding is read in place: the transposed layout puts logical (i, j) at j * 2 + i.
    rt.bind(idx("wt"), ArrayKind::F32, storage(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0])).unwrap();
    for name in ["wp", "wn"] {
        rt.set(idx(name), Elements::F32(&[0.0; 6])).unwrap();
    }
    for (name, n) in [("hb", 3), ("qb", 4), ("mb", 3)] {
        match name {
            "hb" => rt.set(idx(name), Elements::F32(&vec![0.0; n])).unwrap(),
            "qb" => rt.set(idx(name), Elements::I8(&vec![0; n])).unwrap(),
            _ => rt.set(idx(name), Elements::U8(&vec![0; n])).unwrap(),
        }
    }
    rt.set(idx("x"), Elements::F32(&[1.0; 6])).unwrap();
    rt.run().unwrap();
    let OutputData::F32(o0) = &rt.read_outputs(false).unwrap()[0] else { panic!("o0 is f32") };
    // o0 = x * wt + wp - wn + k[col] with x = 1, wp = wn = 0, k = {0.5, -1, 2}.
    assert_eq!(o0, &[1.5, 1.0, 5.0, 4.5, 4.0, 8.0]);
}

#[test]
fn a_run_with_unbound_sources_names_them() {
    let artifact = dtypes();
    let mut rt = Instance::new(artifact.clone()).unwrap();
    rt.set(artifact.source_index("wt").unwrap(), Elements::F32(&[0.0; 6])).unwrap();
    let err = rt.run().unwrap_err();
    assert_eq!(err.code(), "ERR_ZGC_MISSING_BINDING");
    assert_eq!(err.to_string(), "zgc_runtime_run returned MISSING_BINDING (status 8) for unbound source(s) \"wp\", \"wn\", \"hb\", \"qb\", \"mb\"");
}

#[test]
fn outputs_are_checked_for_length_and_come_back_as_values_or_bits() {
    let artifact = dtypes();
    let idx = |n: &str| artifact.source_index(n).unwrap();
    let mut rt = Instance::new(artifact.clone()).unwrap();
    for name in ["wt", "wp", "wn"] {
        rt.set(idx(name), Elements::F32(&[0.0; 6])).unwrap();
    }
    rt.set(idx("hb"), Elements::F32(&[0.5, 0.5, 0.5])).unwrap();
    rt.set(idx("qb"), Elements::I8(&[0; 4])).unwrap();
    rt.set(idx("mb"), Elements::U8(&[0; 3])).unwrap();
    rt.set(idx("h"), Elements::F32(&[1.0, 2.0, 3.0, -1.0])).unwrap();
    rt.run().unwrap();
    let mut short = [0f32; 5];
    let err = rt.copy_output(0, ElementsMut::F32(&mut short)).unwrap_err();
    assert_eq!(err.code(), "ERR_ZGC_SIZE");
    assert_eq!(err.to_string(), "source \"output 0\" expects 6 elements (shape [2, 3]), got 5 elements");
    // o1 = h + hb[i % 3]: 1.5, 2.5, 3.5, -0.5, exact in f16.
    let want = [1.5f32, 2.5, 3.5, -0.5];
    match &rt.read_outputs(false).unwrap()[1] {
        OutputData::F32(v) => assert_eq!(v, &want),
        _ => panic!("f16 decoded to f32 by default"),
    }
    match &rt.read_outputs(true).unwrap()[1] {
        OutputData::U16(bits) => assert_eq!(bits, &want.map(|v| half::f16::from_f32(v).to_bits())),
        _ => panic!("f16 as bits when asked"),
    }
}
