//! A failed attempt: its category ([`ErrorKind`]), what exactly happened
//! ([`ErrorDetail`]: a bounded set), and what the failing layer said, carried with the
//! [`Failure`] to the recorder.

use serde::{Deserialize, Serialize};

use super::notes;
use super::phase::Phase;

/// The error category of a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    Dns,
    Connect,
    Tls,
    TimeoutDns,
    TimeoutConnect,
    TimeoutTls,
    TimeoutH2Setup,
    /// No QUIC handshake within the timeout (a server that drops UDP, say).
    QuicTimeout,
    /// The QUIC connection failed: version mismatch, a transport or application close,
    /// a stateless reset.
    Quic,
    TimeoutSend,
    TimeoutWait,
    TimeoutReceive,
    Reset,
    ClosedBeforeResponse,
    BodyIncomplete,
    Protocol,
    TooLarge,
    LocalResource,
    /// A forward proxy refused or failed the tunnel (its answer to `CONNECT`).
    Proxy,
    /// No answer from the proxy to `CONNECT` within the timeout.
    TimeoutTunnel,
    /// `-L`: a redirect that could not be followed (a loop, past `--max-redirs`, or a
    /// `Location` this run cannot go to); the response itself was received.
    Redirect,
}

impl ErrorKind {
    pub(crate) const ALL: [ErrorKind; 21] = [
        ErrorKind::Dns,
        ErrorKind::Connect,
        ErrorKind::Tls,
        ErrorKind::TimeoutDns,
        ErrorKind::TimeoutConnect,
        ErrorKind::TimeoutTls,
        ErrorKind::TimeoutH2Setup,
        ErrorKind::QuicTimeout,
        ErrorKind::Quic,
        ErrorKind::TimeoutSend,
        ErrorKind::TimeoutWait,
        ErrorKind::TimeoutReceive,
        ErrorKind::Reset,
        ErrorKind::ClosedBeforeResponse,
        ErrorKind::BodyIncomplete,
        ErrorKind::Protocol,
        ErrorKind::TooLarge,
        ErrorKind::LocalResource,
        ErrorKind::Proxy,
        ErrorKind::TimeoutTunnel,
        ErrorKind::Redirect,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            // A failure in these phases is named by its phase.
            ErrorKind::Dns => Phase::Dns.name(),
            ErrorKind::Connect => Phase::Connect.name(),
            ErrorKind::Tls => Phase::Tls.name(),
            ErrorKind::TimeoutDns => "timeout_dns",
            ErrorKind::TimeoutConnect => "timeout_connect",
            ErrorKind::TimeoutTls => "timeout_tls",
            ErrorKind::TimeoutH2Setup => "timeout_h2_setup",
            ErrorKind::QuicTimeout => "quic_timeout",
            ErrorKind::Quic => "quic",
            ErrorKind::TimeoutSend => "timeout_send",
            ErrorKind::TimeoutWait => "timeout_wait",
            ErrorKind::TimeoutReceive => "timeout_receive",
            ErrorKind::Reset => "reset",
            ErrorKind::ClosedBeforeResponse => "closed_before_response",
            ErrorKind::BodyIncomplete => "body_incomplete",
            ErrorKind::Protocol => "protocol",
            ErrorKind::TooLarge => "too_large",
            ErrorKind::LocalResource => "local_resource",
            ErrorKind::Proxy => "proxy",
            ErrorKind::TimeoutTunnel => "timeout_tunnel",
            ErrorKind::Redirect => "redirect",
        }
    }

    pub(crate) fn index(self) -> usize {
        ErrorKind::ALL.iter().position(|k| *k == self).unwrap_or(0)
    }

    /// The timeout category for an attempt cut off while in `phase`.
    pub(crate) fn timeout_at(phase: Phase) -> ErrorKind {
        match phase {
            Phase::Dns => ErrorKind::TimeoutDns,
            Phase::Connect | Phase::ProxyConnect => ErrorKind::TimeoutConnect,
            Phase::Tunnel => ErrorKind::TimeoutTunnel,
            Phase::Tls => ErrorKind::TimeoutTls,
            Phase::H2Setup => ErrorKind::TimeoutH2Setup,
            Phase::QuicHandshake => ErrorKind::QuicTimeout,
            Phase::Send => ErrorKind::TimeoutSend,
            // No attempt is cut off while blocked (its clock starts after), nor after
            // its end: both are named as the wait for the answer.
            Phase::Wait | Phase::Blocked | Phase::Total => ErrorKind::TimeoutWait,
            Phase::Receive => ErrorKind::TimeoutReceive,
        }
    }
}

