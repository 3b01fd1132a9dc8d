//! An isolated instance as the engine drives it (`engine::Engine::Isolated`): its host child
//! and region, what a new child is given again, and how a run the child did not finish ends
//! (crashed, killed at its deadline or memory cap, aborted). A dead child is replaced at once;
//! one that will not start is tried again after a backoff, and given up after `ATTEMPTS`.

use super::child::{self, describe_exit, signal_name, Isolated, Live, Outcome};
use super::{MARK_STORAGE, MARK_VALUES, RUN, SET, STORAGE};
use crate::abi::{DType, Kind};
use crate::dtype::{self, ArrayKind, Elements, ElementsMut, OutputTarget};
use crate::error::{Error, Fault, Number, Result};
use crate::ffi::process::{self, Exit, SharedRegion};
use crate::ffi::runtime::{snapshot_regions, BoundRegion, Temporary};
use crate::instance::{check_bound, check_storage, logical_bytes, Feed, OutputData, PACKED_ALIGNMENT};
use crate::Description;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Failed starts in a row after which an instance is given up, and the waits between them.
pub const ATTEMPTS: u32 = 5;
pub const BACKOFF: [Duration; 4] = [Duration::from_millis(10), Duration::from_millis(50), Duration::from_millis(250), Duration::from_millis(1000)];
/// Commands other than runs (set, storage) are copies in the child; this bounds a stuck one.
const CALL_TIMEOUT_MS: f64 = 30_000.0;
/// How long a wait watches the region before it sleeps: a child answers a short run sooner.
const SPIN: Duration = Duration::from_micros(50);

/// What starting an instance's process takes.
#[derive(Clone)]
pub struct Options {
    pub host: String,
    /// The child's environment (`KEY=value`), the one the caller's JavaScript sees.
    pub env: Vec<String>,
    pub start_timeout: Duration,
    /// Every run's deadline, unless the run sets its own (milliseconds, as given).
    pub timeout_ms: Option<f64>,
    /// The cap on the child's resident memory (megabytes, as given).
    pub max_memory_mb: Option<f64>,
}

/// Counts of what happened to an instance's processes.
#[derive(Default)]
pub struct Faults {
    pub crashes: AtomicU64,
    pub restarts: AtomicU64,
    pub timeouts: AtomicU64,
    pub memory_kills: AtomicU64,
    pub aborts: AtomicU64,
    pub start_failures: AtomicU64,
}

const ALIVE: u8 = 0;
const RESTARTING: u8 = 1;
const FAILED: u8 = 2;
const CLOSED: u8 = 3;

/// What the caller's thread reads and does while another thread runs the instance: its
/// counts and state, its pid, and the abort of the run in progress.
pub struct Control {
    pub faults: Faults,
    state: AtomicU8,
    live: Mutex<Option<Arc<Live>>>,
    /// Weak: counts read after `close()` must not keep the mapping.
    region: Weak<SharedRegion>,
    /// The run command in progress (0: none).
    running: AtomicU32,
    /// The run command aborted (0: none): only that one ends as aborted.
    aborted: AtomicU32,
    /// Why it was given up.
    failure: Mutex<Option<Error>>,
}

impl Control {
    /// The pid of the instance's process now; `None` while it starts again, or given up.
    pub fn pid(&self) -> Option<u32> {
        if self.state.load(Ordering::Acquire) != ALIVE {
            return None;
        }
        self.live.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(|l| l.process.pid())
    }

    /// Whether its process is running (not starting again, not given up).
    pub fn alive(&self) -> bool {
        self.state.load(Ordering::Acquire) == ALIVE
    }

    /// Whether a new process is to be started (its restart may not be due yet).
    pub fn restarting(&self) -> bool {
        self.state.load(Ordering::Acquire) == RESTARTING
    }

