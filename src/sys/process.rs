//! The process's and its threads' CPU time, and a thread's scheduling, where `rustix`
//! has no call for them.

use std::io;
use std::time::Duration;

/// The calling thread's user and system CPU time so far (getrusage), or `None` when
/// the call fails.
pub(crate) fn thread_rusage() -> Option<(Duration, Duration)> {
    // SAFETY: rusage is plain old data, for which all zeroes is a valid value.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes one rusage into the struct we own, and nothing else.
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return None;
    }
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    Some((tv(ru.ru_utime), tv(ru.ru_stime)))
}

/// A thread's CPU clock, readable from any thread while that thread lives.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuClock(libc::clockid_t);

impl CpuClock {
    /// The calling thread's.
    pub(crate) fn current() -> Option<CpuClock> {
        let mut id: libc::clockid_t = 0;
        // SAFETY: pthread_self names the calling thread, which is alive; the call writes
        // `id` only.
        let rc = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
        (rc == 0).then_some(CpuClock(id))
    }

    /// The CPU time (user + system) the thread has used so far, to the nanosecond; zero
    /// when the clock cannot be read (the thread has ended).
    pub(crate) fn elapsed(&self) -> Duration {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into `ts`, which we own; an invalid
        // clock id is an error, not undefined behaviour.
        if unsafe { libc::clock_gettime(self.0, &mut ts) } != 0 {
            return Duration::ZERO;
        }
        Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
    }
}

/// Run the calling thread under SCHED_FIFO at `priority` (where allowed: root, or a
/// user namespace's root).
pub(crate) fn realtime_fifo(priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param that outlives the call; pid 0 is the
    // calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Ask the kernel to keep every CPU out of deep idle states while the returned file is
/// open (PM QoS: a CPU wake-up latency of 0 µs written to /dev/cpu_dma_latency, as
/// cyclictest does). In a virtual machine an idle CPU halts, and waking it (for a timer
/// or a packet) takes 50 µs to a millisecond; held, the idle loop polls instead. Root.
pub(crate) fn hold_cpus_awake() -> io::Result<std::fs::File> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")?;
    f.write_all(&0i32.to_ne_bytes())?;
    Ok(f)
}
