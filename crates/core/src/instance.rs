//! One runtime instance of an artifact: its own storage, its bound sources, its state.
//! Instances of one artifact share nothing but the loaded library.
//!
//! Values reach an instance one way: `Artifact::stage_*` checks and converts them into a
//! `Feed` (borrowed where it can be, owned when it must outlive the call), and
//! `Instance::apply` hands the feed to the artifact. `set` is the two in a row; async runs
//! stage at call time and apply later, on another thread.

use crate::abi::{Binding, DType};
use crate::artifact::{Artifact, Description};
use crate::dtype::{self, ArrayKind, Elements, ElementsMut, OutputTarget};
use crate::error::{check, check_source, Error, Result};
use crate::layout;
use crate::meta::SourceInfo;
use crate::ffi::memory::{bytes_of_mut, elements_mut, AlignedBuf};
use crate::ffi::runtime::{BoundRegion, LiveRuntime, SharedStorage, Temporary};
use std::borrow::Cow;
use std::sync::Arc;

/// Storage the runtime allocates for a BOUND source is aligned to a cache line: more than
/// any item size, and what vectorised artifacts like.
pub const PACKED_ALIGNMENT: usize = 64;

/// Checked values for one source, ready for the artifact.
pub enum Feed<'a> {
    /// Logical bytes for an OWNED source (`zgc_runtime_copy_source`).
    Copy { index: usize, bytes: Cow<'a, [u8]> },
    /// Runtime-owned physical storage for a BOUND source (`zgc_runtime_bind_source`).
    Bind { index: usize, storage: AlignedBuf },
    /// Storage a caller keeps between runs (a sequence's state), bound for one staged run
    /// only: the instance's own binding comes back after it (`Instance::lend`).
    Lend { index: usize, storage: Arc<AlignedBuf> },
}

impl Feed<'_> {
    /// The source it feeds.
    pub fn index(&self) -> usize {
        match self {
            Feed::Copy { index, .. } | Feed::Bind { index, .. } | Feed::Lend { index, .. } => *index,
        }
    }

    pub fn into_owned(self) -> Feed<'static> {
        match self {
            Feed::Copy { index, bytes } => Feed::Copy { index, bytes: Cow::Owned(bytes.into_owned()) },
            Feed::Bind { index, storage } => Feed::Bind { index, storage },
            Feed::Lend { index, storage } => Feed::Lend { index, storage },
        }
    }
}

/// One output of a run, copied out of the artifact.
pub enum OutputData {
    F32(Vec<f32>),
    U16(Vec<u16>),
    I8(Vec<i8>),
    U8(Vec<u8>),
}

fn allocate(source: &SourceInfo) -> Result<AlignedBuf> {
    let bytes = source.tensor.physical_bytes();
    AlignedBuf::zeroed(bytes, PACKED_ALIGNMENT).ok_or_else(|| Error::OutOfMemory {
        what: format!("the storage of source {:?}", source.name),
        bytes,
        alignment: PACKED_ALIGNMENT,
    })
}

