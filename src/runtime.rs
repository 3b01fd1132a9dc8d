//! One runtime instance (`NativeRuntime`), the inputs staged for its async runs
//! (`NativeStaged`), and the run itself: `run_with`, and the fast functions behind
//! `Runtime.run()` and inline async runs.

use crate::stats::{latencies, Latencies};
use crate::errors::{js_err, napi_err, thrown, unsupported, Code, Thrown};
use crate::{js, js_fast};
use crate::js::unknown;
use zgc::abi::{Binding, DType};
use zgc::dtype::{self, Elements};
use zgc::executor::{Core, Owner};
use zgc::instance::{check_bound, not_storage, Feed, PACKED_ALIGNMENT};
use zgc::meta::SourceInfo;
use zgc::offload::Offload;
use zgc::run::{self, Input, Ran, Run};
use crate::js::{JsArray, JsRegion};
use crate::js_fast::{FastArgs, Target};
use zgc::ffi::memory::AlignedBuf;
use zgc::ffi::runtime::SharedStorage;
use zgc::engine::Engine;
use zgc::{Description, Error};
use napi::bindgen_prelude::{TypedArray, Unknown};
use napi::{Env, JsValue};
use napi_derive::napi;
use crate::queue::Lanes;
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

pub(crate) fn stage_copy(artifact: &Description, staged: &NativeStaged, index: u32, values: &TypedArray<'_>) -> napi::Result<(), Code> {
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
    pub(crate) feeds: RefCell<Vec<Feed<'static>>>,
}

#[napi]
impl NativeStaged {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> NativeStaged {
        NativeStaged { feeds: RefCell::new(Vec::new()) }
    }
}

pub(crate) fn source_index(artifact: &Description, index: u32) -> napi::Result<usize, Code> {
    let count = artifact.sources.len();
    if (index as usize) < count {
        Ok(index as usize)
    } else {
        Err(js_err(Error::UnknownSource { name: format!("#{index}"), known: format!("{count} sources") }))
    }
}

pub(crate) fn is_storage(source: &SourceInfo, values: &JsArray) -> bool {
    // The binding first: it rules out most inputs without naming the array.
    source.binding == Binding::Bound && run::takes_as_storage(source, values.kind(), values.len())
}

/// The arguments of one fast call, decoded into the core's run protocol (`zgc::run`): each
/// (index, values) pair an input, then each output array a target.

/// Runs with `run()`'s arguments. `budget`: how long an isolated run is waited for here;
/// `Ok(false)` when it is still going then (its outputs come through `Engine::finish`).
pub(crate) fn run_with(core: &Core, engine: &mut Engine, args: &FastArgs, budget: Option<std::time::Duration>) -> Result<bool, Error> {
    let artifact = engine.shared_description();
    let outputs = args.u32(1).map_or(usize::MAX, |n| n as usize);
    let pairs = args.u32(2).map_or(usize::MAX, |n| n as usize);
    if outputs != artifact.outputs.len() || pairs > artifact.sources.len() || 3 + outputs + 2 * pairs > args.len() {
        return Err(Error::Value { name: "run".into(), detail: "malformed fast-run arguments".into() });
    }
    let timeout = core.take_run_timeout();
    let mut run = Run::begin(core, engine).timeout(timeout);
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
            let (Some(region), Some(kind)) = (region, array.kind()) else { unreachable!("a storage array is a kind some dtype binds") };
            run.input(index, Input::Storage { kind, region: Box::new(region) })?;
        } else {
            let view = array.view().ok_or_else(|| unsupported(source, &array))?;
            run.input(index, Input::Values(view))?;
        }
    }
    let mut ran = match budget {
        None => run.run()?,
        Some(budget) => match run.run_within(budget)? {
            Ran::Done(ran) => ran,
            Ran::Going => return Ok(false),
        },
    };
    for index in 0..outputs {
        let info = &artifact.outputs[index];
        let mut array = args.array(3 + index).ok_or_else(|| dtype::output_error(index, info.dtype, "a value that is not a TypedArray".into()))?;
        let class = array.class_name();
        let view = array.view_mut().ok_or_else(|| dtype::output_error(index, info.dtype, class.into_owned()))?;
        ran.copy(index, view)?;
    }
    Ok(true)
}

