//! A validated plan: scenarios with a target, a connection strategy, a load shape and
//! a stop condition. Built by `config`, run by `engine`.

pub(crate) mod build;
pub(crate) mod redirect;

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;

use crate::net::dns::DnsSettings;
use crate::net::Origin;
use crate::proto::h1::{ConnectionHeader, HttpVersion, RequestTemplate};
pub(crate) use crate::proto::pace::MinSpeed;
pub(crate) use crate::report::raw::ScenarioShape;
pub(crate) use crate::strategy::Strategy;

/// What each strategy asks of HTTP/1.
impl Strategy {
    /// The HTTP version its requests carry.
    pub(crate) fn version(self) -> HttpVersion {
        match self {
            Strategy::Http10 | Strategy::Http10KeepAlive => HttpVersion::Http10,
            _ => HttpVersion::Http11,
        }
    }

    /// The `Connection` header its requests carry.
    pub(crate) fn connection_header(self) -> ConnectionHeader {
        match self {
            Strategy::KeepAlive
            | Strategy::Http10
            | Strategy::H2
            | Strategy::H3
            | Strategy::H3Close
            | Strategy::H3Resumed
            | Strategy::H3ZeroRtt => ConnectionHeader::Default,
            Strategy::Close | Strategy::CloseResumed | Strategy::Close0Rtt => {
                ConnectionHeader::Close
            }
            Strategy::Http10KeepAlive => ConnectionHeader::KeepAlive,
        }
    }
}

/// A row `compare --strategies` asks for: a strategy, and after an `@` either the
/// key-exchange groups its client offers in place of the run's (`close@x25519`,
/// `close@x25519mlkem768+x25519`) or `no-cert`, a client that presents no certificate
/// though `--cert` gives one (`close@no-cert`: what the certificate costs).
#[derive(Debug, Clone)]
pub(crate) struct Choice {
    pub strategy: Strategy,
    /// The text after the `@` (lowercase, `+` between groups) and the groups it names,
    /// most preferred first.
    pub groups: Option<(String, Vec<&'static dyn rustls::crypto::SupportedKxGroup>)>,
    /// `@no-cert`: the row presents no client certificate.
    pub no_cert: bool,
}

/// The text after a row's `@` that leaves its client certificate out.
pub(crate) const NO_CERT: &str = "no-cert";

impl Choice {
    /// A row of `strategy` as the run sets it up.
    pub(crate) fn of(strategy: Strategy) -> Choice {
        Choice {
            strategy,
            groups: None,
            no_cert: false,
        }
    }

    /// The row's name: the strategy's, then `@` and the groups when chosen, or
    /// `@no-cert`.
    pub(crate) fn name(&self) -> String {
        match &self.groups {
            Some((text, _)) => format!("{}@{text}", self.strategy.name()),
            None if self.no_cert => format!("{}@{NO_CERT}", self.strategy.name()),
            None => self.strategy.name().to_string(),
        }
    }

    /// The same row: the same strategy offering the same groups.
    pub(crate) fn same(&self, other: &Choice) -> bool {
        self.name() == other.name()
    }
}

/// One URL of a scenario with its request bytes, built once.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub url: String,
    /// Index into `Scenario::origins`.
    pub origin: usize,
    pub template: RequestTemplate,
    /// The request as sent on every attempt.
    pub request: Vec<u8>,
    /// The request sent as the last one on a connection (`--requests-per-connection`):
    /// it carries `Connection: close` so the server closes first.
    pub request_last: Vec<u8>,
    /// The request head for HTTP/2 and HTTP/3 (strategies `h2` and `h3*` only).
    pub h2_request: Option<http::Request<()>>,
    /// An origin first met in a redirect: `origin` indexes the scenario's list of them
    /// after `Scenario::origins` (`redirect::Redirects::found`).
    pub found_origin: Option<Arc<Origin>>,
}

impl Target {
    /// The request an HTTP/2 or HTTP/3 stream sends: its head and body.
    pub(crate) fn stream_request(&self) -> (&http::Request<()>, Option<&[u8]>) {
        let head = self
            .h2_request
            .as_ref()
            .expect("h2 and h3 scenarios carry a request head");
        (head, self.template.body.as_deref())
    }
}

