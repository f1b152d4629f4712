//! This machine and this moment, as a report names them: the time a run began and the
//! host it ran on.

use crate::report::{Machine, RunInfo};

/// What a report says of its run: `command`, begun at `started_at`, on this host and
/// machine, with the command line as given (its URLs are the report's to fill).
pub fn run_info(command: &str, started_at: String) -> RunInfo {
    RunInfo {
        command: command.into(),
        started_at,
        scheduled_at: None,
        host: host_name(),
        segment: None,
        command_line: std::env::args().collect(),
        urls: Vec::new(),
        machine: machine(),
    }
}

/// The CPUs this process may run on, and the kernel's name and release.
pub fn machine() -> Machine {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    // SAFETY: utsname is plain old data; uname fills it and NUL-terminates its fields.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid utsname to write into.
    let kernel = if unsafe { libc::uname(&mut u) } == 0 {
        let field = |f: &[libc::c_char]| {
            let bytes: Vec<u8> = f
                .iter()
                .take_while(|c| **c != 0)
                .map(|c| *c as u8)
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        };
        format!("{} {}", field(&u.sysname), field(&u.release))
    } else {
        "unknown".into()
    };
    Machine { cpus, kernel }
}

/// Now, RFC 3339 in UTC.
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    // To the millisecond: agents' clocks agree to no better.
    now.replace_nanosecond(now.nanosecond() / 1_000_000 * 1_000_000)
        .unwrap_or(now)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// This machine's host name (gethostname), or "unknown".
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it
    // (or truncates, which the search for NUL below handles).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}
