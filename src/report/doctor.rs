//! `doctor`'s report: what each probe found, the findings in plain sentences, and the
//! problems with their fixes. Filled by `doctor`.

use serde::Serialize;

use super::link::LinkReport;
use crate::record::ServerSettings;

/// A server doctor knows the directives of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ServerKind {
    Nginx,
    Apache,
    Caddy,
    Haproxy,
    Lighttpd,
}

/// What one request on a fresh connection showed.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PersistProbe {
    pub status: Option<u16>,
    pub http_version: Option<String>,
    pub connection_header: Option<String>,
    pub keep_alive_header: Option<String>,
    /// The response let the connection persist.
    pub persistent: bool,
    /// A second request on the same connection succeeded.
    pub reused: bool,
    /// The server closed the connection after the response (within 1 s).
    pub server_closed: bool,
    /// The response had no length (no Content-Length, not chunked): its body ended with
    /// the connection, whatever the server's keep-alive.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub close_delimited: bool,
    pub error: Option<String>,
    /// The name the error is counted under (`refused`, `name_not_found`), for its hint.
    #[serde(skip)]
    pub error_key: Option<&'static str>,
    /// No TCP connection could be made (refused, unreachable, or no answer in time).
    #[serde(skip)]
    pub tcp_unreachable: bool,
    /// What a 3xx to 5xx response said (its status line and first words), for the
    /// finding that names the status.
    #[serde(skip)]
    pub said: Option<Box<str>>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct MaxRequests {
    /// Requests the server served on one connection before ending it; None: it never
    /// ended it within `probed` requests.
    pub limit: Option<u64>,
    pub probed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct IdleTimeout {
    /// The longest idle wait after which the connection still worked, in s.
    pub at_least_s: f64,
    /// The shortest idle time after which it was found closed; None: open at `max_idle`.
    pub at_most_s: Option<f64>,
    /// What the server's `Keep-Alive: timeout=` header claims.
    pub claimed_s: Option<f64>,
    pub probes: u64,
    /// The close moved with when a connection went idle: one probe was still open after
    /// `at_least_s` though another was closed after `at_most_s`, the shorter. The probes
    /// go idle at moments spread over a second, so a server whose timer ticks coarsely
    /// (lighttpd's, once a second) shows it; a client must then stay under `at_most_s`.
    pub varies: bool,
}

impl IdleTimeout {
    /// The idle times the probes bound it by, shorter first; none where no probe was
    /// closed.
    pub(crate) fn bounds(&self) -> Option<[f64; 2]> {
        self.at_most_s
            .map(|hi| [self.at_least_s.min(hi), self.at_least_s.max(hi)])
    }

    /// The longest idle time every probe supports: below it no probe was found closed,
    /// and each one that waited less still worked.
    pub(crate) fn safe_s(&self) -> f64 {
        self.at_most_s
            .map_or(self.at_least_s, |hi| self.at_least_s.min(hi))
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct TlsFindings {
    pub version: String,
    pub cipher_suite: String,
    /// What the server chose when offered h2 and http/1.1.
    pub alpn_selected: Option<String>,
    pub offers_h2: bool,
    /// A second connection resumed the session of the first.
    pub resumption: bool,
    /// Medians of five handshakes each.
    pub full_handshake_ms: f64,
    pub resumed_handshake_ms: Option<f64>,
    /// TLS 1.3 early data (0-RTT) on a resumed session (absent without resumption).
    pub early_data: Option<EarlyDataFinding>,
    /// The first full handshake's ClientHello and the server's first flight (bytes), and
    /// the median connect of the full handshakes (ms): the round trip to judge it at.
    pub client_hello_bytes: Option<u32>,
    pub server_flight_bytes: Option<u64>,
    pub connect_ms: f64,
    /// Which key-exchange groups the server accepts and prefers.
    pub key_exchange: KeyExchangeFindings,
}

/// Key exchange: each group offered alone, then two offers of several.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct KeyExchangeFindings {
    /// Each group the client knows, offered alone (its key share sent).
    pub groups: Vec<GroupProbe>,
    /// X25519MLKEM768, x25519, secp256r1, secp384r1 with shares for the first two, as
    /// browsers offer them.
    pub post_quantum_first: OfferProbe,
    /// x25519, X25519MLKEM768, secp256r1, secp384r1 with a share for x25519 only: a
    /// server that prefers post-quantum asks for it with a HelloRetryRequest.
    pub classical_first: OfferProbe,
}

/// One group offered alone.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct GroupProbe {
    pub group: String,
    pub accepted: bool,
    /// The median of its full handshakes (3), when accepted.
    pub handshake_ms: Option<f64>,
    pub client_hello_bytes: Option<u32>,
    pub server_flight_bytes: Option<u64>,
    /// Why the handshake failed, when not accepted.
    pub error: Option<String>,
}

/// Several groups offered, most preferred first: what the server chose.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OfferProbe {
    pub offered: Vec<String>,
    /// The group agreed on; none when the handshake failed.
    pub chosen: Option<String>,
    /// The server asked for another share (one more round trip).
    pub hello_retry_request: bool,
    /// The median of its full handshakes (3).
    pub handshake_ms: Option<f64>,
    pub client_hello_bytes: Option<u32>,
    pub error: Option<String>,
}

