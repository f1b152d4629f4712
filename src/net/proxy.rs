//! Forward proxies as curl reads them: `-x`/`--proxy URL` or the environment
//! (`http_proxy`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`, `--noproxy`), and credentials
//! from the proxy URL sent as `Proxy-Authorization` (never printed). The `CONNECT` round
//! trip itself is HTTP's: `proto::h1::tunnel`.

use std::net::IpAddr;
use std::sync::Arc;

use base64::Engine;
use rustls::pki_types::ServerName;

/// curl's port for a proxy URL without one.
const DEFAULT_PORT: u16 = 1080;

/// A header value that is sent but never printed (its `Debug` hides it).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl Secret {
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(hidden)")
    }
}

/// A forward proxy that connections go through.
#[derive(Debug, Clone)]
pub(crate) struct Proxy {
    /// An `https://` proxy: TLS to the proxy first.
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub server_name: ServerName<'static>,
    /// `Proxy-Authorization` (Basic, from the URL's `user:pass@`).
    pub authorization: Option<Secret>,
    /// TLS to an https:// proxy (its own roots: `--proxy-cacert`, `--proxy-insecure`).
    pub tls_config: Option<Arc<rustls::ClientConfig>>,
}

impl Proxy {
    /// The proxy as the report names it: scheme, host and port, never its credentials.
    pub(crate) fn display(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{host}:{}", self.port)
    }
}

/// `url` with any credentials in it replaced by `***`, to be printed.
pub(crate) fn redact(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").map_or(("", url), |(s, r)| (s, r));
    let shown = match rest.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => rest.to_string(),
    };
    if scheme.is_empty() {
        shown
    } else {
        format!("{scheme}://{shown}")
    }
}

/// Parse a proxy URL as curl does: `[scheme://][user[:pass]@]host[:port][/]`, scheme
/// http (the default) or https, port 1080 by default; the user and password are
/// percent-decoded. The error names what was wrong, without the credentials.
pub(crate) fn parse(url: &str) -> Result<Proxy, String> {
    let (tls, rest) = match url.split_once("://") {
        None => (false, url),
        Some((s, r)) if s.eq_ignore_ascii_case("http") => (false, r),
        Some((s, r)) if s.eq_ignore_ascii_case("https") => (true, r),
        Some((s, _)) => {
            return Err(format!(
                "a {s}:// proxy is not supported (http:// and https:// proxies are)"
            ))
        }
    };
    let rest = rest.trim_end_matches('/');
    if rest.contains('/') {
        return Err("a proxy URL has no path".to_string());
    }
    let (userinfo, hostport) = match rest.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, rest),
    };
    let (host, port) = super::authority::split(hostport)?;
    let authorization = userinfo.map(|u| {
        let (user, pass) = u.split_once(':').unwrap_or((u, ""));
        let plain = format!("{}:{}", percent_decode(user), percent_decode(pass));
        Secret(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(plain)
        ))
    });
    let server_name =
        ServerName::try_from(host.clone()).map_err(|_| format!("{host:?} is not a host name"))?;
    Ok(Proxy {
        tls,
        port: port.unwrap_or(if tls { 443 } else { DEFAULT_PORT }),
        host,
        server_name,
        authorization,
        tls_config: None,
    })
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `NO_PROXY` / `--noproxy`: a comma-separated list of host names (each matching itself
/// and its subdomains; a leading dot is the same), IP addresses or CIDR ranges, or `*`
/// for every host. Ports are not part of a match, as in curl.
#[derive(Debug, Clone, Default)]
struct NoProxy {
    all: bool,
    names: Vec<String>,
    nets: Vec<(IpAddr, u8)>,
}

impl NoProxy {
    pub(crate) fn parse(list: &str) -> NoProxy {
        let mut n = NoProxy::default();
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if entry == "*" {
                n.all = true;
                continue;
            }
            let bare = entry.trim_start_matches('[').trim_end_matches(']');
            let (addr, bits) = match bare.split_once('/') {
                Some((a, b)) => (a, b.parse::<u8>().ok()),
                None => (bare, None),
            };
            if let Ok(ip) = addr.trim_end_matches(']').parse::<IpAddr>() {
                let max = if ip.is_ipv4() { 32 } else { 128 };
                n.nets.push((ip, bits.unwrap_or(max).min(max)));
                continue;
            }
            n.names
                .push(entry.trim_start_matches('.').to_ascii_lowercase());
        }
        n
    }

    /// Whether `host` (a name or an address, without brackets) goes direct.
    pub(crate) fn matches(&self, host: &str) -> bool {
        if self.all {
            return true;
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.nets.iter().any(|(net, bits)| in_net(ip, *net, *bits));
        }
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        self.names.iter().any(|n| {
            host == *n
                || (host.len() > n.len()
                    && host.ends_with(n.as_str())
                    && host.as_bytes()[host.len() - n.len() - 1] == b'.')
        })
    }
}

