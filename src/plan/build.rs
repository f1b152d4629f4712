//! How a runnable `Scenario` is built from a request (URLs, method, headers, body, TLS
//! options) and a load (workers, threads, shape, stop): the checks that make a plan
//! runnable, whoever asks (the command line through `config`, doctor's and trace's
//! probes, compare's rounds).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use super::{LoadShape, PhaseLimits, Scenario, StopWhen, Strategy, Target};
use crate::net::dns::DnsSettings;
use crate::net::quic::QuicTls;
use crate::net::tls::{self, TlsOptions};
use crate::net::Origin;
use crate::parse::{usage, UsageError};
use crate::proto::h1::RequestTemplate;

/// A parsed http(s) URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParsedUrl {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Path and query (origin form).
    pub target: String,
    /// `Host` header value.
    pub authority: String,
}

pub(crate) fn parse_url(s: &str) -> Result<ParsedUrl, UsageError> {
    let bad = |why: &str| usage(format!("invalid URL {s:?}: {why}"));
    let (tls, rest) = if let Some(r) = s.strip_prefix("http://") {
        (false, r)
    } else if let Some(r) = s.strip_prefix("https://") {
        (true, r)
    } else {
        return bad("the scheme must be http:// or https://");
    };
    let rest = rest.split('#').next().unwrap_or("");
    let (authority, target) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'?' => (&rest[..i], format!("/{}", &rest[i..])),
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    if authority.contains('@') {
        return bad("user information is not supported");
    }
    if authority.is_empty() {
        return bad("no host");
    }
    let (host, port) = match crate::net::authority::split(authority) {
        Ok(hp) => hp,
        Err(why) => return bad(&why),
    };
    Ok(ParsedUrl {
        tls,
        host,
        port: port.unwrap_or(if tls { 443 } else { 80 }),
        target,
        authority: authority.to_string(),
    })
}

/// One `--connect-to HOST1:PORT1:HOST2:PORT2` (None: any host or port; the URL's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectTo {
    pub from_host: Option<String>,
    pub from_port: Option<u16>,
    pub to_host: Option<String>,
    pub to_port: Option<u16>,
}

impl ConnectTo {
    /// Where a request to `host:port` connects by this rule, if it matches.
    pub(crate) fn apply(&self, host: &str, port: u16) -> Option<(String, u16)> {
        let host_matches = self
            .from_host
            .as_deref()
            .is_none_or(|h| h.eq_ignore_ascii_case(host));
        (host_matches && self.from_port.is_none_or(|p| p == port)).then(|| {
            (
                self.to_host.clone().unwrap_or_else(|| host.to_string()),
                self.to_port.unwrap_or(port),
            )
        })
    }
}

/// The request side of a run: URLs, method, headers, body, TLS options.
#[derive(Debug, Clone)]
pub(crate) struct RequestConfig {
    pub urls: Vec<(String, ParsedUrl)>,
    pub method: String,
    pub headers: Vec<(String, String)>,
    pub body: Option<Vec<u8>>,
    pub tls: TlsOptions,
    pub resolve: Vec<(String, u16, IpAddr)>,
    /// `--connect-to`: where requests to a host and port connect instead.
    pub connect_to: Vec<ConnectTo>,
    /// `--unix-socket`: every connection goes to this socket.
    pub unix_socket: Option<std::path::PathBuf>,
    /// `-x`/`--proxy`, `--noproxy`, and the proxy variables.
    pub proxy: crate::net::proxy::ProxySettings,
    /// `--local-addr`: source addresses for new connections.
    pub local_addrs: Vec<IpAddr>,
    /// `--dns-cache`, `--dns-servers`.
    pub dns: DnsSettings,
}

impl RequestConfig {
    /// The same request aimed at `url` (the embedded server's, once it is up), trusting
    /// its CA `root` too.
    pub(crate) fn aimed_at(
        &self,
        url: &str,
        root: rustls::pki_types::CertificateDer<'static>,
    ) -> Result<RequestConfig, UsageError> {
        let mut r = self.clone();
        r.urls = vec![(url.to_string(), parse_url(url)?)];
        r.tls.extra_roots.insert(0, root);
        Ok(r)
    }

