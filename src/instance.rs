//! One runtime instance of an artifact: its own storage, its bound sources, its state.
//! Instances of one artifact share nothing but the loaded library.

use crate::abi::{Binding, DType};
use crate::artifact::Artifact;
use crate::dtype::{self, Elements, ElementsMut, OutputTarget};
use crate::error::{check, Error, Result};
use crate::layout;
use crate::meta::SourceInfo;
use crate::sys::memory::{elements_mut, AlignedBuf};
use crate::sys::runtime::{BoundRegion, LiveRuntime};
use std::sync::Arc;

/// Storage the runtime packs for a BOUND source is aligned to a cache line: more than any
/// item size, and what vectorised artifacts like.
pub const PACKED_ALIGNMENT: usize = 64;

pub struct Instance {
    artifact: Arc<Artifact>,
    live: LiveRuntime,
    f16_scratch: Vec<u16>,
}

impl Instance {
    pub fn new(artifact: Arc<Artifact>) -> Result<Instance> {
        let live = LiveRuntime::init(
            artifact.library.clone(),
            artifact.runtime_size,
            artifact.runtime_alignment,
            artifact.sources.len(),
        )?;
        Ok(Instance { artifact, live, f16_scratch: Vec::new() })
    }

    pub fn artifact(&self) -> &Arc<Artifact> {
        &self.artifact
    }

    fn source(&self, index: usize) -> &SourceInfo {
        &self.artifact.sources[index]
    }

    /// Gives source `index` logical values (C order). OWNED sources copy them in; BOUND
    /// sources get them packed into storage this instance allocates and keeps.
    pub fn set(&mut self, index: usize, values: Elements<'_>) -> Result<()> {
        let source = &self.artifact.sources[index];
        let t = &source.tensor;
        if source.binding == Binding::Embedded {
            return Err(Error::Embedded { name: source.name.clone() });
        }
        if values.len() != t.logical_count {
            return Err(Error::Size {
                name: source.name.clone(),
                expected: format!("{} elements (shape {:?})", t.logical_count, t.shape),
                given: format!("{} elements", values.len()),
            });
        }
        let logical = dtype::to_storage(&source.name, t.dtype, values)?;
        if source.binding == Binding::Owned {
            let status = self.live.copy_source(source.key, &logical);
            return check(status, "zgc_runtime_copy_source", || format!("source {:?}", source.name));
        }
        let mut packed = AlignedBuf::zeroed(t.physical_bytes(), PACKED_ALIGNMENT).ok_or_else(|| Error::OutOfMemory {
            what: format!("the storage of source {:?}", source.name),
            bytes: t.physical_bytes(),
            alignment: PACKED_ALIGNMENT,
        })?;
        let (shape, strides, offset) = (&t.shape, &t.strides, t.offset);
        let physical = packed.as_bytes_mut();
        match t.dtype.item_size() {
            1 => layout::pack(shape, strides, offset, &logical, physical),
            2 => layout::pack::<u16>(shape, strides, offset, &u16s(&logical), elements_mut(physical).expect("aligned")),
            _ => layout::pack::<f32>(shape, strides, offset, &f32s(&logical), elements_mut(physical).expect("aligned")),
        }
        self.bind_checked(index, Box::new(packed))
    }

