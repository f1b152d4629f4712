//! Parsing a response head and deciding its body framing and persistence (RFC 9112 6.3, 9.3).

use crate::record::{ErrorDetail, ErrorKind, Failure, KeepAliveHeader};

/// Most response headers accepted.
pub(crate) const MAX_HEADERS: usize = 100;
/// Largest response head accepted.
pub(crate) const MAX_HEAD_BYTES: usize = 64 * 1024;

/// How the body of a response is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (HEAD, 1xx, 204, 304).
    None,
    Length(u64),
    Chunked,
    /// Body ends when the server closes.
    UntilClose,
}

/// What the engine needs from a response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    pub status: u16,
    /// Minor version: 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub minor_version: u8,
    pub framing: Framing,
    /// `Connection: close` was present.
    pub connection_close: bool,
    /// `Connection: keep-alive` was present.
    pub connection_keep_alive: bool,
    /// The server lets the connection persist after this response (before body framing
    /// is considered: a close-delimited body also ends it).
    pub persistent: bool,
    /// Length of the head in bytes.
    pub head_len: usize,
    /// `Retry-After` in seconds (delta-seconds; an HTTP-date is not read).
    pub retry_after_s: Option<u32>,
    /// What a `Keep-Alive` header announced (its idle timeout, its requests left).
    pub keep_alive: Option<KeepAliveHeader>,
}