/// What exactly went wrong inside an error category (a bounded set, so the report's
/// map of details stays bounded whatever the server sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorDetail {
    // protocol
    BadVersion,
    BadStatusCode,
    BadHeader,
    BadContentLength,
    ConflictingContentLength,
    TransferEncodingWithContentLength,
    BadChunk,
    UnrequestedUpgrade,
    /// HTTP/2: the server broke the protocol (a malformed frame, a bad header block...).
    H2Protocol,
    /// HTTP/2: the server answered the client's preface in HTTP/1 (`HTTP/1.1 400 ...`):
    /// it does not speak h2c (prior knowledge) on this port.
    H2cRefused,
    /// HTTP/2: the server allows no concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS 0).
    ZeroConcurrentStreams,
    /// HTTP/3: the server broke the protocol (a bad frame, QPACK, a missing SETTINGS...).
    H3Protocol,
    // too_large
    TooManyHeaders,
    HeadTooLong,
    ChunkTooLarge,
    // closed_before_response
    EmptyReply,
    EofInHead,
    /// HTTP/2: the connection ended before the server's SETTINGS.
    NoServerSettings,
    /// HTTP/2: a GOAWAY with an error code ended the connection under the stream.
    GoawayError,
    /// HTTP/2: the stream was above the last stream id of the server's GOAWAY, on every
    /// connection it was sent on: the server never processed it (RFC 9113 6.8).
    GoawayUnprocessed,
    // reset
    ResetInSend,
    ResetInHead,
    ResetInBody,
    /// HTTP/2: the server reset the stream (RST_STREAM, other than REFUSED_STREAM).
    StreamReset,
    /// HTTP/2: refused again after its retries (RST_STREAM REFUSED_STREAM).
    RefusedStream,
    // body_incomplete
    ShortBody,
    MissingLastChunk,
    // tls
    CertExpired,
    CertNotYetValid,
    CertUnknownIssuer,
    CertWrongName,
    CertInvalid,
    AlpnMismatch,
    AlertReceived,
    /// The server's answer to the ClientHello was not TLS (a plain-text port).
    NotTls,
    Handshake,
    // timeout_receive
    BelowMinSpeed,
    // timeout_wait
    /// HTTP/2: every connection's streams were busy until the timeout.
    NoFreeStream,
    // connect
    Refused,
    Unreachable,
    // local_resource
    PortsExhausted,
    TooManyOpenFiles,
    NoBuffers,
    // dns: the resolver's reason
    NameNotFound,
    NoAddress,
    DnsServerFailure,
    DnsRefused,
    DnsNoAnswer,
    DnsUnreachable,
    DnsOther,
    // quic
    /// The server answered with a Version Negotiation listing no version the client speaks.
    QuicVersionMismatch,
    /// The server closed the connection with a QUIC transport error.
    QuicTransportError,
    /// The server closed the connection with an application (HTTP/3) error code.
    QuicApplicationClose,
    /// A stateless reset ended the connection.
    QuicStatelessReset,
    // proxy: its answer to CONNECT
    /// 407: the proxy wants credentials (none, or not these).
    ProxyAuthRequired,
    /// 403: the proxy does not allow this destination.
    ProxyForbidden,
    /// 502, 503, 504: the proxy could not reach the origin.
    ProxyBadGateway,
    /// Another status than 2xx.
    ProxyRefused,
    /// The proxy closed the connection (or it failed) before answering.
    ProxyClosed,
    /// The proxy's answer was not HTTP.
    ProxyBadAnswer,
    // redirect: `-L`
    /// The `Location` led back to a URL already visited in the same chain.
    RedirectLoop,
    /// One more redirect after `--max-redirs` were followed.
    TooManyRedirects,
    /// A `Location` that cannot be followed: not a URL, not http(s), or a scheme the
    /// strategy cannot take (HTTP/3 to an http:// URL).
    RedirectUnusable,
}

