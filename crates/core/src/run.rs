//! The run protocol, one call's worth: each input bound without a copy (physical storage of a
//! BOUND source) or its values copied in, one run, then each output copied out. The binding
//! decodes its arguments and calls this; which arrays are storage is decided here too, for
//! runs and for async runs' staged inputs alike.

use crate::abi::Binding;
use crate::dtype::{self, ArrayKind, Elements, ElementsMut};
use crate::error::Result;
use crate::executor::Core;
use crate::ffi::runtime::BoundRegion;
use crate::instance::Instance;
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
}

/// A run being prepared on an instance its caller holds locked.
pub struct Run<'a> {
    core: &'a Core,
    instance: &'a mut Instance,
    bound: bool,
}

impl<'a> Run<'a> {
    pub fn begin(core: &'a Core, instance: &'a mut Instance) -> Run<'a> {
        Run { core, instance, bound: false }
    }

    pub fn instance(&self) -> &Instance {
        self.instance
    }

    /// Applies input `index`.
    pub fn input(&mut self, index: usize, input: Input<'_>) -> Result<()> {
        match input {
            Input::Storage { kind, region } => {
                let outcome = self.instance.bind(index, kind, region);
                // Noted whatever the outcome: a refused bind has dropped the source's old one.
                self.core.note_bindings(self.instance);
                outcome?;
                self.bound = true;
            }
            Input::Values(values) => {
                self.instance.set(index, values)?;
                self.bound |= self.instance.artifact().sources[index].binding == Binding::Bound;
            }
        }
        Ok(())
    }

    /// Runs; the outputs are then copied out of what it returns.
    pub fn run(self) -> Result<Outputs<'a>> {
        if self.bound {
            self.core.note_bindings(self.instance);
        }
        self.instance.run()?;
        Ok(Outputs { instance: self.instance })
    }
}

/// The outputs of a run that succeeded.
pub struct Outputs<'a> {
    instance: &'a mut Instance,
}

impl Outputs<'_> {
    /// Copies output `index` into `target`.
    pub fn copy(&mut self, index: usize, target: ElementsMut<'_>) -> Result<()> {
        self.instance.copy_output(index, target)
    }
}
