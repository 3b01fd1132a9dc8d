//! The async-run queue against real fixture libraries, without Node: batches, order, no two
//! calls inside one instance, pools running in parallel, a bounded queue, cancel and close.
//! A channel stands in for the JavaScript thread.

mod common;
#[path = "common/lent.rs"]
mod lent;

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use zgc_runtime_core::dtype::Elements;
use zgc_runtime_core::executor::{Batch, Core, Owner, Queue, Sink};
use zgc_runtime_core::instance::{Feed, OutputData};
use zgc_runtime_core::offload::Offload;
use zgc_runtime_core::ffi::runtime::Temporary;
use zgc_runtime_core::{Artifact, Error, Instance};

fn build(name: &str, source: &str) -> String {
    common::build(name, source, &[])
}

/// A finished run as the tests see it: token, result, and whether it gave a hop sample.
type Finished = (u64, Result<Vec<OutputData>, Error>, bool);

enum Event {
    Batch(Vec<Finished>),
    Exit(usize),
}

/// What the JavaScript thread would get, as channel messages.
struct ChannelSink(Mutex<Sender<Event>>);

impl Sink<u64> for ChannelSink {
    fn deliver(&self, batch: Batch<u64>) -> Result<(), Batch<u64>> {
        let now = std::time::Instant::now();
        let done = batch.done.into_iter().map(|d| {
            if let Some(core) = &d.core {
                core.settled();
            }
            let hop = d.hop(now).is_some();
            (d.token, d.result, hop)
        });
        self.0.lock().unwrap().send(Event::Batch(done.collect())).unwrap();
        Ok(())
    }
    fn snapshot(&self, _core: &Arc<Core>) -> Option<zgc_runtime_core::Result<Vec<Temporary>>> {
        Some(Ok(Vec::new())) // nothing JavaScript-owned is ever bound here
    }
    fn worker_exit(&self, lane: usize) {
        let _ = self.0.lock().unwrap().send(Event::Exit(lane));
    }
}

fn sink() -> (Arc<dyn Sink<u64>>, Receiver<Event>) {
    let (tx, rx) = channel();
    (Arc::new(ChannelSink(Mutex::new(tx))), rx)
}

/// An instance of slow.c (y = 2x after sleeping `ms`; stats = runs here, most calls inside
/// at once here, most inside the library at once).
fn slow(artifact: &Arc<Artifact>, ms: f32) -> Arc<Core> {
    let mut instance = Instance::new(artifact.clone()).unwrap();
    instance.set(artifact.source_index("sleep_ms").unwrap(), Elements::F32(&[ms])).unwrap();
    Core::new(zgc_runtime_core::engine::Engine::Local(instance))
}

fn feed(artifact: &Artifact, x: [f32; 4]) -> Vec<Feed<'static>> {
    vec![artifact.stage_values(artifact.source_index("x").unwrap(), Elements::F32(&x)).unwrap().into_owned()]
}

fn f32s(out: &OutputData) -> &[f32] {
    match out {
        OutputData::F32(v) => v,
        _ => panic!("not f32"),
    }
}

/// Collects `n` finished runs, and the sizes of the batches they came in.
fn collect_batches(rx: &Receiver<Event>, n: usize) -> (Vec<Finished>, Vec<usize>) {
    let (mut all, mut batches) = (Vec::new(), Vec::new());
    while all.len() < n {
        match rx.recv_timeout(Duration::from_secs(30)).expect("runs finish") {
            Event::Batch(done) => {
                batches.push(done.len());
                all.extend(done);
            }
            Event::Exit(lane) => panic!("lane {lane} exited early"),
        }
    }
    (all, batches)
}

fn collect(rx: &Receiver<Event>, n: usize) -> (Vec<(u64, Result<Vec<OutputData>, Error>)>, usize) {
    let (all, batches) = collect_batches(rx, n);
    (all.into_iter().map(|(t, r, _)| (t, r)).collect(), batches.len())
}