/// `run()`'s one native call (see `sys::js_fast`).
pub(crate) fn fast_run(args: &FastArgs) -> Result<Option<u32>, Error> {
    let (core, _) = args.target(0)?;
    let mut instance = core.lock()?;
    run_with(&core, &mut instance, args, None).map(|_| None)
}

/// An async run that runs inline (see `offload`), with `run()`'s arguments. Returns
/// `INLINE_STAY` or `INLINE_LEAVE` (ran; whether the next run stays inline), or `INLINE_NOT_RUN`
/// when it must queue instead: runs are pending on the instance or waiting in its queue, and
/// it must not overtake them.
pub(crate) fn fast_run_inline(args: &FastArgs) -> Result<Option<u32>, Error> {
    let (core, shared) = args.target(0)?;
    let Some(shared) = shared.filter(|s| s.nothing_waiting()) else { return Ok(Some(INLINE_NOT_RUN)) };
    let mut instance = match core.lock() {
        Ok(instance) => instance,
        Err(Error::Busy) => return Ok(Some(INLINE_NOT_RUN)),
        Err(e) => return Err(e),
    };
    let started = std::time::Instant::now();
    let outcome = run_with(&core, &mut instance, args, Some(INLINE_BUDGET));
    if let Ok(false) = outcome {
        // Counted once, by its worker, as an offloaded run.
        return Ok(Some(INLINE_GOING));
    }
    let stays = shared.record_inline(outcome.is_ok(), started.elapsed());
    outcome.map(|_| Some(if stays { INLINE_STAY } else { INLINE_LEAVE }))
}

pub(crate) const INLINE_STAY: u32 = 0;
pub(crate) const INLINE_LEAVE: u32 = 1;
pub(crate) const INLINE_NOT_RUN: u32 = 2;
/// An isolated run still going after `INLINE_BUDGET`: its worker waits for it (`resume`).
pub(crate) const INLINE_GOING: u32 = 3;
/// How long an inline call waits for an isolated instance's answer on the JavaScript thread:
/// a short run's comes in microseconds; a longer one is waited for off it.
const INLINE_BUDGET: std::time::Duration = std::time::Duration::from_micros(200);

/// The functions behind `Runtime.run()` and inline async runs, made once per module instance
/// (thread): `[run, runInline]`.
#[napi]
pub fn fast_run_function(env: &Env) -> napi::Result<Vec<Unknown<'_>>> {
    Ok(vec![js_fast::create_function(env, "zgcRun", fast_run)?, js_fast::create_function(env, "zgcRunInline", fast_run_inline)?])
}



pub(crate) fn offload_mode(mode: &str) -> napi::Result<Offload, Code> {
    Offload::parse(mode).ok_or_else(|| napi::Error::new(Code::of("ERR_ZGC_VALUE"), format!("offload must be 'auto', 'always' or 'never', got {mode:?}")))
}


#[napi]
pub struct NativeRuntime {
    /// Released on close, with the instance: see `NativeArtifact::release`. (The artifact is
    /// held for its library; an isolated instance's description is its process's.)
    pub(crate) artifact: RefCell<Option<Arc<Description>>>,
    /// `None` once closed. A worker holds a clone while it runs, so the instance is
    /// deinitialised (dropped) only after both let go, on the JavaScript thread.
    /// Only the JS thread touches this cell.
    pub(crate) core: RefCell<Option<Arc<Core>>>,
    /// This runtime's own `runAsync` queue.
    pub(crate) lanes: Rc<Lanes>,
    /// An isolated instance's counts, kept past `close()` (a closed pool's stats still count).
    #[cfg(target_os = "linux")]
    control: Option<Arc<zgc::isolate::instance::Control>>,
}

