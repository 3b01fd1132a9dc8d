//! The parent's side of an isolated instance: starts the host child, hands it the region,
//! issues commands and waits for them, for the child's death, a deadline or a memory cap.

use super::*;
use crate::ffi::process::{self, Channel, Exit, HostProcess, Ready, SharedRegion};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A child that is (or was) running, with its control socket.
pub struct Live {
    pub process: HostProcess,
    pub channel: Channel,
}

/// How a wait ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The command finished (its answer may still be an error).
    Done,
    /// The child died first.
    Exited(Exit),
    /// The deadline passed: the child was killed.
    Timeout,
    /// Its resident memory passed the cap: the child was killed. The bytes it had.
    Memory(u64),
}

/// How often resident memory is sampled during a wait with a cap.
pub const MEMORY_SAMPLE: Duration = Duration::from_millis(2);

/// How long a wait sleeps before it looks again, whatever it was told: a wake-up lost either
/// way (the module's note) then costs this, not a hang.
pub const RECHECK: Duration = Duration::from_millis(100);

/// Largest hello a host may send (a signature of the largest artifact fits many times).
/// (Exclusive or inclusive makes no difference a test can see: none comes near it.)
const HELLO_MAX: u64 = 64 << 20;

pub struct Isolated {
    host: String,
    pub signature: Signature,
    pub layout: Layout,
    pub region: Arc<SharedRegion>,
    live: Option<Arc<Live>>,
    seq: u32,
}

fn host_error(path: &str, reason: impl Into<String>) -> Error {
    Error::Host { path: path.to_owned(), reason: reason.into() }
}

/// Starts a host for `path`, reads its hello: the artifact's signature, or its load error.
fn spawn_child(host: &str, path: &str, env: &[String], timeout: Duration) -> Result<(Live, Signature)> {
    let (mine, theirs) = Channel::pair().map_err(|e| host_error(path, format!("cannot make a socket: {e}")))?;
    let args = [std::process::id().to_string(), path.to_owned()];
    let process = HostProcess::spawn(host, &args, env, theirs.into_fd()).map_err(|e| host_error(path, format!("cannot start the host program {host}: {e}")))?;
    let live = Live { process, channel: mine };
    let until = Instant::now() + timeout;
    let died = |live: &Live, what: &str| {
        let exit = live.process.reap();
        let tail = live.process.stderr_tail(2000);
        host_error(path, format!("the host process {} {what}{}", describe_exit(&exit), if tail.is_empty() { String::new() } else { format!("; its stderr: {}", tail.trim_end()) }))
    };
    let read = |buf: &mut [u8]| -> Result<()> {
        let mut got = 0;
        while got < buf.len() {
            match process::wait_readable(live.channel.raw(), live.process.pidfd(), Some(until)) {
                // Dead or not, what it wrote is still readable; after that, EOF (the child's
                // end closed with it: no other process holds it).
                Ok(Ready::Channel | Ready::Exited) => {}
                Ok(Ready::Timeout) => {
                    live.process.kill();
                    return Err(host_error(path, format!("the host process did not load the artifact within {} ms (killed)", timeout.as_millis())));
                }
                Err(e) => return Err(host_error(path, format!("waiting for the host process: {e}"))),
            }
            match live.channel.recv(&mut buf[got..]) {
                Ok((0, _)) => return Err(died(&live, "before it had loaded the artifact")),
                Ok((n, _)) => got += n,
                Err(e) => return Err(host_error(path, format!("reading from the host process: {e}"))),
            }
        }
        Ok(())
    };
    let mut len = [0u8; 8];
    read(&mut len)?;
    let len = u64::from_le_bytes(len);
    if len > HELLO_MAX {
        return Err(host_error(path, "the host process sent a malformed hello"));
    }
    let mut payload = vec![0u8; len as usize];
    read(&mut payload)?;
    let mut r = Reader::new(&payload);
    let malformed = || host_error(path, "the host process sent a malformed hello");
    match r.u32().map_err(|_| malformed())? {
        1 => {
            let sig = r.signature().map_err(|_| malformed())?;
            Ok((live, sig))
        }
        _ => {
            let code = r.str().map_err(|_| malformed())?;
            let message = r.str().map_err(|_| malformed())?;
            Err(Error::Remote { code: Error::known_code(&code), message, detail: Default::default() })
        }
    }
}

pub fn describe_exit(exit: &Exit) -> String {
    match exit {
        Exit::Code(c) => format!("exited with code {c}"),
        Exit::Signal(s) => format!("was killed by signal {s} ({})", signal_name(*s)),
    }
}

pub fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGKILL => "SIGKILL",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGSYS => "SIGSYS",
        libc::SIGXCPU => "SIGXCPU",
        _ => "signal",
    }
}

