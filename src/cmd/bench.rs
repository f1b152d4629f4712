//! `handshake bench`: load one URL (or the embedded server, on loopback or across a lab's
//! link) and report.

use std::sync::Arc;

use super::{embedded_path, emit_checked, one_link};
use crate::cli::BenchArgs;
use crate::config::{self};
use crate::embedded::{on_client, Embedded};
use crate::engine;
use crate::plan::{Scenario, Strategy};
use crate::report::{thresholds, Report, RunInfo};
use crate::stats::summary;

pub fn run(a: BenchArgs) -> anyhow::Result<i32> {
    let strategy = if a.disable_keepalive {
        Strategy::Close
    } else {
        config::parse_strategy("--strategy", &a.strategy)?
    };
    let thresholds = thresholds::parse_all(&a.output.fail_if, thresholds::Subject::Bench)?;
    let accepted = super::ok_statuses(&a.output)?;
    super::proxy_env_note();
    let mut load = config::load_config(&a.load, config::BENCH_DEFAULTS)?;
    let segment = config::parse_segment(a.segment.as_deref(), a.segments)?;
    let start_at = a
        .start_at
        .as_deref()
        .map(config::parse_start_at)
        .transpose()?;
    let spec = one_link(&a.link)?;
    let path = embedded_path(
        a.url.as_deref(),
        &a.link,
        a.request.urls_from_file.is_some(),
    )?;
    // Without a URL, start the embedded server (in-process, or across the lab's link) and
    // trust its CA.
    let embedded = path
        .as_ref()
        .map(|_| {
            let steps = crate::progress::Steps::on_terminal(
                "bench",
                !a.output.no_progress && !a.output.json,
            );
            Embedded::with_early_data(spec, strategy.early_data(), a.link.chain_bytes(), &steps)
        })
        .transpose()?;
    let (url, roots) = match (&embedded, &path) {
        (Some(e), Some(p)) => (
            Some(e.url(a.embedded_tls || strategy.needs_tls(), p)),
            vec![e.srv.ca_der.clone()],
        ),
        _ => (a.url.clone(), Vec::new()),
    };
    let req = config::request_config(&a.request, url.as_deref(), roots)?;
    config::urls_once(&mut load, &a.load, &a.request, &req);
    config::share_the_machine(&mut load, &a.load, strategy, &req);
    if let Some(seg) = segment {
        config::apply_segment(&mut load, seg)?;
    }
    config::cap_workers(&mut load);
    let sc = config::scenario(
        strategy.name(),
        strategy,
        a.requests_per_connection,
        &req,
        &load,
    )?;
    let sc = Arc::new(Scenario {
        connections: config::connections(a.connections, strategy)?,
        ..sc
    });
    // Progress on a terminal's stderr only, and never beside JSON output.
    let progress = !a.output.no_progress && !a.output.json;
    if let Some((at, wait)) = start_at {
        if wait.is_zero() {
            // With --json the report says it (run.started_at after run.scheduled_at):
            // standard error may be mixed into the JSON stream (`kubectl logs`).
            if !a.output.json {
                let late = (time::OffsetDateTime::now_utc() - at).as_seconds_f64();
                eprintln!("handshake: --start-at passed {late:.3} s ago; starting now");
            }
        } else {
            std::thread::sleep(wait);
        }
    }
    let started_at = crate::host::now_rfc3339();
    crate::interrupt::install();
    let run = || engine::run(sc.clone(), progress);
    let result = on_client(embedded.as_ref(), run)??;
    let mut rep = Report::new(vec![summary::summarize_with_raw(
        &sc.shape(),
        &result.recorder,
        result.wall,
        result.cpu,
    )]);
    rep.run = Some(RunInfo {
        scheduled_at: a.start_at.clone(),
        segment,
        ..crate::host::run_info("bench", started_at)
    });
    if let Some(e) = embedded {
        let (server, link) = e.finish();
        rep.server = Some(server);
        rep.link = link;
    }
    rep.interrupted = super::interrupted("the run", &rep);
    let code = emit_checked(&mut rep, &a.output, &thresholds, false)?;
    let code = code.max(super::no_success(&rep, &accepted));
    Ok(super::exit_status(code))
}
