//! `handshake doctor`: its arguments to the doctor's probes (`crate::doctor`), and its
//! report.

use crate::cli::DoctorArgs;
use crate::cmd::single_target;
use crate::config::single_url_scenario;
use crate::config::{self, parse_positive_duration, UsageError};
use crate::doctor::{execute, DoctorReport};
use crate::embedded::on_client;
use crate::plan::Strategy;
use crate::progress::Steps;
use crate::report::text;
use crate::runtime_thread::current_thread_runtime;

pub fn run(a: DoctorArgs) -> anyhow::Result<i32> {
    if a.max_requests == 0 {
        return Err(UsageError("--max-requests must be at least 1".into()).into());
    }
    let max_idle = parse_positive_duration("--max-idle", &a.max_idle)?;
    super::proxy_env_note();
    crate::interrupt::install();
    let steps = Steps::new("doctor", !a.no_progress);
    let (url, roots, embedded) = single_target(
        a.url.as_deref(),
        &a.link,
        &a.request,
        a.embedded_tls,
        false,
        &steps,
    )?;
    let sc = single_url_scenario(
        &a.request,
        &url,
        roots.clone(),
        Strategy::KeepAlive,
        1,
        &a.timeout,
    )?;
    // The HTTP/2 probes: over TLS when the server offers h2; over cleartext with --h2c.
    let h2_sc = if url.starts_with("https://") || a.h2c {
        Some(single_url_scenario(
            &a.request,
            &url,
            roots.clone(),
            Strategy::H2,
            1,
            &a.timeout,
        )?)
    } else {
        None
    };
    // What each probe sends: the user's request flags, at the URL (HTTP/3's probes at
    // the port the server's Alt-Svc names).
    let req = config::request_config(&a.request, Some(&url), roots.clone())?;
    let run = || -> anyhow::Result<DoctorReport> {
        let local = tokio::task::LocalSet::new();
        current_thread_runtime()?.block_on(local.run_until(execute(
            &sc,
            h2_sc.as_ref(),
            &req,
            a.max_requests,
            max_idle,
            &steps,
        )))
    };
    let mut d = match on_client(embedded.as_ref(), run)? {
        Ok(d) => d,
        // Nothing could be probed: a failed run, not a usage error.
        Err(e) if e.downcast_ref::<crate::doctor::Unreachable>().is_some() => {
            steps.finish();
            eprintln!("handshake: {e}");
            return Ok(1);
        }
        Err(e) => return Err(e),
    };
    steps.finish();
    if let Some(e) = embedded {
        d.link = e.finish().1;
    }
    if crate::interrupt::requested() {
        d.interrupted = Some(crate::report::finding::probes_interrupted());
    }
    let out = if a.json {
        serde_json::to_string_pretty(&d).expect("doctor report serializes")
    } else {
        text::doctor::render(&d, crate::fmt::width())
    };
    super::print_out(&out);
    Ok(super::exit_status(i32::from(!d.problems.is_empty())))
}
