//! `handshake watch`: its arguments to a watch (`crate::watch`), and its report.

use std::net::IpAddr;

use crate::cli::WatchArgs;
use crate::config::{parse_positive_duration, UsageError};
use crate::report::{text, thresholds};
use crate::watch::{self, Options};

pub(crate) fn run(a: WatchArgs) -> anyhow::Result<i32> {
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
        Some(b) => crate::config::parse_bytes("--buffer", b)?,
        None => 32 << 20,
    };
    let metrics = crate::config::metrics::metrics_plan(&a.metrics, a.metrics_max_series as usize)?;
    let meter = metrics
        .wanted()
        .then(|| watch::meter::Meter::new(metrics.max_series));
    let publisher = match &meter {
        Some(m) => {
            crate::metrics::publish::Publisher::start(&metrics, m.clone(), &crate::progress::note)?
        }
        None => None,
    };
    let rep = watch::run(&Options {
        command: a.command,
        pid: a.pid,
        port: a.port,
        host,
        host_as_given: a.host,
        duration,
        buffer,
        meter,
    })?;
    let thresholds::Checked { failed, lines, .. } = thresholds::check_report(&thresholds, &rep)?;
    let out = if a.json {
        serde_json::to_string_pretty(&rep).expect("watch report serializes")
    } else {
        text::watch::render(&rep, crate::fmt::width())
    };
    let unwritten = super::print_out(&out);
    for l in lines {
        crate::progress::note(&l);
    }
    if let Some(p) = publisher {
        p.finish(&crate::progress::note);
    }
    // Ctrl-C first; then the command's failure; then the thresholds'.
    Ok(match rep.exit_status {
        _ if rep.interrupted.is_some() => crate::interrupt::exit_status(),
        Some(code) if code != 0 => code,
        _ => i32::from(failed).max(unwritten),
    })
}