    /// What the choice of a proxy for its URLs has to tell the user (as each origin
    /// built from them says, `Origin::proxy_note`; the command says each line once);
    /// none through a Unix socket.
    pub(crate) fn proxy_notes(&self) -> Vec<String> {
        if self.unix_socket.is_some() {
            return Vec::new();
        }
        let notes = self
            .urls
            .iter()
            .map(|(_, u)| self.proxy.note_for(u.tls, &u.host));
        notes.flatten().collect()
    }
}

/// The load side of a run.
#[derive(Debug, Clone)]
pub(crate) struct LoadConfig {
    pub concurrency: usize,
    pub threads: usize,
    pub load: LoadShape,
    pub stop: StopWhen,
    pub timeout: Duration,
    pub limits: PhaseLimits,
    /// `-L`: follow redirects, at most this many in a row (`--max-redirs`).
    pub redirects: Option<u32>,
    /// HTTP/1 over plain TCP with a task per worker instead of the readiness loop (the
    /// environment's `HANDSHAKE_H1_TASKS`, read once by `config`: to compare the two).
    pub task_per_worker: bool,
}

/// `--connections N`: HTTP/2 connections per origin, shared by the workers.
pub(crate) fn connections(n: Option<usize>, strategy: Strategy) -> Result<usize, UsageError> {
    match n {
        None => Ok(1),
        Some(0) => usage("--connections must be at least 1"),
        Some(n) if n > 100_000 => usage("--connections must be at most 100000"),
        Some(_) if !strategy.multiplexed() => usage(format!(
            "--connections applies to multiplexed strategies (h2); with {} every worker has \
             its own connection: set the number with -c",
            strategy.name()
        )),
        Some(n) => Ok(n),
    }
}

/// Build one runnable scenario.
pub(crate) fn scenario(
    name: &str,
    strategy: Strategy,
    requests_per_connection: Option<u64>,
    req: &RequestConfig,
    load: &LoadConfig,
) -> Result<Scenario, UsageError> {
    if req.urls.is_empty() {
        return usage("no URL given");
    }
    if requests_per_connection == Some(0) {
        return usage("--requests-per-connection must be at least 1");
    }
    check_strategy(strategy, req)?;
    let mut origins: Vec<Origin> = Vec::new();
    let mut targets = Vec::with_capacity(req.urls.len());
    for (raw, u) in &req.urls {
        let origin = origin_of(&mut origins, raw, u, req)?;
        check_proxied(strategy, raw, &origins[origin])?;
        targets.push(target(strategy, req, raw, u, (origin, &origins[origin]))?);
    }
    // Following redirects, an http:// URL may lead to an https:// one.
    // Each scenario counts what its servers ask of the client's certificate apart.
    let client_auth = req.tls.client_auth.counted_apart();
    let (tls, quic_tls) = client_tls(strategy, req, load.redirects.is_some(), &client_auth)?;
    let redirects = load.redirects.map(|max| {
        Arc::new(super::Redirects {
            max,
            req: req.clone(),
            found: Default::default(),
        })
    });
    Ok(Scenario {
        name: name.to_string(),
        strategy,
        targets,
        origins,
        concurrency: load.concurrency,
        threads: load.threads,
        load: load.load,
        stop: load.stop,
        timeout: load.timeout,
        limits: load.limits,
        requests_per_connection,
        connections: 1,
        tls,
        quic_tls,
        dns: req.dns.clone(),
        redirects,
        ok_status: Vec::new(),
        task_per_worker: load.task_per_worker,
        client_auth,
    })
}

