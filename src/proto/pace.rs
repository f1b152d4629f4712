//! The limits on reading a response that every protocol applies the same way: the first
//! byte's deadline (`--wait-timeout`) and the minimum speed after it (`--min-speed`).

use std::time::{Duration, Instant};

use crate::record::{ErrorDetail, ErrorKind, Failure};

/// The minimum-speed rule: fewer than `bytes_per_s` × window bytes in a window fails
/// the attempt (`timeout_receive`, `below_min_speed`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MinSpeed {
    pub bytes_per_s: u64,
    pub window: Duration,
}

/// Limits inside one response read: the first byte's deadline (`--wait-timeout`) and
/// the minimum speed after it (`--min-speed`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadLimits {
    pub first_byte_by: Option<Instant>,
    pub min_speed: Option<MinSpeed>,
}

/// Tracks a response's pace against its `ReadLimits`.
pub(crate) struct Pace {
    limits: ReadLimits,
    started: bool,
    window_start: Instant,
    window_bytes: u64,
}

impl Pace {
    pub(crate) fn new(limits: ReadLimits) -> Option<Pace> {
        (limits.first_byte_by.is_some() || limits.min_speed.is_some()).then(|| Pace {
            limits,
            started: false,
            window_start: Instant::now(),
            window_bytes: 0,
        })
    }

    /// When the next check is due, if any.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        if self.started {
            self.limits.min_speed.map(|m| self.window_start + m.window)
        } else {
            self.limits.first_byte_by
        }
    }

    /// `n` bytes arrived at `now`; the first byte starts the first speed window.
    pub(crate) fn on_bytes(&mut self, n: usize, now: Instant) -> Result<(), Failure> {
        if !self.started {
            self.started = true;
            self.window_start = now;
            self.window_bytes = 0;
            return Ok(());
        }
        self.window_bytes += n as u64;
        self.check(now)
    }

    /// The deadline passed with no read completing.
    pub(crate) fn expired(&mut self, now: Instant) -> Result<(), Failure> {
        if !self.started {
            return Err(ErrorKind::TimeoutWait.into());
        }
        self.check(now)
    }

    /// At the end of a window: too few bytes fail the response, enough start a new window.
    fn check(&mut self, now: Instant) -> Result<(), Failure> {
        let Some(m) = self.limits.min_speed else {
            return Ok(());
        };
        let elapsed = now.saturating_duration_since(self.window_start);
        if elapsed < m.window {
            return Ok(());
        }
        if (self.window_bytes as f64) < m.bytes_per_s as f64 * elapsed.as_secs_f64() {
            return Err(Failure::new(
                ErrorKind::TimeoutReceive,
                ErrorDetail::BelowMinSpeed,
            ));
        }
        self.window_start = now;
        self.window_bytes = 0;
        Ok(())
    }
}