fn in_net(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(bits)).unwrap_or(0);
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(bits)).unwrap_or(0);
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

/// The proxy variables a run reads, as curl reads them: `http_proxy` in lower case only
/// (an upper-case `HTTP_PROXY` can be set by a CGI request's `Proxy:` header), the others
/// in either case, lower case first.
fn from_env(var: impl Fn(&str) -> Option<String>, https: bool) -> Option<(String, String)> {
    let either = |name: &str| {
        let lower = name.to_ascii_lowercase();
        var(&lower)
            .map(|v| (lower.clone(), v))
            .or_else(|| var(&name.to_ascii_uppercase()).map(|v| (name.to_ascii_uppercase(), v)))
    };
    let own = if https {
        either("https_proxy")
    } else {
        var("http_proxy").map(|v| ("http_proxy".to_string(), v))
    };
    own.or_else(|| either("all_proxy"))
        .filter(|(_, v)| !v.is_empty())
}

/// The variables the proxy choice reads.
pub const VARS: [&str; 8] = [
    "http_proxy",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "no_proxy",
    "NO_PROXY",
    "HTTP_PROXY",
];

/// A proxy a run may go through, and where it was named (`--proxy`, or the variable).
#[derive(Debug, Clone)]
pub(crate) struct Named {
    pub from: String,
    pub proxy: Proxy,
}

/// A run's proxy settings, each read and parsed once, when the plan is built: the proxy
/// for http:// URLs and the one for https:// URLs (`-x`/`--proxy`, an empty value meaning
/// none even from the environment; else the environment), the hosts that go direct
/// (`--noproxy`, else `no_proxy`/`NO_PROXY`: a list of host names, each matching itself
/// and its subdomains, addresses, CIDR ranges, or `*`), and the TLS to an https://
/// proxy (`--proxy-cacert`, `--proxy-insecure`), configured once and shared.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProxySettings {
    /// For an http:// URL; a variable's value that cannot be used is kept as its error,
    /// said when a URL would go through it.
    http: Option<Result<Named, String>>,
    /// For an https:// URL.
    https: Option<Result<Named, String>>,
    direct: NoProxy,
    /// An upper-case `HTTP_PROXY` is set, and nothing else names an http:// proxy.
    unread_http_proxy: bool,
}

impl ProxySettings {
    /// From the flags (`-x`/`--proxy`, `--noproxy`) and this process's environment; an
    /// error names the flag whose value was wrong.
    pub(crate) fn new(
        explicit: Option<&str>,
        noproxy: Option<&str>,
        tls: &crate::net::tls::TlsOptions,
    ) -> Result<ProxySettings, String> {
        let env: Vec<(String, String)> = VARS
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
            .collect();
        ProxySettings::from_parts(explicit, noproxy, &env, tls)
    }

