//! A pool's queue over several runtimes (`NativePool`).

use crate::errors::{js_err, napi_err, thrown, Code, Thrown};
use crate::runtime::{offload_mode, queue_stats, NativeStaged, QueueStats};
use crate::js_fast;
use zgc::executor::{Core, Owner};
use zgc::stats::HISTOGRAM_BOUNDS_NS;
use crate::js_fast::Target;
use zgc::Error;
use napi::bindgen_prelude::Unknown;
use napi::{Env, JsValue};
use napi_derive::napi;
use crate::queue::Lanes;
use std::rc::Rc;
use std::sync::{Arc, Weak};

use crate::js::unknown;

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
    pub fn create(env: &Env, handles: Vec<Unknown<'_>>, max_queue: f64, offload: String) -> Result<NativePool, Thrown> {
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
    pub fn submit<'env>(&self, env: &'env Env, staged: &NativeStaged, f16_bits: bool, id: f64, priority: i32, timeout_ms: Option<f64>) -> Result<Unknown<'env>, Thrown> {
        (|| {
            let promise = self.lanes.submit(env.raw(), staged.feeds.take(), f16_bits, id as u64, priority, timeout_ms, None)?;
            Ok(unknown(env, promise))
        })()
        .map_err(thrown(env))
    }

    /// The promise of the isolated run an inline call left going on the first instance (the
    /// one inline runs use): its worker waits for it. `id` lets `cancel` abort it.
    #[napi]
    pub fn resume<'env>(&self, env: &'env Env, f16_bits: bool, id: f64) -> Result<Unknown<'env>, Thrown> {
        (|| {
            Ok(unknown(env, self.lanes.resume(env.raw(), f16_bits, id as u64, 0)?))
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
    pub fn settled<'env>(&self, env: &'env Env) -> Result<Unknown<'env>, Thrown> {
        (|| {
            Ok(unknown(env, self.lanes.when_settled(env.raw())?))
        })()
        .map_err(thrown(env))
    }

    /// The fast-function handle for inline runs of this pool: the first instance, counted in
    /// the pool's queue, and never overtaking a run waiting in it.
    #[napi]
    pub fn inline_handle<'env>(&self, env: &'env Env) -> Result<Unknown<'env>, Thrown> {
        (|| {
            js_fast::create_handle(env, Target { core: self.first.clone(), shared: Arc::downgrade(self.lanes.shared()) }).map_err(napi_err)
        })()
        .map_err(thrown(env))
    }
}


/// The upper bounds (ns) of the latency histograms `stats()` reports.
#[napi]
pub fn histogram_bounds_ns() -> Vec<f64> {
    HISTOGRAM_BOUNDS_NS.iter().map(|&b| b as f64).collect()
}
