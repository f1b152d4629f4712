//! What the audit's HTTP/1 and HTTP/2 servers and its proxy share: the audit's
//! configuration (with the upstream it forwards to), the parts of a request it reads,
//! and the answers of the embedded routes.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use crate::net::Origin;
use crate::proto::h1::has_token;
use crate::server::routes::{route_of, write_head, ConnHeader, Route};
use crate::server::ServerConfig;

pub(crate) struct AuditConfig {
    pub listen: SocketAddr,
    pub tls: bool,
    /// `--client-ca`: ask each client for a certificate these CAs signed (required, or
    /// optional with `--client-cert optional`).
    pub client_certs: Option<crate::server::tls::ClientCerts>,
    pub upstream: Option<Upstream>,
    /// `--proxy-mode`: a forward proxy for the client (then `upstream` is absent).
    pub proxy: Option<ProxyMode>,
    /// Responses, timeouts and limits when answering here.
    pub server: ServerConfig,
}

/// Where requests go: answered here, or forwarded.
#[derive(Clone)]
pub(crate) struct Upstream {
    pub origin: Origin,
    pub authority: String,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub(super) pool: Arc<Mutex<Vec<crate::proto::h1::conn::Conn>>>,
}

impl Upstream {
    pub(crate) fn new(
        origin: Origin,
        authority: String,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Upstream {
        Upstream {
            origin,
            authority,
            tls,
            pool: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

/// The audit as a forward proxy: where names go (`--resolve`), and a pool of
/// connections per origin for plain requests.
pub(crate) struct ProxyMode {
    /// `--resolve HOST:PORT:ADDR`: connect to ADDR for HOST:PORT (no lookup).
    pub resolve: Vec<(String, u16, IpAddr)>,
    pools: Mutex<HashMap<(String, u16), Upstream>>,
}

impl ProxyMode {
    pub(crate) fn new(resolve: Vec<(String, u16, IpAddr)>) -> ProxyMode {
        ProxyMode {
            resolve,
            pools: Mutex::new(HashMap::new()),
        }
    }

    /// The plain origin at `host:port`, at its `--resolve` address when one is given.
    pub(super) fn origin(&self, host: &str, port: u16) -> anyhow::Result<Origin> {
        let mut o = Origin::new(false, host, port)?;
        if let Some((_, _, ip)) = self
            .resolve
            .iter()
            .find(|(h, p, _)| h.eq_ignore_ascii_case(&o.host) && *p == port)
        {
            o.fixed_addrs = Some(vec![SocketAddr::new(*ip, port)]);
        }
        Ok(o)
    }

    /// The pooled connections to a plain request's origin.
    pub(super) fn upstream(&self, host: &str, port: u16) -> anyhow::Result<Upstream> {
        let mut pools = self.pools.lock().unwrap_or_else(|p| p.into_inner());
        let key = (host.to_ascii_lowercase(), port);
        if let Some(u) = pools.get(&key) {
            return Ok(u.clone());
        }
        let origin = self.origin(host, port)?;
        let up = Upstream::new(origin.clone(), origin.authority(), None);
        pools.insert(key, up.clone());
        Ok(up)
    }
}

pub(super) fn is_reset(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
    )
}

/// The parts of a request the audit needs.
#[derive(Debug, Clone)]
pub(super) struct RequestLine {
    pub(super) method: String,
    pub(super) target: String,
    pub(super) minor: u8,
    /// "close", "keep-alive", or "none".
    pub(super) connection: String,
    pub(super) close: bool,
    pub(super) keep_alive: bool,
    pub(super) content_length: Option<u64>,
    pub(super) chunked: bool,
    /// It carries a header a proxy adds (Via, Forwarded, X-Forwarded-For, X-Real-IP).
    pub(super) forwarded: bool,
    /// End-to-end headers, to forward.
    pub(super) headers: Vec<(String, Vec<u8>)>,
}

/// Headers a proxy adds to the requests it passes on.
pub(super) const PROXY_HEADERS: [&str; 4] = ["via", "forwarded", "x-forwarded-for", "x-real-ip"];

/// An HTTP/2 request carries a header a proxy adds.
pub(super) fn forwarded(headers: &http::HeaderMap) -> bool {
    PROXY_HEADERS.iter().any(|h| headers.contains_key(*h))
}

/// Hop-by-hop headers (RFC 9110 7.6.1), never forwarded.
pub(super) const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

impl RequestLine {
    pub(super) fn from(req: &httparse::Request<'_, '_>) -> RequestLine {
        let mut r = RequestLine {
            method: req.method.unwrap_or("GET").to_string(),
            target: req.path.unwrap_or("/").to_string(),
            minor: req.version.unwrap_or(1),
            connection: "none".into(),
            close: false,
            keep_alive: false,
            content_length: None,
            chunked: false,
            forwarded: false,
            headers: Vec::new(),
        };
        let mut listed: Vec<String> = Vec::new();
        for h in req.headers.iter() {
            let name = h.name.to_ascii_lowercase();
            match name.as_str() {
                "connection" => {
                    r.close |= has_token(h.value, "close");
                    r.keep_alive |= has_token(h.value, "keep-alive");
                    listed.extend(
                        String::from_utf8_lossy(h.value)
                            .split(',')
                            .map(|t| t.trim().to_ascii_lowercase()),
                    );
                }
                "content-length" => {
                    r.content_length = std::str::from_utf8(h.value)
                        .ok()
                        .and_then(|v| v.trim().parse().ok())
                }
                "transfer-encoding" => r.chunked = has_token(h.value, "chunked"),
                n if PROXY_HEADERS.contains(&n) => r.forwarded = true,
                _ => {}
            }
            if !HOP_BY_HOP.contains(&name.as_str()) && name != "host" && name != "content-length" {
                r.headers.push((h.name.to_string(), h.value.to_vec()));
            }
        }
        r.headers
            .retain(|(k, _)| !listed.contains(&k.to_ascii_lowercase()));
        r.connection = match (r.close, r.keep_alive) {
            (true, _) => "close".into(),
            (false, true) => "keep-alive".into(),
            _ => "none".into(),
        };
        r
    }
}

/// A response from the embedded routes: (bytes to write, FILL bytes to add, body length).
pub(super) async fn local_response(
    info: &RequestLine,
    cfg: &ServerConfig,
    conn: ConnHeader,
) -> (Vec<u8>, u64, u64) {
    let mut status = 200;
    let mut body_len = cfg.body_size;
    match route_of(&info.target) {
        Route::Bytes(n) => body_len = n,
        Route::Delay(d) => tokio::time::sleep(d).await,
        Route::Status(c) => status = c,
        Route::Bad => {
            status = 400;
            body_len = 0;
        }
        Route::Default | Route::Stats => {}
    }
    if !cfg.delay.is_zero() {
        tokio::time::sleep(cfg.delay).await;
    }
    let no_body = info.method == "HEAD" || status == 204 || status == 304;
    let mut out = Vec::with_capacity(256);
    write_head(&mut out, cfg, status, body_len, false, conn, None);
    let body = if no_body { 0 } else { body_len as u64 };
    (out, body, body)
}

/// An answer of the audit's own that says why it could not pass the request on (an
/// origin it could not reach, a request not in proxy form, a limit), counted in the
/// log of connection `idx` as the audit's; the connection closes after it.
pub(super) fn own_answer(
    log: &super::log::SharedLog,
    idx: usize,
    status: u16,
    why: &str,
) -> (Vec<u8>, u64, u64) {
    super::log::answered_itself(log, idx, status, why);
    let msg = format!("handshake audit: {why}\n");
    let out = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{msg}",
        crate::server::routes::reason(status),
        msg.len()
    );
    (out.into_bytes(), 0, msg.len() as u64)
}
