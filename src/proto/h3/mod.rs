//! HTTP/3 on the client side, over quinn (QUIC with rustls) and the `h3` crate: how a
//! QUIC connection's end or an HTTP/3 stream's failure is classified, and the close
//! codes HTTP/3 uses.

pub(crate) mod client;

use crate::record::{CloseReason, ErrorDetail, ErrorKind, Failure};

/// H3_NO_ERROR (RFC 9114 8.1): a graceful close.
pub(crate) const H3_NO_ERROR: u32 = 0x100;
/// H3_REQUEST_REJECTED: the server did not process the request; it may go again.
const H3_REQUEST_REJECTED: u64 = 0x10b;

/// TLS alerts carried as QUIC CRYPTO_ERROR codes (0x100 + alert, RFC 9001 4.8).
const CRYPTO_BASE: u64 = 0x100;
const ALERT_NO_APPLICATION_PROTOCOL: u64 = 120;

/// How a QUIC connection's end fails the request under way (`in_body`: its response
/// head had arrived).
pub(crate) fn classify_connection(e: &quinn::ConnectionError, in_body: bool) -> Failure {
    connection_failure(e, in_body).said(e)
}

fn connection_failure(e: &quinn::ConnectionError, in_body: bool) -> Failure {
    use quinn::ConnectionError as C;
    match e {
        C::VersionMismatch => Failure::new(ErrorKind::Quic, ErrorDetail::QuicVersionMismatch),
        C::TransportError(t) => local_transport(u64::from(t.code), &t.reason),
        C::ConnectionClosed(c) => {
            let code = u64::from(c.error_code);
            if (CRYPTO_BASE..CRYPTO_BASE + 0x100).contains(&code) {
                let alert = code - CRYPTO_BASE;
                let detail = if alert == ALERT_NO_APPLICATION_PROTOCOL {
                    ErrorDetail::AlpnMismatch
                } else {
                    ErrorDetail::AlertReceived
                };
                Failure::new(ErrorKind::Tls, detail)
            } else {
                Failure::new(ErrorKind::Quic, ErrorDetail::QuicTransportError)
            }
        }
        C::ApplicationClosed(_) => {
            let kind = if in_body {
                ErrorKind::BodyIncomplete
            } else {
                ErrorKind::Quic
            };
            Failure::new(kind, ErrorDetail::QuicApplicationClose)
        }
        C::Reset => Failure::new(ErrorKind::Quic, ErrorDetail::QuicStatelessReset),
        C::TimedOut => ErrorKind::QuicTimeout.into(),
        C::LocallyClosed | C::CidsExhausted => {
            Failure::new(ErrorKind::Quic, ErrorDetail::QuicTransportError)
        }
    }
}

/// An error this side found (quinn closed the connection with it): TLS failures name
/// what rustls refused.
fn local_transport(code: u64, reason: &str) -> Failure {
    if !(CRYPTO_BASE..CRYPTO_BASE + 0x100).contains(&code) {
        return Failure::new(ErrorKind::Quic, ErrorDetail::QuicTransportError);
    }
    let detail = if reason.contains("UnknownIssuer") || reason.contains("CaUsedAsEndEntity") {
        ErrorDetail::CertUnknownIssuer
    } else if reason.contains("NotValidForName") {
        ErrorDetail::CertWrongName
    } else if reason.contains("Expired") {
        ErrorDetail::CertExpired
    } else if reason.contains("NotValidYet") {
        ErrorDetail::CertNotYetValid
    } else if reason.contains("certificate") {
        ErrorDetail::CertInvalid
    } else if reason.contains("NoApplicationProtocol") || reason.contains("application protocol") {
        ErrorDetail::AlpnMismatch
    } else {
        ErrorDetail::Handshake
    };
    Failure::new(ErrorKind::Tls, detail)
}

/// How a request's stream failed. `closed`: the QUIC connection's end, when it has
/// ended (it then says why better than the stream does).
pub(crate) fn classify_stream(
    e: &h3::error::StreamError,
    closed: Option<&quinn::ConnectionError>,
    in_body: bool,
) -> Failure {
    use h3::error::StreamError as S;
    if let Some(c) = closed {
        return classify_connection(c, in_body);
    }
    let cut = if in_body {
        ErrorKind::BodyIncomplete
    } else {
        ErrorKind::ClosedBeforeResponse
    };
    match e {
        S::RemoteTerminate { code, .. } if code.value() == H3_REQUEST_REJECTED => {
            Failure::new(ErrorKind::Reset, ErrorDetail::RefusedStream)
        }
        S::RemoteTerminate { .. } => Failure::new(ErrorKind::Reset, ErrorDetail::StreamReset),
        S::RemoteClosing { .. } => Failure::new(cut, ErrorDetail::GoawayError),
        S::HeaderTooBig { .. } => Failure::new(ErrorKind::TooLarge, ErrorDetail::HeadTooLong),
        S::ConnectionError { .. } => Failure::new(cut, ErrorDetail::QuicApplicationClose),
        _ => Failure::new(ErrorKind::Protocol, ErrorDetail::H3Protocol),
    }
}

/// Whether the server refused the request unprocessed (it may go again elsewhere).
pub(crate) fn refused(e: &h3::error::StreamError) -> bool {
    matches!(e, h3::error::StreamError::RemoteTerminate { code, .. } if code.value() == H3_REQUEST_REJECTED)
        || matches!(e, h3::error::StreamError::RemoteClosing { .. })
}

/// Why a QUIC connection found ended (between requests) ended.
pub(crate) fn close_reason(e: &quinn::ConnectionError) -> CloseReason {
    match e {
        quinn::ConnectionError::ApplicationClosed(a) if u64::from(a.error_code) == 0x100 => {
            CloseReason::ServerGoaway
        }
        quinn::ConnectionError::TimedOut => CloseReason::ServerIdleClose,
        quinn::ConnectionError::LocallyClosed => CloseReason::ClientPolicy,
        _ => CloseReason::Error,
    }
}