impl ResponseHead {
    pub fn is_informational(&self) -> bool {
        (100..200).contains(&self.status)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeadError {
    /// Not HTTP, or a violation of the message syntax.
    Protocol(ErrorDetail, String),
    /// Too many headers or a head too long.
    TooLarge(ErrorDetail, String),
}

impl HeadError {
    /// The error category and sub-reason of this head error.
    pub(crate) fn failure(&self) -> Failure {
        match self {
            HeadError::Protocol(d, _) => Failure::new(ErrorKind::Protocol, *d),
            HeadError::TooLarge(d, _) => Failure::new(ErrorKind::TooLarge, *d),
        }
    }

    /// What was wrong, in words.
    pub(crate) fn message(&self) -> &str {
        match self {
            HeadError::Protocol(_, m) | HeadError::TooLarge(_, m) => m,
        }
    }
}

/// The server's first bytes as a TLS record (content type 20-23, version 3.x): a TLS
/// port answering a plain-text request.
fn looks_like_tls(buf: &[u8]) -> bool {
    matches!(buf, [20..=23, 3, 0..=4, ..])
}

/// Whether a response begins with an HTTP/2 server's first frame: SETTINGS (type 4) on
/// stream 0, its length a multiple of 6 (RFC 9113 6.5), not an ACK; or a GOAWAY (type
/// 7) on stream 0, which a server that speaks only HTTP/2 sends to a request it cannot
/// read as its client preface.
fn looks_like_h2(buf: &[u8]) -> bool {
    let [l0, l1, l2, kind, flags, s0, s1, s2, s3, ..] = *buf else {
        return false;
    };
    let len = u32::from_be_bytes([0, l0, l1, l2]);
    let stream0 = [s0, s1, s2, s3] == [0; 4];
    match kind {
        4 => stream0 && flags & 1 == 0 && len % 6 == 0 && len <= 16_384,
        7 => stream0 && (8..=16_384).contains(&len),
        _ => false,
    }
}

/// Whether a comma-separated header value (e.g. `Connection`) contains `token`.
pub(crate) fn has_token(value: &[u8], token: &str) -> bool {
    value
        .split(|b| *b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// A value of ASCII digits alone (at most 19 of them, within `u64`), as a number.
fn digits(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 19 {
        return None;
    }
    v.iter().try_fold(0u64, |n, b| {
        b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
    })
}

/// Parse a response head from the front of `buf`. `Ok(None)` means more bytes are needed.
/// `head_request` tells whether the request was HEAD (no body whatever the headers say).
// One pass over a response head deciding its framing and persistence (RFC 9112 §6.3,
// §9.3): the header checks are one table of rules, each with its own error.
#[allow(clippy::too_many_lines)]
pub(crate) fn parse_head(
    buf: &[u8],
    head_request: bool,
) -> Result<Option<ResponseHead>, HeadError> {
    let mut headers =
        [const { std::mem::MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut []);
    let head_len = match httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut headers,
    ) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            if buf.len() > MAX_HEAD_BYTES {
                return Err(HeadError::TooLarge(
                    ErrorDetail::HeadTooLong,
                    format!("response head longer than {MAX_HEAD_BYTES} bytes"),
                ));
            }
            return Ok(None);
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HeadError::TooLarge(
                ErrorDetail::TooManyHeaders,
                format!("response has more than {MAX_HEADERS} headers"),
            ))
        }
        Err(e) => {
            let detail = match e {
                httparse::Error::Version => ErrorDetail::BadVersion,
                httparse::Error::Status => ErrorDetail::BadStatusCode,
                _ => ErrorDetail::BadHeader,
            };
            let shown: String = buf
                .iter()
                .take(8)
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ");
            let message = if looks_like_tls(buf) {
                format!("the server answered with a TLS record (bytes {shown}), not HTTP: this port speaks TLS")
            } else if looks_like_h2(buf) {
                format!("the server answered with an HTTP/2 frame (bytes {shown}), not HTTP/1: it speaks HTTP/2 only here")
            } else {
                format!("invalid response head: {e} (first bytes {shown})")
            };
            return Err(HeadError::Protocol(detail, message));
        }
    };
    if head_len > MAX_HEAD_BYTES {
        return Err(HeadError::TooLarge(
            ErrorDetail::HeadTooLong,
            format!("response head longer than {MAX_HEAD_BYTES} bytes"),
        ));
    }
    let status = resp.code.unwrap_or(0);
    let minor_version = resp.version.unwrap_or(1);
    if !(100..=999).contains(&status) {
        return Err(HeadError::Protocol(
            ErrorDetail::BadStatusCode,
            format!("invalid status code {status}"),
        ));
    }
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut transfer_encoding = false;
    let mut connection_close = false;
    let mut connection_keep_alive = false;
    let mut retry_after_s = None;
    let mut keep_alive = None;
    for h in resp.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            // The usual value, digits alone, read as they are.
            if let Some(v) = digits(h.value) {
                match content_length {
                    Some(prev) if prev != v => {}
                    _ => {
                        content_length = Some(v);
                        continue;
                    }
                }
            }
            let s = std::str::from_utf8(h.value)
                .map_err(|_| {
                    HeadError::Protocol(
                        ErrorDetail::BadContentLength,
                        "Content-Length is not ASCII".into(),
                    )
                })?
                .trim();
            // A list of identical values is allowed (RFC 9110 8.6); differing ones are not.
            for part in s.split(',') {
                let part = part.trim();
                if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(HeadError::Protocol(
                        ErrorDetail::BadContentLength,
                        format!("invalid Content-Length {s:?}"),
                    ));
                }
                let v: u64 = part.parse().map_err(|_| {
                    HeadError::Protocol(
                        ErrorDetail::BadContentLength,
                        format!("Content-Length {s:?} overflows"),
                    )
                })?;
                match content_length {
                    Some(prev) if prev != v => {
                        return Err(HeadError::Protocol(
                            ErrorDetail::ConflictingContentLength,
                            format!("conflicting Content-Length values {prev} and {v}"),
                        ))
                    }
                    _ => content_length = Some(v),
                }
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            transfer_encoding = true;
            // chunked must be the final coding for the body to be self-delimited.
            let last = h
                .value
                .rsplit(|b| *b == b',')
                .next()
                .unwrap_or(b"")
                .trim_ascii();
            chunked = last.eq_ignore_ascii_case(b"chunked");
        } else if name.eq_ignore_ascii_case("retry-after") {
            retry_after_s = retry_after_seconds(h.value);
        } else if name.eq_ignore_ascii_case("keep-alive") {
            keep_alive = KeepAliveHeader::parse(h.value).or(keep_alive);
        } else if name.eq_ignore_ascii_case("connection") {
            connection_close |= has_token(h.value, "close");
            connection_keep_alive |= has_token(h.value, "keep-alive");
        }
    }
    if transfer_encoding && content_length.is_some() {
        return Err(HeadError::Protocol(
            ErrorDetail::TransferEncodingWithContentLength,
            "both Transfer-Encoding and Content-Length".into(),
        ));
    }
    let no_body = head_request || (100..200).contains(&status) || status == 204 || status == 304;
    let framing = if no_body {
        Framing::None
    } else if transfer_encoding {
        if chunked {
            Framing::Chunked
        } else {
            Framing::UntilClose
        }
    } else if let Some(n) = content_length {
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    let persistent = if minor_version >= 1 {
        !connection_close
    } else {
        connection_keep_alive && !connection_close
    };
    Ok(Some(ResponseHead {
        status,
        minor_version,
        framing,
        connection_close,
        connection_keep_alive,
        persistent,
        head_len,
        retry_after_s,
        keep_alive,
    }))
}

