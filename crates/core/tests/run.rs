//! The Rust core against real fixture libraries, without Node: compiled here with `cc` from
//! `__test__/fixtures/`, loaded, run and closed through `Artifact` and `Instance`. This is
//! also the suite run under valgrind memcheck (see README, Robustness).

mod common;
#[path = "common/lent.rs"]
mod lent;

use common::{build, fixtures};
use std::sync::Arc;
use zgc_runtime_core::dtype::Elements;
use zgc_runtime_core::instance::OutputData;
use zgc_runtime_core::{Artifact, Instance};

fn f32s(out: &OutputData) -> Vec<f32> {
    match out {
        OutputData::F32(v) => v.clone(),
        _ => panic!("not f32"),
    }
}

#[test]
fn add_runs_many_times_and_from_bytes() {
    let path = build("add", "add.c", &[]);
    let bytes = std::fs::read(&path).unwrap();
    for (artifact, shown) in [(Artifact::open(&path).unwrap(), path.as_str()), (Artifact::from_bytes(&bytes, "<bytes>").unwrap(), "<bytes>")] {
        // The path its errors and JavaScript's `artifact.path` name.
        assert_eq!(artifact.path(), shown);
        let artifact = Arc::new(artifact);
        let (a, b) = (artifact.source_index("a").unwrap(), artifact.source_index("b").unwrap());
        let mut rt = Instance::new(artifact.clone()).unwrap();
        for k in 0..100 {
            let x = [k as f32, 1.5, -2.0, 1e6];
            let y = [0.25, k as f32 * 2.0, 3.0, -1e6];
            rt.set(a, Elements::F32(&x)).unwrap();
            rt.set(b, Elements::F32(&y)).unwrap();
            rt.run().unwrap();
            let want: Vec<f32> = x.iter().zip(&y).map(|(p, q)| p + q).collect();
            assert_eq!(f32s(&rt.read_outputs(false).unwrap()[0]), want);
        }
    }
}

#[test]
fn dtypes_packs_every_bound_layout() {
    let artifact = Arc::new(Artifact::open(&build("dtypes", "dtypes.c", &[])).unwrap());
    let idx = |n: &str| artifact.source_index(n).unwrap();
    let mut rt = Instance::new(artifact.clone()).unwrap();
    let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    let wt = [0.5f32, -1.0, 2.0, 0.25, 4.0, -0.5];
    let wp = [1.0f32, 1.0, 2.0, 2.0, 3.0, 3.0];
    let wn = [0.0f32, 1.0, 0.0, 1.0, 0.0, 1.0];
    rt.set(idx("x"), Elements::F32(&x)).unwrap();
    rt.set(idx("wt"), Elements::F32(&wt)).unwrap();
    rt.set(idx("wp"), Elements::F32(&wp)).unwrap();
    rt.set(idx("wn"), Elements::F32(&wn)).unwrap();
    rt.set(idx("h"), Elements::F32(&[1.0, 2.0, 3.0, 4.0])).unwrap();
    rt.set(idx("hb"), Elements::F32(&[0.5, 0.25, 0.125])).unwrap();
    rt.set(idx("q"), Elements::I8(&[1, 2, 3, 4, 5])).unwrap();
    rt.set(idx("qb"), Elements::I8(&[1, -1, 2, -2])).unwrap();
    rt.set(idx("m"), Elements::U8(&[1, 0, 1, 0, 1])).unwrap();
    rt.set(idx("mb"), Elements::U8(&[1, 1, 0])).unwrap();
    rt.set(idx("g"), Elements::F32(&[3.5])).unwrap();
    rt.run().unwrap();
    let outputs = rt.read_outputs(false).unwrap();
    // o0 = x*wt + wp - wn + k[col], k = {0.5, -1, 2} (dtypes.c).
    let k = [0.5f32, -1.0, 2.0];
    let want: Vec<f32> = (0..6).map(|i| x[i] * wt[i] + wp[i] - wn[i] + k[i % 3]).collect();
    assert_eq!(f32s(&outputs[0]), want);
    assert_eq!(f32s(&outputs[5]), vec![7.0]);
}

