//! One connection driven step by step, for `trace` and `doctor`: open it (dns, connect
//! and tls timed, with the TLS version, cipher suite, ALPN and handshake kind), exchange
//! one request with its response head kept, and watch whether the server closes it.
//! `h2` does the same over HTTP/2.

pub(crate) mod any;
pub(crate) mod h2;
pub(crate) mod h3;

pub(crate) use crate::report::trace::TlsInfo;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ClientConfig;
use tokio::io::AsyncReadExt;

use crate::engine::open::{Opener, Untallied};
use crate::net::dns::DnsSettings;
use crate::net::{classify_io_error, Origin, Stream};
use crate::proto::h1::conn::Conn;
use crate::record::notes::Taken;
use crate::record::{ErrorKind, Failure, Phase, Phases};

impl TlsInfo {
    /// What a finished handshake agreed on, and what it put on the wire where the stream's
    /// tap read it.
    pub(crate) fn of(c: &rustls::ClientConnection, wire: Option<crate::record::Wire>) -> TlsInfo {
        TlsInfo {
            version: match c.protocol_version() {
                Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".into(),
                Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2".into(),
                Some(v) => format!("{v:?}"),
                None => "unknown".into(),
            },
            cipher_suite: c
                .negotiated_cipher_suite()
                .map(|s| format!("{:?}", s.suite()))
                .unwrap_or_default(),
            alpn: c
                .alpn_protocol()
                .map(|p| String::from_utf8_lossy(p).into_owned()),
            resumed: c.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            key_exchange: c
                .negotiated_key_exchange_group()
                .map(|g| crate::record::kx_group_name(u16::from(g.name()))),
            hello_retry_request: wire.map(|w| w.client_hellos > 1),
            client_hello_bytes: wire.map(|w| w.client_hello_bytes),
            server_flight_bytes: wire.map(|w| w.server_flight_bytes).filter(|b| *b > 0),
            client_certificate: None,
        }
    }
}

/// A freshly opened connection and what opening it cost.
pub(crate) struct Opened {
    pub conn: Conn,
    pub dns: Option<Duration>,
    /// The TCP connect (to the proxy, through one: then `proxied`, TLS to an https://
    /// proxy included).
    pub connect: Duration,
    pub proxied: bool,
    /// Through a proxy to an https:// origin: the `CONNECT` round trip.
    pub tunnel: Option<Duration>,
    pub tls: Option<Duration>,
    pub tls_info: Option<TlsInfo>,
    /// TLS 1.3 early data: the handshake has only begun; the first request written goes
    /// in early data and its flush completes the handshake (`tls` and `tls_info` are
    /// absent until `any::Probe`'s first exchange fills them).
    pub early: bool,
}

/// Why a probe step failed: the category and a message for people.
#[derive(Debug, Clone)]
pub(crate) struct ProbeError {
    pub kind: ErrorKind,
    /// The name its kind of failure is counted under: the detail's (`refused`,
    /// `name_not_found`, `cert_wrong_name`), else the category's.
    pub key: &'static str,
    pub message: String,
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind.name(), self.message)
    }
}

impl std::error::Error for ProbeError {}

fn err(kind: ErrorKind, message: impl Into<String>) -> ProbeError {
    ProbeError {
        kind,
        key: kind.name(),
        message: message.into(),
    }
}

/// A failed opening step, as the engine's opener said it.
fn opening_failed(f: Failure) -> ProbeError {
    let message = f.text().to_string();
    let message = match f.detail {
        Some(d) => format!("{message} ({})", d.name()),
        None => message,
    };
    ProbeError {
        key: f.key(),
        ..err(f.kind, message)
    }
}

/// A probe's opener, and how long making it took: reading the resolver's configuration
/// is part of the lookup (of `dns`) when there is one.
fn opener(dns: &DnsSettings, origin: &Origin) -> (Opener<Untallied>, Duration) {
    let t = Instant::now();
    let opener = Opener::single(dns, origin);
    (opener, t.elapsed())
}

fn time(ns: Option<u64>) -> Option<Duration> {
    ns.map(Duration::from_nanos)
}

/// The origin's addresses, and how long looking them up took (none when they were
/// given): the engine's resolving, with a lookup of its own for every probe connection.
pub(crate) async fn resolve(
    origin: &Origin,
    timeout: Duration,
    dns: &DnsSettings,
) -> Result<(Vec<std::net::SocketAddr>, Option<Duration>), ProbeError> {
    let mut phases = Phases::default();
    let by = Instant::now() + timeout;
    let sleep = std::pin::pin!(tokio::time::sleep(timeout));
    let (mut opener, made) = opener(dns, origin);
    let addrs = opener
        .resolve(origin, by, sleep, &mut phases)
        .await
        .map_err(|f| opening_failed(f.failure))?;
    Ok((
        addrs.into_owned(),
        time(phases[Phase::Dns]).map(|d| d + made),
    ))
}

