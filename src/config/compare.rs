//! `compare`'s arguments resolved once into its plan ([`crate::compare::plan::Plan`]):
//! every flag read and checked, each error naming it, before any traffic.

use crate::cli::CompareArgs;
use crate::compare::plan::Plan;
use crate::lab::LinkSpec;
use crate::parse::{parse_percent, UsageError};
use crate::plan::build::LoadConfig;
use crate::plan::Strategy;
use crate::report::thresholds::Subject;

/// The plan of `handshake compare` with these arguments.
pub(crate) fn compare_plan(a: &CompareArgs) -> anyhow::Result<Plan> {
    // Across a link every round costs round trips; 6 is the fewest that give an interval.
    let rounds = a.rounds.unwrap_or(if a.link.any() { 6 } else { 10 });
    if rounds == 0 || rounds > 1000 {
        return Err(UsageError("--rounds must be between 1 and 1000".into()).into());
    }
    let sweep = super::concurrency_steps(&a.load)?;
    let mut chosen = super::parse_strategies("--strategies", a.strategies.as_deref())?;
    if sweep.is_some() && chosen.is_none() {
        // Report 004's table: keep-alive and a new connection per request, side by side.
        chosen = super::parse_strategies(
            "--strategies",
            Some(&["keepalive".to_string(), "close".to_string()]),
        )?;
    }
    let noise_threshold = parse_percent("--noise-threshold", &a.noise_threshold)?;
    let output = super::output(&a.output, Subject::Compare, a.verbose)?;
    let path = super::target::embedded_path(
        a.url.as_deref(),
        &a.link,
        a.request.urls_from_file.is_some(),
    )?;
    let links: Vec<Option<LinkSpec>> = if a.link.any() {
        super::parse_link(&a.link, true)?
            .into_iter()
            .map(Some)
            .collect()
    } else {
        vec![None]
    };
    check_sweeps(a, sweep.is_some(), links.len(), path.is_some())?;
    // Against the embedded server the request is aimed at it once it is up.
    let request = super::target::base_request(&a.request, a.url.as_deref(), path.as_ref())?;
    let no_cert = chosen.iter().flatten().find(|c| c.no_cert);
    if let (Some(c), None) = (no_cert, &request.tls.client_auth.identity) {
        return Err(UsageError(format!(
            "--strategies {}: a row without the client certificate is set against one with it: give the certificate with --cert FILE (and --key FILE)",
            c.name()
        ))
        .into());
    }
    // Across a link every request costs round trips: fewer, concurrent requests per round.
    let defaults = if a.link.any() {
        super::COMPARE_LAB_DEFAULTS
    } else {
        super::COMPARE_DEFAULTS
    };
    let mut loads = match &sweep {
        Some(steps) => steps
            .iter()
            .map(|&c| sweep_load(&a.load, defaults, c))
            .collect::<Result<Vec<_>, _>>()?,
        None => vec![super::load_config(&a.load, defaults)?],
    };
    // A round sends each URL of --urls-from-file once (unless -n or -d says).
    for load in &mut loads {
        super::urls_once(load, super::each_url_once(&a.load, &a.request), &request);
    }
    Ok(Plan {
        chosen,
        url: a.url.clone(),
        path,
        request,
        loads,
        links,
        rounds,
        noise_threshold,
        output,
        h2c: a.h2c,
        requests_per_connection: a.requests_per_connection,
        multiplexed_connections: super::connections(a.connections, Strategy::H2)?,
        server_pids: a.server_pid.clone(),
        chain_bytes: a.link.chain_bytes(),
        progress: !a.output.no_progress,
        metrics: super::metrics::metrics_plan(&a.metrics, 0)?,
        board: None,
    })
}

/// One step of `-c 1,10,50,200`: unless -n or -d says, each worker sends 25 requests a
/// round (at least the comparison's usual number), so a high step is not all start-up.
fn sweep_load(
    a: &crate::cli::LoadArgs,
    defaults: super::LoadDefaults,
    c: usize,
) -> Result<LoadConfig, UsageError> {
    let mut load = super::load_config_at(a, defaults, c)?;
    if a.requests.is_none() && a.duration.is_none() {
        load.stop.requests = Some(defaults.requests.max(25 * c as u64));
    }
    Ok(load)
}

/// One axis swept at a time, and `--server-pid` only for a server given by URL, naming
/// processes that exist.
fn check_sweeps(
    a: &CompareArgs,
    concurrency_sweep: bool,
    links: usize,
    embedded: bool,
) -> Result<(), UsageError> {
    if concurrency_sweep && links > 1 {
        return Err(UsageError(
            "a list of concurrencies (-c) and a list of RTTs (--rtt): sweep one at a time".into(),
        ));
    }
    if a.server_pid.is_empty() {
        return Ok(());
    }
    if embedded {
        return Err(UsageError(
            "--server-pid is for a server given by URL: the embedded server's CPU is read without it"
                .into(),
        ));
    }
    crate::procs::check_pids(&a.server_pid).map_err(UsageError)
}
