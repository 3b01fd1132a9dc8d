//! The binding of isolated instances (`isolate: 'process'`): one `NativeIsolate` per
//! instance, driven by `lib/isolate/`. Commands are sent from the JavaScript thread; a
//! wait for one happens there (short spins, synchronous calls) or on the instance's waiter
//! thread, which settles a promise through a threadsafe function.

use crate::artifact::{describe, ArtifactDescription};
use crate::errors::{js_err, napi_err, thrown, unsupported, Code, Thrown};
use crate::runtime::is_storage;
use zgc::abi::DType;
use zgc::dtype::{self, Elements};
use zgc::error::Error;
use zgc::instance::{check_storage, logical_bytes, OutputData};
use zgc::isolate::child::{self, describe_exit, signal_name, Isolated, Live, Outcome};
use zgc::isolate::{F_STATUS, MARK_STORAGE, MARK_VALUES, RUN, SET, STORAGE};
use crate::js::{self, JsArray};
use zgc::ffi::process::{Exit, SharedRegion};
use crate::tsfn::{Deferred, Tsfn};
use napi::bindgen_prelude::{TypedArray, Unknown};
use napi::Env;
use napi_derive::napi;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Outcome codes `wait` and `waitSync` give JavaScript.
const DONE: u32 = 0;
const EXITED: u32 = 1;
const TIMEOUT: u32 = 2;
const MEMORY: u32 = 3;

/// What the facade (lib/isolate/) needs of the region's protocol to read and write it itself:
/// the commands, the mark of values set in a frame, the word `DONE` is in, and the outcome
/// codes `poll`, `waitSync` and `wait` give. The core owns the layout; these are its numbers.
#[napi(object)]
pub struct IsolateProtocol {
    pub run: u32,
    pub set: u32,
    pub storage: u32,
    pub mark_values: u32,
    /// The index of the `DONE` word among the region's u32 words.
    pub done_word: u32,
    pub done: u32,
    pub exited: u32,
    pub timeout: u32,
    pub memory: u32,
}

#[napi]
pub fn isolate_protocol() -> IsolateProtocol {
    IsolateProtocol {
        run: RUN,
        set: SET,
        storage: STORAGE,
        mark_values: MARK_VALUES,
        done_word: (zgc::isolate::DONE / 4) as u32,
        done: DONE,
        exited: EXITED,
        timeout: TIMEOUT,
        memory: MEMORY,
    }
}

struct WaitJob {
    live: Arc<Live>,
    region: Arc<SharedRegion>,
    seq: u32,
    until: Option<Instant>,
    max_rss: Option<u64>,
    deferred: Deferred,
}

struct WaitDone {
    outcome: Outcome,
    stderr: String,
    deferred: Deferred,
}

/// The waiter thread and the way back from it.
struct Waiter {
    jobs: Sender<WaitJob>,
    tsfn: Arc<Tsfn<WaitDone>>,
}

/// What the last wait that did not end in `Done` saw, for `lastExit()`.
#[derive(Default)]
struct LastExit {
    signal: Option<i32>,
    code: Option<i32>,
    stderr: String,
    rss: Option<u64>,
}

#[napi(object)]
pub struct ExitInfo {
    pub signal: Option<String>,
    pub exit_code: Option<i32>,
    pub stderr: String,
    pub resident_bytes: Option<f64>,
    pub description: String,
}

#[napi]
pub struct NativeIsolate {
    inner: RefCell<Option<Isolated>>,
    waiter: RefCell<Option<Waiter>>,
    last: Rc<RefCell<LastExit>>,
    /// Waits handed to the waiter thread and not settled: the event loop stays alive for them.
    outstanding: Rc<Cell<usize>>,
}

fn ms(v: f64) -> Option<Duration> {
    (v.is_finite() && v > 0.0).then(|| Duration::from_secs_f64(v / 1000.0))
}

fn code_of(outcome: &Outcome) -> u32 {
    match outcome {
        Outcome::Done => DONE,
        Outcome::Exited(_) => EXITED,
        Outcome::Timeout => TIMEOUT,
        Outcome::Memory(_) => MEMORY,
    }
}

