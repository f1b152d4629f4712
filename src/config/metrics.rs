//! `--metrics`, `--remote-write` and their companions resolved into what the metrics
//! publisher does (docs/metrics.md).

use crate::cli::MetricsArgs;
use crate::metrics::publish::{MetricsPlan, RemotePlan};
use crate::parse::UsageError;

/// The metrics plan of these flags; `max_series` is watch's `--metrics-max-series`.
pub(crate) fn metrics_plan(a: &MetricsArgs, max_series: usize) -> Result<MetricsPlan, UsageError> {
    let addr = a
        .metrics
        .as_deref()
        .map(|s| crate::metrics::endpoint::parse_addr("--metrics", s))
        .transpose()?;
    let linger = crate::parse::parse_duration("--metrics-linger", &a.metrics_linger)?;
    let interval =
        crate::parse::parse_positive_duration("--remote-write-interval", &a.remote_write_interval)?;
    let remote = a
        .remote_write
        .as_deref()
        .map(|url| -> Result<RemotePlan, UsageError> {
            let parsed = url
                .parse::<http::Uri>()
                .ok()
                .filter(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some())
                .ok_or_else(|| {
                    UsageError(format!(
                        "--remote-write {url:?}: expected the receiver's http:// or https:// URL (Prometheus: http://HOST:9090/api/v1/write)"
                    ))
                })?;
            Ok(RemotePlan {
                url: parsed,
                interval,
                instance: a.instance.clone().unwrap_or_else(crate::host::host_name),
            })
        })
        .transpose()?;
    if a.instance.is_some() && remote.is_none() {
        return Err(UsageError(
            "--instance names the pushed series: it needs --remote-write URL".into(),
        ));
    }
    Ok(MetricsPlan {
        addr,
        linger,
        remote,
        max_series,
    })
}
