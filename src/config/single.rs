//! `trace`'s and `doctor`'s plans, resolved once from their arguments: the one target
//! (the embedded server's path and link or the URL given), the request's flags and the
//! timeout, and each command's own flags, each error naming its flag, before the
//! embedded server starts or any traffic; then the request aimed at the target and a
//! one-worker scenario of it. Nothing after the plan reads the command line.

use crate::cli::{DoctorArgs, LinkArgs, RequestArgs, TraceArgs};
use crate::embedded::Embedded;
use crate::lab::LinkSpec;
use crate::parse::{parse_positive_duration, UsageError};
use crate::plan::build::{LoadConfig, RequestConfig};
use crate::plan::{LoadShape, Scenario, StopWhen, Strategy};

/// `handshake trace`, resolved.
pub(crate) struct TracePlan {
    pub target: SinglePlan,
    /// `--count`: the requests traced, one after another.
    pub count: u64,
    pub strategy: Strategy,
    /// The embedded server's HTTPS listener (`--embedded-tls`, or the strategy's TLS).
    pub embedded_tls: bool,
    /// The statuses `--ok-status` counts as successes.
    pub accepted: Vec<(u16, u16)>,
    pub json: bool,
    pub progress: bool,
}

/// The plan of `handshake trace` with these arguments.
pub(crate) fn trace_plan(a: &TraceArgs) -> Result<TracePlan, UsageError> {
    if a.count == 0 || a.count > 100_000 {
        return Err(UsageError("--count must be between 1 and 100000".into()));
    }
    let accepted = super::target::ok_statuses(a.ok_status.as_deref())?;
    let strategy = if a.http2 {
        Strategy::H2
    } else if a.http3 {
        Strategy::H3
    } else {
        super::parse_strategy("--strategy", &a.strategy)?
    };
    Ok(TracePlan {
        target: single_plan(a.url.as_deref(), &a.link, &a.request, &a.timeout)?,
        count: a.count,
        strategy,
        embedded_tls: a.embedded_tls || strategy.needs_tls(),
        accepted,
        json: a.json,
        progress: !a.no_progress,
    })
}

/// `handshake doctor`, resolved.
pub(crate) struct DoctorPlan {
    pub target: SinglePlan,
    /// `--max-requests`: the most requests a probe sends on one connection.
    pub max_requests: u64,
    /// `--max-idle`: the longest idle time probed.
    pub max_idle: std::time::Duration,
    pub embedded_tls: bool,
    /// `--h2c`: the HTTP/2 probes over cleartext too.
    pub h2c: bool,
    pub progress: bool,
    pub json: bool,
}

/// The plan of `handshake doctor` with these arguments.
pub(crate) fn doctor_plan(a: &DoctorArgs) -> Result<DoctorPlan, UsageError> {
    if a.max_requests == 0 {
        return Err(UsageError("--max-requests must be at least 1".into()));
    }
    Ok(DoctorPlan {
        max_idle: parse_positive_duration("--max-idle", &a.max_idle)?,
        target: single_plan(a.url.as_deref(), &a.link, &a.request, &a.timeout)?,
        max_requests: a.max_requests,
        embedded_tls: a.embedded_tls,
        h2c: a.h2c,
        progress: !a.no_progress,
        json: a.json,
    })
}

/// One target, resolved.
pub(crate) struct SinglePlan {
    /// The link to the embedded server, if any.
    pub link: Option<LinkSpec>,
    /// The path on the embedded server, when the command runs against it.
    pub path: Option<String>,
    /// The embedded server's certificate chain padded to this many bytes.
    pub chain_bytes: Option<usize>,
    /// The request (against the embedded server, aimed at it once it is up).
    request: RequestConfig,
    timeout: std::time::Duration,
}

/// The target of `trace` or `doctor`: `url` (or none: the embedded server), the link
/// flags, the request's flags and `--timeout`.
fn single_plan(
    url: Option<&str>,
    link: &LinkArgs,
    request: &RequestArgs,
    timeout: &str,
) -> Result<SinglePlan, UsageError> {
    if request.urls_from_file.is_some() {
        return Err(UsageError(
            "--urls-from-file: this command takes one URL".into(),
        ));
    }
    let path = super::target::embedded_path(url, link, false)?;
    let request = super::target::base_request(request, url, path.as_ref())?;
    Ok(SinglePlan {
        link: super::target::one_link(link)?,
        path,
        chain_bytes: link.chain_bytes(),
        request,
        timeout: parse_positive_duration("--timeout", timeout)?,
    })
}

impl SinglePlan {
    /// `--cert` was given: the embedded server asks for a client certificate.
    pub(crate) fn presents_a_certificate(&self) -> bool {
        self.request.tls.client_auth.identity.is_some()
    }

    /// The request at its target: the URL given, or `embedded`'s (HTTPS with `tls`),
    /// trusting its CA.
    pub(crate) fn request(
        &self,
        embedded: Option<&Embedded>,
        tls: bool,
    ) -> Result<RequestConfig, UsageError> {
        match (embedded, &self.path) {
            (Some(e), Some(p)) => self.request.aimed_at(&e.url(tls, p), e.srv.ca_der.clone()),
            _ => Ok(self.request.clone()),
        }
    }

    /// One worker sending `req` `count` times with `strategy`.
    pub(crate) fn scenario(
        &self,
        req: &RequestConfig,
        strategy: Strategy,
        count: u64,
    ) -> Result<Scenario, UsageError> {
        let load = LoadConfig {
            redirects: None,
            task_per_worker: false,
            concurrency: 1,
            threads: 1,
            load: LoadShape::Closed,
            stop: StopWhen {
                requests: Some(count.max(1)),
                duration: None,
            },
            timeout: self.timeout,
            limits: Default::default(),
        };
        super::scenario(strategy.name(), strategy, None, req, &load)
    }
}
