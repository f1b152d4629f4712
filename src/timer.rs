//! Deadlines without a timer-wheel update per request: one `Sleep` per worker or
//! connection, re-armed lazily.

use std::future::Future;
use std::pin::Pin;
use std::time::Instant;

use tokio::time::Sleep;

/// Await `fut` unless `deadline` comes first (`None` then). The sleep is moved only when
/// it would fire too late; when it fires early (armed for an earlier deadline) it is
/// pushed to `deadline` and the wait goes on. So with deadlines that only move forward,
/// an operation that completes in time never touches the timer wheel, and one that is
/// ready at once never polls the timer at all.
pub async fn within<F: Future>(
    mut sleep: Pin<&mut Sleep>,
    deadline: Instant,
    fut: F,
) -> Option<F::Output> {
    let deadline = tokio::time::Instant::from_std(deadline);
    if sleep.deadline() > deadline {
        sleep.as_mut().reset(deadline);
    }
    let mut fut = std::pin::pin!(fut);
    loop {
        tokio::select! {
            biased;
            out = &mut fut => return Some(out),
            _ = sleep.as_mut() => {
                if tokio::time::Instant::now() >= deadline {
                    return None;
                }
                sleep.as_mut().reset(deadline);
            }
        }
    }
}
