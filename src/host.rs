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
    let u = rustix::system::uname();
    let kernel = format!(
        "{} {}",
        u.sysname().to_string_lossy(),
        u.release().to_string_lossy()
    );
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

/// This machine's host name (uname's node name).
pub fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}
