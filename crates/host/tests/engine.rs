//! An isolated instance as the engine drives it (`isolate::instance`), without Node: the run
//! protocol over real host processes, their faults as errors with their properties, and what
//! a new process is given again.
#![cfg(target_os = "linux")]

#[path = "../../core/tests/common/mod.rs"]
mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;
use zgc::dtype::{Elements, ElementsMut};
use zgc::engine::Engine;
use zgc::error::{Error, Fault};
use zgc::isolate::instance::{IsolatedInstance, Options};
use zgc::run::{Input, Run};

const HOST: &str = env!("CARGO_BIN_EXE_zgc-runtime-host");

fn options() -> Options {
    Options { host: HOST.into(), env: std::env::vars().map(|(k, v)| format!("{k}={v}")).collect(), start_timeout: Duration::from_secs(10), timeout_ms: None, max_memory_mb: None }
}

fn faulty(options: Options) -> Engine {
    Engine::Isolated(Box::new(IsolatedInstance::start(&common::build("faulty", "faulty.c", &[]), options).unwrap()))
}

/// One run of the faulty fixture (`mode` 0 answers x * 2 + 1), its output or its error.
fn run(engine: &mut Engine, x: [f32; 4], mode: f32, timeout_ms: Option<f64>) -> Result<Vec<f32>, Error> {
    let mut run = Run::owned(engine).timeout(timeout_ms);
    run.input(0, Input::Values(Elements::F32(&x)))?;
    run.input(1, Input::Values(Elements::F32(&[mode])))?;
    run.input(2, Input::Values(Elements::F32(&[0.0])))?;
    let mut out = vec![0f32; 4];
    run.run()?.copy(0, ElementsMut::F32(&mut out))?;
    Ok(out)
}

fn faults(engine: &mut Engine) -> [u64; 4] {
    let c = engine.isolated().unwrap().control();
    [&c.faults.crashes, &c.faults.restarts, &c.faults.timeouts, &c.faults.start_failures].map(|n| n.load(Ordering::Relaxed))
}

#[test]
fn a_crash_fails_its_run_with_the_signal_and_the_next_run_answers_on_a_new_process() {
    let mut engine = faulty(options());
    assert_eq!(run(&mut engine, [1.0, 2.0, 3.0, 4.0], 0.0, None).unwrap(), [3.0, 5.0, 7.0, 9.0]);
    let pid = engine.isolated().unwrap().control().pid().unwrap();
    let err = run(&mut engine, [1.0; 4], 1.0, None).unwrap_err();
    assert_eq!(err.code(), "ERR_ZGC_INSTANCE_CRASHED");
    assert!(err.to_string().contains(&format!("(pid {pid}) was killed by signal 11 (SIGSEGV) during this run")), "{err}");
    match err.detail().fault.as_deref() {
        Some(Fault::Crashed { signal: Some("SIGSEGV"), exit_code: None, .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(faults(&mut engine), [1, 1, 0, 0]);
    assert_ne!(engine.isolated().unwrap().control().pid(), Some(pid));
    assert_eq!(run(&mut engine, [0.0; 4], 0.0, None).unwrap(), [1.0; 4]);
}

#[test]
fn a_run_past_its_deadline_is_killed_and_says_which_deadline() {
    let mut engine = faulty(Options { timeout_ms: Some(5000.0), ..options() });
    // Mode 4 never ends: the run's own deadline, not the instance's, stops it.
    let err = run(&mut engine, [1.0; 4], 4.0, Some(50.0)).unwrap_err();
    assert_eq!(err.code(), "ERR_ZGC_TIMEOUT");
    assert!(err.to_string().contains("did not finish within timeoutMs 50;"), "{err}");
    assert!(matches!(err.detail().fault.as_deref(), Some(Fault::Timeout { timeout_ms, .. }) if timeout_ms.0 == 50.0));
    assert_eq!(faults(&mut engine), [0, 1, 1, 0]);
    assert_eq!(run(&mut engine, [0.0; 4], 0.0, None).unwrap(), [1.0; 4]);
}

#[test]
fn values_set_are_given_again_to_a_new_process() {
    let add = common::build("add", "add.c", &[]);
    let mut engine = Engine::Isolated(Box::new(IsolatedInstance::start(&add, options()).unwrap()));
    engine.set(1, Elements::F32(&[10.0, 20.0, 30.0, 40.0])).unwrap();
    let pid = engine.isolated().unwrap().control().pid().unwrap();
    let sum = |engine: &mut Engine| -> Result<Vec<f32>, Error> {
        let mut run = Run::owned(engine);
        run.input(0, Input::Values(Elements::F32(&[1.0, 2.0, 3.0, 4.0])))?;
        let mut out = vec![0f32; 4];
        run.run()?.copy(0, ElementsMut::F32(&mut out))?;
        Ok(out)
    };
    assert_eq!(sum(&mut engine).unwrap(), [11.0, 22.0, 33.0, 44.0]);
    // Its process dies as a crashed artifact would.
    std::process::Command::new("kill").args(["-9", &pid.to_string()]).status().unwrap();
    assert_eq!(sum(&mut engine).unwrap_err().code(), "ERR_ZGC_INSTANCE_CRASHED");
    assert_eq!(sum(&mut engine).unwrap(), [11.0, 22.0, 33.0, 44.0], "b given again");
}

#[test]
fn inputs_of_a_run_that_fails_before_it_is_sent_are_not_applied_later() {
    let mut engine = faulty(options());
    {
        let mut bad = Run::owned(&mut engine);
        bad.input(0, Input::Values(Elements::F32(&[9.0; 4]))).unwrap();
        assert_eq!(bad.input(1, Input::Values(Elements::F32(&[1.0, 2.0]))).unwrap_err().code(), "ERR_ZGC_SIZE");
    }
    // Only mode and id given: x is what it was (zeros), not the 9s of the refused run.
    let mut run = Run::owned(&mut engine);
    run.input(1, Input::Values(Elements::F32(&[0.0]))).unwrap();
    run.input(2, Input::Values(Elements::F32(&[0.0]))).unwrap();
    let mut out = vec![0f32; 4];
    run.run().unwrap().copy(0, ElementsMut::F32(&mut out)).unwrap();
    assert_eq!(out, [1.0; 4]);
}

#[test]
fn an_instance_whose_file_is_gone_is_given_up_after_its_attempts() {
    let dir = std::env::temp_dir().join(format!("zgc-engine-gone-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("faulty.so");
    std::fs::copy(common::build("faulty", "faulty.c", &[]), &copy).unwrap();
    let mut engine = Engine::Isolated(Box::new(IsolatedInstance::start(copy.to_str().unwrap(), options()).unwrap()));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(run(&mut engine, [1.0; 4], 1.0, None).unwrap_err().code(), "ERR_ZGC_INSTANCE_CRASHED");
    // A sync caller is refused while a restart is not due; then waits it out.
    let mut seen = Vec::new();
    for _ in 0..5 {
        let code = run(&mut engine, [1.0; 4], 0.0, None).unwrap_err().code();
        seen.push(code);
        if code == "ERR_ZGC_INSTANCE_FAILED" {
            break;
        }
        std::thread::sleep(Duration::from_millis(1100));
    }
    assert_eq!(seen.last(), Some(&"ERR_ZGC_INSTANCE_FAILED"), "{seen:?}");
    let failure = engine.failed().unwrap();
    assert!(failure.to_string().contains("could not be restarted after 5 attempts"), "{failure}");
    assert_eq!(faults(&mut engine)[3], 5);
    assert!(!engine.isolated().unwrap().control().alive());
}