    /// Binds caller storage (`elementCount` elements laid out by offset and strides) to BOUND
    /// source `index` without copying. `array` names the caller's array type.
    pub fn bind(&mut self, index: usize, array: &'static str, region: Box<dyn BoundRegion>) -> Result<()> {
        let source = self.source(index);
        let t = &source.tensor;
        match source.binding {
            Binding::Embedded => return Err(Error::Embedded { name: source.name.clone() }),
            Binding::Owned => return Err(Error::NotBound { name: source.name.clone(), binding: "owned" }),
            Binding::Bound => {}
        }
        let wanted = dtype::storage_array(t.dtype);
        if array != wanted {
            return Err(Error::DType {
                name: source.name.clone(),
                dtype: t.dtype.as_str(),
                expected: format!("a {wanted} of physical storage"),
                given: array.to_owned(),
            });
        }
        let item = t.dtype.item_size();
        if region.byte_len() != t.physical_bytes() {
            return Err(Error::Size {
                name: source.name.clone(),
                expected: format!("{} elements of physical storage (elementCount)", t.element_count),
                given: format!("{} elements", region.byte_len() / item),
            });
        }
        if (region.as_ptr() as usize) % item != 0 {
            return Err(Error::Alignment { name: source.name.clone(), address: region.as_ptr() as usize, alignment: item });
        }
        self.bind_checked(index, region)
    }

    fn bind_checked(&mut self, index: usize, region: Box<dyn BoundRegion>) -> Result<()> {
        let source = &self.artifact.sources[index];
        let status = self.live.bind(index, source.key, region);
        check(status, "zgc_runtime_bind_source", || format!("source {:?}", source.name))
    }

    pub fn run(&mut self) -> Result<()> {
        match self.live.run() {
            Err(slot) => Err(Error::Detached { name: self.source(slot).name.clone() }),
            Ok(status) => check(status, "zgc_runtime_run", || self.unbound_sources()),
        }
    }

    /// Names BOUND sources nothing is bound to, which is what MISSING_BINDING is about.
    fn unbound_sources(&self) -> String {
        let unbound: Vec<String> = self
            .artifact
            .sources
            .iter()
            .filter(|s| s.binding == Binding::Bound && !self.live.is_bound(s.index))
            .map(|s| format!("{:?}", s.name))
            .collect();
        if unbound.is_empty() {
            String::new()
        } else {
            format!("unbound source(s) {}", unbound.join(", "))
        }
    }

    /// Copies output `index` of the last run into `target` (logical C order).
    pub fn copy_output(&mut self, index: usize, target: ElementsMut<'_>) -> Result<()> {
        let info = self
            .artifact
            .outputs
            .get(index)
            .ok_or(Error::OutputIndex { index: index as i64, count: self.artifact.outputs.len() })?;
        let what = format!("output {index}");
        if target.len() != info.logical_count {
            return Err(Error::Size {
                name: what,
                expected: format!("{} elements (shape {:?})", info.logical_count, info.shape),
                given: format!("{} elements", target.len()),
            });
        }
        let context = || format!("output {index}");
        match dtype::output_target(&what, info.dtype, target)? {
            OutputTarget::Direct(bytes) => check(self.live.copy_output(index, bytes), "zgc_runtime_copy_output", context),
            OutputTarget::DecodeF16(out) => {
                debug_assert_eq!(info.dtype, DType::F16);
                let mut bits = std::mem::take(&mut self.f16_scratch);
                bits.resize(info.logical_count, 0);
                let status = self.live.copy_output(index, crate::sys::memory::bytes_of_mut(&mut bits));
                if status == 0 {
                    dtype::decode_f16(&bits, out);
                }
                self.f16_scratch = bits;
                check(status, "zgc_runtime_copy_output", context)
            }
        }
    }
}

fn u16s(bytes: &[u8]) -> std::borrow::Cow<'_, [u16]> {
    match crate::sys::memory::elements::<u16>(bytes) {
        Some(v) => std::borrow::Cow::Borrowed(v),
        None => std::borrow::Cow::Owned(bytes.chunks_exact(2).map(|c| u16::from_ne_bytes([c[0], c[1]])).collect()),
    }
}

fn f32s(bytes: &[u8]) -> std::borrow::Cow<'_, [f32]> {
    match crate::sys::memory::elements::<f32>(bytes) {
        Some(v) => std::borrow::Cow::Borrowed(v),
        None => std::borrow::Cow::Owned(
            bytes.chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect(),
        ),
    }
}
