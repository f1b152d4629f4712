//! One connection driven step by step, for `trace` and `doctor`: open it (dns, connect
//! and tls timed, with the TLS version, cipher suite, ALPN and handshake kind), exchange
//! one request with its response head kept, and watch whether the server closes it.
//! `h2` does the same over HTTP/2.

pub mod h2;
pub mod h3;

pub use crate::report::trace::TlsInfo;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ClientConfig;
use tokio::io::AsyncReadExt;
use tokio_rustls::TlsConnector;

use crate::net::dns::{with_port, DnsSettings, Resolver};
use crate::net::{
    self, classify_connect_error, classify_io_error, classify_tls_error, Origin, Stream,
};
use crate::proto::h1::conn::Conn;
use crate::record::ErrorKind;

impl TlsInfo {
    /// What a finished handshake agreed on.
    pub fn of(c: &rustls::ClientConnection) -> TlsInfo {
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
        }
    }
}

/// A freshly opened connection and what opening it cost.
pub struct Opened {
    pub conn: Conn,
    pub dns: Option<Duration>,
    pub connect: Duration,
    pub tls: Option<Duration>,
    pub tls_info: Option<TlsInfo>,
    /// TLS 1.3 early data: the handshake has only begun; the first request written goes
    /// in early data and its flush completes the handshake (`tls` and `tls_info` are
    /// then absent).
    pub early: bool,
}

/// Why a probe step failed: the category and a message for people.
#[derive(Debug, Clone)]
pub struct ProbeError {
    pub kind: ErrorKind,
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
        message: message.into(),
    }
}

/// The origin's addresses, and how long looking them up took (none when they were
/// given).
pub async fn resolve(
    origin: &Origin,
    timeout: Duration,
    dns: &DnsSettings,
) -> Result<(Vec<std::net::SocketAddr>, Option<Duration>), ProbeError> {
    match &origin.fixed_addrs {
        Some(a) => Ok((a.clone(), None)),
        None => {
            // A lookup of its own for every probe connection, reading the resolver's
            // configuration as a new process would: what it costs is the point.
            let t = Instant::now();
            let resolver = Resolver::new(dns);
            let a = tokio::time::timeout(timeout, resolver.lookup(&origin.host))
                .await
                .map_err(|_| {
                    err(
                        ErrorKind::TimeoutDns,
                        format!("no answer within {timeout:?}"),
                    )
                })?
                .map_err(|f| {
                    let why = f.detail.map_or("lookup failed", |d| d.name());
                    err(ErrorKind::Dns, format!("{}: {why}", origin.host))
                })?;
            Ok((with_port(&a.addrs, origin.port), Some(t.elapsed())))
        }
    }
}

/// Open a connection to `origin` (TLS when `tls` is given).
pub async fn open(
    origin: &Origin,
    tls: Option<&Arc<ClientConfig>>,
    timeout: Duration,
    dns: &DnsSettings,
) -> Result<Opened, ProbeError> {
    let limit = |kind| move |_| err(kind, format!("no answer within {timeout:?}"));
    let (addrs, dns) = resolve(origin, timeout, dns).await?;
    let t = Instant::now();
    let tcp = tokio::time::timeout(timeout, net::dial::connect(&addrs, &origin.local_addrs, 0))
        .await
        .map_err(limit(ErrorKind::TimeoutConnect))?
        .map_err(|e| err(classify_connect_error(&e).kind, e.to_string()))?;
    let connect = t.elapsed();
    let (stream, tls_time, tls_info) = match tls {
        Some(cfg) if origin.tls => {
            let t = Instant::now();
            let connector = TlsConnector::from(cfg.clone()).early_data(cfg.enable_early_data);
            let s =
                tokio::time::timeout(timeout, connector.connect(origin.server_name.clone(), tcp))
                    .await
                    .map_err(limit(ErrorKind::TimeoutTls))?
                    .map_err(|e| err(classify_tls_error(&e).kind, e.to_string()))?;
            if s.get_ref().1.is_handshaking() {
                let mut conn = Conn::new(Stream::Tls(Box::new(s)), None);
                conn.keep_head = true;
                return Ok(Opened {
                    conn,
                    dns,
                    connect,
                    tls: None,
                    tls_info: None,
                    early: true,
                });
            }
            let elapsed = t.elapsed();
            let info = TlsInfo::of(s.get_ref().1);
            (Stream::Tls(Box::new(s)), Some(elapsed), Some(info))
        }
        _ => (Stream::Tcp(tcp), None, None),
    };
    let mut conn = Conn::new(stream, None);
    conn.keep_head = true;
    Ok(Opened {
        conn,
        dns,
        connect,
        tls: tls_time,
        tls_info,
        early: false,
    })
}

/// One request and its response.
#[derive(Debug, Clone)]
pub struct Exchange {
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
}

impl Exchange {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// `timeout=N` of a `Keep-Alive` header.
    pub fn keep_alive_timeout(&self) -> Option<f64> {
        self.header("keep-alive")?
            .split(',')
            .filter_map(|p| p.trim().strip_prefix("timeout="))
            .find_map(|v| v.trim().parse().ok())
    }
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
pub async fn exchange(
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
        conn.read_response(head_request, Default::default()),
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
    })
}

/// Wait up to `limit` for the server to close the idle connection: the time until its
/// EOF (or reset), or `None` if it stayed open.
pub async fn server_closes_within(conn: &mut Conn, limit: Duration) -> Option<Duration> {
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
