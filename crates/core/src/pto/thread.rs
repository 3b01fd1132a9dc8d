//! One OS thread per PTO library: it opens the library, owns its `Host`, and runs every call
//! in submission order. On hardware the device context belongs to the thread that called
//! `set_device`, and the library locks nothing, so one thread is both the rule and the lock.

use super::{Host, HostApi, PtoError};
use std::sync::mpsc;

pub type Job<A> = Box<dyn FnOnce(&mut Host<A>) + Send>;

pub struct HostThread<A: HostApi + 'static> {
    jobs: mpsc::Sender<Job<A>>,
    pub label: String,
    pub runtime_size: usize,
    /// The OS thread id (Linux tid) of the library's thread; -1 where it cannot be read.
    pub tid: i64,
}

fn current_tid() -> i64 {
    std::fs::read_link("/proc/thread-self").ok().and_then(|p| p.file_name()?.to_str()?.parse().ok()).unwrap_or(-1)
}

/// The thread's name as `/proc/self/task/*/comm` shows it.
pub const THREAD_NAME: &str = "zgc-pto-host";

impl<A: HostApi + 'static> HostThread<A> {
    /// Starts the thread, which runs `open` (dlopen and symbol checks happen on it too) and
    /// then serves jobs. Returns once the library is open, or with the reason it is not.
    pub fn spawn(label: String, open: impl FnOnce() -> Result<A, PtoError> + Send + 'static) -> Result<HostThread<A>, PtoError> {
        let (jobs, queue) = mpsc::channel::<Job<A>>();
        let (opened, result) = mpsc::sync_channel::<Result<(usize, i64), PtoError>>(1);
        let stopped = || PtoError::Stopped { path: label.clone() };
        std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                let mut host = match open() {
                    Ok(api) => Host::new(api),
                    Err(e) => {
                        let _ = opened.send(Err(e));
                        return;
                    }
                };
                let _ = opened.send(Ok((host.runtime_size(), current_tid())));
                // Ends only when every sender is gone; loaded libraries keep theirs forever.
                // A job that panics (a broken invariant) must not take the thread, and every
                // later call of the library, with it.
                for job in queue {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&mut host)));
                }
            })
            .map_err(|e| PtoError::Load { path: label.clone(), reason: format!("cannot start its thread: {e}") })?;
        let (runtime_size, tid) = result.recv().map_err(|_| stopped())??;
        Ok(HostThread { jobs, label, runtime_size, tid })
    }

    /// Queues `job` behind every earlier one.
    pub fn submit(&self, job: impl FnOnce(&mut Host<A>) + Send + 'static) -> Result<(), PtoError> {
        self.jobs.send(Box::new(job)).map_err(|_| PtoError::Stopped { path: self.label.clone() })
    }

    /// Runs `job` on the library's thread and waits for its result.
    pub fn call<T: Send + 'static>(&self, job: impl FnOnce(&mut Host<A>) -> T + Send + 'static) -> Result<T, PtoError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(move |host| {
            let _ = tx.send(job(host));
        })?;
        rx.recv().map_err(|_| PtoError::Stopped { path: self.label.clone() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pto::LaunchParams;
    use crate::ffi::memory::AlignedBuf;
    use std::sync::{Arc, Mutex};
    use std::thread::ThreadId;

    /// Remembers the thread of every call.
    struct Threads(Arc<Mutex<Vec<ThreadId>>>);
    impl Threads {
        fn note(&self) -> i32 {
            self.0.lock().unwrap().push(std::thread::current().id());
            0
        }
    }
    impl HostApi for Threads {
        fn runtime_size(&self) -> usize {
            self.note();
            64
        }
        fn set_device(&self, _: i32) -> i32 {
            self.note()
        }
        fn register_kernel(&self, _: i32, _: &[u8]) -> i32 {
            self.note()
        }
        fn init_runtime(&self, _: &mut AlignedBuf) -> i32 {
            self.note()
        }
        fn launch_runtime(&self, _: &mut AlignedBuf, _: &LaunchParams) -> i32 {
            self.note()
        }
        fn finalize_runtime(&self, _: &mut AlignedBuf) -> i32 {
            self.note()
        }
    }

    #[test]
    fn every_call_runs_on_the_one_library_thread_in_submission_order() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let api = Threads(seen.clone());
        let thread = Arc::new(HostThread::spawn("fake".into(), move || Ok(api)).unwrap());
        assert_eq!(thread.runtime_size, 64);
        assert!(thread.tid > 0 && thread.tid != current_tid());
        thread.call(|h| h.set_device(0)).unwrap().unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let callers: Vec<_> = (0..4)
            .map(|k| {
                let (thread, order) = (thread.clone(), order.clone());
                std::thread::spawn(move || {
                    for i in 0..25 {
                        thread.call(move |h| h.register_kernel(k, vec![i as u8 + 1])).unwrap().unwrap();
                        order.lock().unwrap().push((k, i));
                    }
                })
            })
            .collect();
        callers.into_iter().for_each(|c| c.join().unwrap());
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2 + 100);
        assert!(seen.iter().all(|&t| t == seen[0]));
        assert_ne!(seen[0], std::thread::current().id());
        // Each caller's own calls stay in its order.
        for k in 0..4 {
            let mine: Vec<_> = order.lock().unwrap().iter().filter(|(c, _)| *c == k).map(|&(_, i)| i).collect();
            assert_eq!(mine, (0..25).collect::<Vec<_>>());
        }
    }

    #[test]
    fn a_library_that_fails_to_open_reports_why() {
        let err = HostThread::<Threads>::spawn("bad".into(), || Err(PtoError::Load { path: "bad".into(), reason: "no".into() }));
        assert_eq!(err.err().map(|e| e.code()), Some("ERR_PTO_LOAD"));
    }

    #[test]
    fn a_job_that_panics_leaves_the_thread_serving() {
        let api = Threads(Arc::new(Mutex::new(Vec::new())));
        let thread = HostThread::spawn("fake".into(), move || Ok(api)).unwrap();
        assert!(thread.call(|_| -> () { panic!("a broken invariant") }).is_err());
        assert_eq!(thread.call(|h| h.set_device(0)).unwrap(), Ok(()));
    }
}
