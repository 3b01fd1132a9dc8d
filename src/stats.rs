//! The core's run statistics for runs its queue does not drive (an isolated instance's, which
//! JavaScript hands to a child process): the same percentiles and histograms as in-process.

use napi_derive::napi;
use std::cell::RefCell;
use std::time::Duration;
use zgc::stats::Stats;

/// Recent latencies and every run's, as `stats()` reads them (nanoseconds).
#[napi(object)]
pub struct Latencies {
    /// p50, p90, p99 of recent runs (null before the first run).
    pub queue_wait_ns: Vec<Option<f64>>,
    pub compute_ns: Vec<Option<f64>>,
    /// Every run, per bucket of `histogramBoundsNs()` (then above the last), with the sum.
    pub queue_wait_counts: Vec<f64>,
    pub queue_wait_sum_ns: f64,
    pub compute_counts: Vec<f64>,
    pub compute_sum_ns: f64,
}

pub(crate) fn latencies(stats: &Stats) -> Latencies {
    let qs = [50.0, 90.0, 99.0];
    let ns = |v: Vec<Option<u64>>| v.into_iter().map(|x| x.map(|n| n as f64)).collect();
    Latencies {
        queue_wait_ns: ns(stats.queue_wait_percentiles(&qs)),
        compute_ns: ns(stats.compute_percentiles(&qs)),
        queue_wait_counts: stats.queue_wait_histogram.counts.iter().map(|&c| c as f64).collect(),
        queue_wait_sum_ns: stats.queue_wait_histogram.sum_ns as f64,
        compute_counts: stats.compute_histogram.counts.iter().map(|&c| c as f64).collect(),
        compute_sum_ns: stats.compute_histogram.sum_ns as f64,
    }
}

/// One runtime's or pool's latencies, recorded by JavaScript run by run.
#[napi]
pub struct NativeStats {
    stats: RefCell<Stats>,
}

#[napi]
impl NativeStats {
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> NativeStats {
        NativeStats { stats: RefCell::new(Stats::default()) }
    }

    /// A finished run: how long it waited for its instance and how long it ran, milliseconds.
    #[napi]
    pub fn record(&self, ok: bool, queue_wait_ms: f64, compute_ms: f64) {
        // To the nearest nanosecond: 0.01 ms is 10,000 ns exactly, on its histogram bound.
        let d = |ms: f64| Duration::from_nanos(if ms.is_finite() && ms > 0.0 { (ms * 1e6).round() as u64 } else { 0 });
        self.stats.borrow_mut().record(ok, d(queue_wait_ms), d(compute_ms));
    }

    #[napi]
    pub fn latencies(&self) -> Latencies {
        latencies(&self.stats.borrow())
    }
}
