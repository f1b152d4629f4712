//! This machine and this moment, as a report names them: the time a run began and the
//! host it ran on.

use crate::report::{Machine, RunInfo};

/// What a report says of its run: `command`, begun at `started_at`, on this host and
/// machine, with the command line as given (its URLs are the report's to fill).
pub(crate) fn run_info(command: &str, started_at: String) -> RunInfo {
    RunInfo {
        command: command.into(),
        started_at,
        scheduled_at: None,
        host: host_name(),
        segment: None,
        command_line: without_secrets(std::env::args()),
        urls: Vec::new(),
        machine: machine(),
    }
}

/// The command line with a proxy URL's credentials (`-x`, `--proxy`) replaced by `***`.
fn without_secrets(args: impl Iterator<Item = String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for a in args {
        let after_flag = out.last().is_some_and(|p| p == "-x" || p == "--proxy");
        let shown = if after_flag {
            crate::net::proxy::redact(&a)
        } else if let Some(v) = a.strip_prefix("--proxy=") {
            format!("--proxy={}", crate::net::proxy::redact(v))
        } else if let Some(v) = a.strip_prefix("-x").filter(|v| !v.is_empty()) {
            format!("-x{}", crate::net::proxy::redact(v))
        } else {
            a
        };
        out.push(shown);
    }
    out
}

/// The CPUs this process may run on, and the kernel's name and release.
pub(crate) fn machine() -> Machine {
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
pub(crate) fn now_rfc3339() -> String {
    rfc3339(std::time::SystemTime::now())
}

/// `t` in RFC 3339, UTC, to the millisecond.
pub(crate) fn rfc3339(t: std::time::SystemTime) -> String {
    let now = time::OffsetDateTime::from(t);
    // To the millisecond: agents' clocks agree to no better.
    now.replace_nanosecond(now.nanosecond() / 1_000_000 * 1_000_000)
        .unwrap_or(now)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// This machine's host name (uname's node name).
pub(crate) fn host_name() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn proxy_credentials_leave_the_command_line() {
        let args = [
            "handshake",
            "bench",
            "-x",
            "http://u:pw@h:1",
            "--proxy=u:pw@h",
            "-xu:pw@h",
            "u",
        ];
        let shown = super::without_secrets(args.iter().map(|s| s.to_string()));
        assert_eq!(
            shown,
            [
                "handshake",
                "bench",
                "-x",
                "http://***@h:1",
                "--proxy=***@h",
                "-x***@h",
                "u"
            ]
        );
    }
}
