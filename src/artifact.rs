//! A loaded, checked artifact (`NativeArtifact`) and what it looks like to JavaScript
//! (`describe`).

use crate::errors::{js_err, thrown, unsupported, Code, Thrown};
use crate::runtime::{offload_mode, source_index, stage_copy, NativeRuntime, NativeStaged};
use zgc::abi::ABI_VERSION;
use zgc::engine::Engine;
#[cfg(target_os = "linux")]
use zgc::isolate::instance::{IsolatedInstance, Options as IsolationOptions};
use zgc::meta::TensorInfo;
use crate::js::JsArray;
use zgc::ffi::memory::AlignedBuf;
use zgc::{Artifact, Description, Error, Instance};
use napi::bindgen_prelude::TypedArray;
use napi::Env;
use napi_derive::napi;
use std::cell::RefCell;
use std::sync::Arc;
#[cfg(target_os = "linux")]
use std::time::Duration;

#[napi(object)]
pub struct SourceDescription {
    pub key: u32,
    pub name: String,
    pub kind: String,
    pub binding: String,
    pub dtype: String,
    pub shape: Vec<f64>,
    pub strides: Vec<f64>,
    pub offset: f64,
    pub element_count: f64,
    pub byte_count: f64,
    /// Logical elements (`product(shape)`), which `set` takes.
    pub logical_count: f64,
    /// Logical C order is the physical layout: values and storage coincide.
    pub identity: bool,
}

#[napi(object)]
pub struct OutputDescription {
    pub dtype: String,
    pub shape: Vec<f64>,
    pub element_count: f64,
    pub byte_count: f64,
}

#[napi(object)]
pub struct ArtifactDescription {
    pub path: String,
    pub abi_version: u32,
    pub fingerprint_hex: String,
    pub runtime_size: f64,
    pub runtime_alignment: f64,
    pub mutable_bytes: f64,
    pub sources: Vec<SourceDescription>,
    pub outputs: Vec<OutputDescription>,
}

pub(crate) fn shape(t: &TensorInfo) -> Vec<f64> {
    t.shape.iter().map(|&d| d as f64).collect()
}

/// An artifact that instances are made of: loaded here, or run by host processes (each
/// isolated instance's own), of which one is started first to learn its description.
#[napi]
pub struct NativeArtifact {
    /// `None` once released: the last runtime using it was closed (see `release`).
    inner: RefCell<Option<Arc<Artifact>>>,
    #[cfg(target_os = "linux")]
    isolated: Option<Isolation>,
}

#[cfg(target_os = "linux")]
struct Isolation {
    path: String,
    options: IsolationOptions,
    description: Arc<Description>,
    /// The instance started to describe the artifact, which the first `instantiate` takes.
    first: RefCell<Option<IsolatedInstance>>,
}

impl NativeArtifact {
    fn new(artifact: Artifact) -> NativeArtifact {
        NativeArtifact {
            inner: RefCell::new(Some(Arc::new(artifact))),
            #[cfg(target_os = "linux")]
            isolated: None,
        }
    }

    fn artifact(&self) -> napi::Result<Arc<Artifact>, Code> {
        self.inner.borrow().clone().ok_or_else(|| js_err(Error::Closed))
    }

    /// What inputs are checked and staged against.
    fn description(&self) -> napi::Result<Arc<Description>, Code> {
        #[cfg(target_os = "linux")]
        if let Some(i) = &self.isolated {
            return Ok(i.description.clone());
        }
        Ok(self.artifact()?.shared_description())
    }

    fn in_process_only(&self) -> napi::Result<(), Code> {
        #[cfg(target_os = "linux")]
        if self.isolated.is_some() {
            return Err(js_err(Error::Value { name: "storage".into(), detail: "storage is lent to runs in-process only".into() }));
        }
        Ok(())
    }
}

/// How isolated instances are started: `load()`'s and `createPool()`'s options.
#[napi(object)]
pub struct IsolateOptions {
    pub host: String,
    pub env: Vec<String>,
    pub start_timeout_ms: f64,
    pub timeout_ms: Option<f64>,
    pub max_memory_mb: Option<f64>,
}

#[napi]
impl NativeArtifact {
    #[napi(factory)]
    pub fn open(env: &Env, path: String) -> Result<NativeArtifact, Thrown> {
        (|| {
            Artifact::open(&path).map(NativeArtifact::new).map_err(js_err)
        })()
        .map_err(thrown(env))
    }

    #[napi(factory)]
    pub fn from_bytes(env: &Env, bytes: TypedArray<'_>, label: String) -> Result<NativeArtifact, Thrown> {
        (|| {
            Artifact::from_bytes(&bytes.arraybuffer, &label).map(NativeArtifact::new).map_err(js_err)
        })()
        .map_err(thrown(env))
    }

    /// The artifact at `path`, run by host processes (Linux): its first instance's process
    /// is started now (blocking until it has loaded the artifact), and describes it.
    #[cfg(target_os = "linux")]
    #[napi(factory)]
    pub fn isolated(env: &Env, path: String, options: IsolateOptions) -> Result<NativeArtifact, Thrown> {
        (|| {
            let ms = |v: f64| (v.is_finite() && v > 0.0).then(|| Duration::from_secs_f64(v / 1000.0));
            let options = IsolationOptions {
                host: options.host,
                env: options.env,
                start_timeout: ms(options.start_timeout_ms).unwrap_or(Duration::from_secs(30)),
                timeout_ms: options.timeout_ms.filter(|v| *v > 0.0),
                max_memory_mb: options.max_memory_mb.filter(|v| *v > 0.0),
            };
            let first = IsolatedInstance::start(&path, options.clone()).map_err(js_err)?;
            let description = first.description().clone();
            Ok(NativeArtifact {
                inner: RefCell::new(None),
                isolated: Some(Isolation { path, options, description, first: RefCell::new(Some(first)) }),
            })
        })()
        .map_err(thrown(env))
    }

