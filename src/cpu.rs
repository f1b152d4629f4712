//! CPU time of the current thread or process (getrusage), for CPU-per-request figures.

use std::time::Duration;

/// User and system CPU time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CpuTime {
    pub user: Duration,
    pub sys: Duration,
}

impl CpuTime {
    pub(crate) fn total(&self) -> Duration {
        self.user + self.sys
    }
}

impl std::ops::Add for CpuTime {
    type Output = CpuTime;
    fn add(self, o: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user + o.user,
            sys: self.sys + o.sys,
        }
    }
}

impl std::ops::Sub for CpuTime {
    type Output = CpuTime;
    fn sub(self, o: CpuTime) -> CpuTime {
        CpuTime {
            user: self.user.saturating_sub(o.user),
            sys: self.sys.saturating_sub(o.sys),
        }
    }
}

/// CPU time used so far by the calling thread.
pub(crate) fn thread() -> CpuTime {
    crate::sys::process::thread_rusage()
        .map_or_else(CpuTime::default, |(user, sys)| CpuTime { user, sys })
}

/// The calling thread's CPU clock, readable from another thread while it lives.
pub(crate) use crate::sys::process::CpuClock as ThreadClock;
