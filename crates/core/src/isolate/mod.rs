//! Process-isolated instances: the artifact runs in a host child process (`zgc-runtime-host`,
//! its loop in `crate::host`), its tensors cross through a region both processes map, and its
//! death fails only the run it was executing (`child.rs`, the parent's side; `instance.rs`,
//! the instance as the engine drives it).
//!
//! The region (`Layout`): a control page (sequence words, sleep flags), the storage slot of
//! each BOUND source (what `storage()` hands out), then `frames` frames. A frame holds one
//! command: its header (command, argument, the child's answer), one mark per source, a slot
//! per source for its input values and one per output. The parent fills frame
//! `REQ % frames`, then bumps `REQ`; the child takes commands in order, answers each in its
//! frame and sets `DONE` to its number, so several runs can be handed over at once and run
//! back to back. A side that sleeps says so in its flag first, and the other then sends one
//! byte on the control socket to wake it; the sequence words, not the bytes, say what is
//! done, so a stray byte costs one wake-up.

#[cfg(target_os = "linux")]
pub(crate) mod answer;
#[cfg(target_os = "linux")]
pub mod child;
#[cfg(target_os = "linux")]
pub mod instance;

use crate::abi::{Binding, DType, Kind};
use crate::error::{Error, Result};
use crate::meta::{SourceInfo, TensorInfo};

/// Control words, each on its own cache line: commands issued and done (wrapping counts),
/// and the sleep flags: only a side that set its flag is sent a wake-up byte (bytes nobody
/// reads would fill the socket and block the sender).
pub const REQ: usize = 0;

/// The fence between a side's store of its own word and its load of the other's (see above).
#[inline]
pub fn handshake() {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
}

pub const DONE: usize = 64;
pub const CHILD_SLEEPS: usize = 128;
pub const PARENT_SLEEPS: usize = 192;
const CONTROL: usize = 4096;

/// A frame's header: the command, its argument and the child's answer.
pub const F_CMD: usize = 0;
pub const F_ARG: usize = 4;
pub const F_STATUS: usize = 8;
pub const F_CODE_LEN: usize = 12;
pub const F_MSG_LEN: usize = 16;
/// A frame's state: whether its command may still be taken back (see `child::reclaim`).
pub const F_STATE: usize = 20;
pub const STATE_READY: u32 = 1;
pub const STATE_TAKEN: u32 = 2;
pub const STATE_CANCELLED: u32 = 3;
/// An error's detail (`answer.rs`): whether it has an artifact status, the status, and the
/// lengths of its operation and source names, which follow the message.
pub const F_HAS_STATUS: usize = 24;
pub const F_ERR_STATUS: usize = 28;
pub const F_OP_LEN: usize = 32;
pub const F_SRC_LEN: usize = 36;
pub const F_CODE: usize = 64;
pub const CODE_MAX: usize = 64;
pub const F_MSG: usize = 128;
const FRAME_HEADER: usize = 2048;
pub const MSG_MAX: usize = FRAME_HEADER - F_MSG;

/// Commands.
pub const RUN: u32 = 1;
/// Applies the marked inputs without running (`set`).
pub const SET: u32 = 2;
/// Binds the storage slot of source `ARG` to it (`storage()`).
pub const STORAGE: u32 = 3;

/// Marks: what the input slot of a source holds for its frame's command.
pub const MARK_NONE: u32 = 0;
pub const MARK_VALUES: u32 = 1;
pub const MARK_STORAGE: u32 = 2;

const ALIGN: usize = 64;
/// Most frames an instance has, and the bytes their slots may take together (one frame at
/// least): frames pay off for short runs, whose tensors are small.
pub const MAX_FRAMES: usize = 8;
const FRAMES_BYTES: usize = 1 << 20;

/// One frame of the region: where its header, marks and slots are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    pub at: usize,
    pub inputs: Vec<(usize, usize)>,
    pub outputs: Vec<(usize, usize)>,
}

impl Frame {
    pub fn mark(&self, index: usize) -> usize {
        self.at + FRAME_HEADER + 4 * index
    }
}

/// Where everything lives in the region of one artifact's instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub storage: Vec<(usize, usize)>,
    pub frames: Vec<Frame>,
    pub len: usize,
}

fn align_up(n: usize, to: usize) -> Option<usize> {
    n.checked_add(to - 1).map(|v| v / to * to)
}