/// What a strategy needs of the URLs and the method: TLS for resumption, QUIC and early
/// data; an idempotent method for early data (it can be replayed).
fn check_strategy(strategy: Strategy, req: &RequestConfig) -> Result<(), UsageError> {
    let any_tls = req.urls.iter().any(|(_, u)| u.tls);
    if strategy == Strategy::CloseResumed && !any_tls {
        return usage(
            "--strategy close-resumed needs an https:// URL (it is about TLS session resumption)",
        );
    }
    if let (true, Some(path)) = (strategy.quic(), &req.unix_socket) {
        return usage(format!(
            "--strategy {} cannot go over --unix-socket {}: HTTP/3 runs over QUIC, on UDP, and a Unix stream socket carries a byte stream (TCP's part)",
            strategy.name(),
            path.display()
        ));
    }
    if strategy.quic() && req.urls.iter().any(|(_, u)| !u.tls) {
        return usage(format!(
            "--strategy {} needs https:// URLs (HTTP/3 runs over QUIC, which is always encrypted)",
            strategy.name()
        ));
    }
    if strategy.early_data() {
        if !any_tls {
            return usage(format!(
                "--strategy {} needs an https:// URL (early data is TLS 1.3's)",
                strategy.name()
            ));
        }
        if !crate::proto::h1::RequestTemplate::method_is_idempotent(&req.method) {
            return usage(format!(
                "--strategy {}: early data can be replayed, so only idempotent methods (GET, HEAD, PUT, DELETE, OPTIONS, TRACE) may go in it, not {}",
                strategy.name(),
                req.method
            ));
        }
    }
    Ok(())
}

/// What a forward proxy cannot carry: QUIC (UDP), and HTTP/2 in cleartext (a proxy
/// forwards HTTP/1 requests; h2 goes inside a `CONNECT` tunnel, to an https:// URL).
pub(super) fn check_proxied(strategy: Strategy, raw: &str, o: &Origin) -> Result<(), UsageError> {
    let Some(p) = &o.proxy else {
        return Ok(());
    };
    if strategy.quic() {
        return usage(format!(
            "--strategy {} cannot go through the proxy {}: HTTP/3 runs over QUIC, on UDP, and an HTTP proxy forwards TCP (set --proxy \"\" or --noproxy to go direct)",
            strategy.name(),
            p.display()
        ));
    }
    if strategy == Strategy::H2 && !o.tls {
        return usage(format!(
            "{raw}: HTTP/2 in cleartext (h2c) cannot go through the proxy {}: a proxy forwards HTTP/1 requests; HTTP/2 goes through its CONNECT tunnel to an https:// URL",
            p.display()
        ));
    }
    Ok(())
}

/// The index of URL `u`'s origin in `origins`, added (with its `--resolve` address and
/// `--local-addr`s) when it is new.
pub(super) fn origin_of(
    origins: &mut Vec<Origin>,
    raw: &str,
    u: &ParsedUrl,
    req: &RequestConfig,
) -> Result<usize, UsageError> {
    if let Some(i) = origins
        .iter()
        .position(|o| o.key() == (u.tls, u.host.clone(), u.port))
    {
        return Ok(i);
    }
    let mut o =
        Origin::new(u.tls, &u.host, u.port).map_err(|e| UsageError(format!("{raw}: {e}")))?;
    // `--connect-to`: the first rule that matches says where to connect; `--resolve`
    // then applies to that host and port, as in curl.
    if let Some((host, port)) = req.connect_to.iter().find_map(|c| c.apply(&u.host, u.port)) {
        o.dial(&host, port);
    }
    // A proxy (not with a Unix socket, which is where every connection goes, as in
    // curl): connections go to it; `--resolve` then applies to its name.
    if req.unix_socket.is_none() {
        if let Some(n) = req.proxy.pick(u.tls, &u.host).map_err(UsageError)? {
            o.via_proxy(n.proxy.clone());
        }
        o.proxy_note = req.proxy.note_for(u.tls, &u.host);
    }
    if let Some((_, _, ip)) = req
        .resolve
        .iter()
        .find(|(h, p, _)| h.eq_ignore_ascii_case(&o.dial_host) && *p == o.dial_port)
    {
        o.fixed_addrs = Some(vec![SocketAddr::new(*ip, o.dial_port)]);
    }
    if let Some(path) = &req.unix_socket {
        o.via_unix_socket(path);
    }
    o.local_addrs = req.local_addrs.clone();
    o.hop = o.route(false).map(std::sync::Arc::new);
    o.index = origins.len() as u32;
    origins.push(o);
    Ok(origins.len() - 1)
}

