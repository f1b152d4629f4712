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

/// CPU time used so far by the whole process.
pub fn process() -> CpuTime {
    usage(libc::RUSAGE_SELF)
}
