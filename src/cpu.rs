//! CPU time of the current thread or process (getrusage), for CPU-per-request figures.

use std::time::Duration;

/// User and system CPU time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    pub user: Duration,
    pub sys: Duration,
}

impl CpuTime {
    pub fn total(&self) -> Duration {
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

fn usage(who: libc::c_int) -> CpuTime {
    // SAFETY: getrusage writes into the zeroed struct we pass and nothing else.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    if rc != 0 {
        return CpuTime::default();
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    CpuTime {
        user: tv(ru.ru_utime),
        sys: tv(ru.ru_stime),
    }
}

/// CPU time used so far by the calling thread.
pub fn thread() -> CpuTime {
    usage(libc::RUSAGE_THREAD)
}

/// The calling thread's identity, for reading its CPU clock from another thread.
#[derive(Debug, Clone, Copy)]
pub struct ThreadClock(libc::clockid_t);

impl ThreadClock {
    /// The CPU clock of the calling thread. Valid while the thread lives.
    pub fn current() -> Option<ThreadClock> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: pthread_self is always valid for the calling thread; the call writes `id`.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        (rc == 0).then_some(ThreadClock(id))
    }

    /// CPU time (user + system) the thread has used so far, with nanosecond resolution.
    pub fn elapsed(&self) -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes into `ts` only.
        let rc = unsafe { libc::clock_gettime(self.0, &mut ts) };
        if rc != 0 {
            return Duration::ZERO;
        }
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
}
