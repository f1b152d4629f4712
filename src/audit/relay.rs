//! `--proxy-mode`: the audit as the client's forward proxy. A `CONNECT` is answered 200
//! and its tunnel relayed byte for byte, both directions read by `track` as they pass
//! (the TLS hellos: a full or a resumed handshake; turns of application data: requests,
//! estimated); a request in absolute form (`GET http://host/path`) is forwarded to its
//! origin over the audit's own persistent connections (`proxy::forward`).

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::answer::{is_reset, ProxyMode};
use super::log::{with_log, Ending, SharedLog};
use crate::track::{Conn, Kind, Side};

/// How long a tunnel's connect to its origin may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A request target in absolute form (`http://host[:port]/path?query`): its origin's
/// host and port (80 when absent), and the target in origin form (`/path?query`); none
/// for a target in another form; an error says what is wrong with its host and port.
pub(super) fn absolute(target: &str) -> Result<Option<(String, u16, String)>, String> {
    let Some(rest) = target.strip_prefix("http://").or_else(|| {
        target
            .get(..7)
            .filter(|s| s.eq_ignore_ascii_case("http://"))
            .map(|_| &target[7..])
    }) else {
        return Ok(None);
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = crate::net::authority::split(authority)?;
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    Ok(Some((host, port.unwrap_or(80), path)))
}

/// Answer a `CONNECT` to `target` and relay the tunnel until both sides have closed;
/// `early` holds bytes the client sent after its request head. Returns how the client's
/// connection ended.
pub(super) async fn tunnel<S: AsyncRead + AsyncWrite + Unpin>(
    mut client: S,
    early: Vec<u8>,
    target: &str,
    mode: &ProxyMode,
    log: &SharedLog,
    idx: usize,
) -> Ending {
    // The audit's own answer, said to be the audit's and why (and counted as such).
    let refuse = |status: u16, why: String| super::answer::own_answer(log, idx, status, &why).0;
    let origin = match crate::net::authority::split(target) {
        Ok((h, Some(p))) => mode.origin(&h, p).map_err(|e| format!("{e:#}")),
        Ok((_, None)) => Err("no port".to_string()),
        Err(why) => Err(why),
    };
    let origin = match origin {
        Ok(o) => o,
        Err(why) => {
            let why = format!("CONNECT {target:?}: expected host:port ({why})");
            let _ = client.write_all(&refuse(400, why)).await;
            return Ending::Garbage;
        }
    };
    with_log(log, |g| {
        g.conns[idx].tunnel = Some(origin.authority());
    });
    let opened = crate::probe::open(&origin, None, CONNECT_TIMEOUT, &Default::default()).await;
    let upstream = match opened {
        Ok(o) => o.conn.into_stream(),
        Err(e) => {
            let why = format!("could not reach the origin {target}: {e}");
            let _ = client.write_all(&refuse(502, why)).await;
            let _ = client.shutdown().await;
            return Ending::OriginClosed;
        }
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .await
        .is_err()
    {
        return Ending::ClientReset;
    }
    relay(client, upstream, early, log, idx).await
}

/// How one direction of a tunnel ended, and when.
#[derive(Clone, Copy, PartialEq)]
enum Half {
    /// Its sender closed (FIN).
    Closed(Instant),
    /// Its sender reset the connection.
    Reset(Instant),
    /// Writing to the other side failed: that side had gone.
    PeerGone(Instant),
}

impl Half {
    fn at(self) -> Instant {
        match self {
            Half::Closed(t) | Half::Reset(t) | Half::PeerGone(t) => t,
        }
    }
}

/// Who ended the tunnel: whichever side's end came first (a client that resets after
/// the origin's FIN, as curl does with bytes left unread, is still the origin's close).
fn ending(up: Half, down: Half) -> Ending {
    if up.at() <= down.at() {
        match up {
            Half::Closed(_) => Ending::ClientClosed,
            Half::Reset(_) => Ending::ClientReset,
            Half::PeerGone(_) => Ending::OriginClosed,
        }
    } else {
        match down {
            Half::PeerGone(_) => Ending::ClientReset,
            _ => Ending::OriginClosed,
        }
    }
}

/// Relay bytes both ways, each read by the tracker and its figures put in the log.
async fn relay<C, O>(client: C, origin: O, early: Vec<u8>, log: &SharedLog, idx: usize) -> Ending
where
    C: AsyncRead + AsyncWrite + Unpin,
    O: AsyncRead + AsyncWrite + Unpin,
{
    let unknown = SocketAddr::from(([0, 0, 0, 0], 0));
    let conn = Mutex::new(Conn::relayed(unknown, unknown, Instant::now()));
    let seen = |side: Side, data: &[u8]| {
        let mut c = conn.lock().unwrap_or_else(|p| p.into_inner());
        c.relayed_bytes(side, data, Instant::now());
        logged(&c, log, idx);
    };
    let (mut cr, mut cw) = tokio::io::split(client);
    let (mut or, mut ow) = tokio::io::split(origin);
    let up = async {
        if !early.is_empty() {
            seen(Side::Client, &early);
            if ow.write_all(&early).await.is_err() {
                return Half::PeerGone(Instant::now());
            }
        }
        pump(&mut cr, &mut ow, |d| seen(Side::Client, d)).await
    };
    let down = pump(&mut or, &mut cw, |d| seen(Side::Server, d));
    let (up, down) = tokio::join!(up, down);
    ending(up, down)
}

/// Copy `from` to `to` until `from` ends; `seen` reads each piece first. At the end the
/// other side is told (a FIN).
async fn pump<R, W>(from: &mut R, to: &mut W, mut seen: impl FnMut(&[u8])) -> Half
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match from.read(&mut buf).await {
            Ok(0) => {
                let at = Instant::now();
                let _ = to.shutdown().await;
                return Half::Closed(at);
            }
            Ok(n) => {
                seen(&buf[..n]);
                if to.write_all(&buf[..n]).await.is_err() {
                    return Half::PeerGone(Instant::now());
                }
            }
            // A TLS peer's FIN without close_notify is an ordinary close here: the bytes
            // are not ours to decrypt.
            Err(e) if is_reset(&e) => {
                let at = Instant::now();
                let _ = to.shutdown().await;
                return Half::Reset(at);
            }
            Err(_) => {
                let _ = to.shutdown().await;
                return Half::Closed(Instant::now());
            }
        }
    }
}