/// Staging needs only what an artifact is, not its library: an isolated instance's parent
/// stages with the description its host process reported.
impl Description {
    /// Logical values (C order) for source `index`: copied in for OWNED sources, packed
    /// into new runtime-owned storage for BOUND ones.
    pub fn stage_values<'a>(&self, index: usize, values: Elements<'a>) -> Result<Feed<'a>> {
        let logical = self.logical_bytes(index, values)?;
        let source = &self.sources[index];
        if source.binding == Binding::Owned {
            return Ok(Feed::Copy { index, bytes: logical });
        }
        let mut storage = allocate(source)?;
        self.pack(index, &logical, &mut storage);
        Ok(Feed::Bind { index, storage })
    }

    /// Checks `values` for source `index` and gives them as the dtype's logical bytes.
    pub(crate) fn logical_bytes<'a>(&self, index: usize, values: Elements<'a>) -> Result<Cow<'a, [u8]>> {
        logical_bytes(&self.sources[index], values)
    }

    /// Scatters logical bytes into `storage` (the source's physical layout); elements no
    /// logical element maps to are left as they are.
    pub(crate) fn pack(&self, index: usize, logical: &[u8], storage: &mut AlignedBuf) {
        let t = &self.sources[index].tensor;
        let (shape, strides, offset) = (&t.shape, &t.strides, t.offset);
        let physical = storage.as_bytes_mut();
        match t.dtype.item_size() {
            1 => layout::pack(shape, strides, offset, logical, physical),
            2 => layout::pack::<u16>(shape, strides, offset, &u16s(logical), elements_mut(physical).expect("aligned")),
            _ => layout::pack::<f32>(shape, strides, offset, &f32s(logical), elements_mut(physical).expect("aligned")),
        }
    }

    /// Checks that an array of `kind` with `byte_len` bytes can be the physical storage of
    /// BOUND source `index`.
    pub fn check_storage(&self, index: usize, kind: ArrayKind, byte_len: usize) -> Result<()> {
        check_storage(&self.sources[index], kind, byte_len)
    }

    /// New storage for BOUND source `index` that runs borrow one at a time (`Feed::Lend`):
    /// zeros, or `initial` (logical values, C order) packed into its physical layout.
    pub fn lendable_storage(&self, index: usize, initial: Option<Elements<'_>>) -> Result<AlignedBuf> {
        let source = &self.sources[index];
        self.check_storage(index, dtype::storage_kind(source.tensor.dtype), source.tensor.physical_bytes())?;
        match initial {
            None => allocate(source),
            Some(values) => match self.stage_values(index, values)? {
                Feed::Bind { storage, .. } => Ok(storage),
                _ => unreachable!("a BOUND source's values are packed into storage"),
            },
        }
    }

    /// `storage` (from `lendable_storage` for the same source) lent to one staged run.
    pub fn stage_lent(&self, index: usize, storage: Arc<AlignedBuf>) -> Result<Feed<'static>> {
        let source = &self.sources[index];
        self.check_storage(index, dtype::storage_kind(source.tensor.dtype), storage.len())?;
        Ok(Feed::Lend { index, storage })
    }

    /// A copy of physical storage for BOUND source `index`, for a run that must not read
    /// the caller's memory (async runs).
    pub fn stage_storage(&self, index: usize, values: Elements<'_>) -> Result<Feed<'static>> {
        let source = &self.sources[index];
        let bytes = values.bytes();
        self.check_storage(index, values.kind(), bytes.len())?;
        if let (DType::Bool, Elements::U8(v)) = (source.tensor.dtype, values) {
            dtype::check_bool(&source.name, v)?;
        }
        let mut storage = allocate(source)?;
        storage.as_bytes_mut().copy_from_slice(bytes);
        Ok(Feed::Bind { index, storage })
    }
}

/// Checks `values` for `source` and gives them as the dtype's logical bytes (also the parent's
/// check of an isolated instance's inputs, which has the description but not the library).
pub fn logical_bytes<'a>(source: &SourceInfo, values: Elements<'a>) -> Result<Cow<'a, [u8]>> {
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
    dtype::to_storage(&source.name, t.dtype, values)
}

/// Checks that an array of `kind` with `byte_len` bytes can be the physical storage of BOUND
/// `source`.
pub fn check_storage(source: &SourceInfo, kind: ArrayKind, byte_len: usize) -> Result<()> {
    let t = &source.tensor;
    check_bound(source)?;
    if kind != dtype::storage_kind(t.dtype) {
        return Err(not_storage(source, kind.name()));
    }
    if byte_len != t.physical_bytes() {
        return Err(Error::Size {
            name: source.name.clone(),
            expected: format!("{} elements of physical storage (elementCount)", t.element_count),
            given: format!("{} elements", byte_len / t.dtype.item_size()),
        });
    }
    Ok(())
}

/// Checks that `source` takes storage at all: it is BOUND.
pub fn check_bound(source: &SourceInfo) -> Result<()> {
    match source.binding {
        Binding::Embedded => Err(Error::Embedded { name: source.name.clone() }),
        Binding::Owned => Err(Error::NotBound { name: source.name.clone(), binding: "owned" }),
        Binding::Bound => Ok(()),
    }
}

