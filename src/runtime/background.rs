//! Work that must not delay the SA's answers or the SMPs in flight:
//! routing, and building the SA's indexes for a new snapshot.
//!
//! It runs on a thread of its own in the kernel's idle scheduling class
//! (`SCHED_IDLE`), which takes only the CPU no normal thread wants. At
//! nice 10, a routing run still delayed SA answers: on ibsim's 2 cores,
//! while a 6x6 torus lost a switch and Nue routed for 30 ms, a PathRecord
//! waited up to 8.9 ms (OpenSM: 4.4 ms); in the idle class, 2.8 ms. But an
//! idle thread gets nothing while normal threads keep every core busy (an
//! SA flood), and the fabric cannot wait on that: after [`IDLE_GRACE`] the
//! thread is raised to the normal class at nice 10, where it takes its
//! share. Raising needs CAP_SYS_NICE (the daemon runs as root); without
//! it the work stays idle and the failure is logged once.
//!
//! The thread is new for each piece of work, so no pooled thread is left
//! in the idle class. It is started from tokio's blocking pool, whose
//! thread waits for it: a paused test clock does not run ahead while the
//! work runs, as it would not for any blocking task.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tracing::warn;

/// How long background work runs in the idle class before it competes for
/// the CPU at nice 10: a routing run on the fabrics ibsim holds takes
/// 1-50 ms, the 11,664-host fat tree's ftree about a second.
pub(super) const IDLE_GRACE: Duration = Duration::from_millis(250);

/// Nice value of background work once raised: below the owner, the SA and
/// the I/O thread.
const RAISED_NICE: libc::c_int = 10;

/// Why background work gave no result.
pub(super) enum Failed {
    /// It panicked; the payload, to resume the panic where it was awaited.
    Panicked(Box<dyn std::any::Any + Send>),
    /// The runtime shut down first.
    Cancelled,
}

/// Background work's result, awaited.
pub(super) struct Background<R> {
    done: tokio::task::JoinHandle<std::thread::Result<R>>,
    /// The worker thread's kernel ID once it runs (0 before).
    tid: Arc<AtomicI32>,
    raise: Option<Pin<Box<tokio::time::Sleep>>>,
}

/// Runs `work` on a thread named `name` in the idle class; see the module
/// documentation. Must be called inside a tokio runtime.
pub(super) fn spawn<R, W>(name: &'static str, work: W) -> Background<R>
where
    R: Send + 'static,
    W: FnOnce() -> R + Send + 'static,
{
    let tid = Arc::new(AtomicI32::new(0));
    let worker_tid = tid.clone();
    let done = tokio::task::spawn_blocking(move || {
        // The work goes to the thread once it exists, so that it stays
        // here if no thread can be had.
        let (work_tx, work_rx) = std::sync::mpsc::channel::<W>();
        let started = std::thread::Builder::new().name(name.into()).spawn(move || {
            let work = work_rx.recv().expect("the work is sent once the thread exists");
            worker_tid.store(own_tid(), Ordering::Release);
            enter_idle_class();
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            // Ended: nothing left to raise (its ID may go to another thread).
            worker_tid.store(0, Ordering::Release);
            result
        });
        match started {
            Ok(thread) => {
                let _ = work_tx.send(work);
                thread.join().and_then(|r| r)
            }
            Err(e) => {
                warn!(error = %e, name, "no thread for background work: it runs on the blocking pool");
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))
            }
        }
    });
    Background { done, tid, raise: Some(Box::pin(tokio::time::sleep(IDLE_GRACE))) }
}

impl<R> Future for Background<R> {
    type Output = Result<R, Failed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(joined) = Pin::new(&mut self.done).poll(cx) {
            return Poll::Ready(match joined {
                Ok(Ok(r)) => Ok(r),
                Ok(Err(payload)) => Err(Failed::Panicked(payload)),
                Err(e) if e.is_panic() => Err(Failed::Panicked(e.into_panic())),
                Err(_) => Err(Failed::Cancelled),
            });
        }
        if let Some(raise) = self.raise.as_mut() {
            if raise.as_mut().poll(cx).is_ready() {
                self.raise = None;
                raise_to_normal(self.tid.load(Ordering::Acquire));
            }
        }
        Poll::Pending
    }
}

#[allow(unsafe_code)]
fn own_tid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as i32 }
}

/// Puts the calling thread in the idle class; a failure leaves it where
/// it was (normal class), which only means it competes.
#[allow(unsafe_code)]
fn enter_idle_class() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler reads `param` only during the call; 0
    // names the calling thread.
    unsafe {
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
    }
}

/// Moves thread `tid` (0: not started yet, nothing to do) to the normal
/// class at [`RAISED_NICE`]. The first failure is logged.
#[allow(unsafe_code)]
fn raise_to_normal(tid: i32) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if tid == 0 {
        return;
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: both calls read only their arguments; a thread that has
    // ended meanwhile gives ESRCH, nothing else.
    let failed = unsafe {
        libc::sched_setscheduler(tid, libc::SCHED_OTHER, &param) != 0
            || libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, RAISED_NICE) != 0
    };
    let error = std::io::Error::last_os_error();
    if failed && error.raw_os_error() != Some(libc::ESRCH) && !WARNED.swap(true, Ordering::Relaxed) {
        warn!(
            %error,
            "background work (routing, SA indexes) stays in the idle scheduling class: a busy CPU delays it"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[allow(unsafe_code)]
    fn policy_of(tid: i32) -> libc::c_int {
        // SAFETY: reads only its argument.
        unsafe { libc::sched_getscheduler(tid) }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_runs_idle_then_is_raised_after_the_grace() {
        let (seen_tx, seen_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let work = spawn("ibsm-test-bg", move || {
            let tid = own_tid();
            seen_tx.send((tid, policy_of(tid))).unwrap();
            go_rx.recv().unwrap();
            (policy_of(tid), std::thread::current().name().map(String::from))
        });
        let mut work = Box::pin(work);
        let (tid, first) = tokio::task::spawn_blocking(move || seen_rx.recv().unwrap()).await.unwrap();
        assert_eq!(first, libc::SCHED_IDLE, "the work starts in the idle class");
        // Past the grace, polled, the thread is raised (as root).
        tokio::time::sleep(IDLE_GRACE + Duration::from_millis(50)).await;
        assert!(futures::poll!(work.as_mut()).is_pending());
        let raised = policy_of(tid);
        go_tx.send(()).unwrap();
        let (last, name) = match work.await {
            Ok(r) => r,
            Err(_) => panic!("the work failed"),
        };
        assert_eq!(name.as_deref(), Some("ibsm-test-bg"));
        // Raising needs CAP_SYS_NICE: without it the work stays idle.
        #[allow(unsafe_code)]
        // SAFETY: geteuid has no arguments and cannot fail.
        let root = unsafe { libc::geteuid() } == 0;
        if root {
            assert_eq!((raised, last), (libc::SCHED_OTHER, libc::SCHED_OTHER));
        } else {
            assert_eq!(last, libc::SCHED_IDLE);
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_comes_back_to_the_caller() {
        let work = spawn("ibsm-test-bg", || -> u32 { panic!("routing broke") });
        match work.await {
            Err(Failed::Panicked(payload)) => assert_eq!(payload.downcast_ref::<&str>(), Some(&"routing broke")),
            _ => panic!("the panic was lost"),
        }
    }
}
