//! `trace`'s and `doctor`'s one target resolved once: the embedded server's path and
//! link or the URL given, the request's flags and the timeout, each error naming its
//! flag, before the embedded server starts or any traffic; then the request aimed at
//! the target and a one-worker scenario of it.

use crate::cli::{LinkArgs, RequestArgs};
use crate::embedded::Embedded;
use crate::lab::LinkSpec;
use crate::parse::{parse_positive_duration, UsageError};
use crate::plan::build::{LoadConfig, RequestConfig};
use crate::plan::{LoadShape, Scenario, StopWhen, Strategy};

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
pub(crate) fn single_plan(
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