    /// From the flags and the variables `env` (name, value).
    fn from_parts(
        explicit: Option<&str>,
        noproxy: Option<&str>,
        env: &[(String, String)],
        tls: &crate::net::tls::TlsOptions,
    ) -> Result<ProxySettings, String> {
        let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let named = |from: String, url: &str| -> Result<Named, String> {
            let mut p = parse(url).map_err(|e| format!("{from} {:?}: {e}", redact(url)))?;
            if p.tls {
                let cfg = crate::net::tls::client_config(tls, true)
                    .map_err(|e| format!("{from}: TLS to the proxy: {e:#}"))?;
                p.tls_config = Some(cfg);
            }
            Ok(Named { from, proxy: p })
        };
        let (http, https) = match explicit {
            Some("") => (None, None),
            Some(url) => {
                let one = named("-x/--proxy".to_string(), url)?;
                (Some(Ok(one.clone())), Some(Ok(one)))
            }
            None => {
                let for_scheme =
                    |https: bool| from_env(var, https).map(|(from, url)| named(from, &url));
                (for_scheme(false), for_scheme(true))
            }
        };
        let direct = noproxy
            .map(str::to_string)
            .or_else(|| var("no_proxy"))
            .or_else(|| var("NO_PROXY"))
            .map_or_else(NoProxy::default, |n| NoProxy::parse(&n));
        Ok(ProxySettings {
            unread_http_proxy: explicit.is_none() && http.is_none() && var("HTTP_PROXY").is_some(),
            http,
            https,
            direct,
        })
    }

    /// Settings that send every URL direct (`--proxy ""`).
    pub(crate) fn none() -> ProxySettings {
        ProxySettings::default()
    }

    /// The proxy for a URL of `host` (https or not), with where it was named, or none;
    /// an error names the variable whose value was wrong.
    pub(crate) fn pick(&self, https: bool, host: &str) -> Result<Option<&Named>, String> {
        let set = if https { &self.https } else { &self.http };
        match set {
            Some(_) if self.direct.matches(host) => Ok(None),
            Some(Ok(n)) => Ok(Some(n)),
            Some(Err(e)) => Err(e.clone()),
            None => Ok(None),
        }
    }

