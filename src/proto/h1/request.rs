//! Request bytes, built once per (URL, strategy) and written as they are on every attempt.

use super::response::Framing;

/// The HTTP version written on the request line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HttpVersion {
    Http10,
    Http11,
}

/// The `Connection` header a strategy sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectionHeader {
    /// No header: the version's default (1.1 persistent, 1.0 not).
    Default,
    Close,
    KeepAlive,
}

/// What every request of one URL looks like, before version and connection header.
#[derive(Debug, Clone)]
pub(crate) struct RequestTemplate {
    pub method: String,
    /// Path and query as written on the request line (origin form).
    pub target: String,
    /// Value of the `Host` header.
    pub host: String,
    /// Extra headers given by the user (`-H`), in order.
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    /// Through a forward proxy: its credentials (written, never printed).
    pub proxy_authorization: Option<crate::net::proxy::Secret>,
}

impl RequestTemplate {
    /// Whether the method is idempotent (RFC 9110 9.2.2): such a request may be retried
    /// on a new connection when a reused one turns out to be stale.
    pub(crate) fn is_idempotent(&self) -> bool {
        RequestTemplate::method_is_idempotent(&self.method)
    }

    pub(crate) fn method_is_idempotent(method: &str) -> bool {
        matches!(
            method,
            "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS" | "TRACE"
        )
    }

    pub(crate) fn is_head(&self) -> bool {
        self.method == "HEAD"
    }

    /// The exact bytes to write.
    pub(crate) fn build(&self, version: HttpVersion, connection: ConnectionHeader) -> Vec<u8> {
        let mut out = Vec::with_capacity(128 + self.body.as_ref().map_or(0, |b| b.len()));
        let version = match version {
            HttpVersion::Http10 => "HTTP/1.0",
            HttpVersion::Http11 => "HTTP/1.1",
        };
        out.extend_from_slice(
            format!("{} {} {}\r\n", self.method, self.target, version).as_bytes(),
        );
        let has = |name: &str| {
            self.headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case(name))
        };
        if !has("host") {
            out.extend_from_slice(format!("Host: {}\r\n", self.host).as_bytes());
        }
        if !has("user-agent") {
            out.extend_from_slice(
                concat!("User-Agent: handshake/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes(),
            );
        }
        if !has("accept") {
            out.extend_from_slice(b"Accept: */*\r\n");
        }
        for (k, v) in &self.headers {
            out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
        }
        if let Some(a) = &self.proxy_authorization {
            out.extend_from_slice(format!("Proxy-Authorization: {}\r\n", a.expose()).as_bytes());
        }
        match connection {
            ConnectionHeader::Default => {}
            ConnectionHeader::Close => out.extend_from_slice(b"Connection: close\r\n"),
            ConnectionHeader::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
        }
        if let Some(body) = &self.body {
            if !has("content-length") {
                out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
            }
            out.extend_from_slice(b"\r\n");
            out.extend_from_slice(body);
        } else {
            out.extend_from_slice(b"\r\n");
        }
        out
    }
}

/// How a request's body ends (RFC 9112 §6.3), read leniently as a watcher must: chunked
/// when that is the final transfer coding, else by Content-Length; a request with
/// neither, or with another coding, has none that can be followed.
pub(crate) fn request_framing(headers: &[httparse::Header]) -> Framing {
    let mut len = None;
    let mut coding: Option<&[u8]> = None;
    for h in headers {
        if h.name.eq_ignore_ascii_case("transfer-encoding") {
            coding = h.value.rsplit(|b| *b == b',').next();
        } else if h.name.eq_ignore_ascii_case("content-length") {
            len = std::str::from_utf8(h.value)
                .ok()
                .and_then(|v| v.trim().parse().ok());
        }
    }
    match (coding, len) {
        (Some(c), _) if c.trim_ascii().eq_ignore_ascii_case(b"chunked") => Framing::Chunked,
        (None, Some(n)) => Framing::Length(n),
        _ => Framing::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_request_line_headers_and_body() {
        let t = RequestTemplate {
            method: "POST".into(),
            target: "/a?b=1".into(),
            host: "example.test:8080".into(),
            headers: vec![("X-A".into(), "1".into())],
            body: Some(b"hi".to_vec()),
            proxy_authorization: None,
        };
        let s =
            String::from_utf8(t.build(HttpVersion::Http10, ConnectionHeader::KeepAlive)).unwrap();
        assert!(s.starts_with("POST /a?b=1 HTTP/1.0\r\nHost: example.test:8080\r\n"));
        assert!(s.contains("X-A: 1\r\n"));
        assert!(s.contains("Connection: keep-alive\r\n"));
        assert!(s.ends_with("Content-Length: 2\r\n\r\nhi"));
        assert!(!t.is_idempotent());
    }
}