fn input_bytes(s: &SourceInfo) -> usize {
    if s.binding == Binding::Embedded {
        0
    } else {
        s.tensor.byte_count.max(s.tensor.physical_bytes())
    }
}

impl Layout {
    /// How many frames an instance of `sig` gets: up to MAX_FRAMES, as many as fit FRAMES_BYTES.
    pub fn frames_for(sig: &Signature) -> usize {
        let bytes = sig.sources.iter().map(|s| input_bytes(s).saturating_add(ALIGN)).chain(sig.outputs.iter().map(|o| o.byte_count.saturating_add(ALIGN))).fold(FRAME_HEADER, usize::saturating_add);
        (FRAMES_BYTES / bytes.max(1)).clamp(1, MAX_FRAMES)
    }

    pub fn of(sig: &Signature, frames: usize, page: usize) -> Result<Layout> {
        let too_big = || Error::Host { path: sig.path.clone(), reason: "its tensors do not fit one address space".into() };
        let mut at = CONTROL;
        let mut slot = |bytes: usize| -> Result<(usize, usize)> {
            let start = align_up(at, ALIGN).ok_or_else(too_big)?;
            at = start.checked_add(bytes).ok_or_else(too_big)?;
            Ok((start, bytes))
        };
        let mut storage = Vec::with_capacity(sig.sources.len());
        for s in &sig.sources {
            storage.push(slot(if s.binding == Binding::Bound { s.tensor.physical_bytes() } else { 0 })?);
        }
        let mut list = Vec::with_capacity(frames);
        for _ in 0..frames.max(1) {
            let header = slot(FRAME_HEADER.checked_add(sig.sources.len().checked_mul(4).ok_or_else(too_big)?).ok_or_else(too_big)?)?;
            let inputs = sig.sources.iter().map(|s| slot(input_bytes(s))).collect::<Result<Vec<_>>>()?;
            let outputs = sig.outputs.iter().map(|o| slot(o.byte_count)).collect::<Result<Vec<_>>>()?;
            list.push(Frame { at: header.0, inputs, outputs });
        }
        let len = align_up(at.max(1), page).ok_or_else(too_big)?;
        Ok(Layout { storage, frames: list, len })
    }

    /// The frame of command number `seq` (1 for the first).
    pub fn frame(&self, seq: u32) -> &Frame {
        &self.frames[self.frame_index(seq)]
    }

    /// Which frame command `seq` (counted from 1, wrapping) uses: the ring's one rule, which
    /// the parent's JavaScript asks too rather than keep a copy.
    pub fn frame_index(&self, seq: u32) -> usize {
        (seq.wrapping_sub(1) as usize) % self.frames.len()
    }
}

/// What a host child reports of the artifact it loaded: its description, everything the
/// parent needs to check values and size the region without loading the library itself.
pub type Signature = crate::Description;

/// The byte encoding of the hello message (child to parent): little-endian integers,
/// length-prefixed strings.
#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
    fn tensor(&mut self, t: &TensorInfo) {
        self.u32(match t.dtype {
            DType::F32 => 1,
            DType::F16 => 2,
            DType::I8 => 3,
            DType::Bool => 4,
        });
        self.u64(t.shape.len() as u64);
        for &d in &t.shape {
            self.u64(d as u64);
        }
        for &d in &t.strides {
            self.u64(d as i64 as u64);
        }
        self.u64(t.offset as u64);
        self.u64(t.element_count as u64);
        self.u64(t.logical_count as u64);
        self.u64(t.byte_count as u64);
    }
    pub fn signature(&mut self, s: &Signature) {
        self.str(&s.path);
        self.u64(s.fingerprint);
        self.u64(s.runtime_size as u64);
        self.u64(s.runtime_alignment as u64);
        self.u64(s.mutable_bytes as u64);
        self.u64(s.sources.len() as u64);
        for src in &s.sources {
            self.u32(src.key);
            self.str(&src.name);
            self.u32(match src.kind {
                Kind::Input => 1,
                Kind::Parameter => 2,
                Kind::Constant => 3,
                Kind::State => 4,
            });
            self.u32(match src.binding {
                Binding::Owned => 1,
                Binding::Bound => 2,
                Binding::Embedded => 3,
            });
            self.tensor(&src.tensor);
        }
        self.u64(s.outputs.len() as u64);
        for o in &s.outputs {
            self.tensor(o);
        }
    }
}

pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// A field past the end, or a value no artifact has: the child spoke out of turn.
#[derive(Debug)]
pub struct Malformed;

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], Malformed> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or(Malformed)?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }
    pub fn u32(&mut self) -> std::result::Result<u32, Malformed> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().map_err(|_| Malformed)?))
    }
    pub fn u64(&mut self) -> std::result::Result<u64, Malformed> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().map_err(|_| Malformed)?))
    }
    fn usize(&mut self) -> std::result::Result<usize, Malformed> {
        usize::try_from(self.u64()?).map_err(|_| Malformed)
    }
    pub fn str(&mut self) -> std::result::Result<String, Malformed> {
        let n = self.usize()?;
        String::from_utf8(self.take(n)?.to_vec()).map_err(|_| Malformed)
    }
    fn count(&mut self, max: usize) -> std::result::Result<usize, Malformed> {
        self.usize().ok().filter(|&n| n <= max).ok_or(Malformed)
    }
    fn tensor(&mut self) -> std::result::Result<TensorInfo, Malformed> {
        let dtype = DType::from_raw(self.u32()?).ok_or(Malformed)?;
        let rank = self.count(crate::meta::MAX_RANK as usize)?;
        let shape = (0..rank).map(|_| self.usize()).collect::<std::result::Result<Vec<_>, _>>()?;
        let strides = (0..rank).map(|_| self.u64().map(|v| v as i64 as isize)).collect::<std::result::Result<Vec<_>, _>>()?;
        let offset = self.usize()?;
        let element_count = self.usize()?;
        let logical_count = self.usize()?;
        let byte_count = self.usize()?;
        // What the parent sizes slots and checks values by must agree with itself.
        let consistent = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)) == Some(logical_count)
            && logical_count.checked_mul(dtype.item_size()) == Some(byte_count)
            && element_count.checked_mul(dtype.item_size()).is_some();
        if !consistent {
            return Err(Malformed);
        }
        Ok(TensorInfo { dtype, shape, strides, offset, element_count, logical_count, byte_count })
    }
    pub fn signature(&mut self) -> std::result::Result<Signature, Malformed> {
        let path = self.str()?;
        let fingerprint = self.u64()?;
        let runtime_size = self.usize()?;
        let runtime_alignment = self.usize()?;
        let mutable_bytes = self.usize()?;
        let n = self.count(crate::meta::MAX_SOURCES)?;
        let mut sources = Vec::with_capacity(n);
        for index in 0..n {
            let key = self.u32()?;
            let name = self.str()?;
            let kind = Kind::from_raw(self.u32()?).ok_or(Malformed)?;
            let binding = Binding::from_raw(self.u32()?).ok_or(Malformed)?;
            let tensor = self.tensor()?;
            sources.push(SourceInfo { index, key, name, kind, binding, tensor });
        }
        let n = self.count(crate::meta::MAX_OUTPUTS)?;
        let outputs = (0..n).map(|_| self.tensor()).collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Signature { path, fingerprint, runtime_size, runtime_alignment, mutable_bytes, sources, outputs })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tensor(dtype: DType, shape: &[usize], element_count: usize) -> TensorInfo {
        let logical: usize = shape.iter().product();
        let mut strides = vec![1isize; shape.len()];
        for a in (0..shape.len().saturating_sub(1)).rev() {
            strides[a] = strides[a + 1] * shape[a + 1] as isize;
        }
        TensorInfo { dtype, shape: shape.to_vec(), strides, offset: 0, element_count, logical_count: logical, byte_count: logical * dtype.item_size() }
    }

    fn sig() -> Signature {
        let src = |index, name: &str, binding, t| SourceInfo { index, key: index as u32 + 1, name: name.into(), kind: Kind::Input, binding, tensor: t };
        Signature {
            path: "/m/ünï.so".into(),
            fingerprint: u64::MAX - 3,
            runtime_size: 96,
            runtime_alignment: 16,
            mutable_bytes: 7,
            sources: vec![
                src(0, "x", Binding::Owned, tensor(DType::F32, &[2, 3], 6)),
                src(1, "w", Binding::Bound, tensor(DType::F16, &[3], 9)),
                src(2, "c", Binding::Embedded, tensor(DType::I8, &[5], 5)),
            ],
            outputs: vec![tensor(DType::Bool, &[7], 7), tensor(DType::F32, &[], 1)],
        }
    }

    #[test]
    fn a_signature_survives_the_wire() {
        let mut w = Writer::default();
        w.signature(&sig());
        assert_eq!(Reader::new(&w.0).signature().unwrap(), sig());
        // Every truncation is refused, never read past.
        for cut in 0..w.0.len() {
            assert!(Reader::new(&w.0[..cut]).signature().is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn a_signature_whose_sizes_disagree_is_refused() {
        let mut s = sig();
        s.outputs[0].byte_count = 8;
        let mut w = Writer::default();
        w.signature(&s);
        assert!(Reader::new(&w.0).signature().is_err());
    }

    #[test]
    fn slots_are_aligned_apart_and_sized_for_values_or_storage() {
        let l = Layout::of(&sig(), 3, 4096).unwrap();
        assert_eq!(l.frames.len(), 3);
        // x: 24 bytes of values; w: the larger of 6 logical bytes and 18 physical; c: none.
        for f in &l.frames {
            assert_eq!(f.inputs.iter().map(|s| s.1).collect::<Vec<_>>(), vec![24, 18, 0]);
            assert_eq!(f.outputs.iter().map(|s| s.1).collect::<Vec<_>>(), vec![7, 4]);
        }
        assert_eq!(l.storage.iter().map(|s| s.1).collect::<Vec<_>>(), vec![0, 18, 0]);
        let mut all: Vec<(usize, usize)> = l.storage.clone();
        for f in &l.frames {
            all.push((f.at, FRAME_HEADER + 12));
            all.extend(f.inputs.iter().chain(&f.outputs).copied());
        }
        assert!(all.iter().all(|(at, _)| at % 64 == 0 && *at >= CONTROL));
        all.sort();
        assert!(all.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0), "no overlap");
        assert_eq!(l.len % 4096, 0);
        assert!(l.len >= all.last().map(|(a, n)| a + n).unwrap());
        // Commands take the frames in turn, the count wrapping past u32::MAX.
        assert_eq!(l.frame(1).at, l.frames[0].at);
        assert_eq!(l.frame(3).at, l.frames[2].at);
        assert_eq!(l.frame(4).at, l.frames[0].at);
        assert_eq!(l.frame(0).at, l.frames[(u32::MAX as usize) % 3].at);
        assert_eq!([1, 2, 3, 4, 0, u32::MAX].map(|seq| l.frame_index(seq)), [0, 1, 2, 0, (u32::MAX as usize) % 3, (u32::MAX as usize - 1) % 3]);
    }

    #[test]
    fn the_layout_is_packed_in_order_from_the_control_page() {
        // Both processes compute it; exact places, so that a change shows as one.
        let l = Layout::of(&sig(), 2, 4096).unwrap();
        assert_eq!(l.storage, vec![(4096, 0), (4096, 18), (4160, 0)]);
        let f = &l.frames[0];
        assert_eq!(f.at, 4160);
        assert_eq!((f.mark(0), f.mark(2)), (4160 + 2048, 4160 + 2048 + 8));
        // Header and 3 marks end at 6220; slots follow, each aligned up to 64.
        assert_eq!(f.inputs, vec![(6272, 24), (6336, 18), (6400, 0)]);
        assert_eq!(f.outputs, vec![(6400, 7), (6464, 4)]);
        assert_eq!(l.frames[1].at, 6528);
        assert_eq!(l.len, 12288);
        assert_eq!(MSG_MAX, 1920);
        assert_eq!(align_up(65, 64), Some(128));
        assert_eq!(align_up(64, 64), Some(64));
        assert_eq!(align_up(usize::MAX, 64), None);
    }

    #[test]
    fn small_artifacts_get_every_frame_large_ones_one() {
        assert_eq!(Layout::frames_for(&sig()), MAX_FRAMES);
        let mut big = sig();
        big.outputs[1] = tensor(DType::F32, &[1 << 20], 1 << 20);
        assert_eq!(Layout::frames_for(&big), 1);
        big.outputs[1] = tensor(DType::F32, &[1 << 16], 1 << 16);
        assert_eq!(Layout::frames_for(&big), 3);
    }
}