    /// Why the instance was given up, if it was.
    pub fn failure(&self) -> Option<Error> {
        // The state first: every run asks, and only a given-up instance has an error.
        if self.state.load(Ordering::Acquire) != FAILED {
            return None;
        }
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The region, while the instance is open.
    pub fn region(&self) -> Option<Arc<SharedRegion>> {
        self.region.upgrade()
    }

    /// Aborts the run in progress: its process is killed unless the run is done (then its
    /// result is dropped). Between runs, nothing.
    pub fn abort(&self) {
        let seq = self.running.load(Ordering::Acquire);
        if seq == 0 {
            return;
        }
        self.aborted.store(seq, Ordering::Release);
        let Some(region) = self.region.upgrade() else { return };
        if !child::is_done(&region, seq) {
            if let Some(live) = self.live.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                live.process.kill();
            }
        }
    }

    /// Whether run command `seq`, just ended, was aborted.
    fn take_abort(&self, seq: u32) -> bool {
        self.aborted.compare_exchange(seq, 0, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }
}

/// A command sent to the child: its number, and its deadline.
struct Sent {
    seq: u32,
    cmd: u32,
    until: Option<Instant>,
    timeout_ms: Option<f64>,
}

pub struct IsolatedInstance {
    iso: Isolated,
    description: Arc<Description>,
    options: Options,
    control: Arc<Control>,
    /// Per source: logical values given with `set()` (not STATE), given again to a new child.
    sets: Vec<Option<Vec<u8>>>,
    /// Per source: bound to its slot of the region (`storage()`), bound again in a new child.
    slots: Vec<bool>,
    /// Per source: the caller's array bound with `bind()`, copied into each run.
    binds: Vec<Option<Box<dyn BoundRegion>>>,
    /// The last run, whose frame holds its outputs.
    last_run: Option<u32>,
    /// A child to start again: attempts so far, and when the next is due.
    restart: Option<(u32, Instant)>,
    /// The command sent and not waited for yet.
    sent: Option<Sent>,
}

impl IsolatedInstance {
    /// Starts the host child for `path` (blocking until it has loaded the artifact).
    pub fn start(path: &str, options: Options) -> Result<IsolatedInstance> {
        let iso = Isolated::start(&options.host, path, &options.env, options.start_timeout)?;
        let n = iso.signature.sources.len();
        let control = Arc::new(Control {
            faults: Faults::default(),
            state: AtomicU8::new(ALIVE),
            live: Mutex::new(iso.live()),
            region: Arc::downgrade(&iso.region),
            running: AtomicU32::new(0),
            aborted: AtomicU32::new(0),
            failure: Mutex::new(None),
        });
        Ok(IsolatedInstance { description: Arc::new(iso.signature.clone()), iso, options, control, sets: vec![None; n], slots: vec![false; n], binds: (0..n).map(|_| None).collect(), last_run: None, restart: None, sent: None })
    }

    pub fn description(&self) -> &Arc<Description> {
        &self.description
    }

    pub fn control(&self) -> &Arc<Control> {
        &self.control
    }

    pub fn region(&self) -> &Arc<SharedRegion> {
        &self.iso.region
    }

    fn path(&self) -> &str {
        &self.iso.signature.path
    }

    /// Whether it can take a command now; a due restart is tried first. `wait`: sleep until
    /// a restart is due (off the caller's thread), rather than refuse as busy.
    fn usable(&mut self, wait: bool) -> Result<()> {
        if let Some(e) = self.control.failure() {
            return Err(e);
        }
        if self.sent.is_some() {
            return Err(Error::Busy);
        }
        while let Some((_, due)) = self.restart {
            let now = Instant::now();
            if due > now {
                if !wait {
                    return Err(Error::Busy);
                }
                std::thread::sleep(due - now);
            }
            self.try_restart();
            if let Some(e) = self.control.failure() {
                return Err(e);
            }
        }
        Ok(())
    }

    /// How long until its restart is due (`Some(ZERO)`: now); `None` when none is pending.
    pub fn restart_due(&self) -> Option<Duration> {
        self.restart.map(|(_, due)| due.saturating_duration_since(Instant::now()))
    }

    /// Tries a restart that is due, if one is pending.
    pub fn restart_if_due(&mut self) {
        if self.restart_due() == Some(Duration::ZERO) {
            self.try_restart();
        }
    }