impl NativeRuntime {
    pub(crate) fn new(description: Arc<Description>, engine: Engine, mode: Offload) -> NativeRuntime {
        let core = Core::new(engine);
        let lanes = Lanes::new(vec![Arc::downgrade(&core)], Owner::Runtime, usize::MAX, mode);
        #[cfg(target_os = "linux")]
        let control = core.control().cloned();
        NativeRuntime {
            artifact: RefCell::new(Some(description)),
            core: RefCell::new(Some(core)),
            lanes,
            #[cfg(target_os = "linux")]
            control,
        }
    }

    fn artifact(&self) -> napi::Result<Arc<Description>, Code> {
        self.artifact.borrow().clone().ok_or_else(|| js_err(Error::Closed))
    }

    fn core(&self) -> napi::Result<Arc<Core>, Code> {
        self.core.borrow().clone().ok_or_else(|| js_err(Error::Closed))
    }

    /// Runs `f` on the instance, on the JavaScript thread; refused (ERR_ZGC_BUSY) while async
    /// runs are pending, never waiting for one.
    fn with<R>(&self, f: impl FnOnce(&mut Engine) -> napi::Result<R, Code>) -> napi::Result<R, Code> {
        let core = self.core()?;
        let mut guard = core.lock().map_err(js_err)?;
        let outcome = f(&mut guard);
        core.note_bindings(&guard);
        outcome
    }

    fn bind_array(engine: &mut Engine, index: usize, storage: &JsArray) -> napi::Result<(), Code> {
        let source = &engine.description().sources[index];
        let view = storage.view();
        if let (DType::Bool, Some(Elements::U8(bytes))) = (source.tensor.dtype, &view) {
            dtype::check_bool(&source.name, bytes).map_err(js_err)?;
        }
        let refusal = |source: &SourceInfo| js_err(check_bound(source).err().unwrap_or_else(|| not_storage(source, &storage.class_name())));
        match (JsRegion::hold(storage).map_err(napi_err)?, storage.kind(), view) {
            (Some(region), Some(kind), Some(view)) => engine.bind(index, kind, view.bytes(), Box::new(region)).map_err(js_err),
            // Not a kind any dtype binds: the core words the refusal.
            _ => Err(refusal(source)),
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
    /// Recent latencies and every run's.
    pub latencies: Latencies,
    /// The estimates `auto` weighs: run time and the cost of a hop, nanoseconds.
    pub estimated_compute_ns: Option<f64>,
    pub estimated_hop_ns: Option<f64>,
}

pub(crate) fn queue_stats(lanes: &Lanes) -> QueueStats {
    let shared = lanes.shared();
    let figures = lanes.queue.figures();
    let stats = shared.stats.lock().unwrap_or_else(|p| p.into_inner());
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
        latencies: latencies(&stats),
        estimated_compute_ns: policy.compute_ns().map(|n| n as f64),
        estimated_hop_ns: policy.hop_ns().map(|n| n as f64),
    }
}

#[napi]
impl NativeRuntime {
    /// Logical values for a source (copied, or packed into runtime-owned storage).
    #[napi]
    pub fn set(&self, env: &Env, index: u32, values: TypedArray<'_>) -> Result<(), Thrown> {
        (|| {
            let artifact = self.artifact()?;
            let index = source_index(&artifact, index)?;
            let source = &artifact.sources[index];
            let values = JsArray::of(&values);
            let view = values.view().ok_or_else(|| js_err(unsupported(source, &values)))?;
            self.with(|e| e.set(index, view).map_err(js_err))
        })()
        .map_err(thrown(env))
    }

