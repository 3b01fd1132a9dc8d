//! What a queue has done, for `stats()`: counts, percentiles over the recent runs, and
//! cumulative histograms that a scraper can take differences of.

use std::time::Duration;

/// How often recent latencies are kept for percentiles.
const SAMPLES: usize = 4096;

/// What a queue has done, for `stats()`.
#[derive(Default)]
pub struct Stats {
    pub completed: u64,
    pub failed: u64,
    queue_wait: Ring,
    compute: Ring,
    pub queue_wait_histogram: Histogram,
    pub compute_histogram: Histogram,
}

/// Upper bounds of the cumulative histograms, nanoseconds: 1-2.5-5 steps from 10 µs to 10 s,
/// the range from a tiny inline graph to a long one, as Prometheus scrapes them.
pub const HISTOGRAM_BOUNDS_NS: [u64; 19] = [
    10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000,
    50_000_000, 100_000_000, 250_000_000, 500_000_000, 1_000_000_000, 2_500_000_000, 5_000_000_000, 10_000_000_000,
];

/// Every latency since the queue began, counted per bucket: unlike the percentile ring it
/// forgets nothing, so a scraper can take differences between two scrapes.
#[derive(Default, Clone, Debug, PartialEq)]
pub struct Histogram {
    /// Samples at or below each bound (not cumulative), then above the last.
    pub counts: [u64; HISTOGRAM_BOUNDS_NS.len() + 1],
    pub sum_ns: u128,
    pub count: u64,
}

impl Histogram {
    fn observe(&mut self, d: Duration) {
        let ns = d.as_nanos();
        let bucket = HISTOGRAM_BOUNDS_NS.iter().position(|&b| ns <= u128::from(b)).unwrap_or(HISTOGRAM_BOUNDS_NS.len());
        self.counts[bucket] += 1;
        self.sum_ns += ns;
        self.count += 1;
    }
}

#[derive(Default)]
struct Ring {
    ns: Vec<u64>,
    next: usize,
}

impl Ring {
    fn push(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        if self.ns.len() < SAMPLES {
            self.ns.push(ns);
        } else {
            self.ns[self.next] = ns;
        }
        self.next = (self.next + 1) % SAMPLES;
    }

    /// Nearest-rank percentiles `qs` (0..=100) of the kept samples, in nanoseconds.
    fn percentiles(&self, qs: &[f64]) -> Vec<Option<u64>> {
        let mut sorted = self.ns.clone();
        sorted.sort_unstable();
        qs.iter()
            .map(|q| {
                if sorted.is_empty() {
                    return None;
                }
                let rank = ((q / 100.0) * sorted.len() as f64).ceil() as usize;
                Some(sorted[rank.clamp(1, sorted.len()) - 1])
            })
            .collect()
    }
}

impl Stats {
    pub fn record(&mut self, ok: bool, queue_wait: Duration, compute: Duration) {
        if ok {
            self.completed += 1;
        } else {
            self.failed += 1;
        }
        self.queue_wait.push(queue_wait);
        self.compute.push(compute);
        self.queue_wait_histogram.observe(queue_wait);
        self.compute_histogram.observe(compute);
    }

    pub fn queue_wait_percentiles(&self, qs: &[f64]) -> Vec<Option<u64>> {
        self.queue_wait.percentiles(qs)
    }

    pub fn compute_percentiles(&self, qs: &[f64]) -> Vec<Option<u64>> {
        self.compute.percentiles(qs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn percentiles_are_nearest_rank_over_the_last_samples() {
        let mut r = Ring::default();
        assert_eq!(r.percentiles(&[50.0]), vec![None]);
        for ms in 1..=100 {
            r.push(ms * MS);
        }
        let ns = |ms: u64| Some(ms * 1_000_000);
        assert_eq!(r.percentiles(&[0.0, 1.0, 50.0, 90.0, 99.0, 100.0]), vec![ns(1), ns(1), ns(50), ns(90), ns(99), ns(100)]);
        // Past SAMPLES the oldest are replaced, one by one.
        for _ in 0..SAMPLES {
            r.push(500 * MS);
        }
        assert_eq!(r.ns.len(), SAMPLES);
        assert_eq!(r.percentiles(&[0.0, 100.0]), vec![ns(500), ns(500)]);
        r.push(7 * MS);
        assert_eq!(r.percentiles(&[0.0]), vec![ns(7)]);
        assert_eq!(r.next, (100 + SAMPLES + 1) % SAMPLES);
    }

    #[test]
    fn stats_count_successes_and_failures_apart_and_keep_both_latencies() {
        let mut s = Stats::default();
        s.record(true, 2 * MS, 10 * MS);
        s.record(true, 4 * MS, 30 * MS);
        s.record(false, 6 * MS, 20 * MS);
        assert_eq!((s.completed, s.failed), (2, 1));
        assert_eq!(s.queue_wait_percentiles(&[50.0, 100.0]), vec![Some(4_000_000), Some(6_000_000)]);
        assert_eq!(s.compute_percentiles(&[0.0, 50.0]), vec![Some(10_000_000), Some(20_000_000)]);
    }

    #[test]
    fn histograms_count_each_latency_in_the_first_bucket_that_holds_it_and_never_forget() {
        let mut s = Stats::default();
        let us = Duration::from_micros(1);
        // On a bound, just above it, below the first, above the last.
        for (wait, compute) in [(10 * us, 25 * us), (11 * us, 26 * us), (us, 11 * Duration::from_secs(1)), (MS, 10 * Duration::from_secs(1))] {
            s.record(true, wait, compute);
        }
        let q = &s.queue_wait_histogram;
        assert_eq!((q.counts[0], q.counts[1], q.counts[6]), (2, 1, 1));
        assert_eq!(q.counts.iter().sum::<u64>(), 4);
        assert_eq!((q.count, q.sum_ns), (4, 22_000 + 1_000_000));
        let c = &s.compute_histogram;
        assert_eq!((c.counts[1], c.counts[2], c.counts[18], c.counts[19]), (1, 1, 1, 1));
        assert_eq!(c.sum_ns, 51_000 + 21_000_000_000);
        // The percentile ring forgets; the histograms keep every sample.
        for _ in 0..SAMPLES {
            s.record(false, MS, MS);
        }
        assert_eq!(s.queue_wait_histogram.count, 4 + SAMPLES as u64);
        assert_eq!(s.compute_histogram.counts[6], SAMPLES as u64);
    }
}
