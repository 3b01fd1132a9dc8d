//! The napi-rs binding: a thin layer from JavaScript values to the core
//! (`zgc-runtime-core`, imported as `zgc`). The JavaScript API (`lib/`) wraps these classes;
//! they are not meant to be used directly.
//!
//! The raw N-API calls, each `unsafe` with its `SAFETY:` note, are in `js` (TypedArrays lent
//! to an artifact, results as values), `js_fast` (the raw function behind `Runtime.run()`)
//! and `tsfn` (the threadsafe function and promises that bring async runs back);
//! napi-derive's expansions are the only other unsafe code.

#[cfg(target_os = "linux")]
mod isolate;
mod js;
mod js_fast;
mod json;
mod pto;
mod queue;
mod tsfn;

use zgc::abi::{Binding, DType, ABI_VERSION};
use zgc::dtype::{self, Elements};
use zgc::executor::{Core, Owner, HISTOGRAM_BOUNDS_NS};
use zgc::instance::{Feed, PACKED_ALIGNMENT};
use zgc::meta::{SourceInfo, TensorInfo};
use zgc::offload::Offload;
use zgc::run::{self, Input, Run};
use crate::js::{JsArray, JsRegion};
use crate::js_fast::{FastArgs, Target};
use zgc::ffi::memory::AlignedBuf;
use zgc::ffi::runtime::SharedStorage;
use zgc::error::Detail;
use zgc::{Artifact, Error, Instance};
use napi::bindgen_prelude::{TypedArray, Unknown};
use napi::{Env, JsValue};
use napi_derive::napi;
use queue::Lanes;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::{Arc, Weak};

