//! A request from the command line: its URLs (or a file of them), method, headers,
//! body (a file, stdin, or a value), name resolution (`--resolve`, `--dns-servers`),
//! local addresses and TLS options, each error naming its flag.

use std::net::{IpAddr, SocketAddr};

use crate::cli::RequestArgs;
use crate::net::dns::DnsSettings;
use crate::net::tls::{self, TlsOptions, TlsVersions};

use crate::parse::usage;
use crate::parse::UsageError;
use crate::plan::build::{parse_url, ConnectTo, ParsedUrl, RequestConfig};

fn parse_header(h: &str) -> Result<(String, String), UsageError> {
    let Some((k, v)) = h.split_once(':') else {
        return usage(format!("-H/--header {h:?}: expected \"Name: value\""));
    };
    let k = k.trim();
    if k.is_empty() || !k.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
        return usage(format!("-H/--header {h:?}: invalid header name"));
    }
    if v.contains(['\r', '\n']) {
        return usage(format!("-H/--header {h:?}: line breaks are not allowed"));
    }
    if k.eq_ignore_ascii_case("connection") {
        return usage(
            "-H/--header: set connection handling with --strategy, not a Connection header",
        );
    }
    Ok((k.to_string(), v.trim().to_string()))
}

pub(crate) fn parse_resolve(s: &str) -> Result<(String, u16, IpAddr), UsageError> {
    let bad = || usage(format!("--resolve {s:?}: expected HOST:PORT:ADDR"));
    let mut parts = s.splitn(3, ':');
    let (Some(host), Some(port), Some(addr)) = (parts.next(), parts.next(), parts.next()) else {
        return bad();
    };
    let Ok(port) = port.parse::<u16>() else {
        return bad();
    };
    let addr = addr.trim_start_matches('[').trim_end_matches(']');
    let Ok(addr) = addr.parse::<IpAddr>() else {
        return bad();
    };
    Ok((host.to_ascii_lowercase(), port, addr))
}

/// `--connect-to HOST1:PORT1:HOST2:PORT2`, each part possibly empty; an IPv6 host in
/// brackets.
fn parse_connect_to(s: &str) -> Result<ConnectTo, UsageError> {
    let bad = |why: &str| usage(format!("--connect-to {s:?}: {why}"));
    let mut parts = Vec::new();
    let mut rest = s;
    for i in 0..4 {
        let (part, after) = if rest.starts_with('[') {
            match rest.find(']') {
                Some(end) => (&rest[1..end], &rest[end + 1..]),
                None => return bad("an IPv6 address without its closing ]"),
            }
        } else {
            let end = rest.find(':').unwrap_or(rest.len());
            (&rest[..end], &rest[end..])
        };
        parts.push(part);
        rest = match (i, after.strip_prefix(':')) {
            (3, None) if after.is_empty() => "",
            (0..=2, Some(r)) => r,
            _ => return bad("expected HOST1:PORT1:HOST2:PORT2"),
        };
    }
    let port = |p: &str| -> Result<Option<u16>, UsageError> {
        if p.is_empty() {
            return Ok(None);
        }
        match p.parse::<u16>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => usage(format!("--connect-to {s:?}: {p:?} is not a port")),
        }
    };
    let host = |h: &str| (!h.is_empty()).then(|| h.to_ascii_lowercase());
    Ok(ConnectTo {
        from_host: host(parts[0]),
        from_port: port(parts[1])?,
        to_host: host(parts[2]),
        to_port: port(parts[3])?,
    })
}

/// The URL given and those of `--urls-from-file`, each parsed.
fn urls(a: &RequestArgs, url: Option<&str>) -> Result<Vec<(String, ParsedUrl)>, UsageError> {
    let mut raw_urls: Vec<String> = Vec::new();
    if let Some(u) = url {
        raw_urls.push(u.to_string());
    }
    if let Some(path) = &a.urls_from_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| UsageError(format!("--urls-from-file {}: {e}", path.display())))?;
        raw_urls.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(String::from),
        );
        if raw_urls.is_empty() {
            return usage(format!(
                "--urls-from-file {}: no URL in the file",
                path.display()
            ));
        }
    }
    let mut urls = Vec::with_capacity(raw_urls.len());
    for u in raw_urls {
        let p = parse_url(&u)?;
        urls.push((u, p));
    }
    Ok(urls)
}

