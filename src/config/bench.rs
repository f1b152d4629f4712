//! `bench`'s arguments resolved once into its plan: every flag read and checked, each
//! error naming it, before the embedded server starts or any traffic; then the scenario,
//! once the target's URL is known.

use crate::cli::BenchArgs;
use crate::embedded::Embedded;
use crate::lab::LinkSpec;
use crate::parse::UsageError;
use crate::plan::build::{LoadConfig, RequestConfig};
use crate::plan::{Scenario, Strategy};
use crate::report::thresholds::Subject;
use crate::report::Segment;

/// A bench run, resolved: the arguments are read here once, and nothing after reads them.
pub(crate) struct BenchPlan {
    pub strategy: Strategy,
    /// `--segment I/N`: this agent's share of the load.
    pub segment: Option<Segment>,
    /// `--start-at`: when, and how long from now.
    pub start_at: Option<(time::OffsetDateTime, std::time::Duration)>,
    /// The link to the embedded server, if any.
    pub link: Option<LinkSpec>,
    /// The path on the embedded server, when the run is against it.
    pub path: Option<String>,
    /// The request (against the embedded server, aimed at it once it is up).
    request: RequestConfig,
    /// The load before the target is known (the machine's share and the segment are
    /// applied with it).
    load: LoadConfig,
    connections: usize,
    /// `--metrics` and `--remote-write`.
    pub metrics: crate::metrics::publish::MetricsPlan,
    /// The embedded server's HTTPS listener (`--embedded-tls`, or the strategy's TLS).
    pub embedded_tls: bool,
    /// `--cert-chain-bytes`: the embedded server's padded chain.
    pub chain_bytes: Option<usize>,
    /// `--start-at` as given, for the report.
    pub scheduled_at: Option<String>,
    /// `--requests-per-connection`.
    requests_per_connection: Option<u64>,
    /// `-t` was given (then the machine is not shared with a server on loopback).
    threads_given: bool,
    /// `--urls-from-file` without `-n` or `-d`: each URL once.
    each_url_once: bool,
    /// How the report is written and judged.
    pub output: crate::report::Output,
    /// Progress lines on a terminal's stderr (not with `--no-progress`, nor beside
    /// `--json`).
    pub progress: bool,
}

/// The plan of `handshake bench` with these arguments.
pub(crate) fn bench_plan(a: BenchArgs) -> anyhow::Result<BenchPlan> {
    let strategy = if a.disable_keepalive {
        Strategy::Close
    } else {
        super::parse_strategy("--strategy", &a.strategy)?
    };
    let output = super::output(&a.output, Subject::Bench, false)?;
    let load = super::load_config(&a.load, super::BENCH_DEFAULTS)?;
    let segment = super::parse_segment(a.segment.as_deref(), a.segments)?;
    let start_at = a
        .start_at
        .as_deref()
        .map(super::parse_start_at)
        .transpose()?;
    let link = super::target::one_link(&a.link)?;
    let path = super::target::embedded_path(
        a.url.as_deref(),
        &a.link,
        a.request.urls_from_file.is_some(),
    )?;
    let request = super::target::base_request(&a.request, a.url.as_deref(), path.as_ref())?;
    let connections = super::connections(a.connections, strategy)?;
    let metrics = super::metrics::metrics_plan(&a.metrics, 0)?;
    let plan = BenchPlan {
        embedded_tls: a.embedded_tls || strategy.needs_tls(),
        chain_bytes: a.link.chain_bytes(),
        scheduled_at: a.start_at.clone(),
        requests_per_connection: a.requests_per_connection,
        threads_given: a.load.threads.is_some(),
        each_url_once: super::each_url_once(&a.load, &a.request),
        progress: !a.output.no_progress && !a.output.json,
        output,
        strategy,
        segment,
        start_at,
        link,
        path,
        request,
        load,
        connections,
        metrics,
    };
    // The load's own checks (a segment with no requests or no workers) before the run.
    plan.load_for(&plan.request)?;
    Ok(plan)
}

impl BenchPlan {
    /// `--cert` was given: the embedded server asks for a client certificate.
    pub(crate) fn presents_a_certificate(&self) -> bool {
        self.request.tls.client_auth.identity.is_some()
    }

    /// The runnable scenario, against `embedded` when the run is against it (its URL,
    /// trusting its CA).
    pub(crate) fn scenario(&self, embedded: Option<&Embedded>) -> Result<Scenario, UsageError> {
        let req = match (embedded, &self.path) {
            (Some(e), Some(p)) => self
                .request
                .aimed_at(&e.url(self.embedded_tls, p), e.srv.ca_der.clone())?,
            _ => self.request.clone(),
        };
        let load = self.load_for(&req)?;
        let sc = super::scenario(
            self.strategy.name(),
            self.strategy,
            self.requests_per_connection,
            &req,
            &load,
        )?;
        Ok(Scenario {
            connections: self.connections,
            ok_status: self.output.accepted.clone(),
            ..sc
        })
    }

    /// The load against `req`'s URLs: each URL of --urls-from-file once, the machine
    /// shared with a server on loopback, this agent's segment, no more workers than
    /// requests.
    fn load_for(&self, req: &RequestConfig) -> Result<LoadConfig, UsageError> {
        let mut load = self.load.clone();
        super::urls_once(&mut load, self.each_url_once, req);
        super::share_the_machine(&mut load, self.threads_given, self.strategy, req);
        if let Some(seg) = self.segment {
            super::apply_segment(&mut load, seg)?;
        }
        super::cap_workers(&mut load);
        Ok(load)
    }
}
