//! The run protocol, one call's worth, for every caller (sync calls, async workers, host
//! children): each input bound without a copy (physical storage of a BOUND source), copied
//! in, or applied as staged at an async call; one run; then each output copied out. Which
//! arrays are storage is decided here too, for runs and for async runs' staged inputs alike.

use crate::abi::Binding;
use crate::dtype::{self, ArrayKind, Elements, ElementsMut};
use crate::error::Result;
use crate::lane::Core;
use crate::ffi::runtime::{BoundRegion, Temporary};
use crate::instance::{Feed, Instance, OutputData};
use crate::meta::SourceInfo;

/// Whether an array of `kind` (`None`: one the runtime does not read) and `len` elements given
/// for `source` is its physical storage, to be bound: the identity layout's, or exactly
/// `elementCount` elements of a padded one. Anything else is logical values, copied in.
pub fn takes_as_storage(source: &SourceInfo, kind: Option<ArrayKind>, len: usize) -> bool {
    let t = &source.tensor;
    source.binding == Binding::Bound && kind == Some(dtype::storage_kind(t.dtype)) && len == t.element_count && (t.is_identity() || t.element_count != t.logical_count)
}

/// One run input as the caller found it.
pub enum Input<'a> {
    /// Memory to bind without a copy, of the caller's array of `kind`.
    Storage { kind: ArrayKind, region: Box<dyn BoundRegion> },
    /// Values to copy into the source.
    Values(Elements<'a>),
    /// Physical storage to copy into the instance's own: a frame of a child's region, which
    /// the next command reuses.
    StorageCopy(Elements<'a>),
    /// An input staged at an async call (`Artifact::stage_*`): applied; storage lent
    /// (`Feed::Lend`) is bound for this run alone.
    Staged(Feed<'static>),
}

/// A run being prepared on an instance its caller holds locked: the one way every caller
/// (a call on the JavaScript thread, a worker, a host child) drives the artifact.
pub struct Run<'a> {
    /// The lane whose bindings a sync call notes (none off the caller's thread).
    core: Option<&'a Core>,
    instance: &'a mut Instance,
    bound: bool,
    /// Per lent source, the binding the loan displaced: given back when the run ends.
    lent: Vec<(usize, Option<Box<dyn BoundRegion>>)>,
    /// Where regions displaced off the caller's thread go, to be dropped on it; `None`: dropped here.
    displaced: Option<&'a mut Vec<Box<dyn BoundRegion>>>,
}

impl<'a> Run<'a> {
    /// A run on the caller's thread, on `core`'s instance.
    pub fn begin(core: &'a Core, instance: &'a mut Instance) -> Run<'a> {
        Run { core: Some(core), instance, bound: false, lent: Vec::new(), displaced: None }
    }

    /// A run on a worker: regions it displaces (perhaps the caller's arrays) go to `displaced`.
    pub fn off_thread(instance: &'a mut Instance, displaced: &'a mut Vec<Box<dyn BoundRegion>>) -> Run<'a> {
        Run { core: None, instance, bound: false, lent: Vec::new(), displaced: Some(displaced) }
    }

    /// A run in a process that holds no caller's memory (a host child).
    pub fn owned(instance: &'a mut Instance) -> Run<'a> {
        Run { core: None, instance, bound: false, lent: Vec::new(), displaced: None }
    }

    pub fn instance(&self) -> &Instance {
        self.instance
    }

    /// Applies input `index` (for `Input::Staged`, the feed's own).
    pub fn input(&mut self, index: usize, input: Input<'_>) -> Result<()> {
        debug_assert!(!matches!(&input, Input::Staged(feed) if feed.index() != index));
        match input {
            Input::Storage { kind, region } => {
                let outcome = self.instance.bind(index, kind, region);
                // Noted whatever the outcome: a refused bind has dropped the source's old one.
                self.note_bindings();
                outcome?;
                self.bound = true;
            }
            Input::Values(values) => {
                self.instance.set(index, values)?;
                self.bound |= self.instance.artifact().sources[index].binding == Binding::Bound;
            }
            Input::StorageCopy(values) => {
                let feed = self.instance.artifact().stage_storage(index, values)?;
                self.instance.apply(feed)?;
                self.bound = true;
            }
            Input::Staged(Feed::Lend { index, storage }) => {
                let own = self.instance.lend(index, storage)?;
                self.lent.push((index, own));
            }
            Input::Staged(feed) => {
                if let Some(region) = self.instance.apply_keeping(feed)? {
                    self.displace(region);
                }
            }
        }
        Ok(())
    }

    /// Runs; the outputs are then copied out of what it returns.
    pub fn run(self) -> Result<Outputs<'a>> {
        if self.bound {
            self.note_bindings();
        }
        self.instance.run()?;
        Ok(Outputs { run: self })
    }

    /// Runs off the caller's thread, with `temporary` (its copies) standing in for every
    /// caller-owned binding.
    pub fn run_detached(self, temporary: &[Temporary]) -> Result<Outputs<'a>> {
        self.instance.run_detached(temporary)?;
        Ok(Outputs { run: self })
    }

    fn note_bindings(&self) {
        if let Some(core) = self.core {
            core.note_bindings(self.instance);
        }
    }

    fn displace(&mut self, region: Box<dyn BoundRegion>) {
        match &mut self.displaced {
            Some(displaced) => displaced.push(region),
            None => drop(region),
        }
    }
}

impl Drop for Run<'_> {
    /// The instance's own bindings come back after a loan, whether the run succeeded or not.
    fn drop(&mut self) {
        while let Some((index, own)) = self.lent.pop() {
            if let Some(region) = self.instance.give_back(index, own) {
                self.displace(region);
            }
        }
    }
}

/// The outputs of a run that succeeded.
pub struct Outputs<'a> {
    run: Run<'a>,
}

impl Outputs<'_> {
    /// Copies output `index` into `target`.
    pub fn copy(&mut self, index: usize, target: ElementsMut<'_>) -> Result<()> {
        self.run.instance.copy_output(index, target)
    }

    /// Every output, in new memory (f16 as bits when `f16_bits`, else decoded to f32).
    pub fn read(self, f16_bits: bool) -> Result<Vec<OutputData>> {
        self.run.instance.read_outputs(f16_bits)
    }
}