/// The refusal of an array named `given` (of another kind than the dtype's storage, or of no
/// kind the runtime reads) as the storage of BOUND `source`.
pub fn not_storage(source: &SourceInfo, given: &str) -> Error {
    let wanted = dtype::storage_kind(source.tensor.dtype).name();
    Error::DType {
        name: source.name.clone(),
        dtype: source.tensor.dtype.as_str(),
        expected: format!("{} {wanted} of physical storage", if wanted.starts_with("Int") { "an" } else { "a" }),
        given: given.to_owned(),
    }
}

/// Largest packed storage kept for reuse after a source is packed again.
pub const SPARE_LIMIT: usize = 64 << 20;

pub struct Instance {
    artifact: Arc<Artifact>,
    live: LiveRuntime,
    f16_scratch: Vec<u16>,
    /// Per source: packed storage a newer packing displaced, reused by the next `set` so that
    /// repeated sets neither allocate nor fault in fresh pages. Never bound while kept here.
    spares: Vec<Option<AlignedBuf>>,
}

impl Instance {
    pub fn new(artifact: Arc<Artifact>) -> Result<Instance> {
        let live = LiveRuntime::init(
            artifact.library.clone(),
            artifact.runtime_size,
            artifact.runtime_alignment,
            artifact.sources.len(),
        )?;
        let spares = (0..artifact.sources.len()).map(|_| None).collect();
        Ok(Instance { artifact, live, f16_scratch: Vec::new(), spares })
    }

    pub fn artifact(&self) -> &Arc<Artifact> {
        &self.artifact
    }

    fn source(&self, index: usize) -> &SourceInfo {
        &self.artifact.sources[index]
    }

    /// Logical values for source `index` (see `Artifact::stage_values`). A BOUND source is
    /// packed into the spare storage its previous packing left, when there is one.
    pub fn set(&mut self, index: usize, values: Elements<'_>) -> Result<()> {
        let source = &self.artifact.sources[index];
        if source.binding == Binding::Owned {
            // Every run's inputs come this way: checked, then copied in by `apply` (no staging
            // through `stage_values`, which would clone the artifact's Arc for it).
            let bytes = self.artifact.logical_bytes(index, values)?;
            return self.apply(Feed::Copy { index, bytes });
        }
        let artifact = self.artifact.clone();
        let source = &artifact.sources[index];
        if source.binding == Binding::Bound {
            if let Some(mut storage) = self.spares[index].take().filter(|b| b.len() == source.tensor.physical_bytes()) {
                let logical = match artifact.logical_bytes(index, values) {
                    Ok(logical) => logical,
                    Err(e) => {
                        self.spares[index] = Some(storage);
                        return Err(e);
                    }
                };
                // Positions no logical element maps to were zeroed at allocation and are
                // never written, so only logical positions carry stale values, all overwritten.
                artifact.pack(index, &logical, &mut storage);
                return self.bind_checked(index, Box::new(storage));
            }
        }
        let feed = artifact.stage_values(index, values)?;
        self.apply(feed)
    }

    pub fn apply(&mut self, feed: Feed<'_>) -> Result<()> {
        match feed {
            Feed::Copy { index, bytes } => {
                let source = &self.artifact.sources[index];
                let status = self.live.copy_source(source.key, &bytes);
                check_source(status, "zgc_runtime_copy_source", &source.name)
            }
            Feed::Bind { index, storage } => self.bind_checked(index, Box::new(storage)),
            // Outside a staged run there is nothing to give back after: it stays bound.
            Feed::Lend { index, storage } => self.bind_checked(index, Box::new(SharedStorage(storage))),
        }
    }

    /// Binds lent `storage` to source `index` for one run; gives back the binding it displaced
    /// (none when nothing was bound), for `give_back` after the run.
    pub fn lend(&mut self, index: usize, storage: Arc<AlignedBuf>) -> Result<Option<Box<dyn BoundRegion>>> {
        let source = &self.artifact.sources[index];
        match self.live.bind(index, source.key, Box::new(SharedStorage(storage))) {
            Ok(displaced) => Ok(displaced),
            Err((status, _lent)) => check_source(status, "zgc_runtime_bind_source", &source.name).map(|()| None),
        }
    }