/// Closed loop (`-c` workers back to back) or open loop (`--rate`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum LoadShape {
    Closed,
    /// Requests per second over all workers; latency counts from the intended send time.
    Open {
        rate: f64,
    },
}

/// When a scenario stops: after `requests`, at `duration`, whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StopWhen {
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
}

/// Limits on the phases of one attempt, besides its overall timeout.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct PhaseLimits {
    /// dns + connect + tls of a new connection.
    pub connect: Option<Duration>,
    /// End of send to the first response byte.
    pub wait: Option<Duration>,
    /// After the first byte: the least bytes per second over each window.
    pub min_speed: Option<MinSpeed>,
    /// New TCP connections per second at most, over the run's threads
    /// (`--connect-rate`).
    pub connect_rate: Option<f64>,
    /// `--retry-backoff`: the waits between connect tries while a hop cannot be reached
    /// (none: at once).
    pub retry_backoff: Option<Backoff>,
}

/// How long the workers wait between connect tries while a hop cannot be reached: the
/// first wait, and the longest of one worker's (`--retry-backoff MIN..MAX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Backoff {
    pub first: Duration,
    pub longest: Duration,
}

impl Backoff {
    /// 10 ms, then doubling up to 500 ms a worker: with -c 10 the workers together look
    /// every 50 ms, so an outage's end is known to within that.
    pub(crate) const DEFAULT: Backoff = Backoff {
        first: Duration::from_millis(10),
        longest: Duration::from_millis(500),
    };
}

#[derive(Debug, Clone)]
pub(crate) struct Scenario {
    pub name: String,
    pub strategy: Strategy,
    pub targets: Vec<Target>,
    pub origins: Vec<Origin>,
    pub concurrency: usize,
    pub threads: usize,
    pub load: LoadShape,
    pub stop: StopWhen,
    pub timeout: Duration,
    pub limits: PhaseLimits,
    pub requests_per_connection: Option<u64>,
    /// HTTP/2: connections per origin shared by the workers (`--connections`).
    pub connections: usize,
    /// Client TLS configuration for this strategy (None when no origin uses TLS).
    pub tls: Option<Arc<ClientConfig>>,
    /// HTTP/3: TLS for QUIC connections (strategies `h3*` only).
    pub quic_tls: Option<Arc<crate::net::quic::QuicTls>>,
    /// How host names are resolved (cache, name servers).
    pub dns: DnsSettings,
    /// `-L`: redirects are followed (each hop a request), and where they led.
    pub redirects: Option<Arc<Redirects>>,
    /// `--ok-status`: the statuses counted as ok beside 2xx and 3xx.
    pub ok_status: Vec<(u16, u16)>,
    /// HTTP/1 over plain TCP the task way, not the readiness loop (`LoadConfig`).
    pub task_per_worker: bool,
    /// Mutual TLS: the client certificate (`--cert`), and what this scenario's servers
    /// asked of one.
    pub client_auth: crate::net::client_auth::ClientAuth,
}

impl Scenario {
    /// What the choice of its origins' proxies has to tell the user: its own origins',
    /// then those its redirects found so far (the command says each line once).
    pub(crate) fn proxy_notes(&self) -> Vec<String> {
        let found = self.redirects.as_ref().map_or_else(Vec::new, |r| {
            r.found
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone()
        });
        let all = self.origins.iter().chain(found.iter().map(|o| &**o));
        all.filter_map(|o| o.proxy_note.clone()).collect()
    }

    /// The origin `target` goes to: one of the scenario's, or one a redirect led to.
    #[inline]
    pub(crate) fn origin<'a>(&'a self, target: &'a Target) -> &'a Origin {
        match &target.found_origin {
            Some(o) => o,
            None => &self.origins[target.origin],
        }
    }

    /// What the servers asked of a client certificate, and what was presented: none when
    /// no server asked and no `--cert` was given.
    pub(crate) fn client_certificate(&self) -> Option<crate::report::raw::ClientCertificate> {
        let asked = self.client_auth.asked.counts();
        let id = self.client_auth.identity.as_deref();
        (asked.requested > 0 || id.is_some()).then(|| crate::report::raw::ClientCertificate {
            requested: asked.requested,
            presented: asked.presented,
            acceptable_cas: asked.cas,
            subject: id.map(|i| i.subject.clone()),
            key_type: id.map(|i| i.key_type.clone()),
        })
    }

