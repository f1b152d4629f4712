//! Ctrl-C and SIGTERM keep what was measured: the first SIGINT or SIGTERM asks the
//! running command to stop starting new work, to let what is in flight finish (or give
//! it up after [`GRACE`]) and to report what completed, marked as interrupted by that
//! signal, with exit status 128 + its number (130, 143); a second ends the wait for what
//! is in flight at once, and the report is still printed (GNU `timeout` sends its signal
//! twice, to the command and to its group); a third exits at once. Commands that run for
//! more than a moment call [`install`]; the engine and the probes ask [`requested`].

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long work in flight may go on after the first SIGINT.
const GRACE: Duration = Duration::from_secs(1);

/// The signal that asked a command to stop: SIGINT (Ctrl-C, `timeout -s INT`) or
/// SIGTERM (`kill`, systemd stopping a unit, Kubernetes deleting a pod).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct By(i32);

impl By {
    pub(crate) const SIGINT: By = By(libc::SIGINT);
    pub(crate) const SIGTERM: By = By(libc::SIGTERM);

    /// Its name, as a report says it: "SIGINT (Ctrl-C)", "SIGTERM".
    pub(crate) fn words(self) -> &'static str {
        if self == By::SIGTERM {
            "SIGTERM"
        } else {
            "SIGINT (Ctrl-C)"
        }
    }

    /// Its number (2, 15).
    pub(crate) fn number(self) -> i32 {
        self.0
    }

    /// The exit status of a command it interrupted, as shells give it: 128 + its number.
    pub(crate) fn exit_status(self) -> i32 {
        128 + self.0
    }
}

static REQUESTED: AtomicBool = AtomicBool::new(false);
/// The first signal's number (0 before one came).
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// A second signal came: what is in flight is given up now.
static HURRIED: AtomicBool = AtomicBool::new(false);
static HURRY: tokio::sync::Notify = tokio::sync::Notify::const_new();
static AT: OnceLock<Instant> = OnceLock::new();
static INSTALLED: OnceLock<()> = OnceLock::new();
static NOTIFY: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Run when a third signal ends the process at once (the lab's processes and files).
static CLEANUP: std::sync::Mutex<Vec<fn()>> = std::sync::Mutex::new(Vec::new());

/// Whether the running command handles Ctrl-C itself ([`install`] was called): then the
/// first SIGINT is its to act on.
pub(crate) fn installed() -> bool {
    INSTALLED.get().is_some()
}

/// Have `f` run when a signal ends the process at once.
pub(crate) fn on_exit(f: fn()) {
    CLEANUP.lock().unwrap_or_else(|p| p.into_inner()).push(f);
}

/// End the process now with [`exit_status`], after the cleanups registered.
fn exit_now() -> ! {
    let fs = std::mem::take(&mut *CLEANUP.lock().unwrap_or_else(|p| p.into_inner()));
    for f in fs {
        f();
    }
    std::process::exit(exit_status())
}

/// The signal that asked to stop, if one did.
pub(crate) fn by() -> Option<By> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        n => Some(By(n)),
    }
}

/// The exit status of an interrupted command: 128 + the signal's number (130 for
/// SIGINT, also when the stop was asked for otherwise).
pub(crate) fn exit_status() -> i32 {
    by().unwrap_or(By::SIGINT).exit_status()
}

/// Whether this process's group is its terminal's foreground group: a Ctrl-C typed
/// there went to each process of the group (a child command got it too).
pub(crate) fn from_terminal() -> bool {
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

/// A child command's part in a Ctrl-C or SIGTERM: it gets the same signal once (unless a
/// terminal sent a Ctrl-C to the whole group, the child with it) and [`GRACE`] to end on
/// its own (a load tool prints what it measured) before it is stopped; a second signal
/// ends its grace at once.
#[derive(Default)]
pub(crate) struct ChildGrace(Option<Instant>);

impl ChildGrace {
    /// After a Ctrl-C or SIGTERM: pass it on to the process `pid` the first time; true
    /// once its grace is over.
    pub(crate) fn over(&mut self, pid: u32) -> bool {
        if !requested() {
            return false;
        }
        match self.0 {
            None => {
                let by = by().unwrap_or(By::SIGINT);
                if by != By::SIGINT || !from_terminal() {
                    // The child's PID, which its parent has not reaped.
                    let sig = if by == By::SIGTERM {
                        rustix::process::Signal::TERM
                    } else {
                        rustix::process::Signal::INT
                    };
                    if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                        let _ = rustix::process::kill_process(pid, sig);
                    }
                }
                self.0 = Some(Instant::now());
                hurried()
            }
            Some(t) => t.elapsed() >= GRACE || hurried(),
        }
    }
}

/// Whether the user asked to stop (a relaxed load: cheap enough for every request).
#[inline]
pub(crate) fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// When the first signal came, if one did.
pub(crate) fn at() -> Option<Instant> {
    AT.get().copied()
}

/// Whether a second signal came: what is still in flight is given up at once.
pub(crate) fn hurried() -> bool {
    HURRIED.load(Ordering::Relaxed)
}

/// Whether a stop was asked for and the wait for what is in flight is over: [`GRACE`]
/// has passed since, or a second signal came.
pub(crate) fn grace_passed() -> bool {
    requested() && (hurried() || at().is_some_and(|at| at.elapsed() >= GRACE))
}

/// Ask to stop, as the first signal `by` does; the first asking is the one said.
pub(crate) fn request_by(by: By) {
    let _ = SIGNAL.compare_exchange(0, by.0, Ordering::SeqCst, Ordering::SeqCst);
    let _ = AT.set(Instant::now());
    REQUESTED.store(true, Ordering::SeqCst);
    NOTIFY.notify_waiters();
}

/// Give up what is in flight now, as a second signal does.
fn hurry() {
    HURRIED.store(true, Ordering::SeqCst);
    HURRY.notify_waiters();
}

/// Completes once a stop was asked for and [`GRACE`] has passed since (or a second
/// signal came): what is still in flight then is given up.
pub(crate) async fn grace_over() {
    stopped().await;
    let hurry = HURRY.notified();
    if hurried() {
        return;
    }
    let since = at().map_or(Duration::ZERO, |t| t.elapsed());
    tokio::select! {
        () = tokio::time::sleep(GRACE.saturating_sub(since)) => {}
        () = hurry => {}
    }
}

/// Completes as soon as a stop is asked for.
pub(crate) async fn stopped() {
    let notified = NOTIFY.notified();
    if !requested() {
        notified.await;
    }
}

/// Watch for SIGINT and SIGTERM on a thread of its own (once per process): the first
/// asks to stop, the second gives up what is in flight, the third exits at once with
/// 128 + the first's number. Returns when the handlers are in place, so a signal right
/// after is not lost.
pub(crate) fn install() {
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
                let (Ok(mut int), Ok(mut term)) = (
                    signal(SignalKind::interrupt()),
                    signal(SignalKind::terminate()),
                ) else {
                    let _ = tx.send(());
                    return;
                };
                let _ = tx.send(());
                for n in 1.. {
                    let by = tokio::select! {
                        got = int.recv() => got.map(|()| By::SIGINT),
                        got = term.recv() => got.map(|()| By::SIGTERM),
                    };
                    let Some(by) = by else { return };
                    match n {
                        1 => request_by(by),
                        2 => hurry(),
                        _ => exit_now(),
                    }
                }
            });
        });
    if spawned.is_ok() {
        let _ = rx.recv();
    }
}