    /// What the choice of a proxy for a URL of `host` (https or not) has to tell the
    /// user, which the command says once: that a proxy the environment names is used,
    /// or that an upper-case `HTTP_PROXY` is not read.
    pub(crate) fn note_for(&self, https: bool, host: &str) -> Option<String> {
        match self.pick(https, host) {
            Ok(Some(n)) if n.from != "-x/--proxy" => Some(format!(
                "handshake: through the proxy {} (from {}; --noproxy HOST or --proxy \"\" to go direct)",
                n.proxy.display(),
                n.from
            )),
            Ok(None) if !https && self.unread_http_proxy => {
                Some("handshake: HTTP_PROXY is set but not read: as in curl, only the lower-case http_proxy is (a web request's Proxy header can set the upper-case one in CGI)".to_string())
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{parse, NoProxy, ProxySettings};

    #[test]
    fn proxy_urls_as_curl_reads_them() {
        let p = parse("127.0.0.1:3128").unwrap();
        assert_eq!((p.tls, p.host.as_str(), p.port), (false, "127.0.0.1", 3128));
        assert!(p.authorization.is_none());
        let p = parse("http://proxy.test").unwrap();
        assert_eq!(p.port, 1080);
        let p = parse("https://u%40x:p%3Aw@[::1]:8443/").unwrap();
        assert_eq!((p.tls, p.host.as_str(), p.port), (true, "::1", 8443));
        // base64("u@x:p:w")
        assert_eq!(p.authorization.unwrap().expose(), "Basic dUB4OnA6dw==");
        assert_eq!(p_display("http://a:b@h:1"), "http://h:1");
        assert_eq!(super::redact("http://a:b@h:1"), "http://***@h:1");
        assert_eq!(super::redact("a:b@h"), "***@h");
        assert!(format!("{:?}", parse("http://a:secret@h:1").unwrap())
            .find("secret")
            .is_none());
        for bad in [
            "socks5://h:1",
            "http://h:x",
            "http://:1",
            "http://h:1/path",
            "http://h:0",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    fn p_display(u: &str) -> String {
        parse(u).unwrap().display()
    }

    #[test]
    fn no_proxy_matches_names_suffixes_addresses_and_ranges() {
        let n = NoProxy::parse("example.com, .internal ,10.0.0.0/8,::1,[fe80::1]");
        assert!(n.matches("example.com") && n.matches("a.example.com"));
        assert!(!n.matches("badexample.com") && !n.matches("example.org"));
        assert!(n.matches("x.internal") && n.matches("internal"));
        assert!(n.matches("10.1.2.3") && !n.matches("11.0.0.1"));
        assert!(n.matches("::1") && n.matches("fe80::1") && !n.matches("::2"));
        assert!(NoProxy::parse("*").matches("anything"));
        assert!(!NoProxy::parse("").matches("localhost"));
    }

    #[test]
    fn the_environment_as_curl_reads_it() {
        let tls = crate::net::tls::TlsOptions::default();
        let with = |explicit: Option<&str>, noproxy: Option<&str>, env: &[(&str, &str)]| {
            let env: Vec<(String, String)> = env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            ProxySettings::from_parts(explicit, noproxy, &env, &tls).unwrap()
        };
        let via = |s: &ProxySettings, https: bool, host: &str| {
            s.pick(https, host)
                .unwrap()
                .map(|n| (n.from.clone(), n.proxy.display()))
        };
        let named = |from: &str, url: &str| Some((from.to_string(), url.to_string()));
        // Upper-case HTTP_PROXY is not read (and the note says so); HTTPS_PROXY is.
        let upper = with(None, None, &[("HTTP_PROXY", "h:1")]);
        assert_eq!(via(&upper, false, "a"), None);
        assert!(upper.note_for(false, "a").unwrap().contains("not read"));
        let s = with(None, None, &[("HTTPS_PROXY", "h:1")]);
        assert_eq!(via(&s, true, "a"), named("HTTPS_PROXY", "http://h:1"));
        let s = with(None, None, &[("http_proxy", "h:2")]);
        assert_eq!(via(&s, false, "a"), named("http_proxy", "http://h:2"));
        assert!(s
            .note_for(false, "a")
            .unwrap()
            .contains("(from http_proxy;"));
        // ALL_PROXY when the scheme's own is unset; NO_PROXY sends a match direct.
        let e = [("ALL_PROXY", "h:3"), ("NO_PROXY", "a")];
        let s = with(None, None, &e);
        assert_eq!(via(&s, true, "a"), None);
        assert_eq!(via(&s, true, "b"), named("ALL_PROXY", "http://h:3"));
        // --noproxy wins over NO_PROXY; --proxy "" means none at all; --proxy wins over
        // the environment and is not a note (the user named it).
        let s = with(None, Some("b"), &e);
        assert_eq!(via(&s, true, "b"), None);
        assert_eq!(via(&s, true, "a"), named("ALL_PROXY", "http://h:3"));
        assert_eq!(via(&with(Some(""), None, &e), true, "b"), None);
        let s = with(Some("https://p:8443"), None, &e);
        assert_eq!(via(&s, false, "b"), named("-x/--proxy", "https://p:8443"));
        assert!(s
            .pick(false, "b")
            .unwrap()
            .unwrap()
            .proxy
            .tls_config
            .is_some());
        assert_eq!(s.note_for(false, "b"), None);
        // A malformed flag is refused at once, naming it; a malformed variable only when
        // a URL would go through it.
        let bad = ProxySettings::from_parts(Some("socks5://p:1"), None, &[], &tls).unwrap_err();
        assert!(bad.starts_with("-x/--proxy"), "{bad}");
        let s = with(None, None, &[("https_proxy", "http://h:x")]);
        assert_eq!(via(&s, false, "a"), None);
        assert!(s.pick(true, "a").unwrap_err().starts_with("https_proxy"));
    }
}
