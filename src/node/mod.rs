//! The napi-rs binding: a thin layer from JavaScript values to the core. The TypeScript-facing
//! API (`index.js`) wraps these classes; they are not meant to be used directly.

mod pto;

use crate::abi::{Binding, DType, ABI_VERSION};
use crate::dtype::{self, Elements};
use crate::instance::{Feed, OutputData, PACKED_ALIGNMENT};
use crate::meta::{SourceInfo, TensorInfo};
use crate::sys::js::{self, JsArray, JsRegion};
use crate::sys::js_fast::{self, FastArgs};
use crate::sys::memory::AlignedBuf;
use crate::sys::runtime::{SharedStorage, Temporary};
use crate::{Artifact, Error, Instance};
use napi::bindgen_prelude::{AsyncTask, Either, Either4, Float32Array, Int8Array, TypedArray, Uint16Array, Uint8Array, Unknown};
use napi::{Env, JsValue, Task};
use napi_derive::napi;
use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

/// An error's stable code, which napi-rs puts in `err.code`.
pub struct Code(&'static str);
impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

fn js_err(e: Error) -> napi::Error<Code> {
    napi::Error::new(Code(e.code()), e.to_string())
}

fn napi_err(e: napi::Error) -> napi::Error<Code> {
    napi::Error::new(Code("ERR_ZGC_NAPI"), e.reason.clone())
}

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

fn shape(t: &TensorInfo) -> Vec<f64> {
    t.shape.iter().map(|&d| d as f64).collect()
}

#[napi]
pub struct NativeArtifact {
    /// `None` once released: the last runtime using it was closed (see `release`).
    inner: RefCell<Option<Arc<Artifact>>>,
}

impl NativeArtifact {
    fn new(artifact: Artifact) -> NativeArtifact {
        NativeArtifact { inner: RefCell::new(Some(Arc::new(artifact))) }
    }

    fn artifact(&self) -> napi::Result<Arc<Artifact>, Code> {
        self.inner.borrow().clone().ok_or_else(|| js_err(Error::Closed))
    }
}

#[napi]
impl NativeArtifact {
    #[napi(factory)]
    pub fn open(path: String) -> napi::Result<NativeArtifact, Code> {
        Artifact::open(&path).map(NativeArtifact::new).map_err(js_err)
    }

    #[napi(factory)]
    pub fn from_bytes(bytes: TypedArray<'_>, label: String) -> napi::Result<NativeArtifact, Code> {
        Artifact::from_bytes(&bytes.arraybuffer, &label).map(NativeArtifact::new).map_err(js_err)
    }

    #[napi]
    pub fn describe(&self) -> napi::Result<ArtifactDescription, Code> {
        let a = &self.artifact()?;
        Ok(ArtifactDescription {
            path: a.path().to_owned(),
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
                .map(|o| OutputDescription {
                    dtype: o.dtype.as_str().to_owned(),
                    shape: shape(o),
                    element_count: o.element_count as f64,
                    byte_count: o.byte_count as f64,
                })
                .collect(),
        })
    }

    #[napi]
    pub fn instantiate(&self) -> napi::Result<NativeRuntime, Code> {
        let artifact = self.artifact()?;
        Instance::new(artifact.clone())
            .map(|i| NativeRuntime { artifact: RefCell::new(Some(artifact)), inner: RefCell::new(Some(Arc::new(Mutex::new(i)))) })
            .map_err(js_err)
    }

    /// Drops this handle's share of the library, so that closing the last runtime unloads it
    /// (and closes the memfd of a bytes load) now rather than when the GC runs finalizers,
    /// which Node defers to a later turn of the event loop.
    #[napi]
    pub fn release(&self) {
        self.inner.borrow_mut().take();
    }

    /// Copies a `run()` input into `staged`, for a run that starts later on another thread.
    #[napi]
    pub fn stage(&self, staged: &NativeStaged, index: u32, values: TypedArray<'_>) -> napi::Result<(), Code> {
        let artifact = self.artifact()?;
        let index = source_index(&artifact, index)?;
        let source = &artifact.sources[index];
        let values = JsArray::of(&values);
        let view = values.view().ok_or_else(|| js_err(unsupported(source, &values)))?;
        let feed = if is_storage(source, &values) {
            artifact.stage_storage(index, view)
        } else {
            artifact.stage_values(index, view).map(Feed::into_owned)
        };
        staged.feeds.borrow_mut().push(feed.map_err(js_err)?);
        Ok(())
    }
}

/// Inputs copied at `runAsync` call time, applied when the run starts.
#[napi]
pub struct NativeStaged {
    feeds: RefCell<Vec<Feed<'static>>>,
}

#[napi]
impl NativeStaged {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> NativeStaged {
        NativeStaged { feeds: RefCell::new(Vec::new()) }
    }
}

fn source_index(artifact: &Artifact, index: u32) -> napi::Result<usize, Code> {
    let count = artifact.sources.len();
    if (index as usize) < count {
        Ok(index as usize)
    } else {
        Err(js_err(Error::UnknownSource { name: format!("#{index}"), known: format!("{count} sources") }))
    }
}

/// A BOUND input that is its source's physical storage: the identity layout, or exactly
/// `elementCount` elements of a padded one. Anything else is logical values.
fn is_storage_array(source: &SourceInfo, class: &str, len: usize) -> bool {
    let t = &source.tensor;
    source.binding == Binding::Bound
        && class == dtype::storage_array(t.dtype)
        && len == t.element_count
        && (t.is_identity() || t.element_count != t.logical_count)
}

fn is_storage(source: &SourceInfo, values: &JsArray) -> bool {
    is_storage_array(source, &values.class_name(), values.len())
}

/// `run()`'s one native call (see `sys::js_fast`): applies each (index, values) pair as a
/// run input, runs, and copies every output into the arrays given for them.
fn fast_run(args: &FastArgs) -> Result<(), Error> {
    let shared = args.target(0)?;
    let mut instance = match shared.try_lock() {
        Ok(guard) => guard,
        Err(TryLockError::Poisoned(p)) => p.into_inner(),
        Err(TryLockError::WouldBlock) => return Err(Error::Busy),
    };
    let artifact = instance.artifact().clone();
    let outputs = args.u32(1).map_or(usize::MAX, |n| n as usize);
    let pairs = args.u32(2).map_or(usize::MAX, |n| n as usize);
    if outputs != artifact.outputs.len() || pairs > artifact.sources.len() || 3 + outputs + 2 * pairs > args.len() {
        return Err(Error::Value { name: "run".into(), detail: "malformed fast-run arguments".into() });
    }
    for at in (3 + outputs..3 + outputs + 2 * pairs).step_by(2) {
        let index = args.u32(at).map(|i| i as usize).filter(|&i| i < artifact.sources.len()).ok_or_else(|| Error::UnknownSource {
            name: "#?".into(),
            known: format!("{} sources", artifact.sources.len()),
        })?;
        let source = &artifact.sources[index];
        let array = args.array(at + 1).ok_or_else(|| Error::DType {
            name: source.name.clone(),
            dtype: source.tensor.dtype.as_str(),
            expected: dtype::value_arrays(source.tensor.dtype).to_owned(),
            given: "a value that is not a TypedArray".into(),
        })?;
        if is_storage(source, &array) {
            let region = JsRegion::hold(&array).map_err(|e| Error::Value { name: source.name.clone(), detail: e.reason.clone() })?;
            let region = region.expect("a storage array is a kind some dtype binds");
            instance.bind(index, &array.class_name(), Box::new(region))?;
        } else {
            let view = array.view().ok_or_else(|| unsupported(source, &array))?;
            instance.set(index, view)?;
        }
    }
    instance.run()?;
    for index in 0..outputs {
        let info = &artifact.outputs[index];
        let mut array = args.array(3 + index).ok_or_else(|| dtype::output_error(index, info.dtype, "a value that is not a TypedArray".into()))?;
        let class = array.class_name();
        let view = array.view_mut().ok_or_else(|| dtype::output_error(index, info.dtype, class.into_owned()))?;
        instance.copy_output(index, view)?;
    }
    Ok(())
}

/// The function behind `Runtime.run()`, made once per module instance (thread).
#[napi]
pub fn fast_run_function(env: &Env) -> napi::Result<Unknown<'_>> {
    js_fast::create_function(env, "zgcRun", fast_run)
}

