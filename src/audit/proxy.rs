//! Forwarding to `--upstream` over the audit's own persistent connections.

use std::io::Write as _;

use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::answer::{RequestLine, Upstream, HOP_BY_HOP};
use crate::proto::h1::reading::{ReadFail, Reading};
use crate::server::routes::{reason, ConnHeader};

/// Forward to the upstream over a pooled connection; returns the response to write.
pub(super) async fn forward(
    up: &Upstream,
    info: &RequestLine,
    body: &[u8],
    conn: ConnHeader,
) -> anyhow::Result<(Vec<u8>, u64, u64)> {
    let mut req = Vec::with_capacity(512 + body.len());
    let _ = write!(
        req,
        "{} {} HTTP/1.1\r\nHost: {}\r\n",
        info.method, info.target, up.authority
    );
    for (k, v) in &info.headers {
        req.extend_from_slice(k.as_bytes());
        req.extend_from_slice(b": ");
        req.extend_from_slice(v);
        req.extend_from_slice(b"\r\n");
    }
    if !body.is_empty() || matches!(info.method.as_str(), "POST" | "PUT" | "PATCH") {
        let _ = write!(req, "Content-Length: {}\r\n", body.len());
    }
    req.extend_from_slice(b"\r\n");
    req.extend_from_slice(body);
    // A pooled connection may have been closed while idle: retry once on a new one.
    for attempt in 0..2 {
        let pooled = if attempt == 0 {
            up.pool.lock().unwrap_or_else(|p| p.into_inner()).pop()
        } else {
            None
        };
        let fresh = pooled.is_none();
        let mut c = match pooled {
            Some(c) => c,
            None => {
                let o = crate::probe::open(
                    &up.origin,
                    up.tls.as_ref(),
                    Duration::from_secs(30),
                    &Default::default(),
                )
                .await
                .map_err(|e| anyhow::anyhow!("connecting to the upstream: {e}"))?;
                o.conn
            }
        };
        if c.send(&req).await.is_err() && !fresh {
            continue;
        }
        match read_upstream(&mut c.stream, info.method == "HEAD").await {
            Ok((head, body, persistent)) => {
                if persistent {
                    up.pool.lock().unwrap_or_else(|p| p.into_inner()).push(c);
                }
                let mut out = rewrite_head(&head, body.len(), conn)?;
                let n = body.len() as u64;
                out.extend_from_slice(&body);
                return Ok((out, 0, n));
            }
            Err(_) if !fresh => continue,
            Err(e) => return Err(e),
        }
    }
    anyhow::bail!("the upstream closed the connection")
}

/// `--proxy-mode`: forward a plain request in absolute form (`GET http://host/path`) to
/// its origin over the audit's connections to it; the response and the origin
/// (`host:port`), or why it could not go (a request in origin form: the client is not
/// using the audit as its proxy; the origin unreachable).
pub(super) async fn forward_proxied(
    mode: &super::answer::ProxyMode,
    info: &RequestLine,
    body: &[u8],
    conn: ConnHeader,
) -> Result<((Vec<u8>, u64, u64), String), (u16, String)> {
    let (host, port, path) = match super::relay::absolute(&info.target) {
        Ok(Some(t)) => t,
        Ok(None) => return Err((400, format!(
            "a forward proxy takes requests in absolute form (GET http://host/path) and CONNECT; got {} {}",
            info.method, info.target
        ))),
        Err(why) => return Err((400, format!("{} {}: {why}", info.method, info.target))),
    };
    let up = mode
        .upstream(&host, port)
        .map_err(|e| (400, format!("{e:#}")))?;
    let origin = up.authority.clone();
    let mut to_origin = info.clone();
    to_origin.target = path;
    forward(&up, &to_origin, body, conn)
        .await
        .map(|r| (r, origin.clone()))
        .map_err(|e| (502, format!("forwarding to {origin}: {e:#}")))
}

/// The most of an upstream's body the audit holds: it relays a response whole, so a
/// larger one is refused (a 502 that says so) rather than held without bound.
const MAX_RELAYED_BODY: usize = 64 * 1024 * 1024;