fn record(last: &RefCell<LastExit>, outcome: &Outcome, stderr: String) {
    let mut l = last.borrow_mut();
    *l = LastExit { stderr, ..LastExit::default() };
    match outcome {
        Outcome::Exited(Exit::Signal(s)) => l.signal = Some(*s),
        Outcome::Exited(Exit::Code(c)) => l.code = Some(*c),
        Outcome::Timeout => l.signal = Some(libc::SIGKILL),
        Outcome::Memory(rss) => {
            l.signal = Some(libc::SIGKILL);
            l.rss = Some(*rss);
        }
        Outcome::Done => {}
    }
}

impl NativeIsolate {
    fn with<R>(&self, f: impl FnOnce(&mut Isolated) -> Result<R, Error>) -> napi::Result<R, Code> {
        let mut inner = self.inner.borrow_mut();
        let iso = inner.as_mut().ok_or_else(|| js_err(Error::Closed))?;
        f(iso).map_err(js_err)
    }

    fn waiter(&self, env: &Env) -> napi::Result<(Sender<WaitJob>, Arc<Tsfn<WaitDone>>), Code> {
        if let Some(w) = self.waiter.borrow().as_ref() {
            return Ok((w.jobs.clone(), w.tsfn.clone()));
        }
        let (last, outstanding) = (self.last.clone(), self.outstanding.clone());
        let handler = Box::new(move |env: napi::sys::napi_env, done: WaitDone| {
            record(&last, &done.outcome, done.stderr);
            outstanding.set(outstanding.get().saturating_sub(1));
            done.deferred.resolve(env, js::number(env, f64::from(code_of(&done.outcome))));
        });
        let tsfn = Arc::new(
            Tsfn::create(env.raw(), 2, handler).map_err(|s| napi::Error::new(Code::of("ERR_ZGC_NAPI"), format!("cannot create a threadsafe function (status {s})")))?,
        );
        let (jobs, queue) = channel::<WaitJob>();
        let thread_tsfn = tsfn.clone();
        let spawned = std::thread::Builder::new().name("zgc-isolate-wait".into()).spawn(move || {
            for job in queue {
                let outcome = child::wait(&job.live, &job.region, job.seq, job.until, job.max_rss);
                let stderr = if outcome == Outcome::Done { String::new() } else { job.live.process.stderr_tail(4000) };
                drop(job.live);
                if let Err(lost) = thread_tsfn.send(WaitDone { outcome, stderr, deferred: job.deferred }) {
                    // The environment is going away: nothing can be settled.
                    std::mem::forget(lost);
                }
            }
            thread_tsfn.release();
        });
        if spawned.is_err() {
            tsfn.release();
            tsfn.release();
            return Err(js_err(Error::Host { path: String::new(), reason: "cannot start a waiter thread".into() }));
        }
        *self.waiter.borrow_mut() = Some(Waiter { jobs: jobs.clone(), tsfn: tsfn.clone() });
        Ok((jobs, tsfn))
    }
}

#[napi]
impl NativeIsolate {
    /// Starts the host child for `path` with environment `env` (blocking until it has loaded
    /// and validated the artifact, or `start_timeout_ms`).
    #[napi(factory)]
    pub fn start(js_env: &Env, host: String, path: String, env: Vec<String>, start_timeout_ms: f64) -> Result<NativeIsolate, Thrown> {
        (|| {
            let timeout = ms(start_timeout_ms).unwrap_or(Duration::from_secs(30));
            let iso = Isolated::start(&host, &path, &env, timeout).map_err(js_err)?;
            Ok(NativeIsolate { inner: RefCell::new(Some(iso)), waiter: RefCell::new(None), last: Rc::default(), outstanding: Rc::default() })
        })()
        .map_err(thrown(js_env))
    }

    #[napi]
    pub fn describe(&self, env: &Env) -> Result<ArtifactDescription, Thrown> {
        (|| {
            self.with(|iso| Ok(describe(&iso.signature)))
        })()
        .map_err(thrown(env))
    }

    #[napi(getter)]
    pub fn pid(&self) -> Option<u32> {
        self.inner.borrow().as_ref().and_then(Isolated::pid)
    }