/// `--unix-socket PATH`: a socket that exists (a server listening there or not, which
/// the run finds out as a connect error).
fn unix_socket(path: &std::path::Path) -> Result<std::path::PathBuf, UsageError> {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::metadata(path) {
        Ok(m) if m.file_type().is_socket() => Ok(path.to_path_buf()),
        Ok(_) => usage(format!("--unix-socket {}: not a socket", path.display())),
        Err(e) => usage(format!("--unix-socket {}: {e}", path.display())),
    }
}

/// `--local-addr` takes at most this many addresses: each gives its own ephemeral ports
/// (about 28,000 with Linux's default range), so 1,024 are tens of millions of
/// connections.
const MAX_LOCAL_ADDRS: usize = 1024;

/// One `--local-addr` item: an address, or a range `FIRST-LAST` of one family
/// (`127.0.0.2-127.0.0.9`), each address in turn.
fn local_addr_range(v: &str) -> Result<Vec<IpAddr>, UsageError> {
    let ip = |s: &str| {
        s.trim()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .map_err(|_| {
                UsageError(format!(
                    "--local-addr {v:?}: not an IP address or a range FIRST-LAST"
                ))
            })
    };
    let Some((a, b)) = v.split_once('-') else {
        return Ok(vec![ip(v)?]);
    };
    let (first, last) = (ip(a)?, ip(b)?);
    let (lo, hi) = match (first, last) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b))),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b)),
        _ => {
            return usage(format!(
                "--local-addr {v:?}: a range's ends are of one family"
            ))
        }
    };
    if hi < lo {
        return usage(format!(
            "--local-addr {v:?}: the range ends before it starts"
        ));
    }
    if hi - lo >= MAX_LOCAL_ADDRS as u128 {
        return usage(format!(
            "--local-addr {v:?}: {} addresses; at most {MAX_LOCAL_ADDRS}",
            hi - lo + 1
        ));
    }
    Ok((lo..=hi)
        .map(|n| match first {
            IpAddr::V4(_) => IpAddr::from(std::net::Ipv4Addr::from(n as u32)),
            IpAddr::V6(_) => IpAddr::from(std::net::Ipv6Addr::from(n)),
        })
        .collect())
}

/// `--local-addr`: each an IP address of this machine, or a range of them.
fn local_addrs(given: &[String]) -> Result<Vec<IpAddr>, UsageError> {
    let mut local_addrs = Vec::new();
    for v in given {
        local_addrs.extend(local_addr_range(v)?);
    }
    if local_addrs.len() > MAX_LOCAL_ADDRS {
        return usage(format!(
            "--local-addr: {} addresses; at most {MAX_LOCAL_ADDRS} (each gives a range of ephemeral ports of its own)",
            local_addrs.len()
        ));
    }
    for ip in &local_addrs {
        // A source address must belong to this machine (binding to it must work).
        std::net::UdpSocket::bind((*ip, 0)).map_err(|e| {
            UsageError(format!(
                "--local-addr {ip}: not an address of this machine ({e})"
            ))
        })?;
    }
    Ok(local_addrs)
}

/// Standard input, read once: a command that builds several requests (compare's HTTP
/// and HTTPS targets, each step of an RTT sweep) sends the same body in each.
fn stdin_body() -> Result<Vec<u8>, UsageError> {
    static BODY: std::sync::OnceLock<Result<Vec<u8>, String>> = std::sync::OnceLock::new();
    BODY.get_or_init(|| {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut v)
            .map(|_| v)
            .map_err(|e| e.to_string())
    })
    .clone()
    .map_err(|e| UsageError(format!("--data @-: standard input: {e}")))
}

/// The request body: `--body` as given, `--body-file`'s contents, or `--data` as curl
/// takes it (`@FILE` read from FILE, `@-` from standard input).
fn body(a: &RequestArgs) -> Result<Option<Vec<u8>>, UsageError> {
    Ok(match (&a.body, &a.body_file, &a.data) {
        (Some(b), _, _) => Some(b.clone().into_bytes()),
        (None, Some(p), _) => Some(
            std::fs::read(p)
                .map_err(|e| UsageError(format!("--body-file {}: {e}", p.display())))?,
        ),
        (None, None, Some(d)) => Some(match d.strip_prefix('@') {
            Some("-") => stdin_body()?,
            Some(f) => std::fs::read(f).map_err(|e| {
                UsageError(format!(
                    "--data @{f}: cannot read {f}: {e} (a body that starts with @ goes in --body)"
                ))
            })?,
            None => d.clone().into_bytes(),
        }),
        (None, None, None) => None,
    })
}

