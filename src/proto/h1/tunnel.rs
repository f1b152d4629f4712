//! The `CONNECT` round trip that opens a tunnel through a forward proxy to an origin
//! (RFC 9110 9.3.6), and what a refusal says.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::net::proxy::Secret;
use crate::record::{ErrorDetail, ErrorKind, Failure};

/// Longest answer head to a `CONNECT` read (bytes).
const HEAD_MAX: usize = 16 * 1024;

/// Why a proxy did not open a tunnel: its status (none when it answered no HTTP) and what
/// it said, for the error's example.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    pub failure: Failure,
    pub message: String,
}

/// The failure a proxy's answer `status` to `CONNECT` makes.
fn refusal_of(status: u16) -> Failure {
    let detail = match status {
        407 => ErrorDetail::ProxyAuthRequired,
        403 => ErrorDetail::ProxyForbidden,
        502..=504 => ErrorDetail::ProxyBadGateway,
        _ => ErrorDetail::ProxyRefused,
    };
    Failure::new(ErrorKind::Proxy, detail)
}

/// Open a tunnel to `authority` (host:port) through the proxy on `s`: `CONNECT`, then the
/// proxy's answer head. A 2xx opens it; anything else is the proxy's refusal, with its
/// status line.
pub(crate) async fn connect_tunnel<S: AsyncRead + AsyncWrite + Unpin>(
    s: &mut S,
    authority: &str,
    authorization: Option<&Secret>,
) -> Result<(), Refusal> {
    let mut req = format!(
        "CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: handshake/{}\r\n",
        env!("CARGO_PKG_VERSION")
    );
    if let Some(a) = authorization {
        req.push_str("Proxy-Authorization: ");
        req.push_str(a.expose());
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    let io = |e: std::io::Error| Refusal {
        failure: Failure::new(ErrorKind::Proxy, ErrorDetail::ProxyClosed),
        message: format!("the proxy's connection failed during CONNECT {authority}: {e}"),
    };
    s.write_all(req.as_bytes()).await.map_err(io)?;
    s.flush().await.map_err(io)?;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    loop {
        let n = s.read(&mut buf).await.map_err(io)?;
        if n == 0 {
            return Err(Refusal {
                failure: Failure::new(ErrorKind::Proxy, ErrorDetail::ProxyClosed),
                message: format!(
                    "the proxy closed the connection before answering CONNECT {authority}"
                ),
            });
        }
        head.extend_from_slice(&buf[..n]);
        if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
            return answer(&head, end + 4, authority);
        }
        if head.len() > HEAD_MAX {
            return Err(not_http(authority));
        }
    }
}

fn not_http(authority: &str) -> Refusal {
    Refusal {
        failure: Failure::new(ErrorKind::Proxy, ErrorDetail::ProxyBadAnswer),
        message: format!("the proxy's answer to CONNECT {authority} was not HTTP"),
    }
}

/// The proxy's answer head (`head[..end]`; anything after it would be the origin's,
/// which cannot have spoken yet).
fn answer(head: &[u8], end: usize, authority: &str) -> Result<(), Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let Ok(httparse::Status::Complete(_)) = resp.parse(&head[..end]) else {
        return Err(not_http(authority));
    };
    let status = resp.code.unwrap_or(0);
    if (200..300).contains(&status) && end == head.len() {
        return Ok(());
    }
    if (200..300).contains(&status) {
        return Err(not_http(authority));
    }
    let line_end = head.iter().position(|b| *b == b'\r').unwrap_or(0);
    let line = String::from_utf8_lossy(&head[..line_end])
        .trim()
        .to_string();
    Err(Refusal {
        failure: refusal_of(status),
        message: format!("the proxy answered CONNECT {authority} with {line}"),
    })
}
