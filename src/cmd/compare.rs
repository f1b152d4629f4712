//! `handshake compare`: one workload under several connection strategies, side by side
//! (the plan and its rounds, the statistics and the sentences are in
//! [`crate::compare`]).

use super::emit_checked;
use crate::cli::CompareArgs;
use crate::report::Report;

pub(crate) fn run(a: CompareArgs) -> anyhow::Result<i32> {
    let started_at = crate::host::now_rfc3339();
    crate::interrupt::install();
    let mut plan = crate::config::compare::compare_plan(&a)?;
    super::say_new(plan.request.proxy_notes(), &mut Vec::new());
    let board = crate::metrics::run::Board::new(Vec::new());
    let publisher = crate::metrics::publish::Publisher::start(
        &plan.metrics,
        board.clone(),
        &crate::progress::note,
    )?;
    plan.board = publisher.as_ref().map(|_| board);
    let done = plan.run()?;
    let mut rep = Report::new(done.kind, done.scenarios);
    rep.run = Some(crate::host::run_info("compare", started_at));
    rep.server = done.server;
    rep.link = done.link;
    rep.interrupted = super::interrupted("the rounds that ran whole", &rep);
    let code = emit_checked(&mut rep, &plan.output)?;
    // A row in which no request succeeded at all fails the run.
    let code = code.max(super::no_success(&rep, &plan.output.accepted));
    if let Some(p) = publisher {
        p.finish(&crate::progress::note);
    }
    Ok(super::exit_status(code))
}