#[test]
fn every_status_is_an_error_and_the_instance_stays_usable() {
    let artifact = Arc::new(Artifact::open(&build("status", "status.c", &[])).unwrap());
    let mut rt = Instance::new(artifact.clone()).unwrap();
    let run_status = artifact.source_index("run_status").unwrap();
    rt.set(artifact.source_index("buf").unwrap(), Elements::F32(&[1.0, 2.0])).unwrap();
    for (status, code) in [(1i8, "ERR_ZGC_INVALID_ARGUMENT"), (2, "ERR_ZGC_INVALID_RUNTIME_STORAGE"), (5, "ERR_ZGC_SIZE_MISMATCH"), (9, "ERR_ZGC_BUFFER_TOO_SMALL"), (42, "ERR_ZGC_UNKNOWN_STATUS"), (-3, "ERR_ZGC_UNKNOWN_STATUS")] {
        rt.set(run_status, Elements::I8(&[status])).unwrap();
        let err = rt.run().unwrap_err();
        assert_eq!(err.code(), code, "{err}");
        assert!(err.to_string().starts_with("zgc_runtime_run returned ") && err.to_string().contains(&format!("(status {status})")), "{err}");
    }
    rt.set(run_status, Elements::I8(&[0])).unwrap();
    rt.run().unwrap();
    let failing = build("status-init-fails", "status.c", &["INIT_STATUS=10".into()]);
    assert!(Instance::new(Arc::new(Artifact::open(&failing).unwrap())).is_err());
}

/// One `{ rule: 'X', code: 'Y', message: /Z/ }` entry of `__test__/fixtures/manifest.js`.
struct Rule {
    rule: String,
    code: String,
    /// The message pattern's literal runs, in order (the patterns use only `.*` between them).
    parts: Vec<String>,
}

fn quoted(text: &str, key: &str) -> String {
    let at = text.find(&format!("{key}: '")).unwrap_or_else(|| panic!("no {key} in {text}")) + key.len() + 3;
    text[at..at + text[at..].find('\'').unwrap()].to_owned()
}

fn rules() -> Vec<Rule> {
    let manifest = std::fs::read_to_string(fixtures().join("manifest.js")).unwrap();
    manifest
        .lines()
        .filter(|l| l.trim_start().starts_with("{ rule: '"))
        .map(|line| {
            let start = line.find("message: /").unwrap() + "message: /".len();
            let pattern = &line[start..start + line[start..].rfind('/').unwrap()];
            let parts = pattern
                .split(".*")
                .map(|run| {
                    let mut out = String::new();
                    let mut chars = run.chars();
                    while let Some(c) = chars.next() {
                        out.push(if c == '\\' { chars.next().unwrap() } else { c });
                    }
                    out
                })
                .collect();
            Rule { rule: quoted(line, "rule"), code: quoted(line, "code"), parts }
        })
        .collect()
}

#[test]
fn every_malformed_variant_is_refused_at_load_with_its_code_and_rule() {
    let rules = rules();
    assert_eq!(rules.len(), 30, "the manifest's malformed rules");
    for Rule { rule, code, parts } in rules {
        let path = build(&format!("malformed-{rule}"), "malformed.c", &[format!("BAD_{rule}")]);
        let err = match Artifact::open(&path).and_then(|a| Instance::new(Arc::new(a))) {
            Err(e) => e,
            Ok(_) => panic!("malformed-{rule} was accepted"),
        };
        assert_eq!(err.code(), code, "malformed-{rule}: {err}");
        let message = err.to_string();
        let mut from = 0;
        for part in &parts {
            let at = message[from..].find(part.as_str()).unwrap_or_else(|| panic!("malformed-{rule}: {message:?} lacks {part:?}"));
            from += at + part.len();
        }
    }
    let base = Artifact::open(&build("malformed-base", "malformed.c", &[])).unwrap();
    Instance::new(Arc::new(base)).unwrap();
}

/// The run protocol (`zgc_runtime_core::run`): inputs bound or copied, one run, outputs copied out.
mod protocol {
    use super::*;
    use zgc_runtime_core::dtype::{ArrayKind, ElementsMut};
    use zgc_runtime_core::executor::Core;
    use zgc_runtime_core::ffi::memory::{elements_mut, AlignedBuf};
    use zgc_runtime_core::engine::Engine;
    use zgc_runtime_core::run::{takes_as_storage, Input, Run};