    pub fn failed(&self) -> Option<Error> {
        self.control.failure()
    }

    fn write(&mut self, index: usize, bytes: &[u8], mark: u32) {
        self.iso.write_input(index, bytes, mark);
    }

    /// Logical values for source `index` in the next command.
    pub fn input_values(&mut self, index: usize, values: Elements<'_>) -> Result<()> {
        let bytes = logical_bytes(&self.iso.signature.sources[index], values)?;
        self.write(index, &bytes, MARK_VALUES);
        Ok(())
    }

    /// Physical storage (a caller's array of `kind`) for source `index` in the next command.
    pub fn input_storage(&mut self, index: usize, kind: ArrayKind, bytes: &[u8]) -> Result<()> {
        self.check_storage(index, kind, bytes)?;
        self.write(index, bytes, MARK_STORAGE);
        Ok(())
    }

    fn check_storage(&self, index: usize, kind: ArrayKind, bytes: &[u8]) -> Result<()> {
        let source = &self.iso.signature.sources[index];
        check_storage(source, kind, bytes.len())?;
        if source.tensor.dtype == DType::Bool {
            dtype::check_bool(&source.name, bytes)?;
        }
        Ok(())
    }

    /// A staged input (`Artifact::stage_*`) in the next command.
    pub fn input_feed(&mut self, feed: Feed<'_>) -> Result<()> {
        match feed {
            Feed::Copy { index, bytes } => self.write(index, &bytes, MARK_VALUES),
            Feed::Bind { index, storage } => self.write(index, storage.as_bytes(), MARK_STORAGE),
            Feed::Lend { index, .. } => {
                return Err(Error::Value { name: self.iso.signature.sources[index].name.clone(), detail: "storage is lent to runs in-process only".into() });
            }
        }
        Ok(())
    }

    /// Forgets inputs written for a command that will not be sent.
    pub fn clear_inputs(&mut self) {
        self.iso.clear_marks();
    }

    /// Gives source `index` logical values now; a new child is given them again (not STATE,
    /// which is the artifact's own and starts afresh with it).
    #[inline(never)]
    pub fn set(&mut self, index: usize, values: Elements<'_>) -> Result<()> {
        self.usable(false)?;
        let bytes = logical_bytes(&self.iso.signature.sources[index], values)?.into_owned();
        self.write(index, &bytes, MARK_VALUES);
        self.call(SET, 0, Some(CALL_TIMEOUT_MS))?;
        if self.iso.signature.sources[index].kind != Kind::State {
            self.sets[index] = Some(bytes);
        }
        Ok(())
    }

    /// Binds the caller's array to source `index`: copied into the child at each run's start.
    #[inline(never)]
    pub fn bind(&mut self, index: usize, kind: ArrayKind, bytes: &[u8], region: Box<dyn BoundRegion>) -> Result<()> {
        self.check_storage(index, kind, bytes)?;
        self.binds[index] = Some(region);
        self.slots[index] = false;
        self.sets[index] = None;
        Ok(())
    }

    /// Binds source `index` to its slot of the region, zeroed: `(offset, bytes)` of the slot,
    /// which the caller views (the child reads it in place).
    pub fn storage(&mut self, index: usize) -> Result<(usize, usize)> {
        self.usable(false)?;
        check_bound(&self.iso.signature.sources[index])?;
        let (at, len) = self.iso.layout.storage[index];
        self.iso.region.zero(at, len);
        self.call(STORAGE, index as u32, Some(CALL_TIMEOUT_MS))?;
        self.slots[index] = true;
        self.binds[index] = None;
        self.sets[index] = None;
        Ok((at, len))
    }

    #[inline(never)]
    pub fn has_caller_storage(&self) -> bool {
        self.binds.iter().any(Option::is_some)
    }

