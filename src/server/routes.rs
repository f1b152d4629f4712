//! What the embedded server answers, whatever the protocol: the route a path asks for,
//! its status and body, and HTTP/1 response heads.

use std::io::Write as _;
use std::time::Duration;

use super::{ServerConfig, Shared};

/// Bytes used to fill response bodies.
pub(crate) static FILL: [u8; 64 * 1024] = [b'x'; 64 * 1024];
/// What a request asks for, by its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// Any other path: the default body.
    Default,
    Stats,
    Bytes(usize),
    Delay(Duration),
    Status(u16),
    /// A recognised prefix with an invalid number.
    Bad,
}

pub(crate) fn route_of(target: &str) -> Route {
    let path = target.split('?').next().unwrap_or("/");
    if path == "/__handshake/stats" {
        Route::Stats
    } else if let Some(n) = path.strip_prefix("/bytes/") {
        n.parse().map_or(Route::Bad, Route::Bytes)
    } else if let Some(ms) = path.strip_prefix("/delay/") {
        ms.parse::<u64>().map_or(Route::Bad, |ms| {
            Route::Delay(Duration::from_millis(ms.min(600_000)))
        })
    } else if let Some(code) = path.strip_prefix("/status/") {
        match code.parse::<u16>() {
            Ok(c) if (200..=999).contains(&c) => Route::Status(c),
            _ => Route::Bad,
        }
    } else {
        Route::Default
    }
}

/// What a route answers (HTTP/1, HTTP/2 and HTTP/3 alike).
pub(crate) struct Answer {
    pub status: u16,
    pub body_len: usize,
    /// `/__handshake/stats`: the JSON body.
    pub stats_body: Option<Vec<u8>>,
}

impl Answer {
    /// Whether a body follows the head (not for HEAD, 204 or 304).
    pub(crate) fn has_body(&self, method: &http::Method) -> bool {
        *method != http::Method::HEAD && self.status != 204 && self.status != 304
    }

    /// The response head for HTTP/2 and HTTP/3 (`alt_svc`: the HTTP/3 advertisement);
    /// None if it cannot be built.
    pub(crate) fn head(&self, alt_svc: Option<&str>) -> Option<http::Response<()>> {
        let mut head = http::Response::builder().status(self.status).header(
            "content-type",
            if self.stats_body.is_some() {
                "application/json"
            } else {
                "text/plain"
            },
        );
        if self.status != 204 && self.status != 304 {
            head = head.header("content-length", self.body_len);
        }
        if let Some(v) = alt_svc {
            head = head.header("alt-svc", v);
        }
        head.body(()).ok()
    }
}

/// A head with no body (HTTP/2 and HTTP/3): an error status.
pub(crate) fn empty_head(status: u16) -> http::Response<()> {
    http::Response::builder()
        .status(status)
        .header("content-length", 0)
        .body(())
        .unwrap_or_default()
}

/// The answer to `route`, after its delay (`/delay/MS`, or the server's `--delay`).
pub(crate) async fn answer(route: Route, shared: &Shared) -> Answer {
    let cfg = &shared.cfg;
    let mut a = Answer {
        status: 200,
        body_len: cfg.body_size,
        stats_body: None,
    };
    let mut delay = cfg.delay;
    match route {
        Route::Default => {}
        Route::Stats => {
            let b = serde_json::to_vec(&shared.stats.snapshot()).unwrap_or_default();
            a.body_len = b.len();
            a.stats_body = Some(b);
        }
        Route::Bytes(n) => a.body_len = n,
        Route::Delay(d) => delay = d,
        Route::Status(c) => a.status = c,
        Route::Bad => {
            a.status = 400;
            a.body_len = 0;
        }
    }
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    a
}

pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Bodies up to this size go out in the same write as the head.
pub(crate) const INLINE_BODY: usize = 16 * 1024;

/// The `Connection` header of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnHeader {
    None = 0,
    Close = 1,
    KeepAlive = 2,
}

/// Write a response head.
pub(crate) fn write_head(
    out: &mut Vec<u8>,
    cfg: &ServerConfig,
    status: u16,
    body_len: usize,
    json: bool,
    conn: ConnHeader,
    alt_svc: Option<&str>,
) {
    let version = if cfg.http10 { "HTTP/1.0" } else { "HTTP/1.1" };
    let _ = write!(out, "{version} {status} {}\r\n", reason(status));
    if status != 204 && status != 304 {
        let _ = write!(out, "Content-Length: {body_len}\r\n");
    }
    if json {
        out.extend_from_slice(b"Content-Type: application/json\r\n");
    } else {
        out.extend_from_slice(b"Content-Type: text/plain\r\n");
    }
    if let Some(v) = alt_svc {
        let _ = write!(out, "Alt-Svc: {v}\r\n");
    }
    match conn {
        ConnHeader::None => {}
        ConnHeader::Close => out.extend_from_slice(b"Connection: close\r\n"),
        ConnHeader::KeepAlive => {
            let _ = write!(
                out,
                "Connection: keep-alive\r\nKeep-Alive: timeout={}\r\n",
                cfg.idle_timeout.as_secs()
            );
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// The default route's full responses (head and, if small, body) for each `ConnHeader`.
/// `alt_svc`: the HTTP/3 advertisement (responses over TLS).
pub(crate) fn default_responses(cfg: &ServerConfig, alt_svc: Option<&str>) -> [Vec<u8>; 3] {
    [ConnHeader::None, ConnHeader::Close, ConnHeader::KeepAlive].map(|conn| {
        let mut out = Vec::new();
        write_head(&mut out, cfg, 200, cfg.body_size, false, conn, alt_svc);
        if cfg.body_size <= INLINE_BODY {
            out.extend_from_slice(&FILL[..cfg.body_size]);
        }
        out
    })
}