    fn status() -> Arc<Artifact> {
        Arc::new(Artifact::open(&build("status", "status.c", &[])).unwrap())
    }

    #[test]
    fn storage_is_bound_and_values_are_copied_then_the_run_is_copied_out() {
        let artifact = status();
        let (run_status, buf) = (artifact.source_index("run_status").unwrap(), artifact.source_index("buf").unwrap());
        let core = Core::new(Engine::Local(Instance::new(artifact.clone()).unwrap()));
        let mut instance = core.lock().unwrap();
        // buf is BOUND: its storage, bound without a copy, then changed in place between runs.
        let mut storage = AlignedBuf::zeroed(8, 64).unwrap();
        elements_mut::<f32>(storage.as_bytes_mut()).unwrap().copy_from_slice(&[1.5, 2.5]);
        let mut run = Run::begin(&core, &mut instance);
        run.input(run_status, Input::Values(Elements::I8(&[0]))).unwrap();
        run.input(buf, Input::Storage { kind: ArrayKind::F32, region: Box::new(storage) }).unwrap();
        let mut out = [0f32];
        run.run().unwrap().copy(0, ElementsMut::F32(&mut out)).unwrap();
        assert_eq!(out, [4.0]);
        // Values for the BOUND source are copied into storage it owns; the status input decides.
        let mut run = Run::begin(&core, &mut instance);
        run.input(buf, Input::Values(Elements::F32(&[10.0, -3.0]))).unwrap();
        run.run().unwrap().copy(0, ElementsMut::F32(&mut out)).unwrap();
        assert_eq!(out, [7.0]);
        let mut run = Run::begin(&core, &mut instance);
        run.input(run_status, Input::Values(Elements::I8(&[5]))).unwrap();
        assert_eq!(run.run().err().unwrap().code(), "ERR_ZGC_SIZE_MISMATCH");
        // A refused input stops the run there; the instance stays usable.
        let mut run = Run::begin(&core, &mut instance);
        assert_eq!(run.input(run_status, Input::Values(Elements::F32(&[0.0]))).unwrap_err().code(), "ERR_ZGC_DTYPE");
        assert_eq!(run.input(buf, Input::Storage { kind: ArrayKind::I8, region: Box::new(AlignedBuf::zeroed(8, 64).unwrap()) }).unwrap_err().code(), "ERR_ZGC_DTYPE");
        assert_eq!(run.description().sources.len(), 4);
        run.input(run_status, Input::Values(Elements::I8(&[0]))).unwrap();
        run.run().unwrap().copy(0, ElementsMut::F32(&mut out)).unwrap();
        assert_eq!(out, [7.0]);
    }

    #[test]
    fn storage_lent_to_a_run_is_given_back_after_it_whether_it_ran_or_failed() {
        let artifact = status();
        let (run_status, buf) = (artifact.source_index("run_status").unwrap(), artifact.source_index("buf").unwrap());
        let mut instance = Engine::Local(Instance::new(artifact.clone()).unwrap());
        instance.set(buf, Elements::F32(&[1.0, 2.0])).unwrap();
        let lent = Arc::new(artifact.lendable_storage(buf, Some(Elements::F32(&[100.0, 200.0]))).unwrap());
        let staged = |status: i8| [artifact.stage_values(run_status, Elements::I8(&[status])).unwrap().into_owned(), artifact.stage_lent(buf, lent.clone()).unwrap()];
        let mut displaced = Vec::new();
        // Off the caller's thread, as a worker runs: the lent storage is read, the outputs read out.
        let mut run = Run::off_thread(&mut instance, &mut displaced);
        for feed in staged(0) {
            run.input(feed.index(), Input::Staged(feed)).unwrap();
        }
        let out = run.run_detached(&[]).unwrap().read(false).unwrap();
        assert_eq!(f32s(&out[0]), [300.0]);
        // A run that fails gives the loan back too.
        let mut run = Run::off_thread(&mut instance, &mut displaced);
        for feed in staged(5) {
            run.input(feed.index(), Input::Staged(feed)).unwrap();
        }
        assert_eq!(run.run_detached(&[]).err().unwrap().code(), "ERR_ZGC_SIZE_MISMATCH");
        assert_eq!(Arc::strong_count(&lent), 1, "no binding holds the lent storage after its runs");
        // The instance's own storage is bound again: the next plain run reads 1 + 2.
        let mut run = Run::owned(&mut instance);
        run.input(run_status, Input::Values(Elements::I8(&[0]))).unwrap();
        let mut y = [0f32];
        run.run().unwrap().copy(0, ElementsMut::F32(&mut y)).unwrap();
        assert_eq!(y, [3.0]);
        // Physical storage handed over to be copied, as a host child's frame is: not bound.
        let mut frame = [7.0f32, 8.0];
        let mut run = Run::owned(&mut instance);
        run.input(buf, Input::StorageCopy(Elements::F32(&frame))).unwrap();
        frame[0] = 1000.0;
        std::hint::black_box(&frame);
        run.run().unwrap().copy(0, ElementsMut::F32(&mut y)).unwrap();
        assert_eq!(y, [15.0]);
        assert!(displaced.is_empty(), "runtime-owned bindings displaced are dropped, not handed back");
    }

