//! Whether an async run leaves the caller's thread. A hop to another thread and back costs
//! tens of microseconds; a tiny graph runs in well under one. `Auto` runs a graph inline
//! (still behind a Promise) while its measured run time stays below the measured cost of a
//! hop, and offloads it from the first run that is slower, so the event loop is never held
//! for long by a graph known to be slow.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// The `offload` option of `load` and `createPool`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offload {
    Auto,
    Always,
    Never,
}

impl Offload {
    pub fn parse(text: &str) -> Option<Offload> {
        match text {
            "auto" => Some(Offload::Auto),
            "always" => Some(Offload::Always),
            "never" => Some(Offload::Never),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Offload::Auto => "auto",
            Offload::Always => "always",
            Offload::Never => "never",
        }
    }
}

/// Longest run `Auto` lets hold the event loop: a run measured above it is offloaded at once,
/// whatever a hop costs.
pub const INLINE_LIMIT: Duration = Duration::from_millis(1);

/// A running estimate in nanoseconds: an exponentially weighted mean (weight 1/8 for each new
/// sample), `None` until the first sample.
#[derive(Default)]
struct Estimate(AtomicU64);

const NO_SAMPLE: u64 = 0;

impl Estimate {
    fn get(&self) -> Option<u64> {
        match self.0.load(Ordering::Relaxed) {
            NO_SAMPLE => None,
            v => Some(v),
        }
    }

    fn record(&self, ns: u64) {
        let ns = ns.max(1); // 0 means "no sample"
        let next = match self.get() {
            None => ns,
            Some(old) => old - old / 8 + ns / 8,
        };
        self.0.store(next.max(1), Ordering::Relaxed);
    }
}

/// The `Auto` decision for one runtime or pool, updated from every run's timings. Shared
/// between the caller's thread (inline runs) and the threads that run offloaded ones.
pub struct Policy {
    mode: Offload,
    /// Run time (inputs in, graph, outputs out) of recent runs, inline or offloaded.
    compute: Estimate,
    /// What an offloaded run costs beyond its run time: the trip to the worker and back.
    hop: Estimate,
    /// The current choice for `Auto`.
    inline: AtomicBool,
    inline_runs: AtomicU64,
    offloaded_runs: AtomicU64,
}

impl Policy {
    pub fn new(mode: Offload) -> Policy {
        Policy {
            mode,
            compute: Estimate::default(),
            hop: Estimate::default(),
            // Auto starts offloaded: the first runs measure both costs without ever holding
            // the event loop for a graph whose run time is not known yet.
            inline: AtomicBool::new(mode == Offload::Never),
            inline_runs: AtomicU64::new(0),
            offloaded_runs: AtomicU64::new(0),
        }
    }

    pub fn mode(&self) -> Offload {
        self.mode
    }

    /// Whether the next async run should run inline on the caller's thread.
    pub fn inline(&self) -> bool {
        self.inline.load(Ordering::Relaxed)
    }

    /// An inline run took `compute`. Returns whether the next one stays inline.
    pub fn record_inline(&self, compute: Duration) -> bool {
        self.inline_runs.fetch_add(1, Ordering::Relaxed);
        let ns = nanos(compute);
        self.compute.record(ns);
        if self.mode == Offload::Auto {
            let too_slow = compute > INLINE_LIMIT || self.hop.get().is_some_and(|hop| self.compute.get().unwrap_or(ns) > hop);
            if too_slow {
                self.inline.store(false, Ordering::Relaxed);
            }
        }
        self.inline()
    }

    /// An offloaded run took `compute` on its worker, and `hop` more between the call and its
    /// completion reaching JavaScript (when it found its worker idle; `None` when it waited
    /// behind other runs, whose time is not a hop's).
    pub fn record_offloaded(&self, compute: Duration, hop: Option<Duration>) {
        self.offloaded_runs.fetch_add(1, Ordering::Relaxed);
        self.compute.record(nanos(compute));
        if let Some(hop) = hop {
            self.hop.record(nanos(hop));
        }
        if self.mode == Offload::Auto {
            if let (Some(c), Some(h)) = (self.compute.get(), self.hop.get()) {
                // Half the hop, so that a graph near the boundary does not flip at every run.
                let worth_inline = c < h / 2 && Duration::from_nanos(c) < INLINE_LIMIT / 2;
                self.inline.store(worth_inline, Ordering::Relaxed);
            }
        }
    }

    pub fn compute_ns(&self) -> Option<u64> {
        self.compute.get()
    }

    pub fn hop_ns(&self) -> Option<u64> {
        self.hop.get()
    }

    pub fn inline_runs(&self) -> u64 {
        self.inline_runs.load(Ordering::Relaxed)
    }