fn unsupported(source: &SourceInfo, array: &JsArray) -> Error {
    Error::DType {
        name: source.name.clone(),
        dtype: source.tensor.dtype.as_str(),
        expected: dtype::value_arrays(source.tensor.dtype).to_owned(),
        given: array.class_name().into_owned(),
    }
}

#[napi]
pub struct NativeRuntime {
    /// Released on close, with the instance: see `NativeArtifact::release`.
    artifact: RefCell<Option<Arc<Artifact>>>,
    /// `None` once closed. An async run holds a clone while it runs, so the instance is
    /// deinitialised (dropped) only after both let go.
    /// Every method takes `&self`: napi-rs keeps the borrow of a method that returns an
    /// AsyncTask until the task settles, and `&mut self` would lock JavaScript out of the
    /// object (even `close()`) for that long. Only the JS thread touches this cell.
    inner: RefCell<Option<Arc<Mutex<Instance>>>>,
}

impl NativeRuntime {
    fn artifact(&self) -> napi::Result<Arc<Artifact>, Code> {
        self.artifact.borrow().clone().ok_or_else(|| js_err(Error::Closed))
    }

    /// The instance, for a call on the JavaScript thread; never waits for an async run.
    fn shared(&self) -> napi::Result<Arc<Mutex<Instance>>, Code> {
        self.inner.borrow().clone().ok_or_else(|| js_err(Error::Closed))
    }