impl Isolated {
    /// Starts the first host child for `path` and gives it a new region.
    /// `env`: the child's environment (`KEY=value`), the one the caller's JavaScript sees.
    pub fn start(host: &str, path: &str, env: &[String], timeout: Duration) -> Result<Isolated> {
        let (live, signature) = spawn_child(host, path, env, timeout)?;
        let layout = Layout::of(&signature, Layout::frames_for(&signature), process::page_size())?;
        let region = SharedRegion::create("zgc-runtime-region", layout.len)
            .map_err(|e| Error::OutOfMemory { what: format!("the shared region of {path} ({e})"), bytes: layout.len, alignment: process::page_size() })?;
        let mut me = Isolated { host: host.to_owned(), signature, layout, region: Arc::new(region), live: None, seq: 0 };
        me.attach(live)?;
        Ok(me)
    }

    fn attach(&mut self, live: Live) -> Result<()> {
        let mut handoff = (self.region.len() as u64).to_le_bytes().to_vec();
        handoff.extend_from_slice(&(self.layout.frames.len() as u32).to_le_bytes());
        let fd = self.region.fd().ok_or_else(|| host_error(&self.signature.path, "the instance is closed"))?;
        live.channel.send(&handoff, Some(fd)).map_err(|e| host_error(&self.signature.path, format!("cannot hand the region to the host process: {e}")))?;
        self.live = Some(Arc::new(live));
        Ok(())
    }

    /// Replaces a dead (or killed) child by a new one on the same region: storage handed out
    /// stays valid and keeps its contents; the artifact's own state starts afresh.
    pub fn respawn(&mut self, env: &[String], timeout: Duration) -> Result<()> {
        if let Some(old) = self.live.take() {
            old.process.kill();
            old.process.reap();
        }
        let (live, signature) = spawn_child(&self.host, &self.signature.path, env, timeout)?;
        if signature != self.signature {
            live.process.kill();
            return Err(host_error(&self.signature.path, "the artifact changed on disk since it was loaded; load it again"));
        }
        for word in [REQ, DONE, CHILD_SLEEPS, PARENT_SLEEPS] {
            self.region.word(word).store(0, Ordering::Release);
        }
        for frame in &self.layout.frames {
            self.region.zero(frame.mark(0), 4 * self.signature.sources.len());
        }
        self.seq = 0;
        self.attach(live)
    }

    pub fn live(&self) -> Option<Arc<Live>> {
        self.live.clone()
    }

    pub fn pid(&self) -> Option<u32> {
        self.live.as_ref().map(|l| l.process.pid())
    }

    /// Frames: how many commands may be handed over at once.
    pub fn frames(&self) -> usize {
        self.layout.frames.len()
    }

    pub fn next_seq(&self) -> u32 {
        self.seq.wrapping_add(1)
    }

    /// Commands issued and not done.
    pub fn outstanding(&self) -> usize {
        self.seq.wrapping_sub(self.region.word(DONE).load(Ordering::Acquire)) as usize
    }

    /// Writes `bytes` into source `index`'s input slot of the next command's frame, marked as
    /// values or storage.
    pub fn write_input(&self, index: usize, bytes: &[u8], mark: u32) {
        let frame = self.layout.frame(self.seq.wrapping_add(1));
        let (at, len) = frame.inputs[index];
        assert!(bytes.len() <= len);
        self.region.write(at, bytes);
        self.region.word(frame.mark(index)).store(mark, Ordering::Release);
    }

    /// Clears the marks of the next command's frame: inputs written for a command that will
    /// not be sent.
    pub fn clear_marks(&self) {
        let frame = self.layout.frame(self.seq.wrapping_add(1));
        for index in 0..self.signature.sources.len() {
            self.region.word(frame.mark(index)).store(MARK_NONE, Ordering::Release);
        }
    }

    /// Sends `cmd` to the child in the next frame; returns its number. Refused while every
    /// frame holds a command not done.
    pub fn begin(&mut self, cmd: u32, arg: u32) -> Result<u32> {
        let live = self.live.clone().ok_or_else(|| host_error(&self.signature.path, "no host process is running"))?;
        if self.outstanding() >= self.frames() {
            return Err(Error::Busy);
        }
        let seq = self.seq.wrapping_add(1);
        let at = self.layout.frame(seq).at;
        self.region.word(at + F_CMD).store(cmd, Ordering::Relaxed);
        self.region.word(at + F_ARG).store(arg, Ordering::Relaxed);
        self.region.word(at + F_STATE).store(STATE_READY, Ordering::Release);
        self.seq = seq;
        self.region.word(REQ).store(seq, Ordering::SeqCst);
        handshake();
        if self.region.word(CHILD_SLEEPS).load(Ordering::SeqCst) == 1 {
            // A child that died already shows at the wait; nothing to do here.
            let _ = live.channel.send(&[1], None);
        }
        Ok(seq)
    }