/// HTTP/2: streams sent at once on one connection.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Concurrency {
    /// Streams sent at once (the server's limit, at most 100).
    pub tried: u64,
    pub answered: u64,
    /// Refused by the server (REFUSED_STREAM) although within its advertised limit.
    pub refused: u64,
    pub failed: u64,
}

/// What the server does over HTTP/2.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct H2Findings {
    pub settings: ServerSettings,
    /// The preface sent to the server's SETTINGS received.
    pub h2_setup_ms: f64,
    /// Streams served on one connection before its GOAWAY.
    pub max_requests: Option<MaxRequests>,
    pub idle_timeout: Option<IdleTimeout>,
    pub concurrency: Option<Concurrency>,
    /// The HTTP/2 probes failed: why.
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct DoctorReport {
    pub schema_version: u32,
    pub tool: &'static str,
    pub version: &'static str,
    pub url: String,
    /// The `Server` header of the first answer, if any.
    pub server: Option<String>,
    /// The server it names, when doctor knows its settings: its fixes name its own.
    pub server_kind: Option<ServerKind>,
    /// With `--rtt`: the emulated link to the embedded server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkReport>,
    /// The forward proxy the probes went through (scheme, host and port): for an
    /// http:// URL the connections probed are the proxy's; for https:// each is a
    /// `CONNECT` tunnel to the origin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    pub http11: PersistProbe,
    /// HTTP/1.0 without and with `Connection: keep-alive`; null when TCP could not be
    /// reached (an HTTP/3-only server).
    pub http10: Option<PersistProbe>,
    pub http10_keep_alive: Option<PersistProbe>,
    pub max_requests: Option<MaxRequests>,
    pub idle_timeout: Option<IdleTimeout>,
    pub tls: Option<TlsFindings>,
    /// Over TLS, when the server asked for a client certificate: what it asked, what the
    /// probes presented, and how it answers a connection without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<ClientCertPolicy>,
    /// Present when the server speaks HTTP/2 (ALPN h2, or `--h2c`).
    pub h2: Option<H2Findings>,
    /// https:// URLs: whether the server offers HTTP/3, resumes QUIC sessions and takes
    /// 0-RTT on QUIC.
    pub h3: Option<H3Findings>,
    /// The connection policy in one line (the report's headline), with the probes'
    /// figures it was read from (code `policy`; the idle timeout and an unreached
    /// request limit as their bounds).
    pub policy: super::finding::Finding,
    /// What was seen, in plain sentences.
    pub findings: Vec<super::finding::Finding>,
    /// Each problem with a concrete fix. Empty: exit status 0.
    pub problems: Vec<super::finding::Finding>,
    /// Ctrl-C cut the probes short: the report holds those that ended (exit status 130).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<super::finding::Finding>,
}