/// Read one upstream response: (head bytes, body data, connection reusable), by the
/// reader every HTTP/1 response goes through ([`Reading`], keeping the body). The head is
/// bounded by `parse_head` (64 KiB), the body by [`MAX_RELAYED_BODY`].
pub(super) async fn read_upstream<S: tokio::io::AsyncRead + Unpin>(
    s: &mut S,
    head_request: bool,
) -> anyhow::Result<(Vec<u8>, Vec<u8>, bool)> {
    let failed = |f: ReadFail| anyhow::anyhow!("{}", f.failure.text());
    let mut reading = Reading::new(head_request, true, false).keeping_body();
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut chunk = vec![0u8; 16 * 1024];
    let mut any_byte = false;
    loop {
        let (used, done) = reading.advance(&buf).map_err(failed)?;
        buf.drain(..used);
        if let Some(crate::proto::h1::Framing::Length(n)) = reading.final_head().map(|h| h.framing)
        {
            // Refused before any of it is read.
            anyhow::ensure!(n <= MAX_RELAYED_BODY as u64, too_large());
        }
        if reading
            .kept_body
            .as_ref()
            .is_some_and(|b| b.len() > MAX_RELAYED_BODY)
        {
            return Err(too_large());
        }
        if done {
            break;
        }
        let n = s.read(&mut chunk).await?;
        if n == 0 {
            reading.at_eof(any_byte).map_err(failed)?;
            break;
        }
        any_byte = true;
        buf.extend_from_slice(&chunk[..n]);
    }
    let head_bytes = reading.kept_head.take().unwrap_or_default();
    let body = reading.kept_body.take().unwrap_or_default();
    let head = reading
        .into_head()
        .ok_or_else(|| anyhow::anyhow!("the upstream closed before a response"))?;
    let persistent =
        head.persistent && head.framing != crate::proto::h1::Framing::UntilClose && buf.is_empty();
    Ok((head_bytes, body, persistent))
}

fn too_large() -> anyhow::Error {
    anyhow::anyhow!(
        "the upstream's response body is over {} MiB (the audit relays a body whole)",
        MAX_RELAYED_BODY / (1024 * 1024)
    )
}

/// The upstream's head for the client: hop-by-hop headers dropped, our framing and
/// `Connection` added.
pub(super) fn rewrite_head(
    head: &[u8],
    body_len: usize,
    conn: ConnHeader,
) -> anyhow::Result<Vec<u8>> {
    let mut headers = [httparse::EMPTY_HEADER; crate::proto::h1::MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    resp.parse(head)?;
    let status = resp.code.unwrap_or(502);
    let mut out = Vec::with_capacity(head.len() + 64);
    let _ = write!(
        out,
        "HTTP/1.1 {status} {}\r\n",
        resp.reason.unwrap_or(reason(status))
    );
    for h in resp.headers.iter() {
        let name = h.name.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&name.as_str()) || name == "content-length" {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    if status != 204 && status != 304 {
        let _ = write!(out, "Content-Length: {body_len}\r\n");
    }
    match conn {
        ConnHeader::None => {}
        ConnHeader::Close => out.extend_from_slice(b"Connection: close\r\n"),
        ConnHeader::KeepAlive => out.extend_from_slice(b"Connection: keep-alive\r\n"),
    }
    out.extend_from_slice(b"\r\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::{read_upstream, MAX_RELAYED_BODY};

    fn read(bytes: &[u8]) -> anyhow::Result<(Vec<u8>, Vec<u8>, bool)> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(read_upstream(&mut &bytes[..], false))
    }

    #[test]
    fn a_response_is_read_and_an_endless_one_refused() {
        let (head, body, reusable) =
            read(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap();
        assert!(head.starts_with(b"HTTP/1.1 200 OK"));
        assert_eq!((body.as_slice(), reusable), (&b"ok"[..], true));
        // A 1xx is skipped; a chunked body is relayed decoded; a body until close leaves
        // the connection spent; bytes after the response leave it unsure.
        let (head, body, reusable) = read(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n3\r\n!!!\r\n0\r\n\r\n",
        )
        .unwrap();
        assert!(head.starts_with(b"HTTP/1.1 200 OK"), "{head:?}");
        assert_eq!((body.as_slice(), reusable), (&b"ok!!!"[..], true));
        let (_, body, reusable) =
            read(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close").unwrap();
        assert_eq!((body.as_slice(), reusable), (&b"until close"[..], false));
        let (_, _, reusable) = read(b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1").unwrap();
        assert!(!reusable);
        // A body cut short is an error that says so.
        let e = read(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok").unwrap_err();
        assert!(e.to_string().contains("Content-Length"), "{e}");
        // A length past the bound is refused before any of it is read.
        let huge = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n",
            MAX_RELAYED_BODY + 1
        );
        let e = read(huge.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("over 64 MiB"), "{e}");
        // A body until close past the bound is refused once it passes it.
        let mut close = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
        close.resize(close.len() + MAX_RELAYED_BODY + 2, b'x');
        let e = read(&close).unwrap_err().to_string();
        assert!(e.contains("over 64 MiB"), "{e}");
        // A head without its end stops at parse_head's bound.
        let mut endless = b"HTTP/1.1 200 OK\r\n".to_vec();
        endless.resize(200 * 1024, b'a');
        assert!(read(&endless).is_err());
    }
}