/// Open a connection to `origin` (TLS when `tls` is given): the engine's opening (dns,
/// connect and tls, all within `timeout`), each phase timed.
pub(crate) async fn open(
    origin: &Origin,
    tls: Option<&Arc<ClientConfig>>,
    timeout: Duration,
    dns: &DnsSettings,
) -> Result<Opened, ProbeError> {
    let mut phases = Phases::default();
    let by = Instant::now() + timeout;
    let sleep = std::pin::pin!(tokio::time::sleep(timeout));
    let (mut opener, made) = opener(dns, origin);
    let o = opener
        .open(origin, tls, by, None, sleep, &mut phases)
        .await
        .map_err(|f| opening_failed(f.failure))?;
    let tls_info = match &o.stream {
        Stream::Tls(s) if !o.early => Some(TlsInfo::of(s.get_ref().1, o.wire)),
        _ => None,
    };
    let mut conn = Conn::new(o.stream);
    conn.keep_head = true;
    Ok(Opened {
        conn,
        dns: time(phases[Phase::Dns]).map(|d| d + made),
        connect: time(phases[Phase::Connect].or(phases[Phase::ProxyConnect])).unwrap_or_default(),
        proxied: phases[Phase::ProxyConnect].is_some(),
        tunnel: time(phases[Phase::Tunnel]),
        tls: time(phases[Phase::Tls]),
        tls_info,
        early: o.early,
    })
}

/// One request and its response.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    pub status: u16,
    /// "HTTP/1.0" or "HTTP/1.1".
    pub version: &'static str,
    pub headers: Vec<(String, String)>,
    pub send: Duration,
    pub wait: Duration,
    pub receive: Duration,
    pub body_bytes: u64,
    /// By its headers and framing, the server lets the connection persist.
    pub persistent: bool,
    /// The body had no length (no Content-Length, not chunked): it ended with the
    /// connection.
    pub close_delimited: bool,
    /// What a 3xx to 5xx response said (its status line, a redirect's target or an
    /// error's first words).
    pub said: Option<Box<str>>,
}

impl Exchange {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        header(&self.headers, name)
    }

    /// `timeout=N` of a `Keep-Alive` header.
    pub(crate) fn keep_alive_timeout(&self) -> Option<f64> {
        let h = crate::record::KeepAliveHeader::parse(self.header("keep-alive")?.as_bytes())?;
        h.timeout_s.map(f64::from)
    }
}

/// The first header of that name (in any case).
fn header<'h>(headers: &'h [(String, String)], name: &str) -> Option<&'h str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn head_headers(head: &[u8]) -> Vec<(String, String)> {
    let mut headers = [httparse::EMPTY_HEADER; crate::proto::h1::MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    match resp.parse(head) {
        Ok(httparse::Status::Complete(_)) => resp
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_string(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Send `request` and read the response.
pub(crate) async fn exchange(
    conn: &mut Conn,
    request: &[u8],
    head_request: bool,
    timeout: Duration,
) -> Result<Exchange, ProbeError> {
    let t = Instant::now();
    tokio::time::timeout(timeout, conn.send(request))
        .await
        .map_err(|_| err(ErrorKind::TimeoutSend, "the request could not be written"))?
        .map_err(|e| err(classify_io_error(&e), format!("writing the request: {e}")))?;
    let sent = Instant::now();
    let resp = tokio::time::timeout(
        timeout,
        conn.read_response(head_request, Default::default(), Taken::default()),
    )
    .await
    .map_err(|_| {
        err(
            ErrorKind::TimeoutWait,
            format!("no complete response within {timeout:?}"),
        )
    })?
    .map_err(|f| {
        let msg = if f.any_byte {
            "the response was cut or invalid"
        } else {
            "the connection ended before any response byte"
        };
        match f.failure.detail {
            Some(d) => err(f.failure.kind, format!("{msg} ({})", d.name())),
            None => err(f.failure.kind, msg),
        }
    })?;
    conn.requests += 1;
    let persistent = resp.head.persistent
        && resp.head.framing != crate::proto::h1::Framing::UntilClose
        && !resp.leftover;
    Ok(Exchange {
        status: resp.head.status,
        version: if resp.head.minor_version == 0 {
            "HTTP/1.0"
        } else {
            "HTTP/1.1"
        },
        headers: head_headers(&conn.last_head),
        send: sent - t,
        wait: resp.first_byte.saturating_duration_since(sent),
        receive: resp.end.saturating_duration_since(resp.first_byte),
        body_bytes: resp.body_bytes,
        persistent,
        close_delimited: resp.head.framing == crate::proto::h1::Framing::UntilClose,
        said: resp.said,
    })
}

/// Wait up to `limit` for the server to close the idle connection: the time until its
/// EOF (or reset), or `None` if it stayed open.
pub(crate) async fn server_closes_within(conn: &mut Conn, limit: Duration) -> Option<Duration> {
    let t = Instant::now();
    let mut scratch = [0u8; 256];
    loop {
        match tokio::time::timeout(
            limit.saturating_sub(t.elapsed()),
            conn.stream.read(&mut scratch),
        )
        .await
        {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(t.elapsed()),
            // Bytes while idle: not a close; keep watching.
            Ok(Ok(_)) => continue,
        }
    }
}