/// An error's stable code, which napi-rs puts in `err.code`, and the core's detail of it,
/// which `thrown` sets beside it.
pub struct Code(&'static str, Option<Box<Detail>>);
impl AsRef<str> for Code {
    fn as_ref(&self) -> &str {
        self.0
    }
}

impl Code {
    fn of(code: &'static str) -> Code {
        Code(code, None)
    }
}

fn js_err(e: Error) -> napi::Error<Code> {
    let detail = Some(Box::new(e.detail())).filter(|d| **d != Detail::default());
    napi::Error::new(Code(e.code(), detail), e.to_string())
}

fn napi_err(e: napi::Error) -> napi::Error<Code> {
    napi::Error::new(Code::of("ERR_ZGC_NAPI"), e.reason.clone())
}

/// At a method's return: an error with detail is thrown here, as an object with its
/// properties, and napi-rs, seeing the exception pending, throws nothing more. Others go on
/// to napi-rs, which makes them with their code and message.
fn thrown(env: &Env) -> impl Fn(napi::Error<Code>) -> napi::Error<Code> + '_ {
    move |e| match &e.status.1 {
        None => e,
        Some(detail) => {
            let error = js::with_detail(env.raw(), js::error_object(env.raw(), e.status.0, &e.reason), detail);
            // SAFETY: an error object made on this method's thread, thrown as it returns.
            unsafe { napi::sys::napi_throw(env.raw(), error) };
            napi::Error::new(Code::of("PendingException"), e.reason)
        }
    }
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
        Ok(describe(self.artifact()?.description()))
    }

    /// A new instance; `offload` ('auto', 'always', 'never') rules its async runs.
    #[napi]
    pub fn instantiate(&self, env: &Env, offload: String) -> napi::Result<NativeRuntime, Code> {
        (|| {
            let mode = offload_mode(&offload)?;
            let artifact = self.artifact()?;
            let core = Core::new(Instance::new(artifact.clone()).map_err(js_err)?);
            let lanes = Lanes::new(vec![Arc::downgrade(&core)], Owner::Runtime, usize::MAX, mode);
            Ok(NativeRuntime { artifact: RefCell::new(Some(artifact)), core: RefCell::new(Some(core)), lanes })
        })()
        .map_err(thrown(env))
    }

    /// Drops this handle's share of the library, so that closing the last runtime unloads it
    /// (and closes the memfd of a bytes load) now rather than when the GC runs finalizers,
    /// which Node defers to a later turn of the event loop.
    #[napi]
    pub fn release(&self) {
        self.inner.borrow_mut().take();
    }

    /// Copies a run input into `staged`, for a run that starts later on another thread.
    #[napi]
    pub fn stage(&self, env: &Env, staged: &NativeStaged, index: u32, values: TypedArray<'_>) -> napi::Result<(), Code> {
        (|| {
            stage_copy(&*self.artifact()?, staged, index, &values)
        })()
        .map_err(thrown(env))
    }

    /// New storage for BOUND source `index` that runs borrow one at a time (a sequence's
    /// state): zeros, or `initial` (logical values, C order) packed into its layout.
    #[napi]
    pub fn lendable(&self, env: &Env, index: u32, initial: Option<TypedArray<'_>>) -> napi::Result<NativeLendable, Code> {
        (|| {
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
    pub fn stage_lent(&self, env: &Env, staged: &NativeStaged, lendable: &NativeLendable) -> napi::Result<(), Code> {
        (|| {
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
fn describe(a: &zgc::Description) -> ArtifactDescription {
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

fn stage_copy(artifact: &Artifact, staged: &NativeStaged, index: u32, values: &TypedArray<'_>) -> napi::Result<(), Code> {
    let index = source_index(artifact, index)?;
    let source = &artifact.sources[index];
    let values = JsArray::of(values);
    let view = values.view().ok_or_else(|| js_err(unsupported(source, &values)))?;
    let feed = if is_storage(source, &values) {
        artifact.stage_storage(index, view)
    } else {
        artifact.stage_values(index, view).map(Feed::into_owned)
    };
    staged.feeds.borrow_mut().push(feed.map_err(js_err)?);
    Ok(())
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

fn is_storage(source: &SourceInfo, values: &JsArray) -> bool {
    // The binding first: it rules out most inputs without naming the array.
    source.binding == Binding::Bound && run::takes_as_storage(source, &values.class_name(), values.len())
}

/// The arguments of one fast call, decoded into the core's run protocol (`zgc::run`): each
/// (index, values) pair an input, then each output array a target.
fn run_with(core: &Core, instance: &mut Instance, args: &FastArgs) -> Result<(), Error> {
    let artifact = instance.artifact().clone();
    let outputs = args.u32(1).map_or(usize::MAX, |n| n as usize);
    let pairs = args.u32(2).map_or(usize::MAX, |n| n as usize);
    if outputs != artifact.outputs.len() || pairs > artifact.sources.len() || 3 + outputs + 2 * pairs > args.len() {
        return Err(Error::Value { name: "run".into(), detail: "malformed fast-run arguments".into() });
    }
    let mut run = Run::begin(core, instance);
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
            run.input(index, Input::Storage { class: &array.class_name(), region: Box::new(region) })?;
        } else {
            let view = array.view().ok_or_else(|| unsupported(source, &array))?;
            run.input(index, Input::Values(view))?;
        }
    }
    let mut ran = run.run()?;
    for index in 0..outputs {
        let info = &artifact.outputs[index];
        let mut array = args.array(3 + index).ok_or_else(|| dtype::output_error(index, info.dtype, "a value that is not a TypedArray".into()))?;
        let class = array.class_name();
        let view = array.view_mut().ok_or_else(|| dtype::output_error(index, info.dtype, class.into_owned()))?;
        ran.copy(index, view)?;
    }
    Ok(())
}

/// `run()`'s one native call (see `sys::js_fast`).
fn fast_run(args: &FastArgs) -> Result<Option<u32>, Error> {
    let (core, _) = args.target(0)?;
    let mut instance = core.lock()?;
    run_with(&core, &mut instance, args).map(|()| None)
}

/// An async run that runs inline (see `offload`), with `run()`'s arguments. Returns
/// `INLINE_STAY` or `INLINE_LEAVE` (ran; whether the next run stays inline), or `INLINE_NOT_RUN`
/// when it must queue instead: runs are pending on the instance or waiting in its queue, and
/// it must not overtake them.
fn fast_run_inline(args: &FastArgs) -> Result<Option<u32>, Error> {
    let (core, shared) = args.target(0)?;
    let Some(shared) = shared.filter(|s| s.nothing_waiting()) else { return Ok(Some(INLINE_NOT_RUN)) };
    let mut instance = match core.lock() {
        Ok(instance) => instance,
        Err(Error::Busy) => return Ok(Some(INLINE_NOT_RUN)),
        Err(e) => return Err(e),
    };
    let started = std::time::Instant::now();
    let outcome = run_with(&core, &mut instance, args);
    let stays = shared.record_inline(outcome.is_ok(), started.elapsed());
    outcome.map(|()| Some(if stays { INLINE_STAY } else { INLINE_LEAVE }))
}

const INLINE_STAY: u32 = 0;
const INLINE_LEAVE: u32 = 1;
const INLINE_NOT_RUN: u32 = 2;

/// The functions behind `Runtime.run()` and inline async runs, made once per module instance
/// (thread): `[run, runInline]`.
#[napi]
pub fn fast_run_function(env: &Env) -> napi::Result<Vec<Unknown<'_>>> {
    Ok(vec![js_fast::create_function(env, "zgcRun", fast_run)?, js_fast::create_function(env, "zgcRunInline", fast_run_inline)?])
}

fn unsupported(source: &SourceInfo, array: &JsArray) -> Error {
    Error::DType {
        name: source.name.clone(),
        dtype: source.tensor.dtype.as_str(),
        expected: dtype::value_arrays(source.tensor.dtype).to_owned(),
        given: array.class_name().into_owned(),
    }
}

/// A JavaScript error for `e`, as thrown errors are (`code`, message and detail), for promises.
fn error_value(env: napi::sys::napi_env, e: &Error) -> napi::sys::napi_value {
    js::error_value(env, e)
}

fn offload_mode(mode: &str) -> napi::Result<Offload, Code> {
    Offload::parse(mode).ok_or_else(|| napi::Error::new(Code::of("ERR_ZGC_VALUE"), format!("offload must be 'auto', 'always' or 'never', got {mode:?}")))
}

#[napi]
pub struct NativeRuntime {
    /// Released on close, with the instance: see `NativeArtifact::release`.
    artifact: RefCell<Option<Arc<Artifact>>>,
    /// `None` once closed. A worker holds a clone while it runs, so the instance is
    /// deinitialised (dropped) only after both let go, on the JavaScript thread.
    /// Only the JS thread touches this cell.
    core: RefCell<Option<Arc<Core>>>,
    /// This runtime's own `runAsync` queue.
    lanes: Rc<Lanes>,
}

impl NativeRuntime {
    fn artifact(&self) -> napi::Result<Arc<Artifact>, Code> {
        self.artifact.borrow().clone().ok_or_else(|| js_err(Error::Closed))
    }

    fn core(&self) -> napi::Result<Arc<Core>, Code> {
        self.core.borrow().clone().ok_or_else(|| js_err(Error::Closed))
    }

    /// Runs `f` on the instance, on the JavaScript thread; refused (ERR_ZGC_BUSY) while async
    /// runs are pending, never waiting for one.
    fn with<R>(&self, f: impl FnOnce(&mut Instance) -> napi::Result<R, Code>) -> napi::Result<R, Code> {
        let core = self.core()?;
        let mut guard = core.lock().map_err(js_err)?;
        let outcome = f(&mut guard);
        core.note_bindings(&guard);
        outcome
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

impl Drop for NativeRuntime {
    fn drop(&mut self) {
        // Collected without close(): its workers must not wait for runs forever. Nothing can
        // be pending (a pending run's promise keeps this object reachable).
        self.lanes.abandon();
    }
}

#[napi(object)]
pub struct QueueStats {
    pub completed: f64,
    pub failed: f64,
    /// Runs waiting for an instance.
    pub queue_depth: f64,
    /// Runs started, or about to start on a free instance.
    pub in_flight: f64,
    pub inline_runs: f64,
    pub offloaded_runs: f64,
    /// The offload option, and what `auto` does now: 'inline' or 'offloaded'.
    pub offload: String,
    pub decision: String,
    /// Recent latencies, nanoseconds: p50, p90, p99 (null before the first run).
    pub queue_wait_ns: Vec<Option<f64>>,
    pub compute_ns: Vec<Option<f64>>,
    /// Every run since the queue began, per bucket of `histogramBoundsNs()` (then above the
    /// last), with the sum: what a Prometheus histogram exports.
    pub queue_wait_counts: Vec<f64>,
    pub queue_wait_sum_ns: f64,
    pub compute_counts: Vec<f64>,
    pub compute_sum_ns: f64,
    /// The estimates `auto` weighs: run time and the cost of a hop, nanoseconds.
    pub estimated_compute_ns: Option<f64>,
    pub estimated_hop_ns: Option<f64>,
}

fn queue_stats(lanes: &Lanes) -> QueueStats {
    let shared = lanes.shared();
    let figures = lanes.queue.figures();
    let stats = shared.stats.lock().unwrap_or_else(|p| p.into_inner());
    let qs = [50.0, 90.0, 99.0];
    let ns = |v: Vec<Option<u64>>| v.into_iter().map(|x| x.map(|n| n as f64)).collect();
    let policy = &shared.policy;
    QueueStats {
        completed: stats.completed as f64,
        failed: stats.failed as f64,
        queue_depth: figures.waiting as f64,
        in_flight: figures.in_flight as f64,
        inline_runs: policy.inline_runs() as f64,
        offloaded_runs: policy.offloaded_runs() as f64,
        offload: policy.mode().as_str().to_owned(),
        decision: if policy.inline() { "inline" } else { "offloaded" }.to_owned(),
        queue_wait_ns: ns(stats.queue_wait_percentiles(&qs)),
        compute_ns: ns(stats.compute_percentiles(&qs)),
        queue_wait_counts: stats.queue_wait_histogram.counts.iter().map(|&c| c as f64).collect(),
        queue_wait_sum_ns: stats.queue_wait_histogram.sum_ns as f64,
        compute_counts: stats.compute_histogram.counts.iter().map(|&c| c as f64).collect(),
        compute_sum_ns: stats.compute_histogram.sum_ns as f64,
        estimated_compute_ns: policy.compute_ns().map(|n| n as f64),
        estimated_hop_ns: policy.hop_ns().map(|n| n as f64),
    }
}

#[napi]
impl NativeRuntime {
    /// Logical values for a source (copied, or packed into runtime-owned storage).
    #[napi]
    pub fn set(&self, env: &Env, index: u32, values: TypedArray<'_>) -> napi::Result<(), Code> {
        (|| {
            let artifact = self.artifact()?;
            let index = source_index(&artifact, index)?;
            let source = &artifact.sources[index];
            let values = JsArray::of(&values);
            let view = values.view().ok_or_else(|| js_err(unsupported(source, &values)))?;
            self.with(|i| i.set(index, view).map_err(js_err))
        })()
        .map_err(thrown(env))
    }

    /// Zero-copy binding of physical storage; the array is held until rebound or closed.
    #[napi]
    pub fn bind(&self, env: &Env, index: u32, storage: TypedArray<'_>) -> napi::Result<(), Code> {
        (|| {
            let artifact = self.artifact()?;
            let index = source_index(&artifact, index)?;
            self.with(|i| Self::bind_array(i, index, &JsArray::of(&storage)))
        })()
        .map_err(thrown(env))
    }

    /// Binds new zeroed, runtime-owned storage to a BOUND source and returns a view of it.
    /// JavaScript cannot free it under the artifact: the view's buffer holds a share of it.
    /// Where the host forbids external buffers, a JavaScript array is bound instead.
    #[napi]
    pub fn storage<'env>(&self, env: &'env Env, index: u32) -> napi::Result<Unknown<'env>, Code> {
        (|| {
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
        })()
        .map_err(thrown(env))
    }

    /// An async run's input, taken now: applied to the instance at once when it is idle (the
    /// run will start next, so this is its start), else copied into `staged`.
    #[napi]
    pub fn stage(&self, env: &Env, staged: &NativeStaged, index: u32, values: TypedArray<'_>) -> napi::Result<(), Code> {
        (|| {
            let core = self.core()?;
            if core.pending() == 0 {
                if let Ok(mut instance) = core.lock() {
                    let artifact = instance.artifact().clone();
                    let index = source_index(&artifact, index)?;
                    let source = &artifact.sources[index];
                    let values = JsArray::of(&values);
                    let outcome = if is_storage(source, &values) {
                        Self::bind_array(&mut instance, index, &values)
                    } else {
                        let view = values.view().ok_or_else(|| js_err(unsupported(source, &values)))?;
                        instance.set(index, view).map_err(js_err)
                    };
                    core.note_bindings(&instance);
                    return outcome;
                }
            }
            stage_copy(&*self.artifact()?, staged, index, &values)
        })()
        .map_err(thrown(env))
    }

    /// Queues a run with `staged` inputs and returns its promise (an array of output arrays).
    /// `id` (non-zero) lets `cancel` take it back before it starts; it waits behind runs of
    /// its `priority` or higher.
    #[napi]
    pub fn submit<'env>(&self, env: &'env Env, staged: &NativeStaged, f16_bits: bool, id: f64, priority: i32) -> napi::Result<Unknown<'env>, Code> {
        (|| {
            let core = self.core()?;
            // A run that starts now copies JavaScript-owned bound storage now, on this thread.
            let temporary = if core.pending() == 0 && self.lanes.queue.figures().in_flight == 0 {
                let mut instance = core.lock().map_err(js_err)?;
                if instance.has_js_storage() {
                    Some(instance.snapshot_js_storage().map_err(js_err)?)
                } else {
                    None
                }
            } else {
                None
            };
            let promise = self.lanes.submit(env.raw(), staged.feeds.take(), f16_bits, id as u64, priority, temporary)?;
            Ok(unknown(env, promise))
        })()
        .map_err(thrown(env))
    }

    /// Rejects queued run `id` with `reason` if it has not started; whether it had not.
    #[napi]
    pub fn cancel(&self, env: &Env, id: f64, reason: Unknown<'_>) -> bool {
        self.lanes.cancel(env.raw(), id as u64, reason.raw())
    }

    /// Copies output `index` of the last run into `target`.
    #[napi]
    pub fn copy_output(&self, env: &Env, index: u32, target: TypedArray<'_>) -> napi::Result<(), Code> {
        (|| {
            let artifact = self.artifact()?;
            let mut target = JsArray::of(&target);
            let given = target.class_name();
            let Some(view) = target.view_mut() else {
                let info = artifact.outputs.get(index as usize).ok_or(Error::OutputIndex { index: index.into(), count: artifact.outputs.len() });
                return Err(js_err(info.map_or_else(|e| e, |o| dtype::output_error(index as usize, o.dtype, given.into_owned()))));
            };
            self.with(|i| i.copy_output(index as usize, view).map_err(js_err))
        })()
        .map_err(thrown(env))
    }

    /// Releases the instance: deinitialised now, or when the run in flight ends. Queued runs
    /// reject with ERR_ZGC_CLOSED.
    #[napi]
    pub fn close(&self, env: &Env) {
        self.lanes.close(env.raw());
        self.core.borrow_mut().take();
        self.artifact.borrow_mut().take();
    }

    #[napi(getter)]
    pub fn closed(&self) -> bool {
        self.core.borrow().is_none()
    }

    #[napi]
    pub fn stats(&self) -> QueueStats {
        queue_stats(&self.lanes)
    }

    /// Whether the offload policy sends the next async run inline.
    #[napi(getter)]
    pub fn inline(&self) -> bool {
        self.lanes.shared().policy.inline()
    }

    /// The handle the fast functions take for this runtime (inline runs counted in its own
    /// queue). It does not keep the runtime alive: after `close()` the functions throw
    /// ERR_ZGC_CLOSED.
    #[napi]
    pub fn handle<'env>(&self, env: &'env Env) -> napi::Result<Unknown<'env>, Code> {
        let core = self.core.borrow().as_ref().map(Arc::downgrade).ok_or_else(|| js_err(Error::Closed))?;
        js_fast::create_handle(env, Target { core, shared: Arc::downgrade(self.lanes.shared()) }).map_err(napi_err)
    }
}

use js::unknown;

/// A pool's queue: runs staged against the artifact, taken by whichever instance is free.
#[napi]
pub struct NativePool {
    lanes: Rc<Lanes>,
    /// For the inline handle: the instance inline runs use.
    first: Weak<Core>,
}

impl Drop for NativePool {
    fn drop(&mut self) {
        self.lanes.abandon();
    }
}

#[napi]
impl NativePool {
    /// A pool over the runtimes whose `handle()`s are given.
    #[napi(factory)]
    pub fn create(env: &Env, handles: Vec<Unknown<'_>>, max_queue: f64, offload: String) -> napi::Result<NativePool, Code> {
        (|| {
            let mode = offload_mode(&offload)?;
            let cores = handles
                .iter()
                .map(|h| js_fast::handle_target(env.raw(), h.raw()).map(|t| t.core.clone()).ok_or_else(|| js_err(Error::Value { name: "pool".into(), detail: "not a runtime handle".into() })))
                .collect::<napi::Result<Vec<_>, Code>>()?;
            let first = cores.first().cloned().unwrap_or_default();
            let max_queue = if max_queue.is_finite() { max_queue.max(0.0) as usize } else { usize::MAX };
            Ok(NativePool { lanes: Lanes::new(cores, Owner::Pool, max_queue, mode), first })
        })()
        .map_err(thrown(env))
    }

    #[napi]
    pub fn submit<'env>(&self, env: &'env Env, staged: &NativeStaged, f16_bits: bool, id: f64, priority: i32) -> napi::Result<Unknown<'env>, Code> {
        (|| {
            let promise = self.lanes.submit(env.raw(), staged.feeds.take(), f16_bits, id as u64, priority, None)?;
            Ok(unknown(env, promise))
        })()
        .map_err(thrown(env))
    }

    #[napi]
    pub fn cancel(&self, env: &Env, id: f64, reason: Unknown<'_>) -> bool {
        self.lanes.cancel(env.raw(), id as u64, reason.raw())
    }

    /// Refuses new runs; queued and running ones still finish (the pool drains).
    #[napi]
    pub fn stop(&self) {
        self.lanes.stop();
    }

    /// Closes the queue once drained: rejects anything still queued.
    #[napi]
    pub fn close(&self, env: &Env) {
        self.lanes.close(env.raw());
    }

    #[napi]
    pub fn stats(&self) -> QueueStats {
        queue_stats(&self.lanes)
    }

    #[napi(getter)]
    pub fn inline(&self) -> bool {
        self.lanes.shared().policy.inline()
    }

    /// `[inFlight, waiting]` without the percentiles `stats()` sorts for.
    #[napi]
    pub fn figures(&self) -> Vec<u32> {
        let f = self.lanes.queue.figures();
        vec![f.in_flight as u32, f.waiting as u32]
    }

    /// A promise that resolves once every run handed in has settled.
    #[napi]
    pub fn settled<'env>(&self, env: &'env Env) -> napi::Result<Unknown<'env>, Code> {
        Ok(unknown(env, self.lanes.when_settled(env.raw())?))
    }

    /// The fast-function handle for inline runs of this pool: the first instance, counted in
    /// the pool's queue, and never overtaking a run waiting in it.
    #[napi]
    pub fn inline_handle<'env>(&self, env: &'env Env) -> napi::Result<Unknown<'env>, Code> {
        js_fast::create_handle(env, Target { core: self.first.clone(), shared: Arc::downgrade(self.lanes.shared()) }).map_err(napi_err)
    }
}

/// The artifact ABI version this runtime loads (`ABI_VERSION` of the package).
#[napi]
pub fn abi_version() -> u32 {
    ABI_VERSION
}

/// Every `err.code` the package gives (`zgc::error::CODES`), for the JavaScript side and its
/// tests.
#[napi]
pub fn error_codes() -> Vec<String> {
    zgc::error::CODES.iter().map(|c| (*c).to_owned()).collect()
}

/// The upper bounds (ns) of the latency histograms `stats()` reports, in-process and isolated.
#[napi]
pub fn histogram_bounds_ns() -> Vec<f64> {
    HISTOGRAM_BOUNDS_NS.iter().map(|&b| b as f64).collect()
}