    /// Checks `values` for source `index` as an in-process instance would and writes them
    /// into its input slot, for the next command.
    /// `as_storage`: the array is the source's physical storage (`bind()`), whatever its layout.
    #[napi]
    pub fn write(&self, env: &Env, index: u32, values: TypedArray<'_>, as_storage: bool) -> Result<(), Thrown> {
        (|| {
            let values = JsArray::of(&values);
            self.with(|iso| {
                let index = index as usize;
                let source = iso.signature.sources.get(index).ok_or_else(|| Error::UnknownSource { name: format!("#{index}"), known: String::new() })?.clone();
                let view = values.view().ok_or_else(|| unsupported(&source, &values))?;
                if as_storage || is_storage(&source, &values) {
                    let bytes = view.bytes();
                    check_storage(&source, view.kind(), bytes.len())?;
                    if let (DType::Bool, Elements::U8(v)) = (source.tensor.dtype, view) {
                        dtype::check_bool(&source.name, v)?;
                    }
                    iso.write_input(index, bytes, MARK_STORAGE);
                } else {
                    let bytes = logical_bytes(&source, view)?;
                    iso.write_input(index, &bytes, MARK_VALUES);
                }
                Ok(())
            })
        })()
        .map_err(thrown(env))
    }

    /// Forgets inputs written for a command that will not be sent.
    #[napi]
    pub fn clear_marks(&self, env: &Env) -> Result<(), Thrown> {
        (|| {
            self.with(|iso| {
                iso.clear_marks();
                Ok(())
            })
        })()
        .map_err(thrown(env))
    }

    /// Sends a command (1 run, 2 set, 3 storage of source `arg`); returns its number.
    #[napi]
    pub fn begin(&self, env: &Env, cmd: u32, arg: u32) -> Result<u32, Thrown> {
        (|| {
            self.with(|iso| iso.begin(cmd, arg))
        })()
        .map_err(thrown(env))
    }

    /// Whether command `seq` is done, after spinning for at most `spin_us` on this thread.
    #[napi]
    pub fn poll(&self, env: &Env, seq: u32, spin_us: f64) -> Result<bool, Thrown> {
        (|| {
            let region = self.with(|iso| Ok(iso.region.clone()))?;
            let done = || child::is_done(&region, seq);
            Ok(zgc::ffi::process::spin_until(done, Duration::from_secs_f64(spin_us.max(0.0) / 1e6)))
        })()
        .map_err(thrown(env))
    }

    /// Takes back command `seq` if its child has not started it (see `Isolated::reclaim`).
    #[napi]
    pub fn reclaim(&self, seq: u32) -> bool {
        self.inner.borrow().as_ref().is_some_and(|iso| iso.reclaim(seq))
    }

    /// Whether command `seq` is done, without waiting.
    #[napi]
    pub fn done(&self, seq: u32) -> bool {
        self.inner.borrow().as_ref().is_some_and(|iso| iso.done(seq))
    }

    /// Waits on this thread for command `seq`: 0 done, 1 the child died, 2 timed out, 3 over
    /// its memory cap (the child killed for the last two).
    #[napi]
    pub fn wait_sync(&self, env: &Env, seq: u32, timeout_ms: f64, max_rss: f64) -> Result<u32, Thrown> {
        (|| {
            let (live, region) = self.with(|iso| Ok((iso.live(), iso.region.clone())))?;
            let Some(live) = live else { return Err(js_err(Error::Closed)) };
            let until = ms(timeout_ms).map(|d| Instant::now() + d);
            let cap = (max_rss > 0.0).then_some(max_rss as u64);
            let outcome = child::wait(&live, &region, seq, until, cap);
            let stderr = if outcome == Outcome::Done { String::new() } else { live.process.stderr_tail(4000) };
            record(&self.last, &outcome, stderr);
            Ok(code_of(&outcome))
        })()
        .map_err(thrown(env))
    }

