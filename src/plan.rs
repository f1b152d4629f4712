//! A validated plan: scenarios with a target, a connection strategy, a load shape and
//! a stop condition. Built by `config`, run by `engine`.

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use serde::{Deserialize, Serialize};

use crate::net::dns::DnsSettings;
use crate::net::Origin;
use crate::proto::h1::{ConnectionHeader, HttpVersion, RequestTemplate};
pub use crate::proto::pace::MinSpeed;

/// How the client uses connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Persistent HTTP/1.1 connections, reused until the server ends them.
    KeepAlive,
    /// `Connection: close`, a new connection (and full TLS handshake) per request.
    Close,
    /// A new connection per request, with TLS session resumption.
    CloseResumed,
    /// A new connection per request, resumed, with the request in TLS 1.3 early data
    /// (0-RTT) when the session's ticket allows it.
    Close0Rtt,
    /// HTTP/1.0 without a keep-alive header.
    Http10,
    /// HTTP/1.0 with `Connection: keep-alive`.
    Http10KeepAlive,
    /// HTTP/2 (ALPN over TLS, prior knowledge over cleartext): the workers share
    /// `--connections` multiplexed connections per origin.
    H2,
    /// HTTP/3 over QUIC: the workers share `--connections` connections per origin.
    H3,
    /// HTTP/3, a new QUIC connection per request with a full TLS handshake.
    H3Close,
    /// HTTP/3, a new QUIC connection per request resuming a TLS session.
    H3Resumed,
    /// HTTP/3, a new QUIC connection per request, resumed, with the request in 0-RTT.
    H3ZeroRtt,
}

impl Strategy {
    pub const ALL: [Strategy; 11] = [
        Strategy::Close,
        Strategy::CloseResumed,
        Strategy::Close0Rtt,
        Strategy::Http10,
        Strategy::Http10KeepAlive,
        Strategy::KeepAlive,
        Strategy::H2,
        Strategy::H3Close,
        Strategy::H3Resumed,
        Strategy::H3ZeroRtt,
        Strategy::H3,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::KeepAlive => "keepalive",
            Strategy::Close => "close",
            Strategy::CloseResumed => "close-resumed",
            Strategy::Close0Rtt => "close-0rtt",
            Strategy::Http10 => "http10",
            Strategy::Http10KeepAlive => "http10-keepalive",
            Strategy::H2 => "h2",
            Strategy::H3 => "h3",
            Strategy::H3Close => "h3-close",
            Strategy::H3Resumed => "h3-resumed",
            Strategy::H3ZeroRtt => "h3-0rtt",
        }
    }

    /// Parse a name or a short alias.
    pub fn parse(s: &str) -> Option<Strategy> {
        Some(match s.to_ascii_lowercase().as_str() {
            "keepalive" | "keep-alive" | "ka" | "reuse" => Strategy::KeepAlive,
            "close" | "no-keepalive" | "new" => Strategy::Close,
            "close-resumed" | "resumed" | "resume" => Strategy::CloseResumed,
            "close-0rtt" | "0rtt" | "early-data" => Strategy::Close0Rtt,
            "http10" | "http1.0" | "1.0" => Strategy::Http10,
            "http10-keepalive" | "http10-ka" | "1.0-ka" => Strategy::Http10KeepAlive,
            "h2" | "http2" | "h2c" => Strategy::H2,
            "h3" | "http3" | "quic" => Strategy::H3,
            "h3-close" | "http3-close" => Strategy::H3Close,
            "h3-resumed" | "http3-resumed" => Strategy::H3Resumed,
            "h3-0rtt" | "http3-0rtt" => Strategy::H3ZeroRtt,
            _ => return None,
        })
    }

    pub fn known_names() -> String {
        Strategy::ALL
            .iter()
            .map(|s| s.name())
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn version(self) -> HttpVersion {
        match self {
            Strategy::Http10 | Strategy::Http10KeepAlive => HttpVersion::Http10,
            _ => HttpVersion::Http11,
        }
    }

    /// The protocol on the wire, as the report names it.
    pub fn protocol(self) -> &'static str {
        match self {
            Strategy::H2 => "h2",
            s if s.quic() => "h3",
            Strategy::Http10 | Strategy::Http10KeepAlive => "http/1.0",
            _ => "http/1.1",
        }
    }

    /// Whether connections are multiplexed (shared by the workers).
    pub fn multiplexed(self) -> bool {
        matches!(self, Strategy::H2 | Strategy::H3)
    }

    /// HTTP/3 over QUIC.
    pub fn quic(self) -> bool {
        matches!(
            self,
            Strategy::H3 | Strategy::H3Close | Strategy::H3Resumed | Strategy::H3ZeroRtt
        )
    }

    pub fn connection_header(self) -> ConnectionHeader {
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

    /// Whether the client asks to keep connections open.
    pub fn persistent(self) -> bool {
        matches!(
            self,
            Strategy::KeepAlive | Strategy::Http10KeepAlive | Strategy::H2 | Strategy::H3
        )
    }

    /// Whether the strategy is about TLS (resumption, early data) or runs over QUIC
    /// (TLS 1.3 inside): https only.
    pub fn needs_tls(self) -> bool {
        matches!(self, Strategy::CloseResumed | Strategy::Close0Rtt) || self.quic()
    }

    /// Whether the request goes in TLS 1.3 early data where the session allows it.
    pub fn early_data(self) -> bool {
        matches!(self, Strategy::Close0Rtt | Strategy::H3ZeroRtt)
    }

    /// Whether TLS session resumption is offered on new connections.
    pub fn tls_resumption(self) -> bool {
        !matches!(self, Strategy::Close | Strategy::Http10 | Strategy::H3Close)
    }
}

