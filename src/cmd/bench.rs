//! `handshake bench`: load one URL (or the embedded server, on loopback or across a lab's
//! link) and report.

use std::sync::Arc;

use super::emit_checked;
use crate::cli::BenchArgs;
use crate::config;
use crate::embedded::{on_client, Embedded};
use crate::engine;
use crate::report::{Report, RunInfo};
use crate::stats::summary;

pub(crate) fn run(a: BenchArgs) -> anyhow::Result<i32> {
    let plan = config::bench::bench_plan(a)?;
    // Without a URL, start the embedded server (in-process, or across the lab's link) and
    // trust its CA.
    let embedded = plan
        .path
        .as_ref()
        .map(|_| {
            let steps = crate::progress::Steps::on_terminal("bench", plan.progress);
            let early = plan.strategy.early_data();
            let cert = plan.presents_a_certificate();
            Embedded::with_early_data(plan.link, early, plan.chain_bytes, cert, &steps)
        })
        .transpose()?;
    let sc = Arc::new(plan.scenario(embedded.as_ref())?);
    let mut said = Vec::new();
    super::say_new(sc.proxy_notes(), &mut said);
    if let Some((at, wait)) = plan.start_at {
        if wait.is_zero() {
            // With --json the report says it (run.started_at after run.scheduled_at):
            // standard error may be mixed into the JSON stream (`kubectl logs`).
            if !plan.output.json {
                let late = (time::OffsetDateTime::now_utc() - at).as_seconds_f64();
                crate::progress::note(&format!(
                    "handshake: --start-at passed {late:.3} s ago; starting now"
                ));
            }
        } else {
            std::thread::sleep(wait);
        }
    }
    let started_at = crate::host::now_rfc3339();
    crate::interrupt::install();
    let segment = plan
        .segment
        .map(|s| vec![("segment", format!("{}/{}", s.index, s.count))]);
    let board = crate::metrics::run::Board::new(segment.unwrap_or_default());
    let publisher = crate::metrics::publish::Publisher::start(
        &plan.metrics,
        board.clone(),
        &crate::progress::note,
    )?;
    let live = publisher.as_ref().map(|_| board.live(&sc));
    let run = || engine::run_live(sc.clone(), plan.progress, live);
    let result = on_client(embedded.as_ref(), run)??;
    super::say_new(sc.proxy_notes(), &mut said);
    // The board holds a copy of the run's counts for the metrics endpoint only when
    // there is one (a recorder's histograms are about 1 MiB at the end of a run).
    if publisher.is_some() {
        board.keep(&sc, &result.recorder);
    }
    let mut rep = Report::new(
        crate::report::Kind::Bench {},
        vec![summary::summarize_with_raw(
            &sc.shape(),
            &result.recorder,
            result.wall,
            result.cpu,
        )],
    );
    rep.run = Some(RunInfo {
        scheduled_at: plan.scheduled_at.clone(),
        segment: plan.segment,
        ..crate::host::run_info("bench", started_at)
    });
    if let Some(e) = embedded {
        let (server, link) = e.finish();
        rep.server = Some(server);
        rep.link = link;
    }
    rep.interrupted = super::interrupted("the run", &rep);
    let code = emit_checked(&mut rep, &plan.output)?;
    let code = code.max(super::no_success(&rep, &plan.output.accepted));
    if let Some(p) = publisher {
        p.finish(&crate::progress::note);
    }
    Ok(super::exit_status(code))
}