    /// On the caller's thread: copies of the arrays bound with `bind()`, for a run elsewhere.
    #[inline(never)]
    pub fn snapshot_caller_storage(&mut self) -> Result<Vec<Temporary>> {
        let keys: Vec<u32> = self.iso.signature.sources.iter().map(|s| s.key).collect();
        snapshot_regions(&mut self.binds, &keys, PACKED_ALIGNMENT).map_err(|slot| match slot {
            Ok(slot) => Error::Detached { name: self.iso.signature.sources[slot].name.clone() },
            Err(bytes) => Error::OutOfMemory { what: "a copy of bound storage".into(), bytes, alignment: PACKED_ALIGNMENT },
        })
    }

    /// Runs the inputs written since the last command, with the bound arrays copied in:
    /// `temporary` (their copies, off the caller's thread), or read now. `timeout_ms`: this
    /// run's deadline, else the instance's. `wait`: off the caller's thread (see `usable`).
    /// `idle`: called once if the wait goes to sleep (the run is not a short one).
    #[inline(never)]
    pub fn run(&mut self, timeout_ms: Option<f64>, temporary: Option<&[Temporary]>, wait: bool, idle: &mut dyn FnMut()) -> Result<()> {
        let seq = self.send_run(timeout_ms, temporary, wait)?;
        self.complete(seq, idle).map(drop)
    }

    /// `run` on the caller's thread, waiting at most `budget`: `Ok(false)` when the run is
    /// still going, to be waited for by `finish` (on the instance's worker).
    #[inline(never)]
    pub fn run_within(&mut self, timeout_ms: Option<f64>, budget: Duration) -> Result<bool> {
        let seq = self.send_run(timeout_ms, None, false)?;
        let region = &self.iso.region;
        if !process::spin_until(|| child::is_done(region, seq), budget) {
            return Ok(false);
        }
        self.complete(seq, &mut || {}).map(|_| true)
    }

    /// Waits for the run `run_within` left going.
    pub fn finish(&mut self, idle: &mut dyn FnMut()) -> Result<()> {
        let Some(sent) = &self.sent else { return Err(Error::Value { name: "run".into(), detail: "no run is going".into() }) };
        self.complete(sent.seq, idle).map(drop)
    }

    fn send_run(&mut self, timeout_ms: Option<f64>, temporary: Option<&[Temporary]>, wait: bool) -> Result<u32> {
        if let Err(e) = self.usable(wait) {
            self.clear_inputs();
            return Err(e);
        }
        let copies;
        let temporary = match temporary {
            Some(t) => t,
            None => {
                copies = match self.snapshot_caller_storage() {
                    Ok(c) => c,
                    Err(e) => {
                        self.clear_inputs();
                        return Err(e);
                    }
                };
                &copies
            }
        };
        for t in temporary {
            self.write(t.slot(), t.bytes(), MARK_STORAGE);
        }
        self.send(RUN, 0, timeout_ms.or(self.options.timeout_ms))
    }

    /// Sends `cmd`, waits for it (up to `timeout_ms`), and reads its answer. A child that did
    /// not finish it is replaced before this returns the error.
    fn call(&mut self, cmd: u32, arg: u32, timeout_ms: Option<f64>) -> Result<u32> {
        let seq = self.send(cmd, arg, timeout_ms)?;
        self.complete(seq, &mut || {})
    }

    fn send(&mut self, cmd: u32, arg: u32, timeout_ms: Option<f64>) -> Result<u32> {
        let seq = match self.iso.begin(cmd, arg) {
            Ok(seq) => seq,
            Err(e) => {
                self.clear_inputs();
                return Err(e);
            }
        };
        if cmd == RUN {
            self.control.running.store(seq, Ordering::Release);
        }
        let until = timeout_ms.map(|ms| Instant::now() + Duration::from_secs_f64(ms / 1000.0));
        self.sent = Some(Sent { seq, cmd, until, timeout_ms });
        Ok(seq)
    }