impl serde::Serialize for Strategy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Strategy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Strategy, D::Error> {
        let s = String::deserialize(d)?;
        Strategy::parse(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown strategy {s:?} (known: {})",
                Strategy::known_names()
            ))
        })
    }
}

/// One URL of a scenario with its request bytes, built once.
#[derive(Debug, Clone)]
pub struct Target {
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
}

/// Closed loop (`-c` workers back to back) or open loop (`--rate`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadShape {
    Closed,
    /// Requests per second over all workers; latency counts from the intended send time.
    Open {
        rate: f64,
    },
}

/// When a scenario stops: after `requests`, at `duration`, whichever comes first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopWhen {
    pub requests: Option<u64>,
    pub duration: Option<Duration>,
}

/// Limits on the phases of one attempt, besides its overall timeout.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PhaseLimits {
    /// dns + connect + tls of a new connection.
    pub connect: Option<Duration>,
    /// End of send to the first response byte.
    pub wait: Option<Duration>,
    /// After the first byte: the least bytes per second over each window.
    pub min_speed: Option<MinSpeed>,
}

#[derive(Debug, Clone)]
pub struct Scenario {
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
}

impl Scenario {
    /// What the summary needs of the plan.
    pub fn shape(&self) -> ScenarioShape {
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
        }
    }

    /// Requests worker `w` sends when the run is bounded by a count: tickets
    /// w, w+c, w+2c, ... below n, so `-n` not divisible by `-c` still sends exactly n.
    pub fn worker_quota(&self, w: usize) -> Option<u64> {
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
            };
            let sum: u64 = (0..c).map(|w| s.worker_quota(w).unwrap()).sum();
            assert_eq!(sum, n);
        }
    }
}

/// What summarizing a scenario needs of its plan: serializable, and summable over agents.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScenarioShape {
    pub name: String,
    /// The first URL, and how many the scenario cycles through.
    pub url: String,
    pub urls: usize,
    pub origins: usize,
    pub strategy: Strategy,
    pub concurrency: usize,
    pub threads: usize,
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    /// Open loop: requests per second.
    pub rate: Option<f64>,
    pub timeout_s: f64,
    pub requests_per_connection: Option<u64>,
    /// HTTP/2 and HTTP/3 (`h3`): connections per origin the workers share.
    pub connections_per_origin: usize,
    pub dns_cache: bool,
}
