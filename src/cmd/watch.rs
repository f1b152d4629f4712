//! `handshake watch`: its plan (`config::watch`) run by a watch (`crate::watch`), and
//! its report.

use crate::cli::WatchArgs;
use crate::report::{text, thresholds};
use crate::watch;

pub(crate) fn run(a: WatchArgs) -> anyhow::Result<i32> {
    let mut plan = crate::config::watch::watch_plan(a)?;
    let metrics = &plan.metrics;
    let meter = metrics
        .wanted()
        .then(|| watch::meter::Meter::new(metrics.max_series));
    let publisher = match &meter {
        Some(m) => {
            crate::metrics::publish::Publisher::start(metrics, m.clone(), &crate::progress::note)?
        }
        None => None,
    };
    plan.options.meter = meter;
    let rep = watch::run(&plan.options)?;
    let thresholds::Checked { failed, lines, .. } =
        thresholds::check_report(&plan.output.thresholds, &rep)?;
    let out = if plan.output.json {
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