impl DoctorReport {
    /// The report of `url` with its first probe, `http11`, and nothing else probed yet.
    pub(crate) fn probed(url: &str, http11: PersistProbe) -> DoctorReport {
        DoctorReport {
            schema_version: super::SCHEMA_VERSION,
            tool: "handshake",
            version: env!("CARGO_PKG_VERSION"),
            url: url.to_string(),
            server: None,
            server_kind: None,
            link: None,
            proxy: None,
            http11,
            http10: None,
            http10_keep_alive: None,
            max_requests: None,
            idle_timeout: None,
            tls: None,
            client_certificate: None,
            h2: None,
            h3: None,
            policy: super::finding::Finding::new(
                "policy",
                super::finding::Cause::Measured,
                String::new(),
            ),
            findings: Vec::new(),
            problems: Vec::new(),
            interrupted: None,
        }
    }
}

/// A server that asks for a client certificate (a CertificateRequest in its handshake).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ClientCertPolicy {
    /// The probes' handshakes: how many were asked, how many presented `--cert`, and the
    /// CAs the server named.
    #[serde(flatten)]
    pub asked: super::raw::ClientCertificate,
    /// One connection without a certificate: how the server answered it (required in
    /// the handshake, required by an HTTP error after it, or optional).
    pub without_certificate: WithoutCertificate,
}

/// How a server that asked for a client certificate answered a connection that sent none.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "snake_case", tag = "answer")]
pub(crate) enum WithoutCertificate {
    /// The connection failed: an alert, or the server ended it after the handshake.
    Refused { error: String },
    /// The handshake completed and the request was answered with an error status.
    ErrorStatus { status: u16 },
    /// The request was served: the certificate is optional.
    Served { status: u16 },
}

impl ClientCertPolicy {
    /// The policy's part: "client certificate required (the handshake refused without
    /// one)", "… required (400 without one)", or "client certificate optional".
    pub(crate) fn said(&self) -> String {
        match &self.without_certificate {
            WithoutCertificate::Refused { .. } => {
                "client certificate required (refused in the handshake without one)".into()
            }
            WithoutCertificate::ErrorStatus { status } => {
                format!("client certificate required ({status} without one)")
            }
            WithoutCertificate::Served { .. } => {
                "client certificate asked for, optional (served without one)".into()
            }
        }
    }
}

/// TLS 1.3 early data on a resumed connection (over TCP, or QUIC's 0-RTT).
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct EarlyDataFinding {
    /// The server's ticket allowed early data, so the request went in it.
    pub offered: bool,
    /// The server took the request in early data.
    pub accepted: bool,
}

#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct H3Findings {
    /// The `Alt-Svc` header of the server's HTTP/1.1 response.
    pub alt_svc: Option<String>,
    /// `Alt-Svc` names HTTP/3 (`h3`).
    pub advertised: bool,
    /// The UDP port HTTP/3 was tried at: the one `Alt-Svc` names, else the URL's.
    pub port: u16,
    /// A request on a new QUIC connection was answered.
    pub answered: bool,
    /// Why not, when it was not: the error category (and detail).
    pub error: Option<String>,
    /// Medians of `quic_handshake` (first Initial to handshake complete) over new
    /// connections: full handshakes, and resumed ones.
    pub full_handshake_ms: Option<f64>,
    pub resumed_handshake_ms: Option<f64>,
    /// New QUIC connections resumed the TLS session of an earlier one.
    pub resumption: bool,
    /// Of the connections that offered a session ticket: how many resumed.
    pub resumed: u64,
    pub resume_tries: u64,
    /// A request in 0-RTT on a resumed QUIC connection (absent without resumption).
    pub early_data: Option<EarlyDataFinding>,
    /// What all the probes did on the wire: QUIC connections opened (handshake
    /// completed), of them resumed, and requests the server took in 0-RTT.
    pub connections_opened: u64,
    pub handshakes_resumed: u64,
    pub early_data_accepted: u64,
}