    /// Runs `f` on the instance, on the JavaScript thread; never waits for an async run.
    fn with<R>(&self, f: impl FnOnce(&mut Instance) -> napi::Result<R, Code>) -> napi::Result<R, Code> {
        let inner = self.inner.borrow();
        let instance = inner.as_ref().ok_or_else(|| js_err(Error::Closed))?;
        let mut guard = Self::lock(instance)?;
        f(&mut guard)
    }

    fn lock(instance: &Mutex<Instance>) -> napi::Result<MutexGuard<'_, Instance>, Code> {
        match instance.try_lock() {
            Ok(guard) => Ok(guard),
            // A panic inside an earlier call left no broken invariant the instance relies on.
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(js_err(Error::Busy)),
        }
    }

    fn bind_array(instance: &mut Instance, index: usize, storage: &JsArray) -> napi::Result<(), Code> {
        let source = &instance.artifact().sources[index];
        if let (DType::Bool, Some(Elements::U8(bytes))) = (source.tensor.dtype, storage.view()) {
            dtype::check_bool(&source.name, bytes).map_err(js_err)?;
        }
        let given = storage.class_name();
        match JsRegion::hold(storage).map_err(napi_err)? {
            Some(region) => instance.bind(index, &given, Box::new(region)).map_err(js_err),
            // Not a kind any dtype binds: the core words the refusal.
            None => instance.artifact().check_storage(index, &given, 0).map_err(js_err),
        }
    }
}

/// One output as the TypedArray its dtype comes back as.
type OutputArray = Either4<Float32Array, Uint16Array, Int8Array, Uint8Array>;

fn output_array(data: OutputData) -> OutputArray {
    match data {
        OutputData::F32(v) => Either4::A(Float32Array::new(v)),
        OutputData::U16(v) => Either4::B(Uint16Array::new(v)),
        OutputData::I8(v) => Either4::C(Int8Array::new(v)),
        OutputData::U8(v) => Either4::D(Uint8Array::new(v)),
    }
}

#[napi(object)]
pub struct RunFailure {
    pub code: String,
    pub message: String,
}

/// An async run: staged copies applied, then the graph, then the outputs copied out, all on
/// a libuv pool thread, reading no JavaScript memory.
pub struct RunTask {
    instance: Option<Arc<Mutex<Instance>>>,
    copies: Vec<Feed<'static>>,
    temporary: Vec<Temporary>,
    f16_bits: bool,
}

impl Task for RunTask {
    type Output = Result<Vec<OutputData>, Error>;
    type JsValue = Either<Vec<OutputArray>, RunFailure>;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let Some(instance) = self.instance.as_ref() else { return Ok(Err(Error::Closed)) };
        let mut guard = instance.lock().unwrap_or_else(|p| p.into_inner());
        let copies = std::mem::take(&mut self.copies);
        Ok((|| {
            for feed in copies {
                guard.apply(feed)?;
            }
            guard.run_detached(&self.temporary)?;
            guard.read_outputs(self.f16_bits)
        })())
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> napi::Result<Self::JsValue> {
        Ok(match output {
            Ok(outputs) => Either::A(outputs.into_iter().map(output_array).collect()),
            Err(e) => Either::B(RunFailure { code: e.code().to_owned(), message: e.to_string() }),
        })
    }

    fn finally(mut self, _env: Env) -> napi::Result<()> {
        // On the JavaScript thread: if close() already let go, the instance (and any JS array
        // bound to it) is dropped here rather than on the pool thread.
        drop(self.instance.take());
        Ok(())
    }
}

#[napi]
impl NativeRuntime {
    /// Logical values for a source (copied, or packed into runtime-owned storage).
    #[napi]
    pub fn set(&self, index: u32, values: TypedArray<'_>) -> napi::Result<(), Code> {
        let artifact = self.artifact()?;
        let index = source_index(&artifact, index)?;
        let source = &artifact.sources[index];
        let values = JsArray::of(&values);
        let view = values.view().ok_or_else(|| js_err(unsupported(source, &values)))?;
        self.with(|i| i.set(index, view).map_err(js_err))
    }

    /// Zero-copy binding of physical storage; the array is held until rebound or closed.
    #[napi]
    pub fn bind(&self, index: u32, storage: TypedArray<'_>) -> napi::Result<(), Code> {
        let artifact = self.artifact()?;
        let index = source_index(&artifact, index)?;
        self.with(|i| Self::bind_array(i, index, &JsArray::of(&storage)))
    }