impl ErrorDetail {
    pub(crate) const ALL: [ErrorDetail; 63] = [
        ErrorDetail::BadVersion,
        ErrorDetail::BadStatusCode,
        ErrorDetail::BadHeader,
        ErrorDetail::BadContentLength,
        ErrorDetail::ConflictingContentLength,
        ErrorDetail::TransferEncodingWithContentLength,
        ErrorDetail::BadChunk,
        ErrorDetail::UnrequestedUpgrade,
        ErrorDetail::H2Protocol,
        ErrorDetail::H2cRefused,
        ErrorDetail::ZeroConcurrentStreams,
        ErrorDetail::H3Protocol,
        ErrorDetail::TooManyHeaders,
        ErrorDetail::HeadTooLong,
        ErrorDetail::ChunkTooLarge,
        ErrorDetail::EmptyReply,
        ErrorDetail::EofInHead,
        ErrorDetail::NoServerSettings,
        ErrorDetail::GoawayError,
        ErrorDetail::GoawayUnprocessed,
        ErrorDetail::ResetInSend,
        ErrorDetail::ResetInHead,
        ErrorDetail::ResetInBody,
        ErrorDetail::StreamReset,
        ErrorDetail::RefusedStream,
        ErrorDetail::ShortBody,
        ErrorDetail::MissingLastChunk,
        ErrorDetail::CertExpired,
        ErrorDetail::CertNotYetValid,
        ErrorDetail::CertUnknownIssuer,
        ErrorDetail::CertWrongName,
        ErrorDetail::CertInvalid,
        ErrorDetail::AlpnMismatch,
        ErrorDetail::AlertReceived,
        ErrorDetail::NotTls,
        ErrorDetail::Handshake,
        ErrorDetail::BelowMinSpeed,
        ErrorDetail::NoFreeStream,
        ErrorDetail::Refused,
        ErrorDetail::Unreachable,
        ErrorDetail::PortsExhausted,
        ErrorDetail::TooManyOpenFiles,
        ErrorDetail::NoBuffers,
        ErrorDetail::NameNotFound,
        ErrorDetail::NoAddress,
        ErrorDetail::DnsServerFailure,
        ErrorDetail::DnsRefused,
        ErrorDetail::DnsNoAnswer,
        ErrorDetail::DnsUnreachable,
        ErrorDetail::DnsOther,
        ErrorDetail::QuicVersionMismatch,
        ErrorDetail::QuicTransportError,
        ErrorDetail::QuicApplicationClose,
        ErrorDetail::QuicStatelessReset,
        ErrorDetail::ProxyAuthRequired,
        ErrorDetail::ProxyForbidden,
        ErrorDetail::ProxyBadGateway,
        ErrorDetail::ProxyRefused,
        ErrorDetail::ProxyClosed,
        ErrorDetail::ProxyBadAnswer,
        ErrorDetail::RedirectLoop,
        ErrorDetail::TooManyRedirects,
        ErrorDetail::RedirectUnusable,
    ];