/// A `Retry-After` value in delta-seconds (`120`); `None` for an HTTP-date or garbage.
pub(crate) fn retry_after_seconds(value: &[u8]) -> Option<u32> {
    let v = value.trim_ascii();
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_and_persistence() {
        let h = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", false)
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::Length(5));
        assert!(h.persistent);
        assert_eq!(h.head_len, 38);
        let h = parse_head(b"HTTP/1.0 200 OK\r\n\r\n", false)
            .unwrap()
            .unwrap();
        assert_eq!(h.framing, Framing::UntilClose);
        assert!(!h.persistent);
        let h = parse_head(
            b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert!(h.persistent);
        let h = parse_head(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.framing, Framing::Chunked);
        let h = parse_head(
            b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
            false,
        )
        .unwrap()
        .unwrap();
        assert_eq!(h.framing, Framing::None);
        assert_eq!(
            parse_head(b"HTTP/1.1 200 OK\r\nContent-Le", false),
            Ok(None)
        );
    }

    #[test]
    fn the_keep_alive_header_is_read_as_the_server_announced_it() {
        let ka = |value: &str| {
            let head =
                format!("HTTP/1.1 200 OK\r\nKeep-Alive: {value}\r\nContent-Length: 0\r\n\r\n");
            parse_head(head.as_bytes(), false)
                .unwrap()
                .unwrap()
                .keep_alive
        };
        let h = ka("timeout=5, max=100").unwrap();
        assert_eq!((h.timeout_s, h.max), (Some(5), Some(100)));
        assert_eq!(h.describe(), "`Keep-Alive: timeout=5, max=100`");
        let h = ka("Timeout=\"1\"").unwrap();
        assert_eq!((h.timeout_s, h.max), (Some(1), None));
        assert_eq!(ka("max=3,foo=bar").unwrap().max, Some(3));
        assert_eq!(ka("timeout=soon"), None);
        let none = parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false);
        assert_eq!(none.unwrap().unwrap().keep_alive, None);
    }

    #[test]
    fn rejects_bad_heads() {
        assert!(matches!(
            parse_head(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
                false
            ),
            Err(HeadError::Protocol(..))
        ));
        assert!(matches!(
            parse_head(b"HTTP/1.01 200 OK\r\n\r\n", false),
            Err(HeadError::Protocol(..))
        ));
        assert!(matches!(
            parse_head(b"FOO\r\n\r\n", false),
            Err(HeadError::Protocol(..))
        ));
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..101 {
            many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(matches!(
            parse_head(&many, false),
            Err(HeadError::TooLarge(..))
        ));
    }
}
