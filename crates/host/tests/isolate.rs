//! Isolated instances without Node: the parent's side (`isolate::child`) driving real host
//! processes (this crate's `zgc-runtime-host` binary) on C fixtures.
#![cfg(target_os = "linux")]

#[path = "../../core/tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};
use zgc::isolate::child::{self, Isolated, Outcome};
use zgc::isolate::{MARK_VALUES, RUN, SET};
use zgc::ffi::process::Exit;
use zgc::error::Detail;
use zgc::Error;

const HOST: &str = env!("CARGO_BIN_EXE_zgc-runtime-host");
const START: Duration = Duration::from_secs(10);

fn env() -> Vec<String> {
    std::env::vars().map(|(k, v)| format!("{k}={v}")).collect()
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn faulty() -> Isolated {
    Isolated::start(HOST, &common::build("faulty", "faulty.c", &[]), &env(), START).unwrap()
}

/// Writes the faulty fixture's inputs and issues a run; its number.
fn run(iso: &mut Isolated, x: [f32; 4], mode: f32) -> u32 {
    iso.write_input(0, &f32s(&x), MARK_VALUES);
    iso.write_input(1, &f32s(&[mode]), MARK_VALUES);
    iso.write_input(2, &f32s(&[0.0]), MARK_VALUES);
    iso.begin(RUN, 0).unwrap()
}

fn wait(iso: &Isolated, seq: u32, until: Option<Duration>, cap: Option<u64>) -> Outcome {
    child::wait(&iso.live().unwrap(), &iso.region, seq, until.map(|d| Instant::now() + d), cap)
}

fn output(iso: &Isolated, seq: u32) -> Vec<f32> {
    let (at, len) = iso.output_slot(seq, 0);
    let mut bytes = vec![0u8; len];
    iso.region.read(at, &mut bytes);
    bytes.chunks_exact(4).map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
fn a_run_crosses_the_region_and_comes_back() {
    let mut iso = faulty();
    assert_eq!(iso.signature.sources.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(), ["x", "mode", "id"]);
    let seq = run(&mut iso, [1.0, 2.0, 3.0, 4.0], 0.0);
    assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
    iso.answer(seq).unwrap();
    assert_eq!(output(&iso, seq), [3.0, 5.0, 7.0, 9.0]);
}

#[test]
fn runs_handed_over_together_run_in_order_each_in_its_frame() {
    let mut iso = faulty();
    assert!(iso.frames() > 2);
    // The first run sleeps 200 ms (mode 6), so no frame can be done when the next begin()
    // comes: without it, a quick child could finish the first run and free its frame.
    let seqs: Vec<u32> = (0..iso.frames()).map(|k| run(&mut iso, [k as f32; 4], if k == 0 { 6.0 } else { 0.0 })).collect();
    // Every frame holds a command not done: the next one is refused, not overwritten.
    assert_eq!(iso.begin(RUN, 0).unwrap_err(), Error::Busy);
    assert_eq!(wait(&iso, *seqs.last().unwrap(), None, None), Outcome::Done);
    for (k, &seq) in seqs.iter().enumerate() {
        assert!(iso.done(seq));
        assert_eq!(output(&iso, seq), [2.0 * k as f32 + 1.0; 4]);
    }
}

#[test]
fn a_crash_is_seen_with_its_signal_and_a_new_process_serves_on_the_same_region() {
    let mut iso = faulty();
    let first = iso.pid().unwrap();
    let seq = run(&mut iso, [1.0; 4], 1.0);
    assert_eq!(wait(&iso, seq, None, None), Outcome::Exited(Exit::Signal(libc::SIGSEGV)));
    let seq = run(&mut iso, [1.0; 4], 3.0);
    // Dead already: the run cannot be done.
    assert!(matches!(wait(&iso, seq, None, None), Outcome::Exited(_)));
    iso.respawn(&env(), START).unwrap();
    assert_ne!(iso.pid().unwrap(), first);
    let seq = run(&mut iso, [2.0; 4], 0.0);
    assert_eq!(seq, 1, "the count starts again with the process");
    assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
    assert_eq!(output(&iso, seq), [5.0; 4]);
    let seq = run(&mut iso, [2.0; 4], 3.0);
    assert_eq!(wait(&iso, seq, None, None), Outcome::Exited(Exit::Code(3)));
}

#[test]
fn a_hung_run_is_killed_at_its_deadline_and_a_runaway_at_its_memory_cap() {
    let mut iso = faulty();
    let seq = run(&mut iso, [1.0; 4], 4.0);
    let t0 = Instant::now();
    assert_eq!(wait(&iso, seq, Some(Duration::from_millis(50)), None), Outcome::Timeout);
    assert!(t0.elapsed() >= Duration::from_millis(50) && t0.elapsed() < Duration::from_secs(2));
    assert!(iso.live().unwrap().process.exited());
    iso.respawn(&env(), START).unwrap();
    let seq = run(&mut iso, [1.0; 4], 5.0);
    match wait(&iso, seq, None, Some(64 << 20)) {
        Outcome::Memory(rss) => assert!(rss > 64 << 20),
        other => panic!("expected the memory cap, got {other:?}"),
    }
}

#[test]
fn a_run_not_started_can_be_taken_back_and_is_then_skipped() {
    let mut iso = faulty();
    let slow = run(&mut iso, [1.0; 4], 6.0); // 200 ms
    let behind = run(&mut iso, [7.0; 4], 0.0);
    let after = run(&mut iso, [8.0; 4], 0.0);
    assert!(iso.reclaim(behind));
    assert!(!iso.reclaim(behind), "once");
    assert_eq!(wait(&iso, after, None, None), Outcome::Done);
    assert!(iso.done(slow) && iso.done(behind));
    assert_eq!(output(&iso, after), [17.0; 4]);
    // The skipped frame still holds what was written; the child never computed it.
    assert_ne!(output(&iso, behind), [15.0; 4]);
    assert!(!iso.reclaim(after), "done: nothing to take back");
    // Its frame comes round again: what was written for it is not applied then.
    while iso.next_seq() % iso.frames() as u32 != behind % iso.frames() as u32 {
        let seq = iso.begin(SET, 0).unwrap();
        assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
    }
    iso.write_input(1, &f32s(&[0.0]), MARK_VALUES);
    let seq = iso.begin(RUN, 0).unwrap();
    assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
    assert_eq!(output(&iso, seq), [17.0; 4], "x is still the 8 the last run set, not the 7 taken back");
}

#[test]
fn an_error_the_child_reports_comes_back_with_its_code_and_message() {
    // A bool input of 2 is refused by the child's own check, named as in-process.
    let dtypes = Isolated::start(HOST, &common::build("dtypes", "dtypes.c", &[]), &env(), START).unwrap();
    let m = dtypes.signature.sources.iter().position(|s| s.name == "m").unwrap();
    let mut dtypes = dtypes;
    dtypes.write_input(m, &[0, 1, 2, 0, 1], MARK_VALUES);
    let seq = dtypes.begin(SET, 0).unwrap();
    assert_eq!(wait(&dtypes, seq, None, None), Outcome::Done);
    let err = dtypes.answer(seq).unwrap_err();
    assert_eq!(err.code(), "ERR_ZGC_VALUE");
    assert!(err.to_string().contains("\"m\""), "{err}");
    assert_eq!(err.detail(), Detail { source: Some("m".into()), ..Detail::default() });
    // When that frame holds a command again, a success is a success.
    let frames = dtypes.frames() as u32;
    let mut last = seq;
    for _ in 0..frames {
        last = dtypes.begin(SET, 0).unwrap();
        assert_eq!(wait(&dtypes, last, None, None), Outcome::Done);
    }
    assert_eq!(last % frames, seq % frames);
    dtypes.answer(last).unwrap();
}

#[test]
fn a_host_that_cannot_load_the_artifact_says_why() {
    let err = Isolated::start(HOST, "/nonexistent/model.so", &env(), START).err().unwrap();
    assert_eq!(err.code(), "ERR_ZGC_LOAD");
    let err = Isolated::start("/nonexistent/host", &common::build("faulty", "faulty.c", &[]), &env(), START).err().unwrap();
    assert_eq!(err.code(), "ERR_ZGC_INSTANCE_START");
    assert!(err.to_string().contains("cannot start the host program"), "{err}");
    let mut dying = env();
    dying.push("ZGC_FAULTY_ABORT_AT_LOAD=1".into());
    let err = Isolated::start(HOST, &common::build("faulty", "faulty.c", &[]), &dying, START).err().unwrap();
    assert_eq!(err.code(), "ERR_ZGC_INSTANCE_START");
    assert!(err.to_string().contains("signal 6 (SIGABRT) before it had loaded"), "{err}");
}

#[test]
fn storage_binds_a_slot_of_the_region_that_the_child_reads_in_place() {
    use zgc::isolate::STORAGE;
    let path = common::build("add-bound-4", "add_bound.c", &["N=4".into()]);
    let mut iso = Isolated::start(HOST, &path, &env(), START).unwrap();
    for index in 0..2u32 {
        let seq = iso.begin(STORAGE, index).unwrap();
        assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
        iso.answer(seq).unwrap();
    }
    let (a, _) = iso.layout.storage[0];
    let (b, _) = iso.layout.storage[1];
    iso.region.write(a, &f32s(&[1.0, 2.0, 3.0, 4.0]));
    iso.region.write(b, &f32s(&[10.0, 20.0, 30.0, 40.0]));
    let seq = iso.begin(RUN, 0).unwrap();
    assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
    iso.answer(seq).unwrap();
    assert_eq!(output(&iso, seq), [11.0, 22.0, 33.0, 44.0]);
    // Written in place again, read again: no copy was taken.
    iso.region.write(b, &f32s(&[0.5; 4]));
    // A pause long enough for the child to go to sleep on its socket: the next command wakes it.
    std::thread::sleep(Duration::from_millis(5));
    let seq = iso.begin(RUN, 0).unwrap();
    assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
    assert_eq!(output(&iso, seq), [1.5, 2.5, 3.5, 4.5]);
}

#[test]
fn inputs_written_for_a_command_never_sent_are_not_applied_later() {
    let mut iso = faulty();
    let seq = run(&mut iso, [1.0; 4], 0.0);
    assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
    // Written, then given up (a refused input): cleared, never applied.
    iso.write_input(1, &f32s(&[1.0]), MARK_VALUES);
    iso.clear_marks();
    iso.write_input(0, &f32s(&[2.0; 4]), MARK_VALUES);
    let seq = iso.begin(RUN, 0).unwrap();
    assert_eq!(wait(&iso, seq, None, None), Outcome::Done, "mode 1 (a segfault) was not applied");
    assert_eq!(output(&iso, seq), [5.0; 4]);
    // Written, then the child died before a command took them: the new child never sees them.
    iso.write_input(1, &f32s(&[1.0]), MARK_VALUES);
    iso.live().unwrap().process.kill();
    assert!(matches!(wait(&iso, iso.next_seq(), Some(Duration::from_secs(5)), None), Outcome::Exited(_)));
    iso.respawn(&env(), START).unwrap();
    iso.write_input(0, &f32s(&[3.0; 4]), MARK_VALUES);
    let seq = iso.begin(RUN, 0).unwrap();
    assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
    assert_eq!(output(&iso, seq), [7.0; 4]);
}

#[test]
fn an_artifact_status_comes_back_with_its_operation_and_source() {
    let mut iso = Isolated::start(HOST, &common::build("status", "status.c", &[]), &env(), START).unwrap();
    let names: Vec<String> = iso.signature.sources.iter().map(|s| s.name.clone()).collect();
    let index = |name: &str| names.iter().position(|n| n == name).unwrap();
    let (run_status, buf) = (index("run_status"), index("buf"));
    // buf is BOUND: a run without it fails in zgc_runtime_run, naming no one source.
    iso.write_input(run_status, &[0], MARK_VALUES);
    let seq = iso.begin(RUN, 0).unwrap();
    assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
    let err = iso.answer(seq).unwrap_err();
    assert_eq!(err.code(), "ERR_ZGC_MISSING_BINDING");
    assert_eq!(err.detail(), Detail { status: Some(8), operation: Some("zgc_runtime_run".into()), source: None, fault: None });
    // A status about one source names it: the fixture's bind returns bind_status (5).
    let bind_status = index("bind_status");
    iso.write_input(bind_status, &[5], MARK_VALUES);
    let seq = iso.begin(SET, 0).unwrap();
    assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
    iso.answer(seq).unwrap();
    iso.write_input(buf, &f32s(&[1.0, 2.0]), MARK_VALUES);
    let seq = iso.begin(SET, 0).unwrap();
    assert_eq!(wait(&iso, seq, None, None), Outcome::Done);
    let err = iso.answer(seq).unwrap_err();
    assert_eq!(err.code(), "ERR_ZGC_SIZE_MISMATCH");
    assert_eq!(err.detail(), Detail { status: Some(5), operation: Some("zgc_runtime_bind_source".into()), source: Some("buf".into()), fault: None });
    assert_eq!(err.to_string(), "zgc_runtime_bind_source returned SIZE_MISMATCH (status 5) for source \"buf\"");
}

/// Waits on a thread, so that a wait that never ends fails the test instead of hanging it.
fn wait_bounded(iso: &Isolated, seq: u32) -> Result<Outcome, std::sync::mpsc::RecvTimeoutError> {
    let (live, region) = (iso.live().unwrap(), iso.region.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child::wait(&live, &region, seq, None, None)));
    rx.recv_timeout(Duration::from_secs(30))
}

/// Spins until `cond` holds (a state the other side reaches by itself, not a timing).
fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let limit = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < limit, "never saw: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat[stat.rfind(')').unwrap() + 2..].chars().next().unwrap()
}