    fn complete(&mut self, seq: u32, idle: &mut dyn FnMut()) -> Result<u32> {
        let Some(sent) = self.sent.take().filter(|s| s.seq == seq) else { return Err(Error::Closed) };
        let Some(live) = self.iso.live() else { return Err(Error::Closed) };
        let outcome = self.wait(&live, seq, sent.until, idle);
        self.control.running.store(0, Ordering::Release);
        if sent.cmd == RUN && self.control.take_abort(seq) {
            // Killed for it, or finished first: either way the caller has given up on it.
            self.control.faults.aborts.fetch_add(1, Ordering::Relaxed);
            if outcome != Outcome::Done {
                self.recover();
            }
            return Err(Error::Aborted);
        }
        if outcome == Outcome::Done {
            self.iso.answer(seq)?;
            if sent.cmd == RUN {
                self.last_run = Some(seq);
            }
            return Ok(seq);
        }
        let stderr = live.process.stderr_tail(4000);
        drop(live);
        let err = self.fault(outcome, sent.timeout_ms, stderr);
        self.recover();
        Err(err)
    }

    fn wait(&self, live: &Live, seq: u32, until: Option<Instant>, idle: &mut dyn FnMut()) -> Outcome {
        let region = &self.iso.region;
        if process::spin_until(|| child::is_done(region, seq), SPIN) {
            return Outcome::Done;
        }
        idle();
        let cap = self.options.max_memory_mb.map(|mb| (mb * 1024.0 * 1024.0) as u64);
        child::wait(live, region, seq, until, cap)
    }

    /// The error of a run the child did not finish, counted.
    fn fault(&self, outcome: Outcome, timeout_ms: Option<f64>, stderr: String) -> Error {
        let faults = &self.control.faults;
        let path = self.path();
        match outcome {
            Outcome::Timeout => {
                faults.timeouts.fetch_add(1, Ordering::Relaxed);
                let ms = Number(timeout_ms.unwrap_or(0.0));
                Error::Fault {
                    message: format!("run on the isolated instance of {path} did not finish within timeoutMs {ms}; its process was killed and the instance restarts"),
                    fault: Box::new(Fault::Timeout { timeout_ms: ms, stderr }),
                }
            }
            Outcome::Memory(rss) => {
                faults.memory_kills.fetch_add(1, Ordering::Relaxed);
                let mb = Number(self.options.max_memory_mb.unwrap_or(0.0));
                Error::Fault {
                    message: format!("the isolated instance of {path} was killed at {} MiB of resident memory, over maxMemoryMb {mb}; its process was killed and the instance restarts", rss >> 20),
                    fault: Box::new(Fault::Memory { max_memory_mb: mb, resident_bytes: rss, stderr }),
                }
            }
            Outcome::Exited(exit) => {
                faults.crashes.fetch_add(1, Ordering::Relaxed);
                let pid = self.iso.pid().map(|p| format!(" (pid {p})")).unwrap_or_default();
                let state = if self.iso.signature.sources.iter().any(|s| s.kind == Kind::State) { " (its STATE is lost)" } else { "" };
                let lines: Vec<&str> = stderr.trim().split('\n').collect();
                let tail = if stderr.trim().is_empty() { String::new() } else { format!("; its stderr ends: {}", lines[lines.len().saturating_sub(3)..].join(" | ")) };
                let (signal, exit_code) = match exit {
                    Exit::Signal(s) => (Some(signal_name(s)), None),
                    Exit::Code(c) => (None, Some(c)),
                };
                Error::Fault {
                    message: format!("the isolated instance of {path}{pid} {} during this run; the run failed and the instance restarts{state}{tail}", describe_exit(&exit)),
                    fault: Box::new(Fault::Crashed { signal, exit_code, stderr }),
                }
            }
            Outcome::Done => unreachable!("a finished command is no fault"),
        }
    }

    /// A new child for a dead one, now; if it will not start, again later (`BACKOFF`).
    fn recover(&mut self) {
        self.restart = Some((0, Instant::now()));
        self.control.state.store(RESTARTING, Ordering::Release);
        self.try_restart();
    }