    /// What the summary needs of the plan.
    pub(crate) fn shape(&self) -> ScenarioShape {
        ScenarioShape {
            name: self.name.clone(),
            url: self
                .targets
                .first()
                .map(|t| t.url.clone())
                .unwrap_or_default(),
            urls: self.targets.len(),
            origins: self.origins.len(),
            strategy: self.strategy,
            concurrency: self.concurrency,
            threads: self.threads,
            requests: self.stop.requests,
            duration_s: self.stop.duration.map(|d| d.as_secs_f64()),
            rate: match self.load {
                LoadShape::Open { rate } => Some(rate),
                LoadShape::Closed => None,
            },
            timeout_s: self.timeout.as_secs_f64(),
            requests_per_connection: self.requests_per_connection,
            connections_per_origin: self.connections,
            dns_cache: !self.dns.no_cache,
            proxy: self
                .origins
                .iter()
                .find_map(|o| o.proxy.as_ref().map(|p| p.display())),
            redirects: self.redirects.is_some(),
            origin_names: if self.redirects.is_some() {
                origin_names(self)
            } else {
                Vec::new()
            },
            local_addrs: self
                .origins
                .first()
                .map(|o| o.local_addrs.iter().map(ToString::to_string).collect())
                .unwrap_or_default(),
            connect_rate: self.limits.connect_rate,
            client_certificate: self.client_certificate(),
            ok_status: self.ok_status.clone(),
        }
    }

    /// Requests worker `w` sends when the run is bounded by a count: tickets
    /// w, w+c, w+2c, ... below n, so `-n` not divisible by `-c` still sends exactly n.
    pub(crate) fn worker_quota(&self, w: usize) -> Option<u64> {
        self.stop.requests.map(|n| {
            let c = self.concurrency as u64;
            let w = w as u64;
            if w >= n {
                0
            } else {
                (n - w).div_ceil(c)
            }
        })
    }
}

/// A scenario's redirect policy and what its redirects found.
#[derive(Debug)]
pub(crate) struct Redirects {
    /// `--max-redirs`: redirects followed in a row before the next is an error.
    pub max: u32,
    /// The request as given, for the targets redirects lead to.
    pub req: build::RequestConfig,
    /// Origins first met in redirects, after `Scenario::origins` (the `i`th has index
    /// `origins.len() + i`).
    pub found: std::sync::Mutex<Vec<Arc<Origin>>>,
}

/// The names of the scenario's origins, found ones after its own, by index.
pub(crate) fn origin_names(sc: &Scenario) -> Vec<String> {
    let mut names: Vec<String> = sc.origins.iter().map(origin_name).collect();
    if let Some(rd) = &sc.redirects {
        let list = rd.found.lock().unwrap_or_else(|p| p.into_inner());
        names.extend(list.iter().map(|o| origin_name(o)));
    }
    names
}

/// `https://host:port`: an origin as the report names it.
fn origin_name(o: &Origin) -> String {
    format!(
        "{}://{}",
        if o.tls { "https" } else { "http" },
        o.authority()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn quotas_sum_to_n() {
        for (n, c) in [(1001u64, 4usize), (10, 3), (2, 5), (1000, 1)] {
            let s = super::Scenario {
                name: String::new(),
                strategy: super::Strategy::KeepAlive,
                targets: vec![],
                origins: vec![],
                concurrency: c,
                threads: 1,
                load: super::LoadShape::Closed,
                stop: super::StopWhen {
                    requests: Some(n),
                    duration: None,
                },
                timeout: std::time::Duration::from_secs(1),
                limits: Default::default(),
                requests_per_connection: None,
                connections: 1,
                tls: None,
                quic_tls: None,
                dns: Default::default(),
                redirects: None,
                client_auth: Default::default(),
                ok_status: Vec::new(),
                task_per_worker: false,
            };
            let sum: u64 = (0..c).map(|w| s.worker_quota(w).unwrap()).sum();
            assert_eq!(sum, n);
        }
    }
}
