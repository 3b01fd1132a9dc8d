//! The run protocol, one call's worth, for every caller (sync calls, async workers, host
//! children) and every engine (in-process or isolated): each input bound without a copy
//! (physical storage of a BOUND source), copied in, or applied as staged at an async call;
//! one run; then each output copied out. Which arrays are storage is decided here too, for
//! runs and for async runs' staged inputs alike.

use crate::abi::Binding;
use crate::dtype::{self, ArrayKind, Elements, ElementsMut};
use crate::error::Result;
use crate::engine::Engine;
use crate::lane::Core;
use crate::ffi::runtime::{BoundRegion, Temporary};
use crate::instance::{Feed, OutputData};
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
    engine: &'a mut Engine,
    /// An isolated run's deadline (milliseconds), else the instance's own.
    timeout_ms: Option<f64>,
    /// Inputs went into an isolated instance's next command, which has not been sent.
    written: bool,
    /// Called once if an isolated run's wait goes to sleep (a long run): a worker hands over
    /// what it finished before.
    idle: Option<&'a mut dyn FnMut()>,
    bound: bool,
    /// Per lent source, the binding the loan displaced: given back when the run ends.
    lent: Vec<(usize, Option<Box<dyn BoundRegion>>)>,
    /// Where regions displaced off the caller's thread go, to be dropped on it; `None`: dropped here.
    displaced: Option<&'a mut Vec<Box<dyn BoundRegion>>>,
}