/// Validate the request options. `url` is the positional URL; `extra_roots` are trusted
/// in addition (the embedded server's CA).
pub(crate) fn request_config(
    a: &RequestArgs,
    url: Option<&str>,
    extra_roots: Vec<rustls::pki_types::CertificateDer<'static>>,
) -> Result<RequestConfig, UsageError> {
    let urls = urls(a, url)?;
    // Like curl, a body given with --data makes the request a POST unless -X says
    // otherwise.
    let given = a
        .method
        .as_deref()
        .unwrap_or(if a.data.is_some() { "POST" } else { "GET" });
    let method = given.to_ascii_uppercase();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-') {
        return usage(format!("-X/--method {given:?}: not an HTTP method"));
    }
    let mut headers = a
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(t) = &a.content_type {
        headers.push(
            parse_header(&format!("Content-Type: {t}"))
                .map_err(|e| UsageError(format!("-T/--content-type {t:?}: {}", e.0)))?,
        );
    }
    let body = body(a)?;
    let versions = match a.tls_version.as_deref() {
        None => TlsVersions::Any,
        Some("1.2") => TlsVersions::Only12,
        Some("1.3") => TlsVersions::Only13,
        Some(v) => return usage(format!("--tls-version {v:?}: expected 1.2 or 1.3")),
    };
    let groups = a
        .tls_groups
        .as_deref()
        .map(|g| tls::parse_groups(g).map_err(|e| UsageError(format!("--tls-groups {g:?}: {e}"))))
        .transpose()?;
    let mut roots = extra_roots;
    let only_extra = a.cacert.is_some();
    if let Some(path) = &a.cacert {
        roots.extend(
            tls::load_pem_certs("--cacert", path).map_err(|e| UsageError(format!("{e:#}")))?,
        );
    }
    let identity = a
        .cert
        .as_deref()
        .map(|c| crate::net::client_auth::load(c, a.key.as_deref()).map(std::sync::Arc::new))
        .transpose()
        .map_err(UsageError)?;
    let resolve = a
        .resolve
        .iter()
        .map(|r| parse_resolve(r))
        .collect::<Result<Vec<_>, _>>()?;
    let connect_to = a
        .connect_to
        .iter()
        .map(|c| parse_connect_to(c))
        .collect::<Result<Vec<_>, _>>()?;
    let unix_socket = a.unix_socket.as_deref().map(unix_socket).transpose()?;
    let proxy = proxy_settings(a)?;
    let local_addrs = local_addrs(&a.local_addr)?;
    let no_cache = match a.dns_cache.to_ascii_lowercase().as_str() {
        "on" => false,
        "off" => true,
        v => return usage(format!("--dns-cache {v:?}: expected on or off")),
    };
    let servers = a
        .dns_servers
        .iter()
        .map(|v| parse_dns_server(v.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RequestConfig {
        urls,
        method,
        headers,
        body,
        tls: TlsOptions {
            insecure: a.insecure,
            extra_roots: roots,
            only_extra_roots: only_extra,
            versions,
            groups,
            client_auth: crate::net::client_auth::ClientAuth {
                identity,
                ..Default::default()
            },
            ..TlsOptions::default()
        },
        resolve,
        connect_to,
        unix_socket,
        proxy,
        local_addrs,
        dns: DnsSettings { no_cache, servers },
    })
}

/// `-x`/`--proxy` (read here, so a malformed one is a usage error before anything runs),
/// `--noproxy`, `--proxy-cacert`, `--proxy-insecure`, and the environment's proxy
/// variables.
fn proxy_settings(a: &RequestArgs) -> Result<crate::net::proxy::ProxySettings, UsageError> {
    let mut roots = Vec::new();
    if let Some(path) = &a.proxy_cacert {
        roots = tls::load_pem_certs("--proxy-cacert", path)
            .map_err(|e| UsageError(format!("{e:#}")))?;
    }
    let tls = TlsOptions {
        insecure: a.proxy_insecure,
        only_extra_roots: a.proxy_cacert.is_some(),
        extra_roots: roots,
        ..TlsOptions::default()
    };
    crate::net::proxy::ProxySettings::new(a.proxy.as_deref(), a.noproxy.as_deref(), &tls)
        .map_err(UsageError)
}

/// `--dns-servers` entry: `ADDR`, `ADDR:PORT` or `[V6]:PORT` (port 53 by default).
fn parse_dns_server(v: &str) -> Result<SocketAddr, UsageError> {
    if let Ok(ip) = v
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        return Ok(SocketAddr::new(ip, 53));
    }
    v.parse::<SocketAddr>().map_err(|_| {
        UsageError(format!(
            "--dns-servers {v:?}: expected ADDR or ADDR:PORT, e.g. 127.0.0.1:5353"
        ))
    })
}