/// The tunnel's figures so far into the connection's log: requests and responses (new
/// ones on the timeline too), the handshake once its hellos are read, idle gaps.
fn logged(c: &Conn, log: &SharedLog, idx: usize) {
    with_log(log, |g| {
        // Over TLS a turn counts once the origin answered it: a client's last turn that
        // is no request (an HTTP/2 GOAWAY as it closes) is not counted.
        let requests = if c.kind == Kind::Tls {
            c.responses
        } else {
            c.requests
        };
        let before = g.conns[idx].requests;
        for _ in before..requests {
            g.timeline.request();
        }
        let resumed = c.tls.as_ref().and_then(|t| t.resumed);
        let first_hello = resumed.is_some() && g.conns[idx].tls_resumed.is_none();
        if let (true, Some(r)) = (first_hello, resumed) {
            g.timeline.tls_handshake(if r {
                crate::record::HandshakeKind::Resumed
            } else {
                crate::record::HandshakeKind::Full
            });
        }
        let l = &mut g.conns[idx];
        l.requests = requests;
        l.responses = c.responses;
        l.gaps = c.gaps;
        l.estimated = c.kind == Kind::Tls;
        if first_hello {
            l.tls_resumed = resumed;
            l.alpn = c.tls.as_ref().and_then(|t| t.alpn_offered.clone());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_in_absolute_form() {
        assert_eq!(
            absolute("http://localhost:8080/a?b"),
            Ok(Some(("localhost".into(), 8080, "/a?b".into())))
        );
        assert_eq!(
            absolute("HTTP://u:p@[::1]?q"),
            Ok(Some(("::1".into(), 80, "/?q".into())))
        );
        assert_eq!(absolute("/a"), Ok(None));
        assert_eq!(absolute("https://x/"), Ok(None));
        // A host and port that cannot be used: said, not taken for another form.
        for bad in ["http://x:0/", "http://:443/", "http://x:port/"] {
            assert!(absolute(bad).is_err(), "{bad}");
        }
    }
}