    fn try_restart(&mut self) {
        let Some((attempts, _)) = self.restart else { return };
        let started = self.iso.respawn(&self.options.env, self.options.start_timeout).and_then(|()| self.replay());
        // Command numbers start again: an abort of the old process's cannot match a new one's.
        self.control.aborted.store(0, Ordering::Release);
        *self.control.live.lock().unwrap_or_else(|p| p.into_inner()) = self.iso.live();
        match started {
            Ok(()) => {
                self.restart = None;
                self.control.faults.restarts.fetch_add(1, Ordering::Relaxed);
                self.control.state.store(ALIVE, Ordering::Release);
            }
            Err(e) => {
                self.control.faults.start_failures.fetch_add(1, Ordering::Relaxed);
                let attempts = attempts + 1;
                if attempts >= ATTEMPTS {
                    self.restart = None;
                    let failure = Error::InstanceFailed { path: self.path().to_owned(), attempts, last: e.to_string() };
                    *self.control.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(failure);
                    self.control.state.store(FAILED, Ordering::Release);
                } else {
                    self.restart = Some((attempts, Instant::now() + BACKOFF[attempts as usize - 1]));
                }
            }
        }
    }

    /// Gives a new child what the dead one had been given (not its STATE).
    fn replay(&mut self) -> Result<()> {
        let Some(live) = self.iso.live() else { return Err(Error::Closed) };
        let exchange = |me: &mut IsolatedInstance, cmd: u32, arg: u32| -> Result<()> {
            let seq = me.iso.begin(cmd, arg)?;
            let until = Some(Instant::now() + Duration::from_secs_f64(CALL_TIMEOUT_MS / 1000.0));
            match me.wait(&live, seq, until, &mut || {}) {
                Outcome::Done => me.iso.answer(seq),
                other => Err(Error::Host { path: me.path().to_owned(), reason: format!("the new process ended while it was given its inputs again ({other:?})") }),
            }
        };
        for index in 0..self.sets.len() {
            if let Some(bytes) = self.sets[index].take() {
                self.write(index, &bytes, MARK_VALUES);
                let done = exchange(self, SET, 0);
                self.sets[index] = Some(bytes);
                done?;
            }
            if self.slots[index] {
                exchange(self, STORAGE, index as u32)?;
            }
        }
        Ok(())
    }

    /// Copies output `index` of the last run into `target` (logical C order).
    #[inline(never)]
    pub fn copy_output(&mut self, index: usize, target: ElementsMut<'_>) -> Result<()> {
        let outputs = &self.iso.signature.outputs;
        let info = outputs.get(index).ok_or(Error::OutputIndex { index: index as i64, count: outputs.len() })?;
        let what = || format!("output {index}");
        if target.len() != info.logical_count {
            return Err(Error::Size { name: what(), expected: format!("{} elements (shape {:?})", info.logical_count, info.shape), given: format!("{} elements", target.len()) });
        }
        let Some(seq) = self.last_run else {
            return Err(Error::Value { name: what(), detail: "no run has finished on this instance yet".into() });
        };
        let (at, _) = self.iso.output_slot(seq, index);
        match dtype::output_target(what, info.dtype, target)? {
            OutputTarget::Direct(bytes) => self.iso.region.read(at, bytes),
            OutputTarget::DecodeF16(out) => {
                let mut bits = vec![0u16; info.logical_count];
                self.iso.region.read(at, crate::ffi::memory::bytes_of_mut(&mut bits));
                dtype::decode_f16(&bits, out);
            }
        }
        Ok(())
    }

    /// Every output of the last run, in new vectors (f16 decoded unless `f16_bits`).
    #[inline(never)]
    pub fn read_outputs(&mut self, f16_bits: bool) -> Result<Vec<OutputData>> {
        let outputs = self.iso.signature.outputs.clone();
        outputs.iter().enumerate().map(|(index, info)| {
            let mut data = OutputData::zeroed(info.dtype, info.logical_count, f16_bits);
            self.copy_output(index, data.as_target())?;
            Ok(data)
        }).collect()
    }
}

impl Drop for IsolatedInstance {
    /// The child ends with its instance, reaped; the region goes with the last view of it.
    fn drop(&mut self) {
        if let Some(live) = self.iso.live() {
            live.process.kill();
            live.process.reap();
        }
        *self.control.live.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.control.state.store(CLOSED, Ordering::Release);
        self.iso.region.release_fd();
    }
}
