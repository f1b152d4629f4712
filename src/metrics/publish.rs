//! A command's metrics while it runs: the endpoint (`--metrics`) and the pushes
//! (`--remote-write`), started before the work and finished after its report.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub(crate) use super::remote::RemotePlan;
use super::{endpoint::Endpoint, remote::Pusher, Source};

/// What `--metrics` and `--remote-write` asked for.
#[derive(Debug, Clone, Default)]
pub(crate) struct MetricsPlan {
    pub addr: Option<SocketAddr>,
    /// After the end: serve until one more scrape, at most this long.
    pub linger: Duration,
    pub remote: Option<RemotePlan>,
    /// Watch: at most this many label sets per metric.
    pub max_series: usize,
}

impl MetricsPlan {
    pub(crate) fn wanted(&self) -> bool {
        self.addr.is_some() || self.remote.is_some()
    }
}

/// The running endpoint and pusher.
pub(crate) struct Publisher {
    endpoint: Option<Endpoint>,
    pusher: Option<Pusher>,
    linger: Duration,
}

impl Publisher {
    /// Start what the plan asks for (nothing: `None`); the endpoint's address is said
    /// through `say` (the command's stderr: nothing below the commands prints).
    pub(crate) fn start(
        plan: &MetricsPlan,
        source: Arc<dyn Source>,
        say: &dyn Fn(&str),
    ) -> anyhow::Result<Option<Publisher>> {
        if !plan.wanted() {
            return Ok(None);
        }
        let endpoint = plan
            .addr
            .map(|a| Endpoint::start(a, source.clone()))
            .transpose()?;
        if let Some(e) = &endpoint {
            say(&format!(
                "handshake: metrics at http://{}/metrics",
                e.addr()
            ));
        }
        let pusher = plan
            .remote
            .clone()
            .map(|r| Pusher::start(r, source))
            .transpose()?;
        Ok(Some(Publisher {
            endpoint,
            pusher,
            linger: plan.linger,
        }))
    }

    /// After the report: push the last values, say what failed (through `say`), and
    /// serve until one more scrape (at most the linger).
    pub(crate) fn finish(self, say: &dyn Fn(&str)) {
        if let Some(p) = self.pusher {
            let url = p.url.clone();
            if let Some(line) = p.finish().line(&url) {
                say(&line);
            }
        }
        if let Some(e) = self.endpoint {
            if !self.linger.is_zero() {
                say(&format!(
                    "handshake: serving the last values at http://{}/metrics until the next scrape (at most {:?}; Ctrl-C to leave now)",
                    e.addr(),
                    self.linger
                ));
                e.linger(self.linger);
            }
        }
    }
}