/// Waits (briefly) for the workers to have left the runs they handed over.
fn settles(queue: &Queue<u64>) {
    for _ in 0..500 {
        if queue.figures().in_flight == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    panic!("the queue still counts runs in flight");
}

#[test]
fn a_runtime_queue_runs_in_call_order_in_batches_one_call_at_a_time() {
    let artifact = Arc::new(Artifact::open(&build("slow", "slow.c")).unwrap());
    let core = slow(&artifact, 0.0);
    let queue: Arc<Queue<u64>> = Queue::new(vec![Arc::downgrade(&core)], Owner::Runtime, usize::MAX, Offload::Always);
    let (sink, rx) = sink();
    let n = 2000u64;
    for i in 0..n {
        queue.submit(i, 0, 0, feed(&artifact, [i as f32, -(i as f32), 0.5, 1.0]), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    }
    assert!(core.pending() > 0, "queued runs count as pending on the runtime");
    assert!(matches!(core.lock(), Err(Error::Busy)));
    let (done, batches) = collect(&rx, n as usize);
    for (k, (token, result)) in done.iter().enumerate() {
        assert_eq!(*token, k as u64, "finished in call order");
        let outputs = result.as_ref().unwrap();
        let i = *token as f32;
        assert_eq!(f32s(&outputs[0]), &[2.0 * i, -2.0 * i, 1.0, 2.0]);
        assert_eq!(f32s(&outputs[1])[0], (k + 1) as f32, "the instance's own run count");
        assert_eq!(f32s(&outputs[1])[1], 1.0, "never two calls inside the instance");
    }
    assert!(batches < n as usize / 4, "{batches} batches for {n} runs: not drained in batches");
    assert_eq!(core.pending(), 0);
    assert!(core.lock().is_ok());
    queue.close();
    assert!(matches!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), Event::Exit(0)));
}

