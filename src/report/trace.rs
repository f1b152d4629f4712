//! `trace`'s report: each request's phases, what the TLS handshake agreed on, the
//! response's connection headers and what followed it. Filled by `trace`.

use serde::Serialize;

use super::link::LinkReport;
use crate::record::{Phase, ServerSettings};

/// What the TLS handshake negotiated.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TlsInfo {
    pub version: String,
    /// Empty over QUIC: quinn does not expose the suite its TLS session agreed on.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub cipher_suite: String,
    pub alpn: Option<String>,
    pub resumed: bool,
    /// The key-exchange group agreed on (not known over QUIC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key_exchange: Option<String>,
    /// TLS over TCP: whether the server answered the ClientHello with a
    /// HelloRetryRequest (one more round trip), the first ClientHello's bytes and the
    /// server's first flight's (0: not known, with early data).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hello_retry_request: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_hello_bytes: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_flight_bytes: Option<u64>,
    /// Mutual TLS: the server asked for a client certificate in this handshake (absent:
    /// it did not).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<StepClientCertificate>,
}

/// A handshake in which the server asked for a client certificate.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StepClientCertificate {
    /// The client presented one (`--cert`).
    pub presented: bool,
    /// The CAs the server named (none: any).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub acceptable_cas: Vec<String>,
}

/// quinn's figures for the connection so far.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct QuicInfo {
    pub remote: String,
    /// quinn's smoothed round-trip estimate.
    pub rtt_ms: f64,
    pub packets_sent: u64,
    pub packets_lost: u64,
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct TraceStep {
    pub index: u64,
    /// The request went out on a connection opened for an earlier one.
    pub reused: bool,
    pub dns_ms: Option<f64>,
    pub connect_ms: Option<f64>,
    /// Through a forward proxy (new connections): TCP to the proxy (and TLS to an
    /// https:// proxy), in place of `connect_ms`; then, to an https:// origin, the
    /// `CONNECT` round trip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy_connect_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tunnel_ms: Option<f64>,
    pub tls_ms: Option<f64>,
    /// HTTP/2: the preface sent to the server's SETTINGS received (new connections).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h2_setup_ms: Option<f64>,
    /// HTTP/2 and HTTP/3: the stream that carried the request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_id: Option<u64>,
    /// HTTP/3 (new connections): the first Initial sent to the QUIC handshake's end
    /// (transport and TLS together; `connect_ms` and `tls_ms` are then absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quic_handshake_ms: Option<f64>,
    /// HTTP/3 (new connections, not 0-RTT): after the handshake, HTTP/3's control
    /// stream opened and its SETTINGS sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h3_setup_ms: Option<f64>,
    /// 0-RTT over QUIC: the request left this long after the first Initial, before
    /// the handshake's end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_left_ms: Option<f64>,
    /// HTTP/3: quinn's figures for the connection after this response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicInfo>,
    /// HTTP/3 with session resumption: the server's session ticket came on this
    /// connection before it was closed (the next connection can resume).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_ticket: Option<bool>,
    /// TLS 1.3 early data: the request went with the ClientHello, and the server
    /// `accepted` it or `rejected` it (then it was sent again after the handshake);
    /// over QUIC, `unavailable` when 0-RTT was asked for but no session to resume
    /// allowed it (none yet, or the server's tickets allow no early data).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_data: Option<&'static str>,
    pub send_ms: f64,
    pub wait_ms: f64,
    pub receive_ms: f64,
    pub total_ms: f64,
    pub tls: Option<TlsInfo>,
    pub status: u16,
    pub http_version: String,
    pub connection_header: Option<String>,
    pub keep_alive_header: Option<String>,
    pub body_bytes: u64,
    /// The response lets the connection persist (by its version, headers and framing).
    pub persistent: bool,
    /// What was seen after the response: "open", or "closed by the server after N ms".
    pub after_response: String,
    /// HTTP/1: the server closed the connection after this response without a word (no
    /// `Connection: close`): the next request found it closed and went again on a new
    /// connection.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub closed_silently: bool,
    /// What a 3xx to 5xx response said, for the report's `status_examples`.
    #[serde(skip)]
    pub said: Option<Box<str>>,
}

impl TraceStep {
    /// The step's time in `phase`, in ms (`None`: the phase did not happen).
    pub(crate) fn phase_ms(&self, phase: Phase) -> Option<f64> {
        match phase {
            Phase::Blocked => None,
            Phase::Dns => self.dns_ms,
            Phase::Connect => self.connect_ms,
            Phase::ProxyConnect => self.proxy_connect_ms,
            Phase::Tunnel => self.tunnel_ms,
            Phase::Tls => self.tls_ms,
            Phase::H2Setup => self.h2_setup_ms,
            Phase::QuicHandshake => self.quic_handshake_ms,
            Phase::Send => Some(self.send_ms),
            Phase::Wait => Some(self.wait_ms),
            Phase::Receive => Some(self.receive_ms),
            Phase::Total => Some(self.total_ms),
        }
    }

    /// What setting up its connection took, in ms: the setup phases (0 on a reused
    /// connection). HTTP/3's control stream, opened after the handshake without a
    /// round trip, is not one of them.
    pub(crate) fn setup_ms(&self) -> f64 {
        Phase::SETUP.iter().filter_map(|p| self.phase_ms(*p)).sum()
    }
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct TraceReport {
    pub schema_version: u32,
    pub tool: &'static str,
    pub version: &'static str,
    pub url: String,
    pub strategy: String,
    /// The protocol on the wire: `http/1.1`, `http/1.0`, `h2`, `h3`.
    pub protocol: String,
    /// HTTP/2: the server's SETTINGS (from the first connection).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h2_settings: Option<ServerSettings>,
    /// With `--rtt`: the emulated link to the embedded server.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkReport>,
    /// What the trace showed in one sentence, with its evidence: the finding that
    /// explains it (every response an error, 0-RTT never accepted) followed by what was
    /// measured, or what was measured alone. Absent when no request was answered.
    pub headline: Option<super::finding::Finding>,
    /// Everything the trace found, in the order of their causes (the headline's own
    /// finding among them); a later cause is left out while an earlier one explains it.
    pub findings: Vec<super::finding::Finding>,
    pub steps: Vec<TraceStep>,
    /// A step that failed: its category and message.
    pub error: Option<String>,
    /// What the first redirect or error response of each status said: its status line
    /// and a redirect's `Location` or the first words of an error's body.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub status_examples: std::collections::BTreeMap<String, String>,
}
