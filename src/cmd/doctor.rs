//! `handshake doctor`: its arguments to the doctor's probes (`crate::doctor`), and its
//! report.

use crate::cli::DoctorArgs;
use crate::config::single::doctor_plan;
use crate::doctor::{execute, DoctorReport};
use crate::embedded::on_client;
use crate::plan::Strategy;
use crate::progress::Steps;
use crate::report::text;
use crate::runtime_thread::current_thread_runtime;

pub(crate) fn run(a: DoctorArgs) -> anyhow::Result<i32> {
    let plan = doctor_plan(&a)?;
    crate::interrupt::install();
    let steps = Steps::new("doctor", plan.progress);
    let embedded = super::embedded_for(&plan.target, false, &steps)?;
    // What each probe sends: the user's request flags, at the URL (HTTP/3's probes at
    // the port the server's Alt-Svc names).
    let req = plan.target.request(embedded.as_ref(), plan.embedded_tls)?;
    let sc = plan.target.scenario(&req, Strategy::KeepAlive, 1)?;
    super::say_new(sc.proxy_notes(), &mut Vec::new());
    // The HTTP/2 probes: over TLS when the server offers h2; over cleartext with --h2c.
    let tls = req.urls.first().is_some_and(|(_, u)| u.tls);
    let h2_sc = (tls || plan.h2c)
        .then(|| plan.target.scenario(&req, Strategy::H2, 1))
        .transpose()?;
    let run = || -> anyhow::Result<DoctorReport> {
        let local = tokio::task::LocalSet::new();
        current_thread_runtime()?.block_on(local.run_until(execute(
            &sc,
            h2_sc.as_ref(),
            &req,
            plan.max_requests,
            plan.max_idle,
            &steps,
        )))
    };
    let mut d = match on_client(embedded.as_ref(), run)? {
        Ok(d) => d,
        // Nothing could be probed: a failed run, not a usage error.
        Err(e) if e.downcast_ref::<crate::doctor::Unreachable>().is_some() => {
            steps.finish();
            crate::progress::note(&format!("handshake: {e}"));
            return Ok(1);
        }
        Err(e) => return Err(e),
    };
    steps.finish();
    if let Some(e) = embedded {
        d.link = e.finish().1;
    }
    d.interrupted = crate::interrupt::by().map(crate::report::finding::probes_interrupted);
    let out = if plan.json {
        serde_json::to_string_pretty(&d).expect("doctor report serializes")
    } else {
        text::doctor::render(&d, crate::fmt::width())
    };
    let unwritten = super::print_out(&out);
    Ok(super::exit_status(
        i32::from(!d.problems.is_empty()).max(unwritten),
    ))
}
