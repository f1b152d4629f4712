//! Where each fix the tool names is set, in the server's own words: the directive of the
//! server recognised from its `Server` header (nginx, Apache, Caddy, HAProxy, lighttpd),
//! or those of all of them when it is not known. One table for every command (doctor, bench's
//! diagnosis, trace, compare).

pub(crate) use crate::report::doctor::ServerKind;

impl ServerKind {
    /// From a `Server` header: "nginx/1.22.1", "Apache/2.4.62 (Debian)", "Caddy",
    /// "openresty" (nginx's), "HAProxy".
    pub(crate) fn recognise(server: Option<&str>) -> Option<ServerKind> {
        let s = server?.trim().to_ascii_lowercase();
        let starts = |p: &str| s.starts_with(p);
        if starts("nginx") || starts("openresty") {
            Some(ServerKind::Nginx)
        } else if starts("apache") {
            Some(ServerKind::Apache)
        } else if starts("caddy") {
            Some(ServerKind::Caddy)
        } else if starts("haproxy") {
            Some(ServerKind::Haproxy)
        } else if starts("lighttpd") {
            Some(ServerKind::Lighttpd)
        } else {
            None
        }
    }

    /// How often its timer looks for idle connections, where that is coarse and known:
    /// lighttpd's once a second (an idle connection closes up to a second after its
    /// timeout).
    pub(crate) fn idle_tick_s(self) -> Option<f64> {
        (self == ServerKind::Lighttpd).then_some(1.0)
    }

    fn name(self) -> &'static str {
        match self {
            ServerKind::Nginx => "nginx",
            ServerKind::Apache => "Apache",
            ServerKind::Caddy => "Caddy",
            ServerKind::Haproxy => "HAProxy",
            ServerKind::Lighttpd => "lighttpd",
        }
    }
}

/// A server setting doctor may tell the user to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setting {
    /// HTTP/1.1 keep-alive on at all.
    KeepAlive,
    /// Requests per HTTP/1.1 connection.
    MaxRequests,
    /// Idle time before an HTTP/1.1 connection is closed.
    IdleTimeout,
    /// Concurrent HTTP/2 streams per connection.
    H2Streams,
    /// Streams per HTTP/2 connection before GOAWAY.
    H2MaxRequests,
    /// Idle time before an HTTP/2 connection gets GOAWAY.
    H2IdleTimeout,
    /// TLS 1.3 early data (0-RTT), over TCP or QUIC.
    EarlyData,
    /// TLS 1.3 offered at all (early data needs it).
    Tls13,
    /// TLS session resumption (a session cache or tickets).
    Resumption,
    /// HTTP/2 on at all (by ALPN over TLS, or h2c on a cleartext port).
    H2On,
}

/// Each server's directive for `setting`; a server missing from the list has none doctor
/// can name with confidence.
fn directives(setting: Setting) -> &'static [(ServerKind, &'static str)] {
    use ServerKind::{Apache, Caddy, Haproxy, Lighttpd, Nginx};
    match setting {
        Setting::KeepAlive => &[
            (Nginx, "keepalive_timeout above 0"),
            (Apache, "KeepAlive On"),
            (Haproxy, "option http-keep-alive, not option httpclose"),
            (Caddy, "on by default; look for a proxy in front of it"),
            (Lighttpd, "server.max-keep-alive-requests above 0"),
        ],
        Setting::MaxRequests => &[
            (Nginx, "keepalive_requests, default 1000"),
            (Apache, "MaxKeepAliveRequests, default 100"),
            (
                Caddy,
                "no such limit of its own; look for a proxy in front of it",
            ),
            (Lighttpd, "server.max-keep-alive-requests, default 1000"),
        ],
        Setting::IdleTimeout => &[
            (Nginx, "keepalive_timeout, default 75s"),
            (Apache, "KeepAliveTimeout, default 5"),
            (
                Caddy,
                "idle_timeout in the global servers options, default 5m",
            ),
            (Haproxy, "timeout http-keep-alive"),
            (
                Lighttpd,
                "server.max-keep-alive-idle, default 5; its timer ticks once a second, so a connection closes up to a second after it",
            ),
        ],
        Setting::H2Streams => &[
            (Nginx, "http2_max_concurrent_streams, default 128"),
            (Apache, "H2MaxSessionStreams, default 100"),
            (Haproxy, "tune.h2.max-concurrent-streams, default 100"),
        ],
        Setting::H2MaxRequests => &[(Nginx, "keepalive_requests, default 1000")],
        Setting::H2IdleTimeout => &[
            (Nginx, "keepalive_timeout, default 75s"),
            (
                Caddy,
                "idle_timeout in the global servers options, default 5m",
            ),
            (Haproxy, "timeout http-keep-alive"),
        ],
        Setting::H2On => &[
            (Nginx, "`listen PORT ssl http2` or `http2 on`; on a cleartext port `listen PORT http2` is h2c"),
            (Apache, "Protocols h2 http/1.1 (h2c: Protocols h2c http/1.1)"),
            (Caddy, "on by default over TLS; h2c: protocols h1 h2c in the servers options"),
            (Haproxy, "alpn h2,http/1.1 on the bind line; h2c: proto h2"),
        ],
        Setting::EarlyData => &[
            (Nginx, "ssl_early_data on"),
            (Haproxy, "allow-0rtt on the bind line"),
        ],
        Setting::Tls13 => &[
            (Nginx, "ssl_protocols TLSv1.2 TLSv1.3"),
            (Apache, "SSLProtocol -all +TLSv1.2 +TLSv1.3"),
            (Caddy, "protocols tls1.2 tls1.3, its default"),
            (Haproxy, "no ssl-max-ver TLSv1.2 on the bind line"),
        ],
        Setting::Resumption => &[
            (
                Nginx,
                "ssl_session_cache shared:SSL:10m or ssl_session_tickets on",
            ),
            (Apache, "SSLSessionCache shmcb:... and SSLSessionTickets on"),
            (Haproxy, "tune.ssl.cachesize, and no no-tls-tickets"),
        ],
    }
}

