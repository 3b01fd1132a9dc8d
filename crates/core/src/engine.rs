//! What a lane runs on: an instance in this process, or an isolated one in a host child
//! process. Everything above (the run protocol, the queues and their workers, the binding)
//! drives both through this one type.

use crate::dtype::{ArrayKind, Elements, ElementsMut};
use crate::error::{Error, Result};
use crate::ffi::runtime::{BoundRegion, Temporary};
use crate::instance::{Instance, OutputData};
#[cfg(target_os = "linux")]
use crate::isolate::instance::IsolatedInstance;
use crate::Description;
use std::sync::Arc;

pub enum Engine {
    Local(Instance),
    #[cfg(target_os = "linux")]
    Isolated(Box<IsolatedInstance>),
}

impl Engine {
    pub fn description(&self) -> &Description {
        match self {
            Engine::Local(i) => i.artifact(),
            #[cfg(target_os = "linux")]
            Engine::Isolated(i) => i.description(),
        }
    }

    /// A share of the description, to hold while the engine is borrowed.
    pub fn shared_description(&self) -> Arc<Description> {
        match self {
            Engine::Local(i) => i.artifact().shared_description(),
            #[cfg(target_os = "linux")]
            Engine::Isolated(i) => i.description().clone(),
        }
    }

    /// The in-process instance, for what only it does (lending, storage shared with
    /// JavaScript); `None` for an isolated one.
    pub fn local(&mut self) -> Option<&mut Instance> {
        match self {
            Engine::Local(i) => Some(i),
            #[cfg(target_os = "linux")]
            Engine::Isolated(_) => None,
        }
    }

    #[cfg(target_os = "linux")]
    pub fn isolated(&mut self) -> Option<&mut IsolatedInstance> {
        match self {
            Engine::Isolated(i) => Some(i),
            Engine::Local(_) => None,
        }
    }

    /// Logical values for source `index`, kept for later runs (`set()`).
    pub fn set(&mut self, index: usize, values: Elements<'_>) -> Result<()> {
        match self {
            Engine::Local(i) => i.set(index, values),
            #[cfg(target_os = "linux")]
            Engine::Isolated(i) => i.set(index, values),
        }
    }

    /// The caller's array as the physical storage of source `index` (`bind()`): in-process
    /// without a copy; isolated, copied in at each run's start. `bytes` are its contents now.
    pub fn bind(&mut self, index: usize, kind: ArrayKind, bytes: &[u8], region: Box<dyn BoundRegion>) -> Result<()> {
        match self {
            Engine::Local(i) => {
                let _ = bytes;
                i.bind(index, kind, region)
            }
            #[cfg(target_os = "linux")]
            Engine::Isolated(i) => i.bind(index, kind, bytes, region),
        }
    }

    pub fn has_caller_storage(&self) -> bool {
        match self {
            Engine::Local(i) => i.has_caller_storage(),
            #[cfg(target_os = "linux")]
            Engine::Isolated(i) => i.has_caller_storage(),
        }
    }

    pub fn snapshot_caller_storage(&mut self) -> Result<Vec<Temporary>> {
        match self {
            Engine::Local(i) => i.snapshot_caller_storage(),
            #[cfg(target_os = "linux")]
            Engine::Isolated(i) => i.snapshot_caller_storage(),
        }
    }

    pub fn copy_output(&mut self, index: usize, target: ElementsMut<'_>) -> Result<()> {
        match self {
            Engine::Local(i) => i.copy_output(index, target),
            #[cfg(target_os = "linux")]
            Engine::Isolated(i) => i.copy_output(index, target),
        }
    }

    pub fn read_outputs(&mut self, f16_bits: bool) -> Result<Vec<OutputData>> {
        match self {
            Engine::Local(i) => i.read_outputs(f16_bits),
            #[cfg(target_os = "linux")]
            Engine::Isolated(i) => i.read_outputs(f16_bits),
        }
    }

    /// Waits for the isolated run `Run::run_within` left going, and reads its outputs.
    pub fn finish(&mut self, f16_bits: bool, idle: &mut dyn FnMut()) -> Result<Vec<OutputData>> {
        match self {
            #[cfg(target_os = "linux")]
            Engine::Isolated(i) => i.finish(idle)?,
            Engine::Local(_) => {
                let _ = idle;
                return Err(Error::Value { name: "run".into(), detail: "an in-process run is never left going".into() });
            }
        }
        self.read_outputs(f16_bits)
    }

    /// An isolated instance given up for good: its error. (In-process, never.)
    pub fn failed(&self) -> Option<Error> {
        match self {
            Engine::Local(_) => None,
            #[cfg(target_os = "linux")]
            Engine::Isolated(i) => i.failed(),
        }
    }
}