    pub fn offloaded_runs(&self) -> u64 {
        self.offloaded_runs.load(Ordering::Relaxed)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn modes_parse_from_their_names_only() {
        for mode in [Offload::Auto, Offload::Always, Offload::Never] {
            assert_eq!(Offload::parse(mode.as_str()), Some(mode));
        }
        assert_eq!(Offload::parse("sometimes"), None);
        assert_eq!(Offload::parse("Auto"), None);
    }

    #[test]
    fn auto_starts_offloaded_and_goes_inline_once_a_run_costs_less_than_half_a_hop() {
        let p = Policy::new(Offload::Auto);
        assert!(!p.inline());
        // A hop of 60 µs against a run of 1 µs: inline.
        p.record_offloaded(US, Some(60 * US));
        assert!(p.inline());
        assert_eq!((p.compute_ns(), p.hop_ns()), (Some(1_000), Some(60_000)));
        assert_eq!((p.inline_runs(), p.offloaded_runs()), (0, 1));
    }

    #[test]
    fn auto_keeps_a_run_near_the_hop_cost_offloaded() {
        let p = Policy::new(Offload::Auto);
        p.record_offloaded(40 * US, Some(60 * US)); // 40 > 60 / 2
        assert!(!p.inline());
        let q = Policy::new(Offload::Auto);
        q.record_offloaded(29 * US, Some(60 * US));
        assert!(q.inline());
    }

    #[test]
    fn auto_without_a_hop_measured_stays_offloaded() {
        let p = Policy::new(Offload::Auto);
        for _ in 0..10 {
            p.record_offloaded(US, None); // every run waited behind another: no hop sample
        }
        assert!(!p.inline());
        assert_eq!(p.hop_ns(), None);
    }

    #[test]
    fn an_inline_run_above_the_limit_offloads_the_next_at_once() {
        let p = Policy::new(Offload::Auto);
        p.record_offloaded(US, Some(5_000 * US)); // a hop slower than the limit
        assert!(p.inline());
        assert!(p.record_inline(2 * US));
        // One run of 300 ms: offloaded from the next run on, even though a hop costs more.
        assert!(!p.record_inline(Duration::from_millis(300)));
        assert!(!p.inline());
        assert_eq!(p.inline_runs(), 2);
    }

    #[test]
    fn inline_runs_that_average_above_the_hop_go_back_offloaded() {
        let p = Policy::new(Offload::Auto);
        p.record_offloaded(US, Some(20 * US));
        assert!(p.inline());
        // Each run 100 µs: under the limit, but the estimate climbs past the 20 µs hop.
        let mut stayed = 0;
        while p.record_inline(100 * US) {
            stayed += 1;
            assert!(stayed < 100, "never offloaded");
        }
        assert!(p.compute_ns().unwrap() > 20_000);
        // Offloaded runs that turn fast again bring it back inline.
        for _ in 0..40 {
            p.record_offloaded(US, Some(20 * US));
        }
        assert!(p.inline());
    }

    #[test]
    fn the_limit_alone_decides_when_a_hop_costs_more_than_any_run() {
        let p = Policy::new(Offload::Auto);
        p.record_offloaded(US, Some(Duration::from_secs(10)));
        assert!(p.inline());
        assert!(p.record_inline(INLINE_LIMIT), "exactly the limit still stays inline");
        assert!(!p.record_inline(INLINE_LIMIT + US), "just past it leaves");
    }

    #[test]
    fn an_estimate_equal_to_the_hop_stays_inline() {
        let p = Policy::new(Offload::Auto);
        p.record_offloaded(US, Some(4 * US)); // compute 1,000 ns, hop 4,000 ns
        assert!(p.inline());
        // 1,000 - 125 + 25,000 / 8 = 4,000: equal to the hop, not above it.
        assert!(p.record_inline(25 * US));
        assert_eq!(p.compute_ns(), Some(4_000));
        assert!(!p.record_inline(25 * US), "and above it leaves");
    }

    #[test]
    fn going_inline_needs_a_run_under_half_the_limit_as_well_as_half_a_hop() {
        let p = Policy::new(Offload::Auto);
        p.record_offloaded(600 * US, Some(Duration::from_secs(10)));
        assert!(!p.inline(), "600 us is over half the 1 ms limit");
        let q = Policy::new(Offload::Auto);
        q.record_offloaded(INLINE_LIMIT / 2, Some(Duration::from_secs(10)));
        assert!(!q.inline(), "exactly half is not under it");
        let r = Policy::new(Offload::Auto);
        r.record_offloaded(30 * US, Some(60 * US));
        assert!(!r.inline(), "exactly half a hop is not under it");
        for _ in 0..3 {
            r.record_offloaded(30 * US, None);
        }
        assert_eq!(r.offloaded_runs(), 4);
    }

    #[test]
    fn always_and_never_ignore_every_measurement() {
        let always = Policy::new(Offload::Always);
        let never = Policy::new(Offload::Never);
        for p in [&always, &never] {
            p.record_offloaded(US, Some(1_000 * US));
            p.record_inline(Duration::from_secs(1));
            p.record_offloaded(Duration::from_secs(1), Some(US));
        }
        assert!(!always.inline());
        assert!(never.inline());
    }

    #[test]
    fn estimates_weigh_each_new_sample_one_eighth() {
        let e = Estimate::default();
        assert_eq!(e.get(), None);
        e.record(800);
        assert_eq!(e.get(), Some(800));
        e.record(1_600);
        assert_eq!(e.get(), Some(800 - 100 + 200));
        e.record(0); // a zero sample is still a sample, not "none"
        assert!(e.get().is_some());
    }
}
