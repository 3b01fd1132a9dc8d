//! The operating-system side of isolated instances (Linux): a shared memory region both
//! processes map, the control socket, the host child process and the descriptor that tells
//! its death. Every descriptor is close-on-exec, so none leaks into a process the user
//! spawns (a leaked socket end would hide a death).

use std::ffi::{CStr, CString};
use std::io::{Error as IoError, ErrorKind, Result as IoResult};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::AtomicU32;
use std::time::{Duration, Instant};

fn cvt(r: libc::c_int) -> IoResult<libc::c_int> {
    if r < 0 {
        Err(IoError::last_os_error())
    } else {
        Ok(r)
    }
}

/// A `MAP_SHARED` mapping of a memfd: the tensors and control words parent and child share.
pub struct SharedRegion {
    ptr: *mut u8,
    len: usize,
    /// Kept to hand to a new child; let go at close (the mapping needs no descriptor).
    fd: std::sync::Mutex<Option<OwnedFd>>,
}

// SAFETY: the mapping is plain memory owned by this value until drop; concurrent access goes
// through the copy and atomic accessors below, whose callers follow the protocol of
// `isolate::protocol` (one side writes a slot while the other leaves it alone).
unsafe impl Send for SharedRegion {}
// SAFETY: as above.
unsafe impl Sync for SharedRegion {}