#[test]
fn a_pool_queue_spreads_runs_over_its_instances_in_parallel() {
    // A copy of its own: the library-wide count is global to the loaded library.
    let artifact = Arc::new(Artifact::open(&build("slow-pool", "slow.c")).unwrap());
    let cores: Vec<_> = (0..3).map(|_| slow(&artifact, 30.0)).collect();
    let queue: Arc<Queue<u64>> = Queue::new(cores.iter().map(Arc::downgrade).collect(), Owner::Pool, 64, Offload::Always);
    let (sink, rx) = sink();
    for i in 0..3u64 {
        queue.submit(i, 0, 0, feed(&artifact, [i as f32; 4]), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    }
    let (done, _) = collect(&rx, 3);
    let library_max = done.iter().map(|(_, r)| f32s(&r.as_ref().unwrap()[1])[2]).fold(0.0, f32::max);
    assert_eq!(library_max, 3.0, "three sleeping runs were inside the library at once");
    // Many short runs: each once, on some instance, never two inside one.
    let cores: Vec<_> = (0..3).map(|_| slow(&artifact, 0.0)).collect();
    let queue: Arc<Queue<u64>> = Queue::new(cores.iter().map(Arc::downgrade).collect(), Owner::Pool, usize::MAX, Offload::Always);
    let (sink, rx) = self::sink();
    let n = 3000u64;
    for i in 0..n {
        queue.submit(i, 0, 0, feed(&artifact, [i as f32, 0.0, 0.0, 0.0]), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    }
    let (done, _) = collect(&rx, n as usize);
    let mut seen = vec![false; n as usize];
    for (token, result) in &done {
        let outputs = result.as_ref().unwrap();
        assert_eq!(f32s(&outputs[0])[0], 2.0 * *token as f32);
        assert_eq!(f32s(&outputs[1])[1], 1.0);
        assert!(!std::mem::replace(&mut seen[*token as usize], true), "run {token} twice");
    }
    let counts: f32 = cores.iter().map(|c| f32s(&c.lock().unwrap().read_outputs(false).unwrap()[1])[0]).sum();
    assert_eq!(counts, n as f32);
    assert!(cores.iter().all(|c| c.pending() == 0));
}

#[test]
fn the_queue_is_bounded_beyond_the_free_instances() {
    let artifact = Arc::new(Artifact::open(&build("slow", "slow.c")).unwrap());
    let core = slow(&artifact, 50.0);
    let queue: Arc<Queue<u64>> = Queue::new(vec![Arc::downgrade(&core)], Owner::Pool, 2, Offload::Always);
    let (sink, rx) = sink();
    for i in 0..3 {
        assert!(queue.submit(i, 0, 0, feed(&artifact, [1.0; 4]), false, None, None, &sink).is_ok(), "run {i}: one instance free plus 2 waiting");
    }
    let figures = queue.figures();
    assert_eq!(figures.in_flight + figures.waiting, 3);
    match queue.submit(3, 0, 0, feed(&artifact, [1.0; 4]), false, None, None, &sink) {
        Err((e, token)) => {
            assert_eq!(token, 3);
            assert_eq!(e.code(), "ERR_ZGC_QUEUE_FULL");
            // 3 wait, or 2 if the worker already took the first.
            let text = e.to_string();
            assert!(text == "queue is full: 3 runs wait for 1 instance(s) (maxQueue 2)" || text == "queue is full: 2 runs wait for 1 instance(s) (maxQueue 2)", "{text}");
        }
        Ok(()) => panic!("a fourth run was queued"),
    }
    let (done, _) = collect(&rx, 3);
    assert_eq!(done.iter().map(|d| d.0).collect::<Vec<_>>(), vec![0, 1, 2]);
}

#[test]
fn cancel_takes_back_a_run_that_has_not_started_and_close_rejects_the_rest() {
    let artifact = Arc::new(Artifact::open(&build("slow", "slow.c")).unwrap());
    let core = slow(&artifact, 80.0);
    let queue: Arc<Queue<u64>> = Queue::new(vec![Arc::downgrade(&core)], Owner::Runtime, usize::MAX, Offload::Always);
    let (sink, rx) = sink();
    queue.submit(0, 10, 0, feed(&artifact, [3.0; 4]), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    // Until the worker has taken run 0 (it then sleeps 80 ms inside it).
    for _ in 0..1000 {
        if queue.shared.nothing_waiting() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(queue.shared.nothing_waiting());
    for i in 1..5 {
        queue.submit(i, 10 + i, 0, feed(&artifact, [4.0; 4]), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    }
    assert!(queue.cancel(10).is_none(), "a started run cannot be taken back");
    assert_eq!(queue.cancel(12).map(|j| j.token), Some(2));
    assert!(queue.cancel(12).is_none());
    assert_eq!(core.pending(), 4, "the running run and runs 1, 3, 4");
    let rejected: Vec<u64> = queue.close().into_iter().map(|j| j.token).collect();
    assert_eq!(rejected, vec![1, 3, 4]);
    assert!(queue.closed());
    assert!(matches!(queue.submit(9, 0, 0, Vec::new(), false, None, None, &sink), Err((Error::Closed, 9))));
    // The run in flight finishes with its result; then the worker ends.
    let (done, _) = collect(&rx, 1);
    assert_eq!(done[0].0, 0);
    assert_eq!(f32s(&done[0].1.as_ref().unwrap()[0]), &[6.0; 4]);
    assert!(matches!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), Event::Exit(0)));
    assert_eq!(core.pending(), 0);
}

#[test]
fn close_keeps_the_run_starting_on_a_free_instance_even_when_the_owner_lets_go_of_it() {
    let artifact = Arc::new(Artifact::open(&build("slow", "slow.c")).unwrap());
    for round in 0..50 {
        // 20 ms a run: run 0 is still in its instance when close() comes (with 0 ms, on a busy
        // machine, run 0 could end and run 1 start first, and nothing was left to reject).
        let core = slow(&artifact, 20.0);
        let queue: Arc<Queue<u64>> = Queue::new(vec![Arc::downgrade(&core)], Owner::Runtime, usize::MAX, Offload::Always);
        let (sink, rx) = sink();
        queue.submit(0, 0, 0, feed(&artifact, [round as f32; 4]), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
        queue.submit(1, 0, 0, feed(&artifact, [9.0; 4]), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
        // Run 0 is running or about to (counted in flight), run 1 waits behind it.
        assert_eq!(queue.figures().in_flight, 1);
        let rejected: Vec<u64> = queue.close().into_iter().map(|j| j.token).collect();
        assert_eq!(rejected, vec![1], "round {round}");
        // As NativeRuntime::close does: the owner's reference goes at once.
        let gone = Arc::downgrade(&core);
        drop(core);
        let (done, _) = collect(&rx, 1);
        assert_eq!(done[0].0, 0);
        assert_eq!(f32s(&done[0].1.as_ref().unwrap()[0]), &[2.0 * round as f32; 4], "round {round}: the run found its instance");
        assert!(matches!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), Event::Exit(0)));
        // The pins went with the batch: nothing holds the instance any more.
        assert!(gone.upgrade().is_none(), "round {round}");
    }
    // With nothing starting, close pins nothing: the owner's reference is the last one.
    let core = slow(&artifact, 0.0);
    let queue: Arc<Queue<u64>> = Queue::new(vec![Arc::downgrade(&core)], Owner::Runtime, usize::MAX, Offload::Always);
    let (sink, rx) = sink();
    queue.submit(0, 0, 0, feed(&artifact, [1.0; 4]), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    collect(&rx, 1);
    settles(&queue);
    assert!(queue.close().is_empty());
    let gone = Arc::downgrade(&core);
    drop(core);
    assert!(gone.upgrade().is_none(), "an idle queue's close kept the instance");
}

#[test]
fn a_run_whose_instance_is_gone_fails_closed_and_errors_leave_the_queue_working() {
    let artifact = Arc::new(Artifact::open(&build("status", "status.c")).unwrap());
    let mut instance = Instance::new(artifact.clone()).unwrap();
    for name in ["copy_status", "bind_status"] {
        instance.set(artifact.source_index(name).unwrap(), Elements::I8(&[0])).unwrap();
    }
    instance.set(artifact.source_index("buf").unwrap(), Elements::F32(&[1.0, 2.0])).unwrap();
    let core = Core::new(zgc_runtime_core::engine::Engine::Local(instance));
    let queue: Arc<Queue<u64>> = Queue::new(vec![Arc::downgrade(&core)], Owner::Runtime, usize::MAX, Offload::Always);
    let (sink, rx) = sink();
    let run_status = artifact.source_index("run_status").unwrap();
    let with = |status: i8| vec![artifact.stage_values(run_status, Elements::I8(&[status])).unwrap().into_owned()];
    queue.submit(0, 0, 0, with(8), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    queue.submit(1, 0, 0, with(0), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    let (done, _) = collect(&rx, 2);
    assert_eq!(done[0].1.as_ref().err().map(Error::code), Some("ERR_ZGC_MISSING_BINDING"));
    assert!(done[1].1.is_ok());
    drop(core); // the runtime was closed while nothing ran
    queue.submit(2, 0, 0, with(0), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    let (done, _) = collect(&rx, 1);
    assert!(matches!(done[0].1, Err(Error::Closed)));
}

#[test]
fn batches_are_bounded_in_size_and_time_and_idle_runs_give_hop_samples() {
    let artifact = Arc::new(Artifact::open(&build("slow", "slow.c")).unwrap());
    let core = slow(&artifact, 0.0);
    let queue: Arc<Queue<u64>> = Queue::new(vec![Arc::downgrade(&core)], Owner::Runtime, usize::MAX, Offload::Always);
    assert_eq!(queue.lanes(), 1);
    let (sink, rx) = sink();
    let n = 3000u64;
    // Holding the instance keeps the worker inside the first run, so every later one queues
    // behind it, however slowly this thread submits (under valgrind, say).
    let held = core.lock_unchecked();
    for i in 0..n {
        queue.submit(i, 0, 0, feed(&artifact, [i as f32; 4]), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    }
    drop(held);
    let (done, sizes) = collect_batches(&rx, n as usize);
    assert!(sizes.iter().all(|&s| s <= zgc_runtime_core::executor::BATCH_RUNS), "batch sizes {sizes:?}");
    assert!(sizes.len() < n as usize / 4);
    // The first run found the worker idle: a hop sample. Runs queued behind it: none.
    assert!(done[0].2, "the first run's wait was a hop");
    assert_eq!(done.iter().filter(|d| d.2).count(), 1, "only the first run found the worker idle");
    settles(&queue);
    // Runs slower than BATCH_TIME are handed over one by one, not held for the queue to drain.
    let slow_core = slow(&artifact, 5.0);
    let slow_queue: Arc<Queue<u64>> = Queue::new(vec![Arc::downgrade(&slow_core)], Owner::Runtime, usize::MAX, Offload::Always);
    for i in 0..6 {
        slow_queue.submit(i, 0, 0, feed(&artifact, [1.0; 4]), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    }
    let (_, sizes) = collect_batches(&rx, 6);
    assert!(sizes.len() >= 5, "batch sizes {sizes:?}");
    settles(&slow_queue);
    assert_eq!(slow_queue.figures().waiting, 0);
}

#[test]
fn stop_refuses_new_runs_and_lets_queued_ones_finish() {
    let artifact = Arc::new(Artifact::open(&build("slow", "slow.c")).unwrap());
    let cores: Vec<_> = (0..2).map(|_| slow(&artifact, 10.0)).collect();
    let queue: Arc<Queue<u64>> = Queue::new(cores.iter().map(Arc::downgrade).collect(), Owner::Pool, usize::MAX, Offload::Always);
    assert_eq!(queue.lanes(), 2);
    let (sink, rx) = sink();
    for i in 0..6 {
        queue.submit(i, 0, 0, feed(&artifact, [i as f32; 4]), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    }
    queue.stop();
    assert!(!queue.closed(), "stopped is not closed");
    assert!(matches!(queue.submit(9, 0, 0, Vec::new(), false, None, None, &sink), Err((Error::Closed, 9))));
    let (done, _) = collect(&rx, 6);
    let mut tokens: Vec<u64> = done.iter().map(|d| d.0).collect();
    tokens.sort_unstable();
    assert_eq!(tokens, (0..6).collect::<Vec<_>>());
    assert!(done.iter().all(|d| d.1.is_ok()));
    assert!(queue.close().is_empty());
    assert!(queue.closed());
}

/// accum.c: h[0..3] += x, h[4] += 1 in its BOUND STATE source h; y = h[0..3], steps = h[4].
fn accum_feeds(artifact: &Artifact, x: [f32; 4], state: Option<&Arc<zgc_runtime_core::ffi::memory::AlignedBuf>>) -> Vec<Feed<'static>> {
    let mut feeds = feed(artifact, x);
    if let Some(state) = state {
        feeds.push(artifact.stage_lent(artifact.source_index("h").unwrap(), state.clone()).unwrap());
    }
    feeds
}

#[test]
fn storage_lent_to_a_run_is_bound_for_it_alone_and_the_instance_gets_its_own_back() {
    let artifact = Arc::new(Artifact::open(&build("accum", "accum.c")).unwrap());
    let h = artifact.source_index("h").unwrap();
    let mut instance = Instance::new(artifact.clone()).unwrap();
    // The instance's own state: 1000 in h[0].
    instance.set(h, Elements::F32(&[1000.0, 0.0, 0.0, 0.0, 0.0])).unwrap();
    let core = Core::new(zgc_runtime_core::engine::Engine::Local(instance));
    let queue: Arc<Queue<u64>> = Queue::new(vec![Arc::downgrade(&core)], Owner::Pool, usize::MAX, Offload::Always);
    let (sink, rx) = sink();
    let a = Arc::new(artifact.lendable_storage(h, None).unwrap());
    let b = Arc::new(artifact.lendable_storage(h, Some(Elements::F32(&[50.0, 0.0, 0.0, 0.0, 7.0]))).unwrap());
    // a, own, b, a, own, b: each state is carried over only by its own runs.
    let plan: [(Option<&Arc<_>>, f32); 6] = [(Some(&a), 1.0), (None, 2.0), (Some(&b), 3.0), (Some(&a), 4.0), (None, 5.0), (Some(&b), 6.0)];
    for (i, (state, x)) in plan.iter().enumerate() {
        queue.submit(i as u64, 0, 0, accum_feeds(&artifact, [*x, 0.0, 0.0, 0.0], *state), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    }
    let (mut done, _) = collect(&rx, plan.len());
    done.sort_by_key(|(t, _)| *t);
    let seen: Vec<(f32, f32)> = done.iter().map(|(_, r)| {
        let out = r.as_ref().unwrap();
        (f32s(&out[0])[0], f32s(&out[1])[0])
    }).collect();
    assert_eq!(seen, [(1.0, 1.0), (1002.0, 1.0), (53.0, 8.0), (5.0, 2.0), (1007.0, 2.0), (59.0, 9.0)]);
    // The lent storage holds each sequence's state; only the runs hold other shares of it.
    settles(&queue);
    let a_state: Vec<f32> = a.as_bytes().chunks(4).map(|c| f32::from_ne_bytes(c.try_into().unwrap())).collect();
    assert_eq!(a_state, [5.0, 0.0, 0.0, 0.0, 2.0]);
    assert_eq!(Arc::strong_count(&a), 1);
    queue.close();
}

#[test]
fn storage_lent_where_nothing_was_bound_leaves_fresh_zeros_for_the_next_run() {
    let artifact = Arc::new(Artifact::open(&build("accum", "accum.c")).unwrap());
    let h = artifact.source_index("h").unwrap();
    let core = Core::new(zgc_runtime_core::engine::Engine::Local(Instance::new(artifact.clone()).unwrap()));
    let queue: Arc<Queue<u64>> = Queue::new(vec![Arc::downgrade(&core)], Owner::Pool, usize::MAX, Offload::Always);
    let (sink, rx) = sink();
    let a = Arc::new(artifact.lendable_storage(h, Some(Elements::F32(&[9.0, 0.0, 0.0, 0.0, 0.0]))).unwrap());
    queue.submit(0, 0, 0, accum_feeds(&artifact, [1.0; 4], Some(&a)), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    queue.submit(1, 0, 0, accum_feeds(&artifact, [1.0; 4], None), false, None, None, &sink).map_err(|(e, _)| e).unwrap();
    let (mut done, _) = collect(&rx, 2);
    done.sort_by_key(|(t, _)| *t);
    assert_eq!(f32s(&done[0].1.as_ref().unwrap()[0]), &[10.0, 1.0, 1.0, 1.0]);
    // Not a's state: zeros of the instance's own.
    assert_eq!(f32s(&done[1].1.as_ref().unwrap()[0]), &[1.0, 1.0, 1.0, 1.0]);
    assert_eq!(f32s(&done[1].1.as_ref().unwrap()[1]), &[1.0]);
    queue.close();
}

#[test]
fn lent_storage_is_checked_against_its_source() {
    let artifact = Arc::new(Artifact::open(&build("accum", "accum.c")).unwrap());
    let x = artifact.source_index("x").unwrap();
    let h = artifact.source_index("h").unwrap();
    assert!(matches!(artifact.lendable_storage(x, None), Err(Error::NotBound { .. })), "x is OWNED");
    assert!(matches!(artifact.lendable_storage(h, Some(Elements::F32(&[1.0]))), Err(Error::Size { .. })));
    let wrong = Arc::new(zgc_runtime_core::ffi::memory::AlignedBuf::zeroed(8, 64).unwrap());
    assert!(matches!(artifact.stage_lent(h, wrong), Err(Error::Size { .. })));
}

/// A sink that copies caller-owned storage when a worker asks, as the binding does, and counts the asks.
struct CopyingSink(Mutex<Sender<Event>>, std::sync::atomic::AtomicUsize);

impl Sink<u64> for CopyingSink {
    fn deliver(&self, batch: Batch<u64>) -> Result<(), Batch<u64>> {
        let done = batch.done.into_iter().map(|d| {
            if let Some(core) = &d.core {
                core.settled();
            }
            (d.token, d.result, false)
        });
        self.0.lock().unwrap().send(Event::Batch(done.collect())).unwrap();
        Ok(())
    }
    fn snapshot(&self, core: &Arc<Core>) -> Option<zgc_runtime_core::Result<Vec<Temporary>>> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some(core.lock_unchecked().snapshot_caller_storage())
    }
    fn worker_exit(&self, _lane: usize) {}
}

#[test]
fn async_runs_copy_caller_storage_only_while_a_sync_run_has_left_it_bound() {
    use zgc_runtime_core::dtype::ArrayKind;
    use zgc_runtime_core::run::{Input, Run};
    let artifact = Arc::new(Artifact::open(&common::build("status", "status.c", &[])).unwrap());
    let (run_status, buf) = (artifact.source_index("run_status").unwrap(), artifact.source_index("buf").unwrap());
    let core = Core::new(zgc_runtime_core::engine::Engine::Local(Instance::new(artifact.clone()).unwrap()));
    // run_status (OWNED) keeps the 0 the first run gives it: the second run's one input is buf's.
    let sync_run = |input: Input<'_>, status: Option<i8>| {
        let mut instance = core.lock().unwrap();
        let mut run = Run::begin(&core, &mut instance);
        run.input(buf, input).unwrap();
        if let Some(s) = status {
            run.input(run_status, Input::Values(Elements::I8(&[s]))).unwrap();
        }
        drop(run.run().unwrap());
    };
    let (tx, rx) = channel();
    let sink = Arc::new(CopyingSink(Mutex::new(tx), std::sync::atomic::AtomicUsize::new(0)));
    let as_sink: Arc<dyn Sink<u64>> = sink.clone();
    let queue: Arc<Queue<u64>> = Queue::new(vec![Arc::downgrade(&core)], Owner::Runtime, usize::MAX, Offload::Always);
    let status_feed = || vec![artifact.stage_values(run_status, Elements::I8(&[0])).unwrap().into_owned()];
    let asks = || sink.1.load(std::sync::atomic::Ordering::SeqCst);
    // The caller's array bound by a sync run: an async run reads a copy of it.
    let mut lent = zgc_runtime_core::ffi::memory::AlignedBuf::zeroed(8, 64).unwrap();
    lent.as_bytes_mut().copy_from_slice(&[1.0f32, 2.0].iter().flat_map(|v| v.to_ne_bytes()).collect::<Vec<_>>());
    sync_run(Input::Storage { kind: ArrayKind::F32, region: Box::new(lent::Lent(lent)) }, Some(0));
    queue.submit(0, 0, 0, status_feed(), false, None, None, &as_sink).map_err(|(e, _)| e).unwrap();
    let (done, _) = collect_batches(&rx, 1);
    assert_eq!(f32s(&done[0].1.as_ref().unwrap()[0]), &[3.0]);
    assert_eq!(asks(), 1);
    // Values for it replace it with the runtime's own storage: no copy is asked for after.
    sync_run(Input::Values(Elements::F32(&[4.0, 4.0])), None);
    queue.submit(1, 0, 0, status_feed(), false, None, None, &as_sink).map_err(|(e, _)| e).unwrap();
    let (done, _) = collect_batches(&rx, 1);
    assert_eq!(f32s(&done[0].1.as_ref().unwrap()[0]), &[8.0]);
    assert_eq!(asks(), 1, "no copy while no caller storage is bound");
    queue.close();
}