    #[napi]
    pub fn describe(&self, env: &Env) -> Result<ArtifactDescription, Thrown> {
        (|| {
            Ok(describe(&*self.description()?))
        })()
        .map_err(thrown(env))
    }

    /// A new instance; `offload` ('auto', 'always', 'never') rules its async runs. An
    /// isolated one is a new process (the first takes the one that described the artifact).
    #[napi]
    pub fn instantiate(&self, env: &Env, offload: String) -> Result<NativeRuntime, Thrown> {
        (|| {
            let mode = offload_mode(&offload)?;
            #[cfg(target_os = "linux")]
            if let Some(i) = &self.isolated {
                let first = i.first.borrow_mut().take();
                let instance = match first {
                    Some(instance) => instance,
                    None => IsolatedInstance::start(&i.path, i.options.clone()).map_err(js_err)?,
                };
                return Ok(NativeRuntime::new(i.description.clone(), Engine::Isolated(Box::new(instance)), mode));
            }
            let artifact = self.artifact()?;
            let engine = Engine::Local(Instance::new(artifact.clone()).map_err(js_err)?);
            Ok(NativeRuntime::new(artifact.shared_description(), engine, mode))
        })()
        .map_err(thrown(env))
    }

    /// Drops this handle's share of the library, so that closing the last runtime unloads it
    /// (and closes the memfd of a bytes load) now rather than when the GC runs finalizers,
    /// which Node defers to a later turn of the event loop.
    #[napi]
    pub fn release(&self) {
        self.inner.borrow_mut().take();
        #[cfg(target_os = "linux")]
        if let Some(i) = &self.isolated {
            i.first.borrow_mut().take();
        }
    }

    /// Copies a run input into `staged`, for a run that starts later on another thread.
    #[napi]
    pub fn stage(&self, env: &Env, staged: &NativeStaged, index: u32, values: TypedArray<'_>) -> Result<(), Thrown> {
        (|| {
            stage_copy(&*self.description()?, staged, index, &values)
        })()
        .map_err(thrown(env))
    }

    /// New storage for BOUND source `index` that runs borrow one at a time (a sequence's
    /// state): zeros, or `initial` (logical values, C order) packed into its layout.
    #[napi]
    pub fn lendable(&self, env: &Env, index: u32, initial: Option<TypedArray<'_>>) -> Result<NativeLendable, Thrown> {
        (|| {
            self.in_process_only()?;
            let artifact = self.artifact()?;
            let index = source_index(&artifact, index)?;
            let storage = match initial {
                None => artifact.lendable_storage(index, None),
                Some(values) => {
                    let values = JsArray::of(&values);
                    let view = values.view().ok_or_else(|| js_err(unsupported(&artifact.sources[index], &values)))?;
                    artifact.lendable_storage(index, Some(view))
                }
            };
            Ok(NativeLendable { storage: Arc::new(storage.map_err(js_err)?), index })
        })()
        .map_err(thrown(env))
    }

    /// Lends `lendable` to the run `staged` is for, for that run only.
    #[napi]
    pub fn stage_lent(&self, env: &Env, staged: &NativeStaged, lendable: &NativeLendable) -> Result<(), Thrown> {
        (|| {
            self.in_process_only()?;
            let feed = self.artifact()?.stage_lent(lendable.index, lendable.storage.clone()).map_err(js_err)?;
            staged.feeds.borrow_mut().push(feed);
            Ok(())
        })()
        .map_err(thrown(env))
    }
}

/// Storage of one BOUND source that runs borrow one at a time (`NativeArtifact.lendable`). A
/// run holds a share of it until it ends, so dropping this never frees memory under a run.
#[napi]
pub struct NativeLendable {
    storage: Arc<AlignedBuf>,
    index: usize,
}

/// What `describe()` gives JavaScript, from an artifact's signature (loaded here, or reported
/// by an isolated instance's host process).
pub(crate) fn describe(a: &zgc::Description) -> ArtifactDescription {
    ArtifactDescription {
        path: a.path.clone(),
        abi_version: ABI_VERSION,
        fingerprint_hex: format!("{:#018x}", a.fingerprint),
        runtime_size: a.runtime_size as f64,
        runtime_alignment: a.runtime_alignment as f64,
        mutable_bytes: a.mutable_bytes as f64,
        sources: a
            .sources
            .iter()
            .map(|s| SourceDescription {
                key: s.key,
                name: s.name.clone(),
                kind: s.kind.as_str().to_owned(),
                binding: s.binding.as_str().to_owned(),
                dtype: s.tensor.dtype.as_str().to_owned(),
                shape: shape(&s.tensor),
                strides: s.tensor.strides.iter().map(|&d| d as f64).collect(),
                offset: s.tensor.offset as f64,
                element_count: s.tensor.element_count as f64,
                byte_count: s.tensor.byte_count as f64,
                logical_count: s.tensor.logical_count as f64,
                identity: s.tensor.is_identity(),
            })
            .collect(),
        outputs: a
            .outputs
            .iter()
            .map(|o| OutputDescription { dtype: o.dtype.as_str().to_owned(), shape: shape(o), element_count: o.element_count as f64, byte_count: o.byte_count as f64 })
            .collect(),
    }
}


/// Whether this addon runs isolated instances (`isolate: 'process'`): Linux only (memfd,
/// pidfd, the parent-death signal).
#[napi]
pub fn has_isolation() -> bool {
    cfg!(target_os = "linux")
}

/// The artifact ABI version this runtime loads (`ABI_VERSION` of the package).
#[napi]
pub fn abi_version() -> u32 {
    ABI_VERSION
}