/// One URL's requests, built once: HTTP/1's bytes (and the last one's, which closes),
/// and the head for HTTP/2 and HTTP/3.
pub(super) fn target(
    strategy: Strategy,
    req: &RequestConfig,
    raw: &str,
    u: &ParsedUrl,
    (origin, o): (usize, &Origin),
) -> Result<Target, UsageError> {
    // Through a proxy without a tunnel (an http:// URL): the request names the whole URL
    // (absolute form) and carries the proxy's credentials.
    let proxied = o.proxy.as_ref().filter(|_| !o.tunneled());
    let template = RequestTemplate {
        method: req.method.clone(),
        target: match proxied {
            Some(_) => format!("http://{}{}", u.authority, u.target),
            None => u.target.clone(),
        },
        host: u.authority.clone(),
        headers: req.headers.clone(),
        body: req.body.clone(),
        proxy_authorization: proxied.and_then(|p| p.authorization.clone()),
    };
    let request = template.build(strategy.version(), strategy.connection_header());
    let request_last = template.build(
        strategy.version(),
        crate::proto::h1::ConnectionHeader::Close,
    );
    let mut h2_request = (strategy == Strategy::H2 || strategy.quic())
        .then(|| crate::proto::h2::request_head(&template, u.tls))
        .transpose()
        .map_err(|e| UsageError(format!("{raw}: {e}")))?;
    if let (Some(head), true) = (h2_request.as_mut(), strategy.quic()) {
        *head.version_mut() = http::Version::HTTP_3;
    }
    Ok(Target {
        url: raw.to_string(),
        origin,
        template,
        request,
        request_last,
        h2_request,
        found_origin: None,
    })
}

/// The client's TLS configuration, and QUIC's built on it.
type ClientTls = (Option<Arc<rustls::ClientConfig>>, Option<Arc<QuicTls>>);

/// The client's TLS configuration for the strategy (none without an https:// URL), and
/// QUIC's built on it.
fn client_tls(
    strategy: Strategy,
    req: &RequestConfig,
    following: bool,
    client_auth: &crate::net::client_auth::ClientAuth,
) -> Result<ClientTls, UsageError> {
    // HTTP/2 over TLS is agreed by ALPN; the server must choose h2.
    let tls_options = if strategy == Strategy::H2 {
        tls::TlsOptions {
            alpn: vec![b"h2".to_vec()],
            ..req.tls.clone()
        }
    } else if strategy.quic() {
        // QUIC carries TLS 1.3 only (RFC 9001), and HTTP/3 is agreed by ALPN.
        if req.tls.versions == tls::TlsVersions::Only12 {
            return usage(format!(
                "--strategy {}: QUIC uses TLS 1.3 only, so --tls-version 1.2 cannot apply",
                strategy.name()
            ));
        }
        tls::TlsOptions {
            alpn: vec![b"h3".to_vec()],
            versions: tls::TlsVersions::Only13,
            early_data: strategy.early_data(),
            ..req.tls.clone()
        }
    } else {
        tls::TlsOptions {
            early_data: strategy.early_data(),
            ..req.tls.clone()
        }
    };
    let tls_options = tls::TlsOptions {
        client_auth: client_auth.clone(),
        ..tls_options
    };
    let setup = |e: anyhow::Error| UsageError(format!("TLS setup: {e:#}"));
    if !following && !req.urls.iter().any(|(_, u)| u.tls) {
        return Ok((None, None));
    }
    let base = tls::client_config(&tls_options, strategy.tls_resumption()).map_err(setup)?;
    if !strategy.quic() {
        return Ok((Some(base), None));
    }
    let q = QuicTls::new(base.clone()).map_err(setup)?;
    Ok((Some(base), Some(Arc::new(q))))
}