/// "(Apache: MaxKeepAliveRequests, default 100)" for a recognised server; for another
/// (or one without that directive), every server's: "(nginx: ...; Apache: ...)".
///
/// A server is recognised by its `Server` header, which a proxy in front passes on
/// (HAProxy does): where the proxy has the same setting (keep-alive, the idle timeout),
/// what the client saw cannot tell whose it is, so the proxy's is said too, with how to
/// tell them apart.
pub(crate) fn fix(setting: Setting, server: Option<ServerKind>) -> String {
    let all = directives(setting);
    let own = all.iter().find(|(k, _)| Some(*k) == server);
    let chosen: Vec<&(ServerKind, &str)> = match own {
        Some(own) => vec![own],
        None => all.iter().collect(),
    };
    let mut parts: Vec<String> = chosen
        .iter()
        .map(|(k, d)| format!("{}: {d}", k.name()))
        .collect();
    let proxy = all.iter().find(|(k, _)| *k == ServerKind::Haproxy);
    if let (Some((kind, _)), Some((_, d))) = (own, proxy) {
        if *kind != ServerKind::Haproxy
            && matches!(setting, Setting::KeepAlive | Setting::IdleTimeout)
        {
            let name = kind.name();
            parts.push(format!(
                "if a proxy in front passes on {name}'s `Server` header, it may be the proxy's: HAProxy: {d}; doctor {name}'s own address to tell which"
            ));
        }
    }
    format!("({})", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_are_recognised_by_their_server_header() {
        for (header, kind) in [
            ("nginx/1.22.1", Some(ServerKind::Nginx)),
            ("openresty/1.21.4.1", Some(ServerKind::Nginx)),
            ("Apache/2.4.62 (Debian)", Some(ServerKind::Apache)),
            ("Caddy", Some(ServerKind::Caddy)),
            ("HAProxy", Some(ServerKind::Haproxy)),
            ("lighttpd/1.4.69", Some(ServerKind::Lighttpd)),
            ("handshake", None),
        ] {
            assert_eq!(ServerKind::recognise(Some(header)), kind, "{header}");
        }
        assert_eq!(ServerKind::recognise(None), None);
    }

    #[test]
    fn a_recognised_server_gets_its_own_directive_only() {
        let apache = fix(Setting::MaxRequests, Some(ServerKind::Apache));
        assert_eq!(apache, "(Apache: MaxKeepAliveRequests, default 100)");
        let unknown = fix(Setting::MaxRequests, None);
        assert!(unknown.contains("nginx: keepalive_requests") && unknown.contains("Apache: "));
        // HAProxy has no per-connection request limit doctor can name: all of them.
        let haproxy = fix(Setting::MaxRequests, Some(ServerKind::Haproxy));
        assert_eq!(haproxy, unknown);
    }
}