    /// After a run with storage lent to source `index`: binds `own` (what `lend` displaced)
    /// again, or fresh zeroed storage when nothing was bound before, so that no later run of
    /// this instance reads or writes the lender's storage. Returns a region to drop on the
    /// JavaScript thread (`own`, if the artifact refused it again).
    pub fn give_back(&mut self, index: usize, own: Option<Box<dyn BoundRegion>>) -> Option<Box<dyn BoundRegion>> {
        let source = &self.artifact.sources[index];
        let own = match own {
            Some(own) => own,
            None => match allocate(source) {
                Ok(zeros) => Box::new(zeros),
                // No memory for zeros: the lent storage stays bound (a plain run would then share it).
                Err(_) => return None,
            },
        };
        match self.live.bind(index, source.key, own) {
            // What it displaces is the lent storage: one share of an Arc, dropped anywhere.
            Ok(_lent) => None,
            Err((_, own)) => Some(own),
        }
    }

    /// Binds caller storage (`elementCount` elements laid out by offset and strides) to BOUND
    /// source `index` without copying. `kind` is the caller's array's.
    pub fn bind(&mut self, index: usize, kind: ArrayKind, region: Box<dyn BoundRegion>) -> Result<()> {
        self.artifact.check_storage(index, kind, region.byte_len())?;
        let item = self.source(index).tensor.dtype.item_size();
        if (region.as_ptr() as usize) % item != 0 {
            let name = self.source(index).name.clone();
            return Err(Error::Alignment { name, address: region.as_ptr() as usize, alignment: item });
        }
        self.bind_checked(index, region)
    }

    fn bind_checked(&mut self, index: usize, region: Box<dyn BoundRegion>) -> Result<()> {
        self.bind_keeping(index, region).map(drop)
    }

    /// Binds `region`; storage the runtime packed that it displaces is kept for reuse, and any
    /// other displaced region (or `region`, refused) is handed back to drop where it belongs.
    fn bind_keeping(&mut self, index: usize, region: Box<dyn BoundRegion>) -> Result<Option<Box<dyn BoundRegion>>> {
        let source = &self.artifact.sources[index];
        let (status, unused) = match self.live.bind(index, source.key, region) {
            Ok(displaced) => (0, displaced),
            Err((status, rejected)) => (status, Some(rejected)),
        };
        let mut other = None;
        if let Some(unused) = unused {
            if unused.packed_len().is_some_and(|len| len <= SPARE_LIMIT) {
                self.spares[index] = unused.into_packed();
            } else {
                other = Some(unused);
            }
        }
        check_source(status, "zgc_runtime_bind_source", &source.name)?;
        Ok(other)
    }

    /// `apply` off the caller's thread: a region the feed displaces is handed back instead
    /// of dropped, since it may be a JavaScript array.
    pub fn apply_keeping(&mut self, feed: Feed<'_>) -> Result<Option<Box<dyn BoundRegion>>> {
        match feed {
            Feed::Bind { index, storage } => self.bind_keeping(index, Box::new(storage)),
            copy => self.apply(copy).map(|()| None),
        }
    }

    /// Whether caller-owned storage is bound, which async runs must copy at their start.
    pub fn has_caller_storage(&self) -> bool {
        self.live.has_caller_owned()
    }

    pub fn run(&mut self) -> Result<()> {
        match self.live.run() {
            Err(slot) => Err(Error::Detached { name: self.source(slot).name.clone() }),
            Ok(status) => check(status, "zgc_runtime_run", || self.unbound_sources()),
        }
    }