    /// Takes command `seq` back if the child has not started it: it will skip it. Whether it
    /// was taken back (a run handed over behind one that hangs goes to another instance).
    pub fn reclaim(&self, seq: u32) -> bool {
        let at = self.layout.frame(seq).at;
        !self.done(seq) && self.region.word(at + F_STATE).compare_exchange(STATE_READY, STATE_CANCELLED, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    pub fn done(&self, seq: u32) -> bool {
        is_done(&self.region, seq)
    }

    /// The child's answer to command `seq` (done, and its frame not reused since).
    pub fn answer(&self, seq: u32) -> Result<()> {
        super::answer::read(&self.region, self.layout.frame(seq).at)
    }

    /// Where output `index` of command `seq` is in the region.
    pub fn output_slot(&self, seq: u32, index: usize) -> (usize, usize) {
        self.layout.frame(seq).outputs[index]
    }
}

/// Whether command `seq` is done: DONE has reached it (counts wrap; at most a few frames apart).
pub fn is_done(region: &SharedRegion, seq: u32) -> bool {
    (region.word(DONE).load(Ordering::Acquire).wrapping_sub(seq) as i32) >= 0
}

/// A child asleep while a command waits for it is sent a byte again: its wake-up was lost. (A
/// child running a command has its flag down, so a long run is never sent bytes.)
fn wake_if_asleep(live: &Live, region: &SharedRegion) {
    if region.word(CHILD_SLEEPS).load(Ordering::SeqCst) == 1 && region.word(REQ).load(Ordering::SeqCst) != region.word(DONE).load(Ordering::SeqCst) {
        let _ = live.channel.send(&[1], None);
    }
}

/// Waits for command `seq` of `live` until `until`, killing the child when it passes `until`
/// or `max_rss` bytes of resident memory. (Short waits spin on the JavaScript thread first:
/// `NativeIsolate::poll`.)
pub fn wait(live: &Live, region: &SharedRegion, seq: u32, until: Option<Instant>, max_rss: Option<u64>) -> Outcome {
    let done = || is_done(region, seq);
    let sleeps = region.word(PARENT_SLEEPS);
    loop {
        if done() {
            return Outcome::Done;
        }
        let step = if max_rss.is_some() { MEMORY_SAMPLE } else { RECHECK };
        let slice = Some(until.map_or(Instant::now() + step, |u| u.min(Instant::now() + step)));
        // Said before DONE is looked at again, so a child finishing meanwhile sends a byte.
        sleeps.store(1, Ordering::SeqCst);
        handshake();
        if done() {
            sleeps.store(0, Ordering::SeqCst);
            return Outcome::Done;
        }
        let ready = process::wait_readable(live.channel.raw(), live.process.pidfd(), slice);
        sleeps.store(0, Ordering::SeqCst);
        match ready {
            Ok(Ready::Channel) => {
                if !live.channel.drain() && !done() {
                    return Outcome::Exited(live.process.reap());
                }
            }
            Ok(Ready::Exited) => {
                return if done() { Outcome::Done } else { Outcome::Exited(live.process.reap()) };
            }
            Ok(Ready::Timeout) | Err(_) => {
                if done() {
                    return Outcome::Done;
                }
                wake_if_asleep(live, region);
                if until.is_some_and(|u| Instant::now() >= u) {
                    live.process.kill();
                    live.process.reap();
                    return Outcome::Timeout;
                }
                if let (Some(cap), Some(rss)) = (max_rss, live.process.resident_bytes()) {
                    if rss > cap {
                        live.process.kill();
                        live.process.reap();
                        return Outcome::Memory(rss);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exits_are_told_by_signal_name_or_code() {
        let names = [
            (libc::SIGSEGV, "SIGSEGV"),
            (libc::SIGABRT, "SIGABRT"),
            (libc::SIGKILL, "SIGKILL"),
            (libc::SIGBUS, "SIGBUS"),
            (libc::SIGFPE, "SIGFPE"),
            (libc::SIGILL, "SIGILL"),
            (libc::SIGTERM, "SIGTERM"),
            (libc::SIGTRAP, "SIGTRAP"),
            (libc::SIGSYS, "SIGSYS"),
            (libc::SIGXCPU, "SIGXCPU"),
            (libc::SIGUSR1, "signal"),
        ];
        for (signal, name) in names {
            assert_eq!(signal_name(signal), name);
        }
        assert_eq!(describe_exit(&Exit::Signal(libc::SIGSEGV)), "was killed by signal 11 (SIGSEGV)");
        assert_eq!(describe_exit(&Exit::Code(3)), "exited with code 3");
    }
}
