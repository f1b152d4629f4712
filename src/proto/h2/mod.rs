//! HTTP/2 on the client side, over the `h2` crate (framing, HPACK, flow control): the
//! client connection (`client`: opened, its SETTINGS awaited, a stream exchanged), the
//! request head built once per target, how a stream's failure is classified, and what
//! the server's frames said about the connection (`wire`).

pub(crate) mod client;
pub(crate) mod wire;

use crate::net::classify_io_failure;
use crate::proto::h1::RequestTemplate;
use crate::record::{ErrorDetail, ErrorKind, Failure};
use wire::GoAway;

/// The client preface's first line: how a prior-knowledge (h2c) connection is told
/// from HTTP/1 by a server.
pub(crate) const PREFACE_START: &[u8] = b"PRI * HTTP/2.0\r\n";

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
pub(crate) fn request_head(t: &RequestTemplate, tls: bool) -> Result<http::Request<()>, String> {
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StreamFailure {
    pub failure: Failure,
    /// The server did not process the request (REFUSED_STREAM, or the stream was above
    /// a GOAWAY's last stream id): it may go again on another connection.
    pub refused: bool,
}

/// Classify a stream's error. `goaway`: the GOAWAY the server sent on this connection,
/// if any; `stream`: the stream's id, if it was opened; `in_body`: the response head
/// had arrived.
pub(crate) fn classify(
    e: &h2::Error,
    goaway: Option<GoAway>,
    stream: Option<u32>,
    in_body: bool,
) -> StreamFailure {
    let reason = e.reason();
    // Above a GOAWAY's last stream id the server never processed the request, however
    // the connection's end surfaced (RFC 9113 6.8).
    let above_goaway = matches!((goaway, stream), (Some(g), Some(id)) if id > g.last_stream_id);
    let refused = above_goaway || (e.is_reset() && reason == Some(h2::Reason::REFUSED_STREAM));
    let cut = if in_body {
        ErrorKind::BodyIncomplete
    } else {
        ErrorKind::ClosedBeforeResponse
    };
    let failure = if above_goaway {
        Failure::new(
            ErrorKind::ClosedBeforeResponse,
            ErrorDetail::GoawayUnprocessed,
        )
    } else if refused {
        Failure::new(ErrorKind::Reset, ErrorDetail::RefusedStream)
    } else if goaway.is_some_and(|g| g.error_code != 0) {
        // The server ended the connection with an error under a stream it had taken.
        Failure::new(cut, ErrorDetail::GoawayError)
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
        let detail = if in_body {
            ErrorDetail::ShortBody
        } else {
            ErrorDetail::EofInHead
        };
        Failure::new(cut, detail)
    } else {
        // Found by this side: the server broke the protocol (h2 answered with GOAWAY or
        // RST_STREAM itself).
        Failure::new(ErrorKind::Protocol, ErrorDetail::H2Protocol)
    };
    StreamFailure { failure, refused }
}