// Issue 46: under qemu-user a store then a load of the handshake words could be reordered, so
// that each side read the other's flag from before its store. Both lost wake-ups are made here
// by writing the flag the other side would have read, and each wait must still end.

#[test]
fn a_child_asleep_whose_wake_up_was_lost_is_woken_by_the_waiting_parent() {
    use zgc::isolate::CHILD_SLEEPS;
    use std::sync::atomic::Ordering;
    let mut iso = faulty();
    let pid = iso.pid().unwrap();
    let region = iso.region.clone();
    let sleeps = region.word(CHILD_SLEEPS);
    // Idle: it has said it sleeps, and sleeps in recv (the only place it blocks with its flag up).
    until("the child asleep on its socket", || sleeps.load(Ordering::SeqCst) == 1 && state(pid) == 'S');
    // The parent reads the flag as from before the child's store: it sends no byte.
    sleeps.store(0, Ordering::SeqCst);
    let seq = run(&mut iso, [1.0, 2.0, 3.0, 4.0], 0.0);
    sleeps.store(1, Ordering::SeqCst);
    assert_eq!(wait_bounded(&iso, seq), Ok(Outcome::Done), "the command waits for a child nobody woke");
    iso.answer(seq).unwrap();
    assert_eq!(output(&iso, seq), [3.0, 5.0, 7.0, 9.0]);
}