    /// Zero-copy binding of physical storage; the array is held until rebound or closed.
    #[napi]
    pub fn bind(&self, env: &Env, index: u32, storage: TypedArray<'_>) -> Result<(), Thrown> {
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
    pub fn storage<'env>(&self, env: &'env Env, index: u32) -> Result<Unknown<'env>, Thrown> {
        (|| {
            let artifact = self.artifact()?;
            let index = source_index(&artifact, index)?;
            let source = &artifact.sources[index];
            let dtype = source.tensor.dtype;
            artifact.check_storage(index, dtype::storage_kind(dtype), source.tensor.physical_bytes()).map_err(js_err)?;
            let bytes = source.tensor.physical_bytes();
            let buf = AlignedBuf::zeroed(bytes, PACKED_ALIGNMENT).ok_or_else(|| {
                js_err(Error::OutOfMemory { what: format!("the storage of source {:?}", source.name), bytes, alignment: PACKED_ALIGNMENT })
            })?;
            self.with(|engine| match js::external_view(env, Arc::new(buf), dtype).map_err(napi_err)? {
                js::ExternalView::Shared(view, shared) => {
                    let instance = engine.local().ok_or_else(|| js_err(Error::Value { name: source.name.clone(), detail: "an isolated instance's storage is a slot of its region (storageSlot)".into() }))?;
                    instance.bind(index, dtype::storage_kind(dtype), Box::new(SharedStorage(shared))).map_err(js_err)?;
                    Ok(view)
                }
                js::ExternalView::Copied(array) => {
                    Self::bind_array(engine, index, &JsArray::of(&array))?;
                    Ok(array.to_unknown())
                }
            })
        })()
        .map_err(thrown(env))
    }