    /// A `run()` input: bound zero-copy when the array is the source's physical storage, else
    /// as `set`.
    #[napi]
    pub fn feed(&self, index: u32, values: TypedArray<'_>) -> napi::Result<(), Code> {
        let artifact = self.artifact()?;
        let index = source_index(&artifact, index)?;
        let source = &artifact.sources[index];
        let values = JsArray::of(&values);
        if is_storage(source, &values) {
            return self.with(|i| Self::bind_array(i, index, &values));
        }
        let view = values.view().ok_or_else(|| js_err(unsupported(source, &values)))?;
        self.with(|i| i.set(index, view).map_err(js_err))
    }

    #[napi]
    pub fn run(&self) -> napi::Result<(), Code> {
        self.with(|i| i.run().map_err(js_err))
    }

    /// Binds new zeroed, runtime-owned storage to a BOUND source and returns a view of it.
    /// JavaScript cannot free it under the artifact: the view's buffer holds a share of it.
    /// Where the host forbids external buffers, a JavaScript array is bound instead.
    #[napi]
    pub fn storage<'env>(&self, env: &'env Env, index: u32) -> napi::Result<Unknown<'env>, Code> {
        let artifact = self.artifact()?;
        let index = source_index(&artifact, index)?;
        let source = &artifact.sources[index];
        let dtype = source.tensor.dtype;
        artifact.check_storage(index, dtype::storage_array(dtype), source.tensor.physical_bytes()).map_err(js_err)?;
        let bytes = source.tensor.physical_bytes();
        let buf = AlignedBuf::zeroed(bytes, PACKED_ALIGNMENT).ok_or_else(|| {
            js_err(Error::OutOfMemory { what: format!("the storage of source {:?}", source.name), bytes, alignment: PACKED_ALIGNMENT })
        })?;
        self.with(|instance| match js::external_view(env, Arc::new(buf), dtype).map_err(napi_err)? {
            js::ExternalView::Shared(view, shared) => {
                instance.bind(index, dtype::storage_array(dtype), Box::new(SharedStorage(shared))).map_err(js_err)?;
                Ok(view)
            }
            js::ExternalView::Copied(array) => {
                Self::bind_array(instance, index, &JsArray::of(&array))?;
                Ok(array.to_unknown())
            }
        })
    }

    /// Starts a run on the libuv pool with `staged` inputs. Bound JavaScript arrays are
    /// copied now, on this thread; the run itself reads only runtime-owned memory.
    #[napi]
    pub fn run_async(&self, staged: &NativeStaged, f16_bits: bool) -> napi::Result<AsyncTask<RunTask>, Code> {
        let shared = self.shared()?;
        let mut copies = Vec::new();
        let temporary = {
            let mut instance = Self::lock(&shared)?;
            for feed in staged.feeds.take() {
                match feed {
                    // Bindings now: a JS array they replace is released on this thread.
                    Feed::Bind { .. } => instance.apply(feed).map_err(js_err)?,
                    copy => copies.push(copy),
                }
            }
            instance.snapshot_js_storage().map_err(js_err)?
        };
        Ok(AsyncTask::new(RunTask { instance: Some(shared), copies, temporary, f16_bits }))
    }

    /// Copies output `index` of the last run into `target`.
    #[napi]
    pub fn copy_output(&self, index: u32, target: TypedArray<'_>) -> napi::Result<(), Code> {
        let artifact = self.artifact()?;
        let mut target = JsArray::of(&target);
        let given = target.class_name();
        let Some(view) = target.view_mut() else {
            let info = artifact.outputs.get(index as usize).ok_or(Error::OutputIndex { index: index.into(), count: artifact.outputs.len() });
            return Err(js_err(info.map_or_else(|e| e, |o| dtype::output_error(index as usize, o.dtype, given.into_owned()))));
        };
        self.with(|i| i.copy_output(index as usize, view).map_err(js_err))
    }

    /// Releases the instance: deinitialised now, or when an async run in flight ends.
    #[napi]
    pub fn close(&self) {
        self.inner.borrow_mut().take();
        self.artifact.borrow_mut().take();
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.inner.borrow().is_none()
    }

    /// The handle `fastRunFunction()`'s function takes for this runtime. It does not keep
    /// the runtime alive: after `close()` the function throws ERR_ZGC_CLOSED.
    #[napi]
    pub fn handle<'env>(&self, env: &'env Env) -> napi::Result<Unknown<'env>, Code> {
        let weak = self.inner.borrow().as_ref().map(Arc::downgrade).ok_or_else(|| js_err(Error::Closed))?;
        js_fast::create_handle(env, weak).map_err(napi_err)
    }
}