    /// The name used in JSON (`requests.error_details`) and text.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ErrorDetail::BadVersion => "bad_version",
            ErrorDetail::BadStatusCode => "bad_status_code",
            ErrorDetail::BadHeader => "bad_header",
            ErrorDetail::BadContentLength => "bad_content_length",
            ErrorDetail::ConflictingContentLength => "conflicting_content_length",
            ErrorDetail::TransferEncodingWithContentLength => {
                "transfer_encoding_with_content_length"
            }
            ErrorDetail::BadChunk => "bad_chunk",
            ErrorDetail::UnrequestedUpgrade => "unrequested_upgrade",
            ErrorDetail::H2Protocol => "h2_protocol_error",
            ErrorDetail::H2cRefused => "h2c_refused",
            ErrorDetail::ZeroConcurrentStreams => "zero_concurrent_streams",
            ErrorDetail::H3Protocol => "h3_protocol_error",
            ErrorDetail::TooManyHeaders => "too_many_headers",
            ErrorDetail::HeadTooLong => "head_too_long",
            ErrorDetail::ChunkTooLarge => "chunk_too_large",
            ErrorDetail::EmptyReply => "empty_reply",
            ErrorDetail::EofInHead => "eof_in_head",
            ErrorDetail::NoServerSettings => "no_server_settings",
            ErrorDetail::GoawayError => "goaway_error",
            ErrorDetail::GoawayUnprocessed => "goaway_unprocessed",
            ErrorDetail::ResetInSend => "reset_in_send",
            ErrorDetail::ResetInHead => "reset_in_head",
            ErrorDetail::ResetInBody => "reset_in_body",
            ErrorDetail::StreamReset => "stream_reset",
            ErrorDetail::RefusedStream => "refused_stream",
            ErrorDetail::ShortBody => "short_body",
            ErrorDetail::MissingLastChunk => "missing_last_chunk",
            ErrorDetail::CertExpired => "cert_expired",
            ErrorDetail::CertNotYetValid => "cert_not_yet_valid",
            ErrorDetail::CertUnknownIssuer => "cert_unknown_issuer",
            ErrorDetail::CertWrongName => "cert_wrong_name",
            ErrorDetail::CertInvalid => "cert_invalid",
            ErrorDetail::AlpnMismatch => "alpn_mismatch",
            ErrorDetail::AlertReceived => "alert_received",
            ErrorDetail::NotTls => "not_tls",
            ErrorDetail::Handshake => "handshake",
            ErrorDetail::BelowMinSpeed => "below_min_speed",
            ErrorDetail::NoFreeStream => "no_free_stream",
            ErrorDetail::Refused => "refused",
            ErrorDetail::Unreachable => "unreachable",
            ErrorDetail::PortsExhausted => "ports_exhausted",
            ErrorDetail::TooManyOpenFiles => "too_many_open_files",
            ErrorDetail::NoBuffers => "no_buffers",
            ErrorDetail::NameNotFound => "name_not_found",
            ErrorDetail::NoAddress => "no_address",
            ErrorDetail::DnsServerFailure => "dns_server_failure",
            ErrorDetail::DnsRefused => "dns_refused",
            ErrorDetail::DnsNoAnswer => "dns_no_answer",
            ErrorDetail::DnsUnreachable => "dns_unreachable",
            ErrorDetail::DnsOther => "dns_other",
            ErrorDetail::QuicVersionMismatch => "quic_version_mismatch",
            ErrorDetail::QuicTransportError => "quic_transport_error",
            ErrorDetail::QuicApplicationClose => "quic_application_close",
            ErrorDetail::QuicStatelessReset => "quic_stateless_reset",
            ErrorDetail::ProxyAuthRequired => "proxy_auth_required",
            ErrorDetail::ProxyForbidden => "proxy_forbidden",
            ErrorDetail::ProxyBadGateway => "proxy_bad_gateway",
            ErrorDetail::ProxyRefused => "proxy_refused",
            ErrorDetail::ProxyClosed => "proxy_closed",
            ErrorDetail::ProxyBadAnswer => "proxy_bad_answer",
            ErrorDetail::RedirectLoop => "redirect_loop",
            ErrorDetail::TooManyRedirects => "too_many_redirects",
            ErrorDetail::RedirectUnusable => "redirect_unusable",
        }
    }

    pub(crate) fn index(self) -> usize {
        ErrorDetail::ALL
            .iter()
            .position(|d| *d == self)
            .unwrap_or(0)
    }
}

/// A failed attempt: its category, where known what exactly happened, and what the
/// failing layer said (the OS's, the TLS library's or the server's words), carried with
/// the failure to the recorder, which keeps one message of each kind as its example.
#[derive(Debug, Clone)]
pub struct Failure {
    pub kind: ErrorKind,
    pub detail: Option<ErrorDetail>,
    /// What the failing layer said (at most [`notes::EXAMPLE_MAX_BYTES`]); `None` where
    /// nothing did ([`describe`] then says what the kind means).
    pub message: Option<std::sync::Arc<str>>,
    /// Where it failed while opening a connection, when that was not the URL's own host
    /// and port (a proxy names itself in its failures).
    pub hop: Option<std::sync::Arc<Hop>>,
}

/// How a connection's address was chosen when it is not the URL's host and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Via {
    /// `--connect-to HOST:PORT:TO_HOST:TO_PORT`.
    ConnectTo,
    /// `--resolve HOST:PORT:ADDR`.
    Resolve,
    /// `--unix-socket PATH`.
    UnixSocket,
    /// An origin a redirect led to (`-L`).
    Redirect,
}

/// The hop a connection was opened to: the address tried, how it was chosen, and the
/// origin (`scheme://host:port`) the request was for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hop {
    pub via: Via,
    /// `host:port` connected to, or the Unix socket's path.
    pub address: String,
    pub origin: String,
}

/// Two failures are the same failure when their category and detail are: what was said
/// is its example, not its identity.
impl PartialEq for Failure {
    fn eq(&self, other: &Failure) -> bool {
        self.kind == other.kind && self.detail == other.detail
    }
}

impl Eq for Failure {}

impl Failure {
    pub(crate) fn new(kind: ErrorKind, detail: ErrorDetail) -> Failure {
        Failure {
            kind,
            detail: Some(detail),
            message: None,
            hop: None,
        }
    }

    /// This failure, met on the way to `hop` (kept where one is already named).
    #[must_use]
    pub(crate) fn at(mut self, hop: Option<&std::sync::Arc<Hop>>) -> Failure {
        if self.hop.is_none() {
            self.hop = hop.cloned();
        }
        self
    }

