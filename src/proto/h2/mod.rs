//! HTTP/2 on the client side, over the `h2` crate (framing, HPACK, flow control): the
//! request head built once per target, how a stream's failure is classified, and what
//! the server's frames said about the connection (`wire`).

pub mod wire;

use crate::net::classify_io_failure;
use crate::proto::h1::RequestTemplate;
use crate::record::{ErrorDetail, ErrorKind, Failure};

/// Headers HTTP/2 forbids (RFC 9113 8.2.2): connection-specific ones. `Host` becomes
/// the `:authority` pseudo-header.
const NOT_IN_H2: [&str; 6] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// The request head sent on every stream for this target (cloned per request: `h2`
/// takes it by value).
pub fn request_head(t: &RequestTemplate, tls: bool) -> Result<http::Request<()>, String> {
    let scheme = if tls { "https" } else { "http" };
    let uri = format!("{scheme}://{}{}", t.host, t.target);
    let mut b = http::Request::builder()
        .method(t.method.as_str())
        .uri(uri.as_str())
        .version(http::Version::HTTP_2);
    for (k, v) in &t.headers {
        let lower = k.to_ascii_lowercase();
        if NOT_IN_H2.contains(&lower.as_str()) || (lower == "te" && v != "trailers") {
            continue;
        }
        b = b.header(lower.as_str(), v.as_str());
    }
    if let Some(body) = &t.body {
        b = b.header("content-length", body.len());
    }
    b.body(())
        .map_err(|e| format!("cannot be sent over HTTP/2: {e}"))
}

/// How a stream failed, from the `h2` crate's error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamFailure {
    pub failure: Failure,
    /// The server did not process the request (REFUSED_STREAM, or the stream was above
    /// a GOAWAY's last stream id): it may go again on another connection.
    pub refused: bool,
}

/// Classify a stream's error. `above_goaway`: the stream's id is above the last stream
/// id of a GOAWAY the server sent. `in_body`: the response head had arrived.
pub fn classify(e: &h2::Error, above_goaway: bool, in_body: bool) -> StreamFailure {
    let reason = e.reason();
    let refused = (e.is_reset() && reason == Some(h2::Reason::REFUSED_STREAM))
        || (e.is_go_away() && e.is_remote() && above_goaway);
    let failure = if refused {
        Failure::new(ErrorKind::Reset, ErrorDetail::RefusedStream)
    } else if let Some(io) = e.get_io() {
        let detail = if in_body {
            ErrorDetail::ResetInBody
        } else {
            ErrorDetail::ResetInHead
        };
        classify_io_failure(io, detail)
    } else if e.is_reset() && e.is_remote() {
        Failure::new(ErrorKind::Reset, ErrorDetail::StreamReset)
    } else if e.is_go_away() && e.is_remote() {
        // The server ended the connection under a stream it had taken.
        let kind = if in_body {
            ErrorKind::BodyIncomplete
        } else {
            ErrorKind::ClosedBeforeResponse
        };
        match (reason == Some(h2::Reason::NO_ERROR), in_body) {
            (false, _) => Failure::new(kind, ErrorDetail::GoawayError),
            (true, true) => Failure::new(kind, ErrorDetail::ShortBody),
            (true, false) => Failure::new(kind, ErrorDetail::EofInHead),
        }
    } else {
        // Found by this side: the server broke the protocol (h2 answered with GOAWAY or
        // RST_STREAM itself).
        Failure::new(ErrorKind::Protocol, ErrorDetail::H2Protocol)
    };
    StreamFailure { failure, refused }
}