impl<'a> Run<'a> {
    /// A run on the caller's thread, on `core`'s instance.
    pub fn begin(core: &'a Core, engine: &'a mut Engine) -> Run<'a> {
        Run { core: Some(core), engine, timeout_ms: None, written: false, idle: None, bound: false, lent: Vec::new(), displaced: None }
    }

    /// A run on a worker: regions it displaces (perhaps the caller's arrays) go to `displaced`.
    pub fn off_thread(engine: &'a mut Engine, displaced: &'a mut Vec<Box<dyn BoundRegion>>) -> Run<'a> {
        Run { core: None, engine, timeout_ms: None, written: false, idle: None, bound: false, lent: Vec::new(), displaced: Some(displaced) }
    }

    /// A run in a process that holds no caller's memory (a host child).
    pub fn owned(engine: &'a mut Engine) -> Run<'a> {
        Run { core: None, engine, timeout_ms: None, written: false, idle: None, bound: false, lent: Vec::new(), displaced: None }
    }

    pub fn description(&self) -> &crate::Description {
        self.engine.description()
    }

    /// What to do once if an isolated run's wait goes to sleep.
    pub fn idle(mut self, idle: &'a mut dyn FnMut()) -> Run<'a> {
        self.idle = Some(idle);
        self
    }

    /// This run's deadline on an isolated instance (in-process runs cannot be stopped).
    pub fn timeout(mut self, timeout_ms: Option<f64>) -> Run<'a> {
        self.timeout_ms = timeout_ms;
        self
    }

    /// Applies input `index` (for `Input::Staged`, the feed's own).
    pub fn input(&mut self, index: usize, input: Input<'_>) -> Result<()> {
        debug_assert!(!matches!(&input, Input::Staged(feed) if feed.index() != index));
        #[cfg(target_os = "linux")]
        if let Engine::Isolated(_) = self.engine {
            return self.input_isolated(index, input);
        }
        match input {
            Input::Storage { kind, region } => {
                let outcome = local(self.engine).bind(index, kind, region);
                // Noted whatever the outcome: a refused bind has dropped the source's old one.
                self.note_bindings();
                outcome?;
                self.bound = true;
            }
            Input::Values(values) => {
                let instance = local(self.engine);
                instance.set(index, values)?;
                self.bound |= instance.artifact().sources[index].binding == Binding::Bound;
            }
            Input::StorageCopy(values) => {
                let instance = local(self.engine);
                let feed = instance.artifact().stage_storage(index, values)?;
                instance.apply(feed)?;
                self.bound = true;
            }
            Input::Staged(Feed::Lend { index, storage }) => {
                let own = local(self.engine).lend(index, storage)?;
                self.lent.push((index, own));
            }
            Input::Staged(feed) => {
                if let Some(region) = local(self.engine).apply_keeping(feed)? {
                    self.displace(region);
                }
            }
        }
        Ok(())
    }

    /// An isolated instance's input: into its next command's frame; the child applies it as
    /// the run starts. Out of line: the in-process path is every tiny run's.
    #[cfg(target_os = "linux")]
    #[inline(never)]
    fn input_isolated(&mut self, index: usize, input: Input<'_>) -> Result<()> {
        let Some(isolated) = self.engine.isolated() else { unreachable!("called for an isolated engine") };
        self.written = true;
        match input {
            Input::Storage { kind, region } => {
                let copy = crate::ffi::runtime::snapshot_regions(&mut [Some(region)], &[0], crate::instance::PACKED_ALIGNMENT);
                let name = || isolated.description().sources[index].name.clone();
                match copy {
                    Ok(copies) if copies.len() == 1 => isolated.input_storage(index, kind, copies[0].bytes()),
                    Ok(_) => Err(crate::error::Error::Value { name: name(), detail: "storage that is not the caller's".into() }),
                    Err(_) => Err(crate::error::Error::Detached { name: name() }),
                }
            }
            Input::Values(values) => isolated.input_values(index, values),
            Input::StorageCopy(values) => isolated.input_storage(index, values.kind(), values.bytes()),
            Input::Staged(feed) => isolated.input_feed(feed),
        }
    }

    /// Runs; the outputs are then copied out of what it returns.
    pub fn run(mut self) -> Result<Outputs<'a>> {
        if self.bound {
            self.note_bindings();
        }
        self.written = false;
        match &mut self.engine {
            Engine::Local(instance) => instance.run()?,
            #[cfg(target_os = "linux")]
            Engine::Isolated(isolated) => isolated.run(self.timeout_ms, None, false, &mut || {})?,
        }
        Ok(Outputs { run: self })
    }

    /// `run` on the caller's thread that waits for an isolated instance at most `budget`
    /// (in-process, the run itself). A run still going then is left to `Engine::finish`.
    pub fn run_within(mut self, budget: std::time::Duration) -> Result<Ran<'a>> {
        #[cfg(target_os = "linux")]
        if let Engine::Isolated(isolated) = &mut self.engine {
            self.written = false;
            if !isolated.run_within(self.timeout_ms, budget)? {
                return Ok(Ran::Going);
            }
            return Ok(Ran::Done(Outputs { run: self }));
        }
        let _ = budget;
        self.run().map(Ran::Done)
    }

    /// Runs off the caller's thread, with `temporary` (its copies) standing in for every
    /// caller-owned binding.
    pub fn run_detached(mut self, temporary: &[Temporary]) -> Result<Outputs<'a>> {
        self.written = false;
        match &mut self.engine {
            Engine::Local(instance) => instance.run_detached(temporary)?,
            #[cfg(target_os = "linux")]
            Engine::Isolated(isolated) => {
                let mut nothing = || {};
                let idle: &mut dyn FnMut() = match self.idle.take() {
                    Some(idle) => idle,
                    None => &mut nothing,
                };
                isolated.run(self.timeout_ms, Some(temporary), true, idle)?
            }
        }
        Ok(Outputs { run: self })
    }

    fn note_bindings(&self) {
        if let Some(core) = self.core {
            core.note_bindings(self.engine);
        }
    }

    fn displace(&mut self, region: Box<dyn BoundRegion>) {
        match &mut self.displaced {
            Some(displaced) => displaced.push(region),
            None => drop(region),
        }
    }
}

fn local(engine: &mut Engine) -> &mut crate::instance::Instance {
    engine.local().expect("an engine not isolated is in-process")
}

impl Drop for Run<'_> {
    /// The instance's own bindings come back after a loan, whether the run succeeded or not.
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if self.written {
            if let Some(isolated) = self.engine.isolated() {
                isolated.clear_inputs();
            }
        }
        while let Some((index, own)) = self.lent.pop() {
            let Some(instance) = self.engine.local() else { break };
            if let Some(region) = instance.give_back(index, own) {
                self.displace(region);
            }
        }
    }
}

/// How `run_within` left a run.
pub enum Ran<'a> {
    Done(Outputs<'a>),
    /// An isolated instance's run still going after the budget.
    Going,
}

/// The outputs of a run that succeeded.
pub struct Outputs<'a> {
    run: Run<'a>,
}

impl Outputs<'_> {
    /// Copies output `index` into `target`.
    pub fn copy(&mut self, index: usize, target: ElementsMut<'_>) -> Result<()> {
        self.run.engine.copy_output(index, target)
    }

    /// Every output, in new memory (f16 as bits when `f16_bits`, else decoded to f32).
    pub fn read(self, f16_bits: bool) -> Result<Vec<OutputData>> {
        self.run.engine.read_outputs(f16_bits)
    }
}