    /// `wait_sync` on the waiter thread: a promise of the same code.
    #[napi]
    pub fn wait<'env>(&self, env: &'env Env, seq: u32, timeout_ms: f64, max_rss: f64) -> Result<Unknown<'env>, Thrown> {
        (|| {
            let (live, region) = self.with(|iso| Ok((iso.live(), iso.region.clone())))?;
            let Some(live) = live else { return Err(js_err(Error::Closed)) };
            let (jobs, tsfn) = self.waiter(env)?;
            let (deferred, promise) = Deferred::new(env.raw()).map_err(|s| napi::Error::new(Code::of("ERR_ZGC_NAPI"), format!("cannot create a promise (status {s})")))?;
            let until = ms(timeout_ms).map(|d| Instant::now() + d);
            let cap = (max_rss > 0.0).then_some(max_rss as u64);
            if let Err(lost) = jobs.send(WaitJob { live, region, seq, until, max_rss: cap, deferred }) {
                lost.0.deferred.reject(env.raw(), js::error_object(env.raw(), "ERR_ZGC_CLOSED", "runtime is closed"));
            } else {
                if self.outstanding.get() == 0 {
                    tsfn.keep_loop(env.raw(), true);
                }
                self.outstanding.set(self.outstanding.get() + 1);
            }
            Ok(js::unknown(env, promise))
        })()
        .map_err(thrown(env))
    }

    /// Lets the event loop end while no wait is outstanding (called by the facade after each).
    #[napi]
    pub fn idle(&self, env: &Env) {
        if self.outstanding.get() == 0 {
            if let Some(w) = self.waiter.borrow().as_ref() {
                w.tsfn.keep_loop(env.raw(), false);
            }
        }
    }

    /// How the child ended, as the last wait saw it.
    #[napi]
    pub fn last_exit(&self) -> ExitInfo {
        let l = self.last.borrow();
        let description = match (l.rss, l.signal, l.code) {
            (Some(rss), _, _) => format!("was killed at {} MiB of resident memory", rss >> 20),
            (None, Some(s), _) => describe_exit(&Exit::Signal(s)),
            (None, None, Some(c)) => describe_exit(&Exit::Code(c)),
            _ => String::new(),
        };
        ExitInfo {
            signal: l.signal.map(|s| signal_name(s).to_owned()),
            exit_code: l.code,
            stderr: l.stderr.clone(),
            resident_bytes: l.rss.map(|r| r as f64),
            description,
        }
    }

    /// The number the next command will get (its frame is where its inputs go).
    #[napi(getter)]
    pub fn next_seq(&self) -> u32 {
        self.inner.borrow().as_ref().map_or(0, |iso| iso.next_seq())
    }

    /// The frame (an index into `frameLayout()`) of command `seq`.
    #[napi]
    pub fn frame_of(&self, seq: u32) -> u32 {
        self.inner.borrow().as_ref().map_or(0, |iso| iso.layout.frame_index(seq) as u32)
    }

    /// How many commands may be handed over at once.
    #[napi(getter)]
    pub fn frames(&self) -> u32 {
        self.inner.borrow().as_ref().map_or(1, |iso| iso.frames() as u32)
    }

    /// The child's answer to command `seq`: throws the error it reported.
    #[napi]
    pub fn answer(&self, env: &Env, seq: u32) -> Result<(), Thrown> {
        (|| {
            self.with(|iso| iso.answer(seq))
        })()
        .map_err(thrown(env))
    }

    /// Every output of run `seq`, in new arrays (f16 decoded unless `f16_bits`).
    #[napi]
    pub fn outputs<'env>(&self, env: &'env Env, seq: u32, f16_bits: bool) -> Result<Vec<Unknown<'env>>, Thrown> {
        (|| {
            let count = self.with(|iso| Ok(iso.signature.outputs.len()))?;
            (0..count).map(|i| self.output_of(env, seq, i as u32, f16_bits)).collect::<napi::Result<Vec<_>, Code>>()
        })()
        .map_err(thrown(env))
    }

    #[napi]
    pub fn output<'env>(&self, env: &'env Env, seq: u32, index: u32, f16_bits: bool) -> Result<Unknown<'env>, Thrown> {
        self.output_of(env, seq, index, f16_bits).map_err(thrown(env))
    }

    fn output_of<'env>(&self, env: &'env Env, seq: u32, index: u32, f16_bits: bool) -> napi::Result<Unknown<'env>, Code> {
        let data = self.with(|iso| {
            let info = iso.signature.outputs.get(index as usize).ok_or(Error::OutputIndex { index: i64::from(index), count: iso.signature.outputs.len() })?;
            let n = info.logical_count;
            // Straight from the region into the vector that becomes the array: one copy.
            let (at, len) = iso.output_slot(seq, index as usize);
            let read = |out: &mut [u8]| {
                debug_assert_eq!(out.len(), len);
                iso.region.read(at, out);
            };
            Ok(match info.dtype {
                DType::F32 => {
                    let mut v = vec![0f32; n];
                    read(zgc::ffi::memory::bytes_of_mut(&mut v));
                    OutputData::F32(v)
                }
                DType::F16 => {
                    let mut bits = vec![0u16; n];
                    read(zgc::ffi::memory::bytes_of_mut(&mut bits));
                    if f16_bits {
                        OutputData::U16(bits)
                    } else {
                        let mut out = vec![0.0f32; n];
                        dtype::decode_f16(&bits, &mut out);
                        OutputData::F32(out)
                    }
                }
                DType::I8 => {
                    let mut v = vec![0i8; n];
                    read(zgc::ffi::memory::bytes_of_mut(&mut v));
                    OutputData::I8(v)
                }
                DType::Bool => {
                    let mut v = vec![0u8; n];
                    read(&mut v);
                    OutputData::U8(v)
                }
            })
        })?;
        let value = js::output_value(env.raw(), data).map_err(napi_err)?;
        Ok(js::unknown(env, value))
    }

    /// An ArrayBuffer over the whole shared region (null where external buffers are forbidden).
    #[napi]
    pub fn region<'env>(&self, env: &'env Env) -> Result<Option<Unknown<'env>>, Thrown> {
        (|| {
            let region = self.with(|iso| Ok(iso.region.clone()))?;
            Ok(js::region_buffer(env.raw(), &region).map_err(napi_err)?.map(|v| js::unknown(env, v)))
        })()
        .map_err(thrown(env))
    }

    /// Where each frame is in the region, for the facade's own reads and writes of it: per
    /// frame `[statusWord, firstMarkWord, inputs (offset, length)..., outputs (offset, length)...]`,
    /// the first two as indices of the region's u32 words, the slots in bytes.
    #[napi]
    pub fn frame_layout(&self, env: &Env) -> Result<Vec<Vec<f64>>, Thrown> {
        (|| {
            self.with(|iso| {
                Ok(iso
                    .layout
                    .frames
                    .iter()
                    .map(|f| {
                        let mut v = vec![((f.at + F_STATUS) / 4) as f64, (f.mark(0) / 4) as f64];
                        for &(at, len) in f.inputs.iter().chain(&f.outputs) {
                            v.push(at as f64);
                            v.push(len as f64);
                        }
                        v
                    })
                    .collect())
            })
        })()
        .map_err(thrown(env))
    }

    /// `[byteOffset, byteLength]` of source `index`'s storage slot in the region.
    #[napi]
    pub fn storage_slot(&self, env: &Env, index: u32) -> Result<Vec<f64>, Thrown> {
        (|| {
            self.with(|iso| {
                let (at, len) = *iso.layout.storage.get(index as usize).ok_or(Error::Value { name: format!("#{index}"), detail: "no such source".into() })?;
                Ok(vec![at as f64, len as f64])
            })
        })()
        .map_err(thrown(env))
    }

    /// Kills the child if command `seq` is not done: the abort of the run it executes. A run
    /// the child has finished is left alone, since the one handed behind it may be running now
    /// (JavaScript may not have looked yet). Whether it killed.
    #[napi]
    pub fn kill_unless_done(&self, seq: u32) -> bool {
        let inner = self.inner.borrow();
        let Some(iso) = inner.as_ref() else { return false };
        if iso.done(seq) {
            return false;
        }
        iso.live().inspect(|live| live.process.kill()).is_some()
    }

    /// Kills the child now (a timeout or abort mid-run); the wait on it reports its death.
    #[napi]
    pub fn kill(&self) {
        if let Some(live) = self.inner.borrow().as_ref().and_then(Isolated::live) {
            live.process.kill();
        }
    }

    /// Starts a new child on the same region (after a death); blocks until it has loaded.
    #[napi]
    pub fn respawn(&self, js_env: &Env, env: Vec<String>, start_timeout_ms: f64) -> Result<(), Thrown> {
        (|| {
            let timeout = ms(start_timeout_ms).unwrap_or(Duration::from_secs(30));
            self.with(|iso| iso.respawn(&env, timeout))
        })()
        .map_err(thrown(js_env))
    }

    /// Ends the child and the waiter thread; the region goes with the last view of it.
    #[napi]
    pub fn close(&self) {
        if let Some(iso) = self.inner.borrow_mut().take() {
            if let Some(live) = iso.live() {
                live.process.kill();
            }
            iso.region.release_fd();
        }
        if let Some(w) = self.waiter.borrow_mut().take() {
            drop(w.jobs);
            w.tsfn.release();
        }
    }
}

impl Drop for NativeIsolate {
    fn drop(&mut self) {
        self.close();
    }
}

