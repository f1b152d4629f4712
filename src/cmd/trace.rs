//! `handshake trace`: its arguments to a trace (`crate::trace`), and its report.

use crate::cli::TraceArgs;
use crate::config;
use crate::embedded::on_client;
use crate::report::text;
use crate::runtime_thread::current_thread_runtime;
use crate::trace::{self, TraceReport};

pub(crate) fn run(a: TraceArgs) -> anyhow::Result<i32> {
    let plan = config::single::trace_plan(&a)?;
    let steps = crate::progress::Steps::on_terminal("trace", plan.progress);
    let embedded = super::embedded_for(&plan.target, plan.strategy.early_data(), &steps)?;
    let req = plan.target.request(embedded.as_ref(), plan.embedded_tls)?;
    let sc = plan.target.scenario(&req, plan.strategy, plan.count)?;
    let mut said = Vec::new();
    super::say_new(sc.proxy_notes(), &mut said);
    let run = || -> anyhow::Result<TraceReport> {
        let rt = current_thread_runtime()?;
        let local = tokio::task::LocalSet::new();
        Ok(rt.block_on(local.run_until(trace::execute(&sc, plan.count))))
    };
    let mut t = on_client(embedded.as_ref(), run)??;
    super::say_new(sc.proxy_notes(), &mut said);
    if let Some(e) = embedded {
        t.link = e.finish().1;
    }
    let out = if plan.json {
        serde_json::to_string_pretty(&t).expect("trace serializes")
    } else {
        text::trace::render(&t, crate::fmt::width())
    };
    let unwritten = super::print_out(&out);
    let failed = no_success(&t, &plan.accepted);
    if let Some(line) = &failed {
        crate::progress::note(&format!("handshake: {line}"));
    }
    Ok(i32::from(t.error.is_some() || failed.is_some()).max(unwritten))
}

/// "no response was a success: 2 of 2 were 400 (what the server said); ...", when the
/// trace has responses and none was 2xx, 3xx or accepted by `--ok-status`.
fn no_success(t: &TraceReport, accepted: &[(u16, u16)]) -> Option<String> {
    let first = t.steps.first()?;
    if t.steps
        .iter()
        .any(|s| crate::record::status::is_ok(s.status, accepted))
    {
        return None;
    }
    let n = t.steps.iter().filter(|s| s.status == first.status).count();
    let said = t
        .status_examples
        .get(&first.status.to_string())
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    Some(format!(
        "no response was a success: {n} of {} were {}{said}; a trace with no 2xx or 3xx response fails (--ok-status {}xx counts them as successes)",
        t.steps.len(),
        first.status,
        first.status / 100
    ))
}
