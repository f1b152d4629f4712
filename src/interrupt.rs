//! Ctrl-C keeps what was measured: the first SIGINT asks the running command to stop
//! starting new work, to let what is in flight finish (or give it up after
//! [`GRACE`]) and to report what completed, marked as interrupted, with exit status 130;
//! a second SIGINT exits at once. Commands that run for more than a moment call
//! [`install`]; the engine and the probes ask [`requested`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long work in flight may go on after the first SIGINT.
pub const GRACE: Duration = Duration::from_secs(1);

/// The exit status of an interrupted command (128 + SIGINT), as shells give it.
pub const EXIT_STATUS: i32 = 130;

static REQUESTED: AtomicBool = AtomicBool::new(false);
static AT: OnceLock<Instant> = OnceLock::new();
static INSTALLED: OnceLock<()> = OnceLock::new();
static NOTIFY: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Run at a second SIGINT, before the process exits (the lab's processes and files).
static CLEANUP: std::sync::Mutex<Vec<fn()>> = std::sync::Mutex::new(Vec::new());

/// Whether the running command handles Ctrl-C itself ([`install`] was called): then the
/// first SIGINT is its to act on.
pub fn installed() -> bool {
    INSTALLED.get().is_some()
}

/// Have `f` run when a second SIGINT ends the process at once.
pub fn on_exit(f: fn()) {
    CLEANUP.lock().unwrap_or_else(|p| p.into_inner()).push(f);
}

/// End the process now with [`EXIT_STATUS`], after the cleanups registered.
pub fn exit_now() -> ! {
    let fs = std::mem::take(&mut *CLEANUP.lock().unwrap_or_else(|p| p.into_inner()));
    for f in fs {
        f();
    }
    std::process::exit(EXIT_STATUS)
}

/// Whether this process's group is its terminal's foreground group: a Ctrl-C typed
/// there went to each process of the group (a child command got it too).
pub fn from_terminal() -> bool {
    use std::os::fd::AsFd;
    let ours = rustix::process::getpgrp();
    let foreground = |fd: std::os::fd::BorrowedFd<'_>| rustix::termios::tcgetpgrp(fd).ok();
    [
        std::io::stdin().as_fd(),
        std::io::stdout().as_fd(),
        std::io::stderr().as_fd(),
    ]
    .into_iter()
    .any(|fd| foreground(fd) == Some(ours))
}

/// A child command's part in a Ctrl-C: it gets the interrupt once (unless a terminal
/// sent it to the whole group, the child with it) and [`GRACE`] to end on its own (a
/// load tool prints what it measured) before it is stopped.
#[derive(Default)]
pub struct ChildGrace(Option<Instant>);

impl ChildGrace {
    /// After a Ctrl-C: pass it on to the process `pid` the first time; true once its
    /// grace is over.
    pub fn over(&mut self, pid: u32) -> bool {
        if !requested() {
            return false;
        }
        match self.0 {
            None => {
                if !from_terminal() {
                    // The child's PID, which its parent has not reaped.
                    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                        let _ = rustix::process::kill_process(pid, rustix::process::Signal::INT);
                    }
                }
                self.0 = Some(Instant::now());
                false
            }
            Some(t) => t.elapsed() >= GRACE,
        }
    }
}

/// Whether the user asked to stop (a relaxed load: cheap enough for every request).
#[inline]
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// When the first SIGINT came, if one did.
pub fn at() -> Option<Instant> {
    AT.get().copied()
}

/// Ask to stop, as the first SIGINT does (also for tests of the machinery).
pub fn request() {
    let _ = AT.set(Instant::now());
    REQUESTED.store(true, Ordering::SeqCst);
    NOTIFY.notify_waiters();
}

/// Completes once a stop was asked for and [`GRACE`] has passed since: what is still in
/// flight then is given up.
pub async fn grace_over() {
    let notified = NOTIFY.notified();
    if !requested() {
        notified.await;
    }
    let since = at().map_or(Duration::ZERO, |t| t.elapsed());
    tokio::time::sleep(GRACE.saturating_sub(since)).await;
}

/// Completes as soon as a stop is asked for.
pub async fn stopped() {
    let notified = NOTIFY.notified();
    if !requested() {
        notified.await;
    }
}

/// Watch for SIGINT on a thread of its own (once per process): the first asks to stop,
/// the second exits with status 130 at once. Returns when the handler is in place, so a
/// Ctrl-C right after is not lost.
pub fn install() {
    if INSTALLED.set(()).is_err() {
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("handshake-sigint".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                let _ = tx.send(());
                return;
            };
            rt.block_on(async move {
                use tokio::signal::unix::{signal, SignalKind};
                let Ok(mut int) = signal(SignalKind::interrupt()) else {
                    let _ = tx.send(());
                    return;
                };
                let _ = tx.send(());
                if int.recv().await.is_none() {
                    return;
                }
                request();
                if int.recv().await.is_some() {
                    exit_now();
                }
            });
        });
    if spawned.is_ok() {
        let _ = rx.recv();
    }
}