#[test]
fn a_parent_whose_wake_up_was_lost_sees_the_answer_anyway() {
    use zgc::isolate::PARENT_SLEEPS;
    use std::sync::atomic::Ordering;
    let dir = std::env::temp_dir().join(format!("zgc-hold-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hold = dir.join("release");
    let _ = std::fs::remove_file(&hold);
    let mut vars = env();
    vars.push(format!("ZGC_FAULTY_HOLD={}", hold.display()));
    let mut iso = Isolated::start(HOST, &common::build("faulty", "faulty.c", &[]), &vars, START).unwrap();
    // Mode 7: the run is held until the file exists.
    let seq = run(&mut iso, [1.0, 2.0, 3.0, 4.0], 7.0);
    let (live, shared) = (iso.live().unwrap(), iso.region.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child::wait(&live, &shared, seq, None, None)));
    let region = iso.region.clone();
    let sleeps = region.word(PARENT_SLEEPS);
    until("the parent's wait asleep", || sleeps.load(Ordering::SeqCst) == 1);
    // The child reads the parent's flag as from before its store: it will send no byte.
    sleeps.store(0, Ordering::SeqCst);
    std::fs::write(&hold, b"").unwrap();
    assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(Outcome::Done), "the parent waits for an answer that came");
    assert_eq!(output(&iso, seq), [3.0, 5.0, 7.0, 9.0]);
    std::fs::remove_dir_all(&dir).unwrap();
}
