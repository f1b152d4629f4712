//! `watch`'s plan, resolved once from its arguments: what to watch (a command, a process,
//! a port, an address), for how long, its buffer, its metrics and how its report is
//! written and judged, each error naming its flag, before anything is watched.

use std::net::IpAddr;

use crate::cli::WatchArgs;
use crate::parse::{parse_bytes, parse_positive_duration, UsageError};
use crate::report::thresholds;
use crate::watch::Options;

/// `handshake watch`, resolved.
pub(crate) struct WatchPlan {
    /// What to watch (its live meter is added once the metrics are served).
    pub options: Options,
    /// `--metrics` and `--remote-write`.
    pub metrics: crate::metrics::publish::MetricsPlan,
    /// How the report is written and judged (`--json`, `--fail-if`).
    pub output: crate::report::Output,
}

/// The plan of `handshake watch` with these arguments.
pub(crate) fn watch_plan(a: WatchArgs) -> anyhow::Result<WatchPlan> {
    let thresholds = thresholds::parse_all(&a.fail_if, thresholds::Subject::Audit)?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| parse_positive_duration("-d/--duration", d))
        .transpose()?;
    let host = a
        .host
        .as_deref()
        .map(|h| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .map_err(|_| UsageError(format!("--host {h:?}: expected an IP address")))
        })
        .transpose()?;
    if let Some(pid) = a.pid {
        if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(UsageError(format!("--pid {pid}: no such process")).into());
        }
    }
    let buffer = match a.buffer.as_deref() {
        Some(b) => parse_bytes("--buffer", b)?,
        None => 32 << 20,
    };
    let metrics = super::metrics::metrics_plan(&a.metrics, a.metrics_max_series as usize)?;
    Ok(WatchPlan {
        options: Options {
            command: a.command,
            pid: a.pid,
            port: a.port,
            host,
            host_as_given: a.host,
            duration,
            buffer,
            meter: None,
        },
        metrics,
        output: crate::report::Output {
            json: a.json,
            thresholds,
            ..Default::default()
        },
    })
}