impl SharedRegion {
    /// A new zeroed region of `len` bytes (a multiple of the page size), sealed against
    /// resizing so that neither process can shrink it under the other's mapping.
    pub fn create(name: &str, len: usize) -> IoResult<SharedRegion> {
        let cname = CString::new(name).map_err(|_| IoError::from(ErrorKind::InvalidInput))?;
        // SAFETY: a valid C string; the flags are memfd_create's.
        let fd = cvt(unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) })?;
        // SAFETY: `fd` was just returned to us and is owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: a memfd we own; the length fits off_t (checked by the conversion).
        cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), libc::off_t::try_from(len).map_err(|_| IoError::from(ErrorKind::InvalidInput))?) })?;
        // SAFETY: fcntl on our memfd with the seal flags it takes.
        cvt(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL) })?;
        SharedRegion::map(fd, len)
    }

    /// Maps a region received from the other process; `len` must be its size.
    pub fn map(fd: OwnedFd, len: usize) -> IoResult<SharedRegion> {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: fstat writes a `stat` into the out-pointer for our descriptor.
        cvt(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
        // SAFETY: fstat succeeded, so the struct is initialised.
        let size = unsafe { st.assume_init() }.st_size;
        if len == 0 || u64::try_from(size).ok() != Some(len as u64) {
            return Err(IoError::new(ErrorKind::InvalidData, format!("shared region is {size} bytes, expected {len}")));
        }
        // SAFETY: a fresh shared mapping of the whole file; the kernel picks the address.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if ptr == libc::MAP_FAILED {
            return Err(IoError::last_os_error());
        }
        Ok(SharedRegion { ptr: ptr.cast(), len, fd: std::sync::Mutex::new(Some(fd)) })
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The memfd, until `release_fd`.
    pub fn fd(&self) -> Option<RawFd> {
        self.fd.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Closes the memfd; the mapping stays for as long as views of it live.
    pub fn release_fd(&self) {
        self.fd.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
    /// The mapping's address, for an external ArrayBuffer that holds this region alive.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    fn check(&self, offset: usize, len: usize) {
        assert!(offset.checked_add(len).is_some_and(|end| end <= self.len), "region access {offset}+{len} past {}", self.len);
    }

    /// A control word. Atomics are the only shared-memory access both processes make at once.
    pub fn word(&self, offset: usize) -> &AtomicU32 {
        self.check(offset, 4);
        assert!(offset.is_multiple_of(4));
        // SAFETY: in bounds and aligned (checked); AtomicU32 has u32's layout, and the mapping
        // lives as long as `&self`.
        unsafe { &*self.ptr.add(offset).cast::<AtomicU32>() }
    }

    /// Copies `data` into the region at `offset`.
    pub fn write(&self, offset: usize, data: &[u8]) {
        self.check(offset, data.len());
        // SAFETY: in bounds (checked); the other process does not touch this slot now (protocol).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(offset), data.len()) }
    }

    /// Copies bytes at `offset` into `out`.
    pub fn read(&self, offset: usize, out: &mut [u8]) {
        self.check(offset, out.len());
        // SAFETY: in bounds (checked); the other process does not write this slot now.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(offset), out.as_mut_ptr(), out.len()) }
    }

    /// A slot as bytes, for the side that owns it for the moment (the child during a command).
    #[allow(clippy::mut_from_ref)]
    pub fn slot_mut(&self, offset: usize, len: usize) -> &mut [u8] {
        self.check(offset, len);
        // SAFETY: in bounds (checked); by the protocol only the caller touches this slot until
        // it signals the other side, and each slot is handed out once per command.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(offset), len) }
    }

    /// Zeroes a range: a respawned child starts without the dead one's leftovers.
    pub fn zero(&self, offset: usize, len: usize) {
        self.check(offset, len);
        // SAFETY: in bounds; no other process maps the region while it is reset.
        unsafe { std::ptr::write_bytes(self.ptr.add(offset), 0, len) }
    }
}

impl Drop for SharedRegion {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; nothing borrows it past `self`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Storage for a BOUND source inside the region (the child's zero-copy `storage()`).
pub struct RegionSlot {
    pub region: std::sync::Arc<SharedRegion>,
    pub offset: usize,
    pub len: usize,
}

// SAFETY: the slot lies inside the region (checked at creation), which this value keeps mapped.
unsafe impl super::runtime::BoundRegion for RegionSlot {
    fn as_ptr(&self) -> *mut u8 {
        // SAFETY: offset is within the mapping (checked in `RegionSlot::new`).
        unsafe { self.region.as_ptr().add(self.offset) }
    }
    fn byte_len(&self) -> usize {
        self.len
    }
    fn is_live(&mut self) -> bool {
        true
    }
}

impl RegionSlot {
    pub fn new(region: std::sync::Arc<SharedRegion>, offset: usize, len: usize) -> RegionSlot {
        region.check(offset, len);
        RegionSlot { region, offset, len }
    }
}

/// One end of the control socket (AF_UNIX stream): one byte wakes the other side.
pub struct Channel(OwnedFd);

impl Channel {
    /// Both ends, close-on-exec.
    pub fn pair() -> IoResult<(Channel, Channel)> {
        let mut fds = [0; 2];
        // SAFETY: socketpair writes two descriptors into the array.
        cvt(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) })?;
        // SAFETY: both were just created and are owned by nothing else.
        Ok(unsafe { (Channel(OwnedFd::from_raw_fd(fds[0])), Channel(OwnedFd::from_raw_fd(fds[1]))) })
    }

    /// The socket the child inherited as its stdin, moved to a close-on-exec descriptor (so
    /// that a process the artifact spawns cannot hold it), with stdin reopened on /dev/null.
    pub fn from_stdin() -> IoResult<Channel> {
        // SAFETY: duplicates descriptor 0 to a new close-on-exec descriptor above 2.
        let fd = cvt(unsafe { libc::fcntl(0, libc::F_DUPFD_CLOEXEC, 3) })?;
        // SAFETY: the new descriptor is ours alone.
        let channel = Channel(unsafe { OwnedFd::from_raw_fd(fd) });
        // SAFETY: a constant path; dup2 onto 0 replaces the socket there.
        unsafe {
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            if null >= 0 {
                libc::dup2(null, 0);
                libc::close(null);
            }
        }
        Ok(channel)
    }

    pub fn into_fd(self) -> OwnedFd {
        self.0
    }
    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Sends `data` (blocking until written), with `fd` attached when given.
    pub fn send(&self, data: &[u8], fd: Option<RawFd>) -> IoResult<()> {
        let mut sent = 0;
        while sent < data.len() {
            let mut iov = libc::iovec { iov_base: data[sent..].as_ptr() as *mut _, iov_len: data.len() - sent };
            // Room for one descriptor's control message, aligned as cmsghdr wants.
            let mut control = [0u64; 4];
            // SAFETY: zeroed msghdr is a valid empty header.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            if let (Some(fd), 0) = (fd, sent) {
                // SAFETY: CMSG_SPACE is a pure size computation.
                let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
                msg.msg_control = control.as_mut_ptr().cast();
                // `as _`: the field is usize on glibc, u32 on musl.
                msg.msg_controllen = space as _;
                // SAFETY: the control buffer holds `space` bytes (32 >= CMSG_SPACE(4)); the
                // header and data pointers CMSG_* return lie inside it.
                unsafe {
                    let cmsg = libc::CMSG_FIRSTHDR(&msg);
                    (*cmsg).cmsg_level = libc::SOL_SOCKET;
                    (*cmsg).cmsg_type = libc::SCM_RIGHTS;
                    (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
                }
            }
            // SAFETY: `msg` points at live buffers for the duration of the call.
            let n = unsafe { libc::sendmsg(self.raw(), &msg, libc::MSG_NOSIGNAL) };
            if n < 0 {
                let e = IoError::last_os_error();
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            sent += n as usize;
        }
        Ok(())
    }

    /// Reads up to `buf.len()` bytes (blocking; 0 means the other end is gone), and a
    /// descriptor if one came with them (received close-on-exec).
    pub fn recv(&self, buf: &mut [u8]) -> IoResult<(usize, Option<OwnedFd>)> {
        loop {
            let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
            let mut control = [0u64; 4];
            // SAFETY: zeroed msghdr is a valid empty header.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            // SAFETY: `msg` points at live buffers for the duration of the call.
            let n = unsafe { libc::recvmsg(self.raw(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
            if n < 0 {
                let e = IoError::last_os_error();
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let mut fd = None;
            // SAFETY: the kernel filled `msg`; CMSG_FIRSTHDR/NXTHDR walk only inside it.
            unsafe {
                let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
                while !cmsg.is_null() {
                    if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                        let raw = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>());
                        fd = Some(OwnedFd::from_raw_fd(raw));
                    }
                    cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
                }
            }
            return Ok((n as usize, fd));
        }
    }

    /// Reads exactly `buf.len()` bytes; an error if the other end closes first.
    pub fn recv_exact(&self, buf: &mut [u8]) -> IoResult<Option<OwnedFd>> {
        let mut got = 0;
        let mut fd = None;
        while got < buf.len() {
            let (n, f) = self.recv(&mut buf[got..])?;
            if n == 0 {
                return Err(IoError::from(ErrorKind::UnexpectedEof));
            }
            fd = fd.or(f);
            got += n;
        }
        Ok(fd)
    }

    /// Reads whatever wake-up bytes are waiting, without blocking; false if the other end is gone.
    pub fn drain(&self) -> bool {
        let mut buf = [0u8; 64];
        loop {
            // SAFETY: reads into a local buffer of its length.
            let n = unsafe { libc::recv(self.raw(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
            if n > 0 {
                continue;
            }
            if n == 0 {
                return false;
            }
            let e = IoError::last_os_error();
            return e.kind() != ErrorKind::Interrupted || self.drain();
        }
    }
}

/// What `wait_readable` saw.
#[derive(Debug, PartialEq, Eq)]
pub enum Ready {
    /// The channel has bytes (or was closed).
    Channel,
    /// The process exited.
    Exited,
    /// The deadline passed.
    Timeout,
}

/// Waits until `channel` is readable, the process behind `pidfd` exits, or `until`.
pub fn wait_readable(channel: RawFd, pidfd: RawFd, until: Option<Instant>) -> IoResult<Ready> {
    loop {
        let timeout = match until {
            None => -1,
            Some(t) => {
                let left = t.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Ok(Ready::Timeout);
                }
                // Rounded up: a poll that wakes a little early would spin.
                i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
            }
        };
        let mut fds = [libc::pollfd { fd: channel, events: libc::POLLIN, revents: 0 }, libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 }];
        // SAFETY: polls two descriptors described by a local array of its length.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
        if n < 0 {
            let e = IoError::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[1].revents != 0 {
            return Ok(Ready::Exited);
        }
        if fds[0].revents != 0 {
            return Ok(Ready::Channel);
        }
        if until.is_some_and(|t| Instant::now() >= t) {
            return Ok(Ready::Timeout);
        }
    }
}

/// How a child ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// A host child: its pid, a pidfd (death shows as readable; signals never reach a reused
/// pid), and the memfd its stderr goes to. Reaped by pid, never `waitpid(-1)`, which would
/// take Node's own children from libuv.
pub struct HostProcess {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    stderr: OwnedFd,
    reaped: std::sync::Mutex<Option<Exit>>,
}

impl HostProcess {
    /// Starts `program args` with `stdin` as its control socket and stderr captured, by
    /// posix_spawn (a fork would copy the page tables of a large Node heap first).
    /// `env` (`KEY=value` entries) is its whole environment.
    pub fn spawn(program: &str, args: &[String], env: &[String], stdin: OwnedFd) -> IoResult<HostProcess> {
        // SAFETY: a valid C string literal.
        let stderr = cvt(unsafe { libc::memfd_create(c"zgc-host-stderr".as_ptr(), libc::MFD_CLOEXEC) })?;
        // SAFETY: just created, ours alone.
        let stderr = unsafe { OwnedFd::from_raw_fd(stderr) };
        let mut argv_c = vec![CString::new(program).map_err(|_| IoError::from(ErrorKind::InvalidInput))?];
        for a in args {
            argv_c.push(CString::new(a.as_str()).map_err(|_| IoError::from(ErrorKind::InvalidInput))?);
        }
        let mut argv: Vec<*mut libc::c_char> = argv_c.iter().map(|c| c.as_ptr() as *mut _).collect();
        argv.push(std::ptr::null_mut());
        let env_c = env.iter().filter_map(|e| CString::new(e.as_str()).ok()).collect::<Vec<_>>();
        let mut envp: Vec<*mut libc::c_char> = env_c.iter().map(|c| c.as_ptr() as *mut _).collect();
        envp.push(std::ptr::null_mut());
        let pid = spawn_raw(&argv_c[0], &argv, &envp, stdin.as_raw_fd(), stderr.as_raw_fd())?;
        drop(stdin);
        // SAFETY: pidfd_open on the pid we just spawned and have not reaped (so it is ours).
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if pidfd < 0 {
            let e = IoError::last_os_error();
            // SAFETY: our unreaped child: kill and reap it so that nothing is left behind.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            return Err(e);
        }
        // SAFETY: a new descriptor owned by nothing else; pidfds are close-on-exec.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
        Ok(HostProcess { pid, pidfd, stderr, reaped: std::sync::Mutex::new(None) })
    }

    pub fn pid(&self) -> u32 {
        self.pid as u32
    }
    pub fn pidfd(&self) -> RawFd {
        self.pidfd.as_raw_fd()
    }

    /// SIGKILL through the pidfd: harmless once the child is gone, and never a reused pid.
    pub fn kill(&self) {
        // SAFETY: pidfd_send_signal with our pidfd and no siginfo.
        unsafe { libc::syscall(libc::SYS_pidfd_send_signal, self.pidfd.as_raw_fd(), libc::SIGKILL, std::ptr::null::<libc::siginfo_t>(), 0) };
    }

    /// Reaps the child (blocking until it exits) and says how it ended; idempotent.
    pub fn reap(&self) -> Exit {
        let mut reaped = self.reaped.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(exit) = &*reaped {
            return exit.clone();
        }
        let mut status = 0;
        loop {
            // SAFETY: waits for our own child by pid (never -1), status into a local.
            let r = unsafe { libc::waitpid(self.pid, &mut status, 0) };
            if r == self.pid {
                break;
            }
            if r < 0 && IoError::last_os_error().kind() == ErrorKind::Interrupted {
                continue;
            }
            // Reaped elsewhere (it cannot be: only this value waits for this pid).
            status = 0;
            break;
        }
        let exit = if libc::WIFSIGNALED(status) { Exit::Signal(libc::WTERMSIG(status)) } else { Exit::Code(libc::WEXITSTATUS(status)) };
        *reaped = Some(exit.clone());
        exit
    }

    /// Whether the child has exited (without reaping it).
    pub fn exited(&self) -> bool {
        let mut fds = [libc::pollfd { fd: self.pidfd.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        // SAFETY: polls one descriptor, without waiting.
        unsafe { libc::poll(fds.as_mut_ptr(), 1, 0) > 0 }
    }

    /// The last `max` bytes the child wrote to stderr.
    pub fn stderr_tail(&self, max: usize) -> String {
        let fd = self.stderr.as_raw_fd();
        // SAFETY: lseek on our memfd, to learn its size.
        let end = unsafe { libc::lseek(fd, 0, libc::SEEK_END) };
        if end <= 0 {
            return String::new();
        }
        let start = (end as usize).saturating_sub(max);
        let mut buf = vec![0u8; end as usize - start];
        // SAFETY: pread into a buffer of its length.
        let n = unsafe { libc::pread(fd, buf.as_mut_ptr().cast(), buf.len(), start as libc::off_t) };
        buf.truncate(n.max(0) as usize);
        String::from_utf8_lossy(&buf).into_owned()
    }

    /// Resident memory of the child, bytes (from /proc/PID/statm); None once it is gone.
    pub fn resident_bytes(&self) -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{}/statm", self.pid)).ok()?;
        let pages: u64 = text.split_whitespace().nth(1)?.parse().ok()?;
        Some(pages * page_size() as u64)
    }
}

impl Drop for HostProcess {
    fn drop(&mut self) {
        // Never left running or unreaped (a zombie) past its owner.
        self.kill();
        self.reap();
    }
}

fn spawn_raw(path: &CStr, argv: &[*mut libc::c_char], envp: &[*mut libc::c_char], stdin: RawFd, stderr: RawFd) -> IoResult<libc::pid_t> {
    let devnull = c"/dev/null";
    let mut pid = 0;
    // SAFETY: the file-actions object is initialised before use and destroyed after; every
    // pointer passed (path, argv, envp) is a NUL-terminated C string or array that
    // outlives the call; posix_spawn applies the dup2s in the child only.
    unsafe {
        let mut actions = std::mem::MaybeUninit::<libc::posix_spawn_file_actions_t>::uninit();
        let r = libc::posix_spawn_file_actions_init(actions.as_mut_ptr());
        if r != 0 {
            return Err(IoError::from_raw_os_error(r));
        }
        let mut actions = actions.assume_init();
        let mut r = libc::posix_spawn_file_actions_adddup2(&mut actions, stdin, 0);
        if r == 0 {
            r = libc::posix_spawn_file_actions_addopen(&mut actions, 1, devnull.as_ptr(), libc::O_WRONLY, 0);
        }
        if r == 0 {
            r = libc::posix_spawn_file_actions_adddup2(&mut actions, stderr, 2);
        }
        if r == 0 {
            r = libc::posix_spawn(&mut pid, path.as_ptr(), &actions, std::ptr::null(), argv.as_ptr(), envp.as_ptr());
        }
        libc::posix_spawn_file_actions_destroy(&mut actions);
        if r != 0 {
            return Err(IoError::from_raw_os_error(r));
        }
    }
    Ok(pid)
}

pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 {
        n as usize
    } else {
        4096
    }
}

/// In the child, first thing: die with the thread that spawned it (SIGKILL when it ends,
/// even by SIGKILL of Node), dump no core (a core of a large process takes seconds), and
/// give up if that parent is already gone. `parent` is the pid it was started from.
pub fn become_host_child(parent: u32) -> IoResult<()> {
    // SAFETY: prctl with PR_SET_PDEATHSIG and a signal number; setrlimit with a local struct.
    unsafe {
        cvt(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0))?;
        let none = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
        if libc::getppid() as u32 != parent {
            libc::_exit(70);
        }
    }
    Ok(())
}

/// Waits a little while spinning for `cond`, yielding the core every few turns (cores are
/// few, and the other side may need this one).
pub fn spin_until(mut cond: impl FnMut() -> bool, budget: Duration) -> bool {
    let until = Instant::now() + budget;
    let mut turns = 0u32;
    loop {
        if cond() {
            return true;
        }
        turns = turns.wrapping_add(1);
        if turns.is_multiple_of(64) {
            if Instant::now() >= until {
                return false;
            }
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}