    /// On the caller's thread: copies of all storage the caller lent to this instance, for
    /// `run_detached` on another thread.
    pub fn snapshot_caller_storage(&mut self) -> Result<Vec<Temporary>> {
        let keys: Vec<u32> = self.artifact.sources.iter().map(|s| s.key).collect();
        self.live.snapshot_caller_owned(&keys, PACKED_ALIGNMENT).map_err(|slot| match slot {
            Ok(slot) => Error::Detached { name: self.source(slot).name.clone() },
            Err(bytes) => Error::OutOfMemory { what: "a copy of bound storage".into(), bytes, alignment: PACKED_ALIGNMENT },
        })
    }

    /// Runs without reading the caller's memory: `temporary` (from `snapshot_caller_storage`)
    /// stands in for every caller-owned binding during the run.
    pub fn run_detached(&mut self, temporary: &[Temporary]) -> Result<()> {
        match self.live.run_detached(temporary) {
            Err(slot) => Err(Error::Detached { name: self.source(slot).name.clone() }),
            Ok(Err((slot, status))) => {
                let source = self.source(slot);
                check_source(status, "zgc_runtime_bind_source", &source.name)
            }
            Ok(Ok(status)) => check(status, "zgc_runtime_run", || self.unbound_sources()),
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
        // Names are formatted only on the way to an error: this is every run's hot path.
        let what = || format!("output {index}");
        if target.len() != info.logical_count {
            return Err(Error::Size {
                name: what(),
                expected: format!("{} elements (shape {:?})", info.logical_count, info.shape),
                given: format!("{} elements", target.len()),
            });
        }
        match dtype::output_target(what, info.dtype, target)? {
            OutputTarget::Direct(bytes) => check(self.live.copy_output(index, bytes), "zgc_runtime_copy_output", what),
            OutputTarget::DecodeF16(out) => {
                let mut bits = std::mem::take(&mut self.f16_scratch);
                bits.resize(info.logical_count, 0);
                let status = self.live.copy_output(index, bytes_of_mut(&mut bits));
                if status == 0 {
                    dtype::decode_f16(&bits, out);
                }
                self.f16_scratch = bits;
                check(status, "zgc_runtime_copy_output", what)
            }
        }
    }

    /// Every output of the last run, in new vectors (f16 decoded unless `f16_bits`).
    pub fn read_outputs(&mut self, f16_bits: bool) -> Result<Vec<OutputData>> {
        let artifact = self.artifact.clone();
        let mut outputs = Vec::with_capacity(artifact.outputs.len());
        for (index, info) in artifact.outputs.iter().enumerate() {
            let mut data = OutputData::zeroed(info.dtype, info.logical_count, f16_bits);
            self.copy_output(index, data.as_target())?;
            outputs.push(data);
        }
        Ok(outputs)
    }
}

impl OutputData {
    /// `n` zeros of the array an output of `dtype` is read into (f16: bits when `f16_bits`).
    pub fn zeroed(dtype: DType, n: usize, f16_bits: bool) -> OutputData {
        match dtype {
            DType::F32 => OutputData::F32(vec![0.0; n]),
            DType::F16 if f16_bits => OutputData::U16(vec![0; n]),
            DType::F16 => OutputData::F32(vec![0.0; n]),
            DType::I8 => OutputData::I8(vec![0; n]),
            DType::Bool => OutputData::U8(vec![0; n]),
        }
    }

    pub fn as_target(&mut self) -> ElementsMut<'_> {
        match self {
            OutputData::F32(v) => ElementsMut::F32(v),
            OutputData::U16(v) => ElementsMut::U16(v),
            OutputData::I8(v) => ElementsMut::I8(v),
            OutputData::U8(v) => ElementsMut::U8(v),
        }
    }
}

fn u16s(bytes: &[u8]) -> Cow<'_, [u16]> {
    match crate::ffi::memory::elements::<u16>(bytes) {
        Some(v) => Cow::Borrowed(v),
        None => Cow::Owned(bytes.chunks_exact(2).map(|c| u16::from_ne_bytes([c[0], c[1]])).collect()),
    }
}

fn f32s(bytes: &[u8]) -> Cow<'_, [f32]> {
    match crate::ffi::memory::elements::<f32>(bytes) {
        Some(v) => Cow::Borrowed(v),
        None => Cow::Owned(bytes.chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect()),
    }
}
