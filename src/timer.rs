//! Time for the engine and the server: deadlines without a timer-wheel update per
//! request (one `Sleep` per worker or connection, re-armed lazily), and the open loop's
//! paced waits on a timer of each worker's own (a Linux `timerfd`, which the kernel fires
//! with a high-resolution timer) rather than on tokio's timer wheel, whose millisecond
//! ticks would make every paced send leave up to a millisecond late and add that to its
//! `blocked` phase and its latency.

use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::time::Instant;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::Sleep;

/// Await `fut` unless `deadline` comes first (`None` then). The sleep is moved only when
/// it would fire too late; when it fires early (armed for an earlier deadline) it is
/// pushed to `deadline` and the wait goes on. So with deadlines that only move forward,
/// an operation that completes in time never touches the timer wheel, and one that is
/// ready at once never polls the timer at all.
///
/// A future of its own rather than an async fn: an async fn keeps its argument and its
/// pinned copy side by side, and `fut` (a response read) is most of a worker's task.
pub(crate) fn within<F: Future>(
    mut sleep: Pin<&mut Sleep>,
    deadline: Instant,
    fut: F,
) -> Within<'_, F> {
    let deadline = tokio::time::Instant::from_std(deadline);
    if sleep.deadline() > deadline {
        sleep.as_mut().reset(deadline);
    }
    Within {
        sleep,
        deadline,
        fut,
    }
}

pin_project_lite::pin_project! {
    /// The future [`within`] returns.
    pub struct Within<'a, F> {
        sleep: Pin<&'a mut Sleep>,
        deadline: tokio::time::Instant,
        #[pin]
        fut: F,
    }
}

impl<F: Future> Future for Within<'_, F> {
    type Output = Option<F::Output>;

    fn poll(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        use std::task::Poll;
        let this = self.project();
        if let Poll::Ready(out) = this.fut.poll(cx) {
            return Poll::Ready(Some(out));
        }
        while this.sleep.as_mut().poll(cx).is_ready() {
            if tokio::time::Instant::now() >= *this.deadline {
                return Poll::Ready(None);
            }
            this.sleep.as_mut().reset(*this.deadline);
        }
        Poll::Pending
    }
}

/// Keep the runtime's timer waking at least once a `period`, for as long as the future
/// runs (spawn it on the runtime).
///
/// Tokio's time driver writes to the reactor's wake-up descriptor whenever a timer is
/// armed earlier than the driver's next planned wake-up, and with no timer armed at all
/// that is every timer: a server taking one connection at a time (each with its idle
/// timeout, armed when its first read waits) paid a `write` system call per connection
/// for it, and the reactor a wake-up for nothing. With this tick armed, a timer more
/// than `period` ahead never asks for one; the cost is one wake-up per `period`.
pub(crate) async fn keep_timer_awake(period: std::time::Duration) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
    }
}

/// One worker's pacing timer. Without a `timerfd` (an old kernel, or out of file
/// descriptors) it falls back to tokio's timer, coarser but correct.
pub(crate) struct Pacer {
    timer: Option<AsyncFd<OwnedFd>>,
}

impl Default for Pacer {
    fn default() -> Self {
        Pacer::new()
    }
}

impl Pacer {
    /// Must be called inside the runtime that will wait on it.
    pub(crate) fn new() -> Pacer {
        use rustix::time::{timerfd_create, TimerfdClockId, TimerfdFlags};
        let timer = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )
        .ok()
        .and_then(|fd| crate::sys::async_fd(fd, Interest::READABLE).ok());
        Pacer { timer }
    }

    /// Return at `at` (at once if it has passed).
    pub(crate) async fn until(&self, at: Instant) {
        let wait = at.saturating_duration_since(Instant::now());
        if wait.is_zero() {
            return;
        }
        let fired = match &self.timer {
            Some(timer) => arm(timer, wait).is_ok() && expiry(timer).await.is_ok(),
            None => false,
        };
        if !fired {
            tokio::time::sleep_until(at.into()).await;
        }
    }
}

/// Set the timer to fire once, `wait` from now.
fn arm(timer: &AsyncFd<OwnedFd>, wait: std::time::Duration) -> io::Result<()> {
    use rustix::time::{timerfd_settime, Itimerspec, TimerfdTimerFlags, Timespec};
    let spec = Itimerspec {
        it_interval: Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
        it_value: Timespec {
            tv_sec: wait.as_secs() as i64,
            tv_nsec: i64::from(wait.subsec_nanos()),
        },
    };
    timerfd_settime(timer.get_ref(), TimerfdTimerFlags::empty(), &spec)?;
    Ok(())
}

/// Wait until the armed timer has fired, and consume its expiry count.
async fn expiry(timer: &AsyncFd<OwnedFd>) -> io::Result<()> {
    loop {
        let mut guard = timer.readable().await?;
        let read = guard.try_io(|fd| {
            let mut count = [0u8; 8];
            rustix::io::read(fd.get_ref(), &mut count)?;
            Ok(())
        });
        match read {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
            Ok(Err(e)) => return Err(e),
            // Not fired yet (a stale readiness): wait again.
            Err(_would_block) => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Paced waits, on the timerfd and on the fallback, never return before the intended
    /// time.
    #[test]
    fn waits_until_the_intended_time() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let hires = Pacer::new();
            assert!(hires.timer.is_some(), "timerfd_create failed on Linux");
            let fallback = Pacer { timer: None };
            for pacer in [&hires, &fallback] {
                let start = Instant::now();
                for i in 1..=20u32 {
                    let at = start + Duration::from_micros(700) * i;
                    pacer.until(at).await;
                    assert!(Instant::now() >= at, "returned before send {i}'s time");
                }
            }
        });
    }
}