    /// An async run's input, taken now: applied to the instance at once when it is idle (the
    /// run will start next, so this is its start), else copied into `staged`.
    #[napi]
    pub fn stage(&self, env: &Env, staged: &NativeStaged, index: u32, values: TypedArray<'_>) -> Result<(), Thrown> {
        (|| {
            let core = self.core()?;
            if core.pending() == 0 {
                // In-process only: an isolated instance takes its inputs with the run's command.
                if let Some(mut instance) = core.lock().ok().filter(|e| matches!(**e, Engine::Local(_))) {
                    let artifact = instance.shared_description();
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
    pub fn submit<'env>(&self, env: &'env Env, staged: &NativeStaged, f16_bits: bool, id: f64, priority: i32, timeout_ms: Option<f64>) -> Result<Unknown<'env>, Thrown> {
        (|| {
            let core = self.core()?;
            // A run that starts now copies JavaScript-owned bound storage now, on this thread.
            let temporary = if core.pending() == 0 && self.lanes.queue.figures().in_flight == 0 {
                let mut instance = core.lock().map_err(js_err)?;
                if instance.has_caller_storage() {
                    Some(instance.snapshot_caller_storage().map_err(js_err)?)
                } else {
                    None
                }
            } else {
                None
            };
            let promise = self.lanes.submit(env.raw(), staged.feeds.take(), f16_bits, id as u64, priority, timeout_ms, temporary)?;
            Ok(unknown(env, promise))
        })()
        .map_err(thrown(env))
    }

    /// The promise of the isolated run an inline call left going (`INLINE_GOING`): its worker
    /// waits for it. `id` lets `cancel` abort it.
    #[napi]
    pub fn resume<'env>(&self, env: &'env Env, f16_bits: bool, id: f64) -> Result<Unknown<'env>, Thrown> {
        (|| {
            let promise = self.lanes.resume(env.raw(), f16_bits, id as u64, 0)?;
            Ok(unknown(env, promise))
        })()
        .map_err(thrown(env))
    }

    /// Rejects queued run `id` with `reason` if it has not started; whether it had not. A run
    /// an isolated instance is running is aborted: its process is killed.
    #[napi]
    pub fn cancel(&self, env: &Env, id: f64, reason: Unknown<'_>) -> bool {
        self.lanes.cancel(env.raw(), id as u64, reason.raw())
    }

    /// Copies output `index` of the last run into `target`.
    #[napi]
    pub fn copy_output(&self, env: &Env, index: u32, target: TypedArray<'_>) -> Result<(), Thrown> {
        (|| {
            let artifact = self.artifact()?;
            let mut target = JsArray::of(&target);
            let given = target.class_name();
            let Some(view) = target.view_mut() else {
                let info = artifact.outputs.get(index as usize).ok_or(Error::OutputIndex { index: index.into(), count: artifact.outputs.len() });
                return Err(js_err(info.map_or_else(|e| e, |o| dtype::output_error(index as usize, o.dtype, given.into_owned()))));
            };
            self.with(|e| e.copy_output(index as usize, view).map_err(js_err))
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
    pub fn handle<'env>(&self, env: &'env Env) -> Result<Unknown<'env>, Thrown> {
        (|| {
            let core = self.core.borrow().as_ref().map(Arc::downgrade).ok_or_else(|| js_err(Error::Closed))?;
            js_fast::create_handle(env, Target { core, shared: Arc::downgrade(self.lanes.shared()) }).map_err(napi_err)
        })()
        .map_err(thrown(env))
    }

    /// The deadline of the next sync run on an isolated instance (`run({ timeoutMs })`).
    #[napi]
    pub fn set_run_timeout(&self, timeout_ms: Option<f64>) {
        if let Some(core) = self.core.borrow().as_ref() {
            core.set_run_timeout(timeout_ms);
        }
    }

    /// An isolated instance's counts, state and process: `null` in-process.
    #[napi]
    pub fn faults(&self) -> Option<Faults> {
        #[cfg(target_os = "linux")]
        if let Some(control) = &self.control {
            let f = &control.faults;
            let n = |c: &std::sync::atomic::AtomicU64| c.load(std::sync::atomic::Ordering::Relaxed) as f64;
            return Some(Faults {
                crashes: n(&f.crashes),
                restarts: n(&f.restarts),
                timeouts: n(&f.timeouts),
                memory_kills: n(&f.memory_kills),
                aborts: n(&f.aborts),
                start_failures: n(&f.start_failures),
                alive: control.alive(),
                pid: control.pid(),
            });
        }
        None
    }

    /// `[byteOffset, byteLength]` of source `index`'s storage slot in an isolated instance's
    /// region, bound to it now and zeroed (`storage()`; the caller views it in `region()`).
    #[napi]
    pub fn storage_slot(&self, env: &Env, index: u32) -> Result<Vec<f64>, Thrown> {
        (|| {
            let artifact = self.artifact()?;
            let index = source_index(&artifact, index)?;
            self.with(|engine| {
                #[cfg(target_os = "linux")]
                if let Some(isolated) = engine.isolated() {
                    let (at, len) = isolated.storage(index).map_err(js_err)?;
                    return Ok(vec![at as f64, len as f64]);
                }
                let _ = (engine, index);
                Err(js_err(Error::Value { name: "storage".into(), detail: "an in-process instance has no region".into() }))
            })
        })()
        .map_err(thrown(env))
    }

    /// An ArrayBuffer over an isolated instance's whole region (null where the host forbids
    /// external buffers, or in-process).
    #[napi]
    pub fn region<'env>(&self, env: &'env Env) -> Result<Option<Unknown<'env>>, Thrown> {
        (|| {
            #[cfg(target_os = "linux")]
            {
                let core = self.core()?;
                let Some(region) = core.control().and_then(|c| c.region()) else { return Ok(None) };
                return Ok(js::region_buffer(env.raw(), &region).map_err(napi_err)?.map(|v| unknown(env, v)));
            }
            #[allow(unreachable_code)]
            Ok(None)
        })()
        .map_err(thrown(env))
    }
}

/// What an isolated instance's processes went through, and its process now.
#[napi(object)]
pub struct Faults {
    pub crashes: f64,
    pub restarts: f64,
    pub timeouts: f64,
    pub memory_kills: f64,
    pub aborts: f64,
    pub start_failures: f64,
    pub alive: bool,
    pub pid: Option<u32>,
}
