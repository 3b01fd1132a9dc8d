//! A queue's latencies as `stats()` reads them: the core's percentiles and histograms.

use napi_derive::napi;
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