    /// This failure with `message` as what was said (cut at
    /// [`notes::EXAMPLE_MAX_BYTES`], on a character boundary, marked with an ellipsis).
    /// Failures are not the hot path: a message is formatted only for a failed attempt.
    #[must_use]
    pub(crate) fn said(mut self, message: impl std::fmt::Display) -> Failure {
        self.message = Some(notes::cut_example(message.to_string()).into());
        self
    }

    /// What it says: the failing layer's message, else what its kind means.
    pub(crate) fn text(&self) -> &str {
        self.message.as_deref().unwrap_or_else(|| describe(self))
    }

    /// The name its example message is kept under: the detail's, else the category's.
    pub(crate) fn key(&self) -> &'static str {
        self.detail.map_or(self.kind.name(), ErrorDetail::name)
    }
}

/// What a failure of this kind means, in plain words: the example kept when no error
/// message came with it (a timeout, a parse error without one).
fn describe(f: &Failure) -> &'static str {
    match f.detail {
        Some(ErrorDetail::NoFreeStream) => {
            return "every connection's streams were busy until the timeout"
        }
        Some(ErrorDetail::BelowMinSpeed) => return "the body came slower than the minimum speed",
        Some(ErrorDetail::ShortBody) => {
            return "the connection ended before the body's Content-Length was read"
        }
        Some(ErrorDetail::MissingLastChunk) => {
            return "the connection ended before the chunked body's last chunk"
        }
        Some(ErrorDetail::EmptyReply) => {
            return "the server closed the connection without sending a byte"
        }
        Some(ErrorDetail::GoawayUnprocessed) => {
            return "the server's GOAWAY left the stream unprocessed (above its last stream id) on each connection it was sent on"
        }
        _ => {}
    }
    match f.kind {
        ErrorKind::Dns => "the name could not be resolved",
        ErrorKind::Connect => "the TCP connect failed",
        ErrorKind::Tls => "the TLS handshake failed",
        ErrorKind::TimeoutDns => "no answer from the resolver within the timeout",
        ErrorKind::TimeoutConnect => "the TCP connect did not complete within the timeout",
        ErrorKind::TimeoutTls => "the TLS handshake did not complete within the timeout",
        ErrorKind::TimeoutH2Setup => "the server's HTTP/2 SETTINGS did not come within the timeout",
        ErrorKind::QuicTimeout => "no QUIC handshake within the timeout",
        ErrorKind::Quic => "the QUIC connection failed",
        ErrorKind::TimeoutSend => "the request could not be written within the timeout",
        ErrorKind::TimeoutWait => "no response within the timeout",
        ErrorKind::TimeoutReceive => "the response body did not arrive within the timeout",
        ErrorKind::Reset => "the server reset the connection",
        ErrorKind::ClosedBeforeResponse => "the server closed the connection before responding",
        ErrorKind::BodyIncomplete => "the connection ended before the whole body arrived",
        ErrorKind::Protocol => "the server's answer broke the protocol",
        ErrorKind::TooLarge => "the response head was too large",
        ErrorKind::LocalResource => "the client ran out of a local resource",
        ErrorKind::Proxy => "the proxy did not open the tunnel",
        ErrorKind::TimeoutTunnel => "no answer from the proxy to CONNECT within the timeout",
        ErrorKind::Redirect => match f.detail {
            Some(ErrorDetail::RedirectLoop) => "the redirect led back to a URL already visited",
            Some(ErrorDetail::TooManyRedirects) => {
                "another redirect after --max-redirs were followed"
            }
            _ => "the redirect's Location could not be followed",
        },
    }
}

impl From<ErrorKind> for Failure {
    fn from(kind: ErrorKind) -> Failure {
        Failure {
            kind,
            detail: None,
            message: None,
            hop: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What was said travels with the failure, cut to the example's size on a character
    /// boundary; two failures of one kind are the same failure whatever each said.
    #[test]
    fn a_failure_carries_what_was_said() {
        let f = Failure::new(ErrorKind::Connect, ErrorDetail::Refused);
        assert_eq!(f.message, None);
        let said = f.clone().said("Connection refused (os error 111)");
        assert_eq!(
            said.message.as_deref(),
            Some("Connection refused (os error 111)")
        );
        assert_eq!(said, f);
        assert_eq!(said.key(), "refused");
        let long = Failure::from(ErrorKind::Tls).said("é".repeat(400));
        let m = long.message.unwrap();
        assert!(m.ends_with('…'), "{m}");
        assert!(
            m.len() <= notes::EXAMPLE_MAX_BYTES + '…'.len_utf8(),
            "{}",
            m.len()
        );
        assert_ne!(f, Failure::from(ErrorKind::Connect));
    }
}