    #[test]
    fn a_caller_s_region_displaced_off_its_thread_is_handed_back_to_drop_there() {
        let artifact = status();
        let (run_status, buf) = (artifact.source_index("run_status").unwrap(), artifact.source_index("buf").unwrap());
        let core = Core::new(Engine::Local(Instance::new(artifact.clone()).unwrap()));
        let mut instance = core.lock().unwrap();
        let mut run = Run::begin(&core, &mut instance);
        let mut lent = AlignedBuf::zeroed(8, 64).unwrap();
        elements_mut::<f32>(lent.as_bytes_mut()).unwrap().copy_from_slice(&[1.0, 2.0]);
        run.input(buf, Input::Storage { kind: ArrayKind::F32, region: Box::new(lent::Lent(lent)) }).unwrap();
        run.input(run_status, Input::Values(Elements::I8(&[0]))).unwrap();
        drop(run.run().unwrap());
        assert!(instance.has_caller_storage());
        // A worker's staged storage replaces it: the caller's region comes back, not dropped there.
        let mut displaced = Vec::new();
        let mut run = Run::off_thread(&mut instance, &mut displaced);
        let staged = artifact.stage_storage(buf, Elements::F32(&[5.0, 6.0])).unwrap();
        run.input(buf, Input::Staged(staged)).unwrap();
        let out = run.run_detached(&[]).unwrap().read(false).unwrap();
        assert_eq!(f32s(&out[0]), [11.0]);
        assert_eq!(displaced.len(), 1);
        assert!(displaced[0].caller_owned());
        assert!(!instance.has_caller_storage());
    }

    #[test]
    fn storage_is_the_bound_source_s_own_array_of_its_physical_length() {
        let artifact = status();
        let buf = &artifact.sources[artifact.source_index("buf").unwrap()];
        let owned = &artifact.sources[artifact.source_index("run_status").unwrap()];
        assert!(takes_as_storage(buf, Some(ArrayKind::F32), 2));
        assert!(!takes_as_storage(buf, Some(ArrayKind::F32), 1));
        assert!(!takes_as_storage(buf, Some(ArrayKind::F64), 2));
        assert!(!takes_as_storage(buf, None, 2), "an array of no kind the runtime reads");
        assert!(!takes_as_storage(owned, Some(ArrayKind::I8), 1), "an OWNED source takes values only");
        // Not the identity layout: a padded one's physical length (9 for 6 values) is storage;
        // a transposed one's is its logical length too, and is taken as values.
        let dtypes = Artifact::open(&build("dtypes", "dtypes.c", &[])).unwrap();
        let source = |name: &str| dtypes.sources[dtypes.source_index(name).unwrap()].clone();
        assert!(takes_as_storage(&source("wp"), Some(ArrayKind::F32), 9));
        assert!(!takes_as_storage(&source("wp"), Some(ArrayKind::F32), 6));
        assert!(!takes_as_storage(&source("wt"), Some(ArrayKind::F32), 6));
    }
}
