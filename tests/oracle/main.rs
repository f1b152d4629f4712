//! The oracle: situations built from dimensions, each with its truth known from its own
//! configuration, and every finding code that `bench`, `trace`, `doctor` and `compare`
//! print (their headline and each finding) checked against a predicate over that truth. A code without a
//! predicate fails, so no new sentence ships without its oracle; a predicate can look
//! at the sentence too (a failure must name the hop that failed).
//!
//! The server of a situation is scripted here, so that its policy is exactly the
//! situation's: keep-alive, `Connection: close` on the first response, HTTP/1.0 without
//! keep-alive, bodies ended by the close, `Connection: close` after k responses, or a
//! close after k responses that says nothing (a FIN, or a RST when the next request
//! comes); or it is nginx, Apache, HAProxy in front of nginx or Caddy configured for the
//! policies they have. Beside the policy: the status it answers (200, 404, 429, 503,
//! 413), the path (direct, through tinyproxy or squid, through a forward proxy that is
//! down, to a port where nothing listens, `--connect-to`, a Unix socket up or gone, a
//! redirect to the server or to nothing) and the client's strategy (keepalive, close,
//! close-resumed, close-0rtt); compare's own codes in `oracle/compare.rs`.
//!
//! A fixed, seeded sample of the product runs here; `HANDSHAKE_ORACLE=full` runs all of
//! it and prints the table of situation x command x verdict (`scripts/oracle`).
//!
//! `audit`'s codes are judged in `oracle/audit.rs`, over real clients (curl, Python,
//! Node, Go, Ruby) whose use of connections is known from how they are called, and
//! `watch`'s over the same clients in `oracle/watch.rs`.

#[path = "audit.rs"]
mod clients;
#[path = "../common/mod.rs"]
mod common;
#[path = "compare.rs"]
mod compared;
#[path = "front.rs"]
mod front;
mod mtls;
#[path = "watch.rs"]
mod watched;

use std::io::Write as _;
use std::net::TcpStream;
use std::process::Command;

use common::*;
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Policy {
    KeepAlive,
    /// `Connection: close` on response k of each connection (1: keep-alive is off).
    CloseHeader(u32),
    /// HTTP/1.0 answers without `Connection: keep-alive`.
    Http10,
    /// No Content-Length, not chunked: each body ends with the connection.
    CloseDelimited,
    /// The connection closed after response k, without a word.
    SilentClose(u32),
    /// As `SilentClose`, by a TCP RST: after response k the server resets the
    /// connection when the next request comes (SO_LINGER 0), as a server that drops
    /// its idle connections abruptly does.
    ResetClose(u32),
    /// The server accepts, reads the request and never answers (the client's
    /// `--timeout 0.3s` ends each attempt).
    Stall,
    /// Keep-alive with an idle timeout of 500 ms, closed without a word.
    IdleTimeout,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    Direct,
    /// `-x` to a port where nothing listens.
    ProxyDown,
    /// `-x` to tinyproxy, in plain HTTP: it ends every client connection after its
    /// response, whatever the origin does.
    ProxyUp,
    /// `-x` to squid, in plain HTTP: it keeps its client connections
    /// (`client_persistent_connections on`, its default) whatever the origin does.
    SquidUp,
    /// The URL's own port: nothing listens.
    ServerDown,
    /// The URL names `a.test`, and `--connect-to` sends it to the server.
    ConnectTo,
    /// `--connect-to` sends the URL's name to a port where nothing listens.
    ConnectToDown,
    /// `--unix-socket` to a socket's file whose server is gone.
    UnixDown,
    /// `-L`: the server answers each request with a redirect to a port where nothing
    /// listens (bench: trace and doctor do not follow redirects).
    RedirectDown,
    /// `--unix-socket` to nginx's socket (it listens on its TCP port too).
    UnixUp,
    /// `-L`: a server that keeps its connections answers each request with a redirect
    /// to the situation's server (bench and compare).
    RedirectUp,
}

impl Policy {
    /// The k after which the server ends each connection without a word, by FIN or by
    /// RST.
    fn silent(self) -> Option<u32> {
        match self {
            Policy::SilentClose(k) | Policy::ResetClose(k) => Some(k),
            _ => None,
        }
    }
}

impl Path {
    /// The server's answer can reach the client this way.
    fn reaches(self) -> bool {
        matches!(
            self,
            Path::Direct
                | Path::ConnectTo
                | Path::ProxyUp
                | Path::SquidUp
                | Path::UnixUp
                | Path::RedirectUp
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Cmd {
    Bench,
    Trace,
    /// Its probes choose their own requests: run once per situation (strategy
    /// keepalive).
    Doctor,
    /// Its own strategies, each a row: run once per situation (strategy keepalive);
    /// judged in `oracle/compare.rs`.
    Compare,
}

/// Who answers: the scripted server (any policy), or nginx configured for the policy
/// (`keepalive_timeout 0` for keep-alive off, `keepalive_requests 3`, `return STATUS`).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Server {
    Scripted,
    Nginx,
    /// Apache: `KeepAlive Off`, `MaxKeepAliveRequests 3`, `KeepAliveTimeout 500ms`;
    /// a status by `RedirectMatch STATUS ^/`.
    Apache,
    /// HAProxy in front of nginx (which keeps its connections): HAProxy's own policy,
    /// `option httpclose` (it sends `connection: close`) or `timeout http-keep-alive
    /// 500ms`; nginx's `Server` header passed through.
    HaproxyNginx,
    /// Caddy: `header Connection close` (Go's server then ends each connection), or its
    /// idle timeout at 500 ms; a status by `respond`.
    Caddy,
}

/// TLS to the server (nginx): none, TLS 1.3, TLS 1.2 only, TLS 1.3 with early data on;
/// or a certificate the client must refuse: expired, for another name, from a CA it was
/// not given.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tls {
    None,
    V13,
    V12,
    V13Early,
    /// TLS 1.3 with session tickets and the session cache off: no session resumed.
    NoTickets,
    /// TLS 1.3 with HTTP/2 offered in ALPN (`listen … ssl http2`; nginx's defaults: 128
    /// concurrent streams, 1000 requests per connection, the 75 s keep-alive timeout).
    H2,
    Expired,
    WrongName,
    UnknownCa,
    /// TLS 1.3, nginx requiring a client certificate (`ssl_verify_client on`), given
    /// with `--cert`/`--key`.
    ClientCert,
    /// The same, without `--cert`: nginx answers 400 and ends each connection.
    ClientCertMissing,
    /// nginx asking for one optionally (`ssl_verify_client optional`), given.
    ClientCertOptional,
}

impl Tls {
    fn verifies(self) -> bool {
        matches!(
            self,
            Tls::None
                | Tls::V13
                | Tls::V12
                | Tls::V13Early
                | Tls::NoTickets
                | Tls::H2
                | Tls::ClientCert
                | Tls::ClientCertMissing
                | Tls::ClientCertOptional
        )
    }
}

#[derive(Clone, Copy, Debug)]
struct Situation {
    server: Server,
    tls: Tls,
    policy: Policy,
    status: u16,
    path: Path,
    strategy: &'static str,
}

impl Situation {
    /// What the server does with a connection after this situation's answer: its
    /// policy, except where the server ends the connection after an error status
    /// whatever its keep-alive (Apache after 503 and 413, with `Connection: close`: its
    /// `ap_status_drops_connection`; curl sees the same).
    fn truth(&self) -> Policy {
        match self.path {
            // The client's peer is the proxy: tinyproxy ends every client connection
            // after its response, without `Connection: close`; squid keeps them.
            Path::ProxyUp => Policy::SilentClose(1),
            Path::SquidUp => Policy::KeepAlive,
            _ if self.server == Server::Apache && matches!(self.status, 413 | 503) => {
                Policy::CloseHeader(1)
            }
            _ => self.policy,
        }
    }

    /// The client's peer is the scripted server, which does not look at the HTTP
    /// version (the real servers and the proxies close HTTP/1.0 without keep-alive).
    fn peer_scripted(&self) -> bool {
        self.server == Server::Scripted && !matches!(self.path, Path::ProxyUp | Path::SquidUp)
    }

    fn reached(&self) -> bool {
        self.path.reaches() && self.tls.verifies() && self.policy != Policy::Stall
    }

    fn persistent(&self) -> bool {
        matches!(self.strategy, "keepalive" | "h2")
    }

    fn error_status(&self) -> bool {
        self.status >= 400
    }

    /// The server ends each connection after its first response.
    fn ends_after_first(&self) -> bool {
        matches!(
            self.truth(),
            Policy::CloseHeader(1)
                | Policy::Http10
                | Policy::CloseDelimited
                | Policy::SilentClose(1)
                | Policy::ResetClose(1)
        )
    }

    fn name(&self) -> String {
        match self.path {
            Path::Direct if self.tls != Tls::None => {
                format!("{:?} TLS {:?} {}", self.server, self.tls, self.strategy)
            }
            Path::Direct | Path::ConnectTo => format!(
                "{:?}{} {:?} {} {}",
                self.server,
                if self.path == Path::ConnectTo {
                    " via --connect-to"
                } else {
                    ""
                },
                self.policy,
                self.status,
                self.strategy
            ),
            Path::ProxyUp => format!("{:?} via tinyproxy {}", self.server, self.strategy),
            Path::UnixUp => format!(
                "{:?} {:?} via --unix-socket {}",
                self.server, self.policy, self.strategy
            ),
            Path::RedirectUp => format!(
                "{:?} {:?} after a redirect {}",
                self.server, self.policy, self.strategy
            ),
            Path::SquidUp => format!(
                "{:?} {:?} via squid {}",
                self.server, self.policy, self.strategy
            ),
            p => format!("{p:?} {}", self.strategy),
        }
    }
}

/// The direct situations of one strategy: each server under each policy it has, each
/// status.
fn direct(strategy: &'static str) -> Vec<Situation> {
    let mut out = Vec::new();
    for policy in [
        Policy::KeepAlive,
        Policy::CloseHeader(1),
        Policy::CloseHeader(3),
        Policy::Http10,
        Policy::CloseDelimited,
        Policy::SilentClose(1),
        Policy::SilentClose(3),
        Policy::ResetClose(1),
        Policy::ResetClose(3),
        Policy::IdleTimeout,
    ] {
        for status in [200, 404, 429, 503, 413] {
            for server in [
                Server::Scripted,
                Server::Nginx,
                Server::Apache,
                Server::HaproxyNginx,
                Server::Caddy,
            ] {
                // nginx closes with `Connection: close` only; Apache so, or when
                // idle; HAProxy and Caddy have keep-alive off or an idle timeout.
                let by_header = matches!(
                    policy,
                    Policy::KeepAlive | Policy::CloseHeader(1) | Policy::CloseHeader(3)
                );
                let idle_or_off = matches!(
                    policy,
                    Policy::KeepAlive | Policy::CloseHeader(1) | Policy::IdleTimeout
                );
                let can = match server {
                    Server::Scripted => true,
                    Server::Nginx => by_header,
                    Server::Apache => by_header || policy == Policy::IdleTimeout,
                    Server::HaproxyNginx | Server::Caddy => idle_or_off,
                };
                if !can {
                    continue;
                }
                out.push(Situation {
                    server,
                    tls: Tls::None,
                    policy,
                    status,
                    path: Path::Direct,
                    strategy,
                });
            }
        }
    }
    out
}

/// The whole product (the unreachable paths once per strategy: the server's policy and
/// status cannot show there).
fn situations() -> Vec<Situation> {
    let mut out = Vec::new();
    for strategy in ["keepalive", "close"] {
        out.extend(direct(strategy));
        for path in [
            Path::ProxyDown,
            Path::ServerDown,
            Path::ConnectToDown,
            Path::UnixDown,
            Path::RedirectDown,
        ] {
            out.push(Situation {
                server: Server::Scripted,
                tls: Tls::None,
                policy: Policy::KeepAlive,
                status: 200,
                path,
                strategy,
            });
        }
        // A server that takes the request and never answers.
        out.push(Situation {
            server: Server::Scripted,
            tls: Tls::None,
            policy: Policy::Stall,
            status: 200,
            path: Path::Direct,
            strategy,
        });
        let mut by = |path, servers: &[(Server, Policy)]| {
            for &(server, policy) in servers {
                out.push(Situation {
                    server,
                    tls: Tls::None,
                    policy,
                    status: 200,
                    path,
                    strategy,
                });
            }
        };
        // Through tinyproxy: the proxy is the peer.
        by(
            Path::ProxyUp,
            &[
                (Server::Scripted, Policy::KeepAlive),
                (Server::Nginx, Policy::KeepAlive),
            ],
        );
        // Through squid: it keeps its client connections, whatever the origin does.
        by(
            Path::SquidUp,
            &[
                (Server::Scripted, Policy::KeepAlive),
                (Server::Scripted, Policy::CloseHeader(1)),
                (Server::Nginx, Policy::KeepAlive),
            ],
        );
        // nginx on a Unix socket; a redirect (followed) to the server: the truths of the
        // server's own policy.
        by(
            Path::UnixUp,
            &[
                (Server::Nginx, Policy::KeepAlive),
                (Server::Nginx, Policy::CloseHeader(1)),
                (Server::Nginx, Policy::CloseHeader(3)),
            ],
        );
        by(
            Path::RedirectUp,
            &[
                (Server::Scripted, Policy::KeepAlive),
                (Server::Scripted, Policy::CloseHeader(1)),
                (Server::Nginx, Policy::KeepAlive),
            ],
        );
        // The same server reached by another name: the truths of the direct path.
        by(
            Path::ConnectTo,
            &[
                (Server::Nginx, Policy::KeepAlive),
                (Server::Scripted, Policy::CloseHeader(1)),
                (Server::Scripted, Policy::SilentClose(1)),
            ],
        );
    }
    out.extend(tls_situations());
    out
}

/// TLS, against nginx: what each strategy's TLS feature needs, certificates to refuse,
/// and HTTP/2 offered.
fn tls_situations() -> Vec<Situation> {
    let mut out = Vec::new();
    for tls in [
        Tls::V13,
        Tls::V12,
        Tls::V13Early,
        Tls::NoTickets,
        Tls::Expired,
        Tls::WrongName,
        Tls::UnknownCa,
    ] {
        for strategy in ["keepalive", "close-resumed", "close-0rtt"] {
            out.push(Situation {
                server: Server::Nginx,
                tls,
                policy: Policy::KeepAlive,
                status: 200,
                path: Path::Direct,
                strategy,
            });
        }
    }
    // A client certificate asked for: required and given, required and missing (nginx
    // answers 400 and ends the connection), optional and not given.
    for (tls, policy, status) in [
        (Tls::ClientCert, Policy::KeepAlive, 200),
        (Tls::ClientCertMissing, Policy::CloseHeader(1), 400),
        (Tls::ClientCertOptional, Policy::KeepAlive, 200),
    ] {
        for strategy in ["keepalive", "close-resumed"] {
            out.push(Situation {
                server: Server::Nginx,
                tls,
                policy,
                status,
                path: Path::Direct,
                strategy,
            });
        }
    }
    // HTTP/2: nginx offering h2, over its own strategy too.
    for strategy in ["keepalive", "h2", "close-resumed"] {
        out.push(Situation {
            server: Server::Nginx,
            tls: Tls::H2,
            policy: Policy::KeepAlive,
            status: 200,
            path: Path::Direct,
            strategy,
        });
    }
    out
}

/// The idle timeout of `Policy::IdleTimeout`.
const IDLE: std::time::Duration = std::time::Duration::from_millis(500);

/// What the scripted server does with one connection: the situation's policy, exactly.
fn serve(policy: Policy, status: u16, mut s: TcpStream) {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        413 => "Content Too Large",
        429 => "Too Many Requests",
        _ => "Service Unavailable",
    };
    let mut n = 0;
    let idle = if policy == Policy::IdleTimeout {
        IDLE
    } else {
        std::time::Duration::from_secs(10)
    };
    while let Some(head) = s
        .set_read_timeout(Some(idle))
        .ok()
        .and_then(|()| read_head_from(&mut s))
    {
        n += 1;
        let asked_close = String::from_utf8_lossy(&head)
            .to_ascii_lowercase()
            .contains("connection: close");
        let body = "hello\n";
        let (version, length, header, close) = match policy {
            Policy::KeepAlive | Policy::IdleTimeout => ("1.1", true, asked_close, asked_close),
            Policy::CloseHeader(k) => ("1.1", true, n == k || asked_close, n == k || asked_close),
            Policy::Http10 => ("1.0", true, false, true),
            Policy::CloseDelimited => ("1.1", false, false, true),
            Policy::SilentClose(k) | Policy::ResetClose(k) => {
                ("1.1", true, asked_close, n == k || asked_close)
            }
            Policy::Stall => {
                // Hold the connection, unanswered, until the client gives up.
                while read_head_from(&mut s).is_some() {}
                return;
            }
        };
        let mut r = format!("HTTP/{version} {status} {reason}\r\nContent-Type: text/plain\r\n");
        if length {
            r.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        if header {
            r.push_str("Connection: close\r\n");
        }
        r.push_str("\r\n");
        r.push_str(body);
        if s.write_all(r.as_bytes()).is_err() {
            return;
        }
        if close && !asked_close && matches!(policy, Policy::ResetClose(_)) {
            // The next request, if one comes, meets a reset.
            if read_head_from(&mut s).is_some() {
                reset(s);
            }
            return;
        }
        if close {
            return;
        }
    }
}

/// What one command printed: its exit code, its JSON, and stderr.
struct Run {
    code: Option<i32>,
    json: Value,
    stderr: String,
}

impl Run {
    /// The findings the command's JSON carries: its headline and the rest.
    fn findings(&self, cmd: Cmd) -> Vec<&Value> {
        let (headline, rest) = match cmd {
            Cmd::Bench => {
                let s = &self.json["scenarios"][0];
                (&s["headline"], &s["diagnosis"])
            }
            Cmd::Trace => (&self.json["headline"], &self.json["findings"]),
            Cmd::Doctor => (&self.json["policy"], &self.json["findings"]),
            Cmd::Compare => (&Value::Null, &self.json["comparison"]["headline"]),
        };
        let mut out: Vec<&Value> = headline
            .is_object()
            .then_some(headline)
            .into_iter()
            .collect();
        out.extend(rest.as_array().into_iter().flatten());
        if cmd == Cmd::Doctor {
            out.extend(self.json["problems"].as_array().into_iter().flatten());
        }
        if cmd == Cmd::Compare {
            for part in ["explanations", "left_out"] {
                out.extend(
                    self.json["comparison"][part]
                        .as_array()
                        .into_iter()
                        .flatten(),
                );
            }
        }
        out
    }
}

/// nginx answering `status` under the situation's keep-alive policy.
fn nginx(s: &Situation) -> Nginx {
    let policy = match s.policy {
        Policy::CloseHeader(1) => "keepalive_timeout 0;".to_string(),
        Policy::CloseHeader(k) => format!("keepalive_requests {k};"),
        _ => String::new(),
    };
    let (status, tls, unix) = (s.status, s.tls, s.path == Path::UnixUp);
    Nginx::start_servers(&policy, 1, |ports, d| {
        let (flag, ssl) = match tls {
            Tls::None => ("", String::new()),
            _ => {
                let name = if tls == Tls::WrongName { "other.example" } else { "localhost" };
                let years = (tls == Tls::Expired).then_some((2020, 2021));
                write_certs_valid(d, &[name], years);
                let protocols = if tls == Tls::V12 { "TLSv1.2" } else { "TLSv1.2 TLSv1.3" };
                let early = match tls {
                    Tls::V13Early => "ssl_early_data on;".to_string(),
                    Tls::NoTickets => "ssl_session_tickets off; ssl_session_cache off;".into(),
                    _ => mtls::nginx_lines(tls, d),
                };
                let d = d.display();
                (
                    if tls == Tls::H2 { " ssl http2" } else { " ssl" },
                    format!("ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem; ssl_protocols {protocols}; {early}"),
                )
            }
        };
        // On a Unix socket too, where the situation goes that way.
        let unix = if unix {
            format!("listen unix:{}/ng.sock;", d.display())
        } else {
            String::new()
        };
        format!(
            "server {{ listen 127.0.0.1:{}{flag}; {unix} {ssl} location / {{ return {status} \"hello\\n\"; }} }}",
            ports[0]
        )
    })
    .expect("nginx")
}

/// Apache under the situation's keep-alive policy, answering its status.
fn apache_for(s: &Situation) -> Apache {
    let policy = match s.policy {
        Policy::CloseHeader(1) => "KeepAlive Off".to_string(),
        // Apache counts the requests after the first (its log's `%k`): a limit of k - 1
        // ends each connection with `Connection: close` on response k (curl sees the
        // same).
        Policy::CloseHeader(k) => format!("KeepAlive On\nMaxKeepAliveRequests {}", k - 1),
        Policy::IdleTimeout => format!("KeepAlive On\nKeepAliveTimeout {}ms", IDLE.as_millis()),
        _ => "KeepAlive On".to_string(),
    };
    let m = "/usr/lib/apache2/modules";
    let status = if s.status == 200 {
        String::new()
    } else {
        format!("RedirectMatch {} ^/", s.status)
    };
    Apache::start(&format!(
        "LoadModule alias_module {m}/mod_alias.so\nLoadModule dir_module {m}/mod_dir.so\nDirectoryIndex index.html\n{policy}\n{status}"
    ))
    .expect("Apache (scripts/test installs it)")
}

/// A server that answers every request with a redirect to `dead`'s port (where
/// nothing listens), keeping its connections: its port.
fn redirecting_to(dead: u16) -> u16 {
    let (addr, _) = script_server(move |mut c, _| {
        while read_head(&mut c).is_some() {
            write(
                &mut c,
                format!(
                    "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:{dead}/next\r\nContent-Length: 0\r\n\r\n"
                )
                .as_bytes(),
            );
        }
    });
    addr.port()
}

/// The servers a situation started, stopped when dropped: nginx (alone, or behind
/// HAProxy), Apache, HAProxy or Caddy.
#[derive(Default)]
struct Held {
    nginx: Option<Nginx>,
    apache: Option<Apache>,
    front: Option<front::Front>,
}

/// Start the situation's server (none where nothing is to listen): its port, and what
/// holds it up.
fn start_server(s: &Situation, dead: u16) -> (u16, Held) {
    let mut h = Held::default();
    let port = server_port(s, dead, &mut h);
    // A redirect to the server, from one that keeps its connections.
    let port = if s.path == Path::RedirectUp {
        redirecting_to(port)
    } else {
        port
    };
    (port, h)
}

/// The situation's own server (none where nothing is to listen): its port.
fn server_port(s: &Situation, dead: u16, h: &mut Held) -> u16 {
    if matches!(s.path, Path::ServerDown | Path::UnixDown) {
        dead
    } else if s.path == Path::RedirectDown {
        redirecting_to(dead)
    } else if s.server == Server::Nginx {
        h.nginx.insert(nginx(s)).port
    } else if s.server == Server::Apache {
        h.apache.insert(apache_for(s)).port
    } else if s.server == Server::HaproxyNginx {
        let backend = h.nginx.insert(nginx(&Situation {
            policy: Policy::KeepAlive,
            ..*s
        }));
        let policy = match s.policy {
            Policy::CloseHeader(_) => "option httpclose".to_string(),
            Policy::IdleTimeout => format!("timeout http-keep-alive {}ms", IDLE.as_millis()),
            _ => String::new(),
        };
        h.front.insert(front::haproxy(backend.port, &policy)).port
    } else if s.server == Server::Caddy {
        let idle = format!("{}ms", IDLE.as_millis());
        h.front
            .insert(front::caddy(
                s.status,
                (s.policy == Policy::IdleTimeout).then_some(idle.as_str()),
                matches!(s.policy, Policy::CloseHeader(_)),
            ))
            .port
    } else {
        let (policy, status) = (s.policy, s.status);
        script_server(move |c, _| serve(policy, status, c)).0.port()
    }
}

/// `--cacert` for nginx's CA (not where the client must refuse it as unknown), and
/// `--cert`/`--key` where the situation gives a client certificate.
fn tls_args(s: &Situation, held: &Held) -> Vec<String> {
    let Some(n) = held.nginx.as_ref().filter(|_| s.tls != Tls::None) else {
        return Vec::new();
    };
    let mut args = Vec::new();
    if s.tls != Tls::UnknownCa {
        args.extend([
            "--cacert".into(),
            n.dir.join("ca.pem").display().to_string(),
        ]);
    }
    args.extend(mtls::client_args(s.tls, &n.dir));
    args
}

fn run(s: &Situation, cmd: Cmd) -> Run {
    let dead = free_port();
    let (port, held) = start_server(s, dead);
    let url = match (s.tls, s.path) {
        (Tls::None, Path::ConnectTo | Path::ConnectToDown) => format!("http://a.test:{port}/"),
        (Tls::None, _) => format!("http://127.0.0.1:{port}/"),
        _ => format!("https://localhost:{port}/"),
    };
    let mut args: Vec<String> = match cmd {
        Cmd::Bench => ["bench", &url, "-n", "12", "-c", "1", "--no-progress"]
            .map(String::from)
            .to_vec(),
        Cmd::Trace => ["trace", &url, "--count", "3"].map(String::from).to_vec(),
        Cmd::Doctor => [
            "doctor",
            &url,
            "--no-progress",
            "--max-idle",
            "1s",
            "--max-requests",
            "20",
        ]
        .map(String::from)
        .to_vec(),
        // Six rounds give each row its interval; one where every request waits for
        // --timeout.
        Cmd::Compare => {
            let rounds = if s.policy == Policy::Stall { "1" } else { "6" };
            [
                "compare",
                &url,
                "--rounds",
                rounds,
                "-n",
                "4",
                "-c",
                "1",
                "--no-progress",
            ]
            .map(String::from)
            .to_vec()
        }
    };
    args.push("--json".into());
    if s.policy == Policy::Stall {
        args.extend(["--timeout".into(), "0.3s".into()]);
    }
    if !matches!(cmd, Cmd::Doctor | Cmd::Compare) {
        args.extend(["-s".into(), s.strategy.into()]);
    }
    // tinyproxy, stopped when the run is done.
    let mut proxy = None;
    // A socket's file whose server is gone (removed with the directory).
    let gone = Dir::new(&format!("oracle-unix-{dead}"));
    match s.path {
        Path::ProxyDown => args.extend(["-x".into(), format!("http://127.0.0.1:{}", free_port())]),
        Path::ConnectTo => args.extend([
            "--connect-to".into(),
            format!("a.test:{port}:127.0.0.1:{port}"),
        ]),
        Path::ConnectToDown => args.extend([
            "--connect-to".into(),
            format!("a.test:{port}:127.0.0.1:{}", free_port()),
        ]),
        Path::UnixDown => {
            let path = gone.path("gone.sock");
            drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
            args.extend(["--unix-socket".into(), path]);
        }
        Path::RedirectDown | Path::RedirectUp => args.push("-L".into()),
        Path::UnixUp => {
            let n = held.nginx.as_ref().expect("nginx on a Unix socket");
            args.extend([
                "--unix-socket".into(),
                n.dir.join("ng.sock").display().to_string(),
            ]);
        }
        Path::ProxyUp | Path::SquidUp => {
            let p = if s.path == Path::ProxyUp {
                tinyproxy(false)
            } else {
                squid()
            };
            args.extend(["-x".into(), format!("http://127.0.0.1:{}", p.port)]);
            proxy = Some(p);
        }
        Path::Direct | Path::ServerDown => {}
    }
    args.extend(tls_args(s, &held));
    let mut c = Command::new(bin());
    let out = without_proxy_env(c.args(&args)).output().unwrap();
    drop(proxy);
    drop(held);
    Run {
        code: out.status.code(),
        json: serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A finding's code and the predicate its claim needs of the situation's truth.
#[derive(Clone, Copy)]
struct Predicate {
    code: &'static str,
    holds: fn(&Situation, &str) -> Result<(), String>,
}

fn need(ok: bool, why: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(why.to_string())
    }
}

/// Every code bench and trace can print, with what must be true for it. Codes that need
/// what no situation here has (TLS, a rate, a resource run out) have `never`: printed
/// here, they are false.
const PREDICATES: &[Predicate] = &[
    Predicate {
        code: "measured",
        holds: |s, _| need(s.reached(), "a run that reached no server measured nothing"),
    },
    Predicate {
        code: "attempts_failed",
        holds: |s, t| match s.path {
            Path::Direct if s.policy == Policy::Stall => need(
                t.contains("timeout_wait") && !t.contains("proxy"),
                "the attempts waited for an answer that never came",
            ),
            Path::Direct | Path::ConnectTo if !s.tls.verifies() => need(
                t.contains(" tls") && !t.contains("proxy"),
                "TLS to the origin failed",
            ),
            Path::Direct
            | Path::ConnectTo
            | Path::ProxyUp
            | Path::SquidUp
            | Path::UnixUp
            | Path::RedirectUp => Err("the server answered".into()),
            Path::ProxyDown => need(
                t.contains("to the proxy http://127.0.0.1:") && t.contains("was not reached"),
                "the counts are of the proxy's connects",
            ),
            Path::ServerDown | Path::ConnectToDown | Path::UnixDown | Path::RedirectDown => {
                need(!t.contains("proxy"), "no proxy was set")
            }
        },
    },
    Predicate {
        code: "leading_error",
        holds: |s, t| failed_at_its_hop(s, t),
    },
    Predicate {
        code: "no_success_status",
        holds: |s, t| {
            need(s.reached() && s.error_status(), "the server answered 2xx")?;
            mtls::status_cause(s, t)
        },
    },
    Predicate {
        code: "mostly_error_status",
        holds: |s, t| {
            need(s.reached() && s.error_status(), "the server answered 2xx")?;
            mtls::status_cause(s, t)
        },
    },
    Predicate {
        code: "not_reused_server_http10",
        holds: |s, t| {
            peer_ends(
                s,
                t,
                need(s.truth() == Policy::Http10, "the server answered HTTP/1.1"),
            )
        },
    },
    Predicate {
        code: "not_reused_server_close_header",
        holds: |s, t| {
            if matches!(s.path, Path::ProxyUp | Path::SquidUp) {
                return peer_ends(s, t, Ok(()));
            }
            need(
                s.truth() == Policy::CloseHeader(1),
                "the server did not send `Connection: close` on its first response",
            )?;
            need(
                t.contains("keep-alive is off"),
                "the sentence names the cause",
            )?;
            need(t.contains("Turn keep-alive on"), "and its fix")
        },
    },
    Predicate {
        code: "not_reused_server_close_delimited",
        holds: |s, t| {
            if matches!(s.path, Path::ProxyUp | Path::SquidUp) {
                return peer_ends(s, t, Ok(()));
            }
            need(
                s.truth() == Policy::CloseDelimited,
                "the server sent lengths",
            )?;
            need(
                t.contains("Content-Length or a chunked body"),
                "the fix is a length",
            )
        },
    },
    Predicate {
        code: "not_reused_server_max_requests",
        holds: |s, t| {
            if matches!(s.path, Path::ProxyUp | Path::SquidUp) {
                return peer_ends(s, t, Ok(()));
            }
            need(
                s.truth() == Policy::CloseHeader(3),
                "the server did not close after a number of requests",
            )?;
            need(
                t.contains("after 3 requests each"),
                "the sentence gives the number",
            )
        },
    },
    Predicate {
        code: "not_reused_server_silent_close",
        holds: |s, t| {
            peer_ends(
                s,
                t,
                need(
                    s.truth().silent().is_some(),
                    "the server said when it closed, or did not close",
                ),
            )
        },
    },
    Predicate {
        code: "server_idle_close",
        holds: |s, _| {
            need(
                s.truth().silent().is_some_and(|k| k > 1),
                "the server did not close reused connections without a word",
            )
        },
    },
    Predicate {
        code: "not_reused",
        holds: |s, t| {
            peer_ends(
                s,
                t,
                need(
                    s.persistent() && s.ends_after_first(),
                    "the server let connections persist",
                ),
            )
        },
    },
    Predicate {
        code: "through_proxy",
        holds: |s, _| {
            need(
                matches!(s.path, Path::ProxyDown | Path::ProxyUp | Path::SquidUp),
                "no proxy was set",
            )
        },
    },
    Predicate {
        code: "not_reused_server_idle_close",
        holds: never,
    },
    // TLS: the strategies' features, and doctor's TLS probes.
    Predicate {
        code: "early_data_never_accepted",
        holds: |s, t| {
            need(
                s.tls == Tls::V13 && (s.strategy == "close-0rtt"),
                "the server takes early data, or TLS 1.3 was not negotiated",
            )?;
            need(
                t.contains("ssl_early_data on"),
                "the fix is the server's setting",
            )
        },
    },
    Predicate {
        code: "early_data_needs_tls13",
        holds: |s, t| {
            need(s.tls == Tls::V12, "TLS 1.3 was negotiated")?;
            need(
                t.contains("TLS 1.2") && t.contains("TLSv1.3"),
                "the sentence says TLS 1.2, and that TLS 1.3 comes first",
            )
        },
    },
    Predicate {
        code: "one_connection_only",
        holds: never,
    },
    Predicate {
        code: "tls",
        holds: |s, t| {
            let v = match s.tls {
                Tls::V12 => "TLSv1.2",
                _ => "TLSv1.3",
            };
            need(s.reached() && t.contains(v), "the version negotiated")
        },
    },
    Predicate {
        code: "tls_resumption",
        holds: |s, _| {
            need(s.reached() && s.tls != Tls::None, "no TLS")?;
            need(s.tls != Tls::NoTickets, "the server resumes no session")
        },
    },
    Predicate {
        code: "early_data_not_offered",
        holds: |s, _| {
            need(
                matches!(s.tls, Tls::V13 | Tls::H2) || mtls::asks(s),
                "the server allows early data, or speaks TLS 1.2",
            )
        },
    },
    Predicate {
        code: "early_data_accepted",
        holds: |s, _| {
            need(
                s.tls == Tls::V13Early,
                "the server does not take early data",
            )
        },
    },
    Predicate {
        code: "h2_not_offered",
        holds: |s, _| {
            need(s.reached() && s.tls != Tls::None, "no TLS (ALPN)")?;
            need(s.tls != Tls::H2, "the server offers h2")
        },
    },
    // HTTP/2, where nginx offers it (its defaults: 128 streams, 1000 requests, 75 s).
    Predicate {
        code: "h2_settings",
        holds: |s, t| {
            need(s.tls == Tls::H2, "no HTTP/2")?;
            need(
                t.contains("max concurrent streams 128"),
                "nginx's SETTINGS said",
            )
        },
    },
    Predicate {
        code: "h2_concurrency",
        holds: |s, t| {
            need(s.tls == Tls::H2, "no HTTP/2")?;
            need(
                t.contains("100 answered, 0 refused"),
                "nginx takes 128 at once",
            )
        },
    },
    Predicate {
        code: "h2_few_streams",
        holds: never,
    },
    Predicate {
        code: "h2_streams_refused",
        holds: never,
    },
    Predicate {
        code: "h2_max_requests_low",
        holds: never,
    },
    Predicate {
        code: "h2_idle_timeout_short",
        holds: never,
    },
    Predicate {
        code: "h2_not_spoken",
        holds: never,
    },
    Predicate {
        code: "h2_probes_failed",
        holds: never,
    },
    Predicate {
        code: "h3_not_offered",
        holds: |s, _| need(s.reached() && s.tls != Tls::None, "no TLS"),
    },
    Predicate {
        code: "kx_groups",
        holds: |s, t| {
            need(s.reached() && s.tls != Tls::None, "no TLS")?;
            need(
                s.tls != Tls::V12 || t.contains("TLS 1.2:"),
                "under TLS 1.2 a refused group can be the certificate's: said",
            )
        },
    },
    Predicate {
        code: "kx_preference",
        holds: |s, t| {
            need(s.reached() && s.tls != Tls::None, "no TLS")?;
            need(
                s.tls != Tls::V12 || !t.contains("client's share"),
                "TLS 1.2 has no key shares",
            )
        },
    },
    // doctor: its probes, and the policy they add up to.
    Predicate {
        code: "policy",
        holds: policy_says,
    },
    Predicate {
        code: "error_status",
        holds: |s, t| {
            need(s.reached() && s.error_status(), "the server answered 2xx")?;
            mtls::status_cause(s, t)
        },
    },
    Predicate {
        code: "client_certificate",
        holds: mtls::finding,
    },
    Predicate {
        code: "server_says",
        holds: |s, t| {
            let name = match s.server {
                Server::Nginx | Server::HaproxyNginx => "nginx",
                Server::Apache => "Apache",
                Server::Caddy => "Caddy",
                Server::Scripted => return Err("no Server header".into()),
            };
            need(t.contains(name), "the Server header names another server")
        },
    },
    Predicate {
        code: "http11_kept",
        holds: |s, _| need(keeps_after_first(s), "the server ended each connection"),
    },
    Predicate {
        code: "http11_closed",
        holds: |s, t| {
            need(
                s.ends_after_first() && s.truth() != Policy::CloseDelimited,
                "the server kept connections, or the framing ended them",
            )?;
            // The sentence says how the server ended it.
            let said = match s.truth() {
                Policy::SilentClose(_) | Policy::ResetClose(_) => {
                    "closes without `Connection: close`"
                }
                Policy::Http10 => "it answers HTTP/1.0",
                _ => "Connection: close)",
            };
            need(t.contains(said), said)
        },
    },
    Predicate {
        code: "keep_alive_off",
        holds: |s, t| {
            need(
                s.ends_after_first() && s.truth() != Policy::CloseDelimited,
                "the server kept connections, or the framing ended them",
            )?;
            fix_names_the_closer(s, t)
        },
    },
    Predicate {
        code: "http11_close_delimited",
        holds: |s, _| {
            need(
                s.truth() == Policy::CloseDelimited,
                "the responses had a length",
            )
        },
    },
    Predicate {
        code: "close_delimited",
        holds: |s, t| {
            need(
                s.truth() == Policy::CloseDelimited,
                "the responses had a length",
            )?;
            need(
                t.contains("Content-Length or a chunked body"),
                "the fix is a length",
            )
        },
    },
    Predicate {
        code: "http10_kept",
        holds: |s, _| {
            // nginx and Apache close HTTP/1.0 without keep-alive; the scripted server
            // does not look at the version.
            need(
                s.peer_scripted() && keeps_after_first(s),
                "the server closed HTTP/1.0 connections",
            )
        },
    },
    Predicate {
        code: "http10_closed",
        holds: |s, _| {
            need(
                !s.peer_scripted() || !keeps_after_first(s),
                "the server kept HTTP/1.0 connections",
            )
        },
    },
    // Apache announces its idle timeout in `Keep-Alive: timeout=N`, in whole seconds (its
    // 500 ms as 0); nginx and the scripted server announce none.
    Predicate {
        code: "keep_alive_header_matches",
        holds: |s, t| {
            need(
                s.server == Server::Apache && s.truth() == Policy::IdleTimeout,
                "no idle timeout within the probe's --max-idle 1s, or no Keep-Alive header",
            )?;
            need(
                t.contains("whole seconds"),
                "the header's resolution is said",
            )
        },
    },
    Predicate {
        code: "keep_alive_header_not_contradicted",
        holds: |s, _| {
            need(
                s.server == Server::Apache && s.truth() != Policy::IdleTimeout,
                "the idle timeout was met, or no Keep-Alive header",
            )
        },
    },
    Predicate {
        code: "keep_alive_header_mismatch",
        holds: never,
    },
    Predicate {
        code: "http10_keep_alive_honoured",
        holds: |s, _| need(keeps_after_first(s), "the server ended each connection"),
    },
    Predicate {
        code: "http10_keep_alive_ignored",
        holds: |s, _| need(s.ends_after_first(), "the server kept connections"),
    },
    Predicate {
        code: "max_requests",
        holds: |s, t| {
            let k = limit(s).ok_or("the server has no limit")?;
            need(
                t.contains(&format!("after {k} requests")),
                "the sentence gives the limit",
            )
        },
    },
    Predicate {
        code: "max_requests_low",
        holds: |s, _| need(limit(s).is_some_and(|k| k < 100), "no low limit"),
    },
    Predicate {
        code: "max_requests_not_met",
        holds: |s, t| {
            need(
                keeps_after_first(s) && limit(s).is_none(),
                "the server has a limit",
            )?;
            need(
                t.contains("at least 20"),
                "the sentence gives what was probed",
            )
        },
    },
    Predicate {
        code: "idle_timeout_not_met",
        holds: |s, _| {
            need(
                keeps_after_first(s) && s.truth() != Policy::IdleTimeout,
                "the server closed idle connections within --max-idle",
            )
        },
    },
    Predicate {
        code: "idle_timeout",
        holds: |s, t| {
            need(
                s.truth() == Policy::IdleTimeout,
                "the server has no idle timeout",
            )?;
            need(t.contains("0.5"), "the sentence's bounds hold its 0.5 s")
        },
    },
    Predicate {
        code: "idle_timeout_short",
        holds: |s, t| {
            need(
                s.truth() == Policy::IdleTimeout,
                "the server has no idle timeout",
            )?;
            fix_names_the_closer(s, t)
        },
    },
    Predicate {
        code: "not_reused_client_policy",
        holds: never,
    },
    Predicate {
        code: "not_reused_errors",
        holds: never,
    },
    Predicate {
        code: "not_reused_mixed",
        holds: never,
    },
    Predicate {
        code: "server_ignored_close",
        // The redirecting server and tinyproxy answer a request to close without
        // `Connection: close`; the scripted server confirms `Connection: close` but
        // does not look at the version (HTTP/1.0 without keep-alive); the real servers
        // confirm both.
        holds: |s, t| {
            // The situation's own server leaves a close unconfirmed.
            let own = s.server == Server::Scripted
                && s.strategy == "http10"
                && !matches!(s.truth(), Policy::CloseHeader(1) | Policy::Http10);
            let unconfirmed = match s.path {
                Path::RedirectDown | Path::ProxyUp | Path::RedirectUp => true,
                _ => own,
            };
            need(
                matches!(s.strategy, "close" | "http10") && unconfirmed,
                "the server confirmed each close asked for",
            )?;
            // After a redirect, the origins are named: the redirecting one, and the
            // situation's server where it did not confirm either.
            match s.path {
                Path::RedirectUp if own => need(
                    t.starts_with("The servers at http://127.0.0.1:"),
                    "both origins are named",
                ),
                Path::RedirectUp | Path::RedirectDown => need(
                    t.starts_with("The server at http://127.0.0.1:"),
                    "the redirecting origin is named",
                ),
                _ => Ok(()),
            }
        },
    },
    Predicate {
        code: "mostly_redirects",
        holds: never,
    },
    Predicate {
        code: "resumption_never_granted",
        holds: |s, t| {
            need(
                s.tls == Tls::NoTickets,
                "the server resumes sessions (nginx's tickets are on)",
            )?;
            need(
                t.contains("it issues no session tickets or keeps no session cache")
                    && t.contains("ssl_session_tickets on"),
                "the cause and the server's setting are said",
            )?;
            need(
                t.contains("0-RTT needs a resumed session") == (s.strategy == "close-0rtt"),
                "0-RTT is named where it was asked for, and only there",
            )
        },
    },
    Predicate {
        code: "syn_retransmitted",
        holds: never,
    },
    Predicate {
        code: "ports_exhausted",
        holds: never,
    },
    Predicate {
        code: "file_descriptors_exhausted",
        holds: never,
    },
    Predicate {
        code: "listen_backlog_overflow",
        holds: never,
    },
];

/// The server keeps a connection for a second request.
fn keeps_after_first(s: &Situation) -> bool {
    !s.ends_after_first()
}

/// The requests after which the server ends each connection, when it has a limit.
fn limit(s: &Situation) -> Option<u32> {
    match s.truth() {
        Policy::CloseHeader(k) | Policy::SilentClose(k) | Policy::ResetClose(k) if k > 1 => Some(k),
        _ => None,
    }
}

/// doctor's policy: an error status said as such (and no keep-alive claimed), else
/// keep-alive or a close after each response, and the limit it found.
fn policy_says(s: &Situation, t: &str) -> Result<(), String> {
    need(s.reached(), "nothing was reached")?;
    mtls::policy_part(s, t)?;
    if s.error_status() {
        return need(
            t.contains(&format!("answered {}", s.status)),
            "the error status is said, not a policy",
        );
    }
    if s.ends_after_first() {
        return need(
            t.contains("HTTP/1.1 closes after each response"),
            "the server ends each connection",
        );
    }
    need(
        t.contains("HTTP/1.1 keep-alive"),
        "the server keeps connections",
    )?;
    match limit(s) {
        Some(k) => need(
            t.contains(&format!("; {k} requests per connection")),
            "its limit",
        ),
        None => need(
            t.contains("at least 20 requests per connection"),
            "no limit met",
        ),
    }
}

/// Through a forward proxy in plain HTTP the peer is the proxy (tinyproxy ends every
/// client connection after its response): a claim of how "the server" ended the
/// connections must name the proxy, and say that the proxy may end them itself or pass
/// on the origin's way (the client cannot tell). Elsewhere, `origin`: the origin's own
/// policy decides.
fn peer_ends(s: &Situation, t: &str, origin: Result<(), String>) -> Result<(), String> {
    if s.path == Path::SquidUp {
        return Err("squid keeps its client connections, whatever the origin does".into());
    }
    if s.path != Path::ProxyUp {
        return origin;
    }
    need(
        t.contains("roxy http://127.0.0.1:") && t.contains("or passes on the origin's"),
        "through the proxy, the proxy is the peer, and whose way it is cannot be told",
    )
}

/// A fix for what HAProxy did in front of nginx (which keeps its connections, 75 s) must
/// name HAProxy's setting: nginx's `Server` header, passed on, does not say whose the
/// policy is.
fn fix_names_the_closer(s: &Situation, t: &str) -> Result<(), String> {
    if matches!(s.path, Path::ProxyUp | Path::SquidUp) {
        return need(
            t.contains("the proxy's own settings") && !t.contains("(nginx: "),
            "through a proxy, the fix is in the proxy's settings, not the origin's",
        );
    }
    need(
        s.server != Server::HaproxyNginx || t.contains("HAProxy"),
        "HAProxy in front ended the connections, and only nginx's setting is named",
    )
}

fn never(_: &Situation, _: &str) -> Result<(), String> {
    Err("nothing in these situations makes it true".into())
}

/// A failure's words name the hop that failed: the proxy when it was the proxy, never
/// when there was none.
fn failed_at_its_hop(s: &Situation, text: &str) -> Result<(), String> {
    if s.policy == Policy::Stall {
        return need(
            text.contains("127.0.0.1:")
                && text.contains("was sent the request, but no response came in time")
                && !text.contains("proxy")
                && !text.contains("nothing accepts"),
            "the server at the URL's address took the connection and never answered",
        );
    }
    match s.path {
        Path::Direct | Path::ConnectTo if !s.tls.verifies() => {
            let said = match s.tls {
                Tls::Expired => "expired",
                Tls::WrongName => "other.example",
                _ => "--cacert",
            };
            need(
                text.contains(said) && !text.contains("proxy") && !text.contains("nothing accepts"),
                "the certificate's fault is said, at the origin",
            )
        }
        Path::Direct
        | Path::ConnectTo
        | Path::ProxyUp
        | Path::SquidUp
        | Path::UnixUp
        | Path::RedirectUp => Err("the server answered".into()),
        Path::ConnectToDown => need(
            text.contains("where --connect-to sends a.test:")
                && !text.contains("connections at a.test"),
            "the address --connect-to gave refused: it is named, not the URL's name",
        ),
        Path::UnixDown => need(
            text.contains("at the Unix socket /") && !text.contains("connections at 127.0.0.1"),
            "the Unix socket refused: it is named, not a TCP address",
        ),
        Path::RedirectDown => need(
            text.contains("a redirect led to") && text.contains("the first origin answered"),
            "the first origin answered; the redirect's target refused",
        ),
        Path::ProxyDown => need(
            text.contains("the proxy http://127.0.0.1:") && text.contains("was not reached"),
            "the proxy refused: it must be named, and the origin said not reached",
        ),
        Path::ServerDown => need(
            !text.contains("proxy") && text.contains("nothing accepts connections"),
            "nothing listened at the URL's port, and no proxy was set",
        ),
    }
}

/// What must be said in a situation, whatever else is: the failure's line on stderr
/// (naming its hop), and the cause of no reuse where keep-alive was asked for.
fn required(s: &Situation, cmd: Cmd, r: &Run) -> Vec<String> {
    let mut errs = Vec::new();
    if !s.reached() {
        if r.code != Some(1) {
            errs.push(format!("exit {:?} for a run that reached nothing", r.code));
        }
        // bench and doctor say it on stderr; trace --json in its `error`.
        let said = match cmd {
            Cmd::Bench | Cmd::Doctor | Cmd::Compare => r.stderr.clone(),
            Cmd::Trace => r.json["error"].as_str().unwrap_or("").to_string(),
        };
        if let Err(e) = failed_at_its_hop(s, &said) {
            errs.push(format!("its failure: {e}: {}", said.trim()));
        }
        return errs;
    }
    let codes: Vec<&str> = r
        .findings(cmd)
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    // Answers that were all errors explain the run, and no reuse cause is said after
    // them (the connections carried error answers).
    let want: &[&str] = match (cmd, s.persistent() && !s.error_status(), s.truth()) {
        (_, false, _) => &[],
        // squid keeps its client connections whatever the origin does.
        _ if s.path == Path::SquidUp => &[],
        (Cmd::Doctor, _, Policy::CloseDelimited) => &["close_delimited"],
        (
            Cmd::Doctor,
            _,
            Policy::CloseHeader(3) | Policy::SilentClose(3) | Policy::ResetClose(3),
        ) => &["max_requests"],
        (Cmd::Doctor, _, Policy::IdleTimeout) => &["idle_timeout"],
        (Cmd::Doctor, _, Policy::KeepAlive) => &["http11_kept"],
        (Cmd::Doctor, _, _) => &["keep_alive_off"],
        (_, true, Policy::Http10) => &["not_reused_server_http10"],
        (_, true, Policy::CloseHeader(1)) => &["not_reused_server_close_header"],
        (Cmd::Bench, true, Policy::CloseDelimited) => &["not_reused_server_close_delimited"],
        (Cmd::Bench, true, Policy::SilentClose(1) | Policy::ResetClose(1)) => {
            &["not_reused_server_silent_close"]
        }
        // trace sends 3: a close after the third is met by no request.
        (Cmd::Trace, true, Policy::SilentClose(k) | Policy::ResetClose(k)) if k < 3 => {
            &["not_reused_server_silent_close"]
        }
        (Cmd::Bench, true, Policy::CloseHeader(3)) => &["not_reused_server_max_requests"],
        _ => &[],
    };
    // A server that resumes no session, where resumption was asked for (doctor
    // always asks).
    let resumes = matches!(s.strategy, "close-resumed" | "close-0rtt") || cmd == Cmd::Doctor;
    let no_tickets: &[&str] = if s.tls == Tls::NoTickets && resumes {
        &["resumption_never_granted"]
    } else {
        &[]
    };
    let mtls = mtls::required(s, cmd == Cmd::Doctor);
    for w in want.iter().chain(no_tickets).chain(mtls) {
        if !codes.contains(w) {
            errs.push(format!("{w} not said (said {codes:?})"));
        }
    }
    let want_exit = if s.error_status() { 1 } else { 0 };
    // doctor's exit says whether it found a problem.
    if cmd != Cmd::Doctor && r.code != Some(want_exit) {
        errs.push(format!("exit {:?}, not {want_exit}", r.code));
    }
    errs
}

/// One finding (`prefix` before its code in what is said of it) against its code's
/// predicate in `table`: `None` where it holds.
fn check_finding(table: &[Predicate], s: &Situation, f: &Value, prefix: &str) -> Option<String> {
    let code = f["code"].as_str().unwrap_or("(none)");
    let text = f["text"].as_str().unwrap_or("");
    match table.iter().find(|p| p.code == code) {
        None => Some(format!("{prefix}{code}: no predicate (\"{text}\")")),
        Some(p) => (p.holds)(s, text)
            .err()
            .map(|e| format!("{prefix}{code}: false: {e} (\"{text}\")")),
    }
}

/// The false claims of one run: each finding whose predicate does not hold, and each
/// code without a predicate; then what was not said that must be.
fn judge(s: &Situation, cmd: Cmd, r: &Run, table: &[Predicate]) -> Vec<String> {
    let mut errs = Vec::new();
    for f in r.findings(cmd) {
        let code = f["code"].as_str().unwrap_or("(none)");
        let text = f["text"].as_str().unwrap_or("");
        errs.extend(check_finding(table, s, f, ""));
        // doctor through a proxy probed the proxy: its sentences say so, all but the
        // origin's `Server` header passed on.
        if cmd == Cmd::Doctor
            && matches!(s.path, Path::ProxyUp | Path::SquidUp)
            && code != "server_says"
            && text.to_ascii_lowercase().contains("the server")
        {
            errs.push(format!(
                "{code}: says the server, which was not probed (\"{text}\")"
            ));
        }
        // After a redirect, "the server" of a reuse cause is one of two origins: the
        // sentence says the counts are over both, with each one's connections.
        if s.path == Path::RedirectUp
            && code.starts_with("not_reused")
            && !text.contains("followed redirects across 2 origins (http://127.0.0.1:")
        {
            errs.push(format!("{code}: the origins are not named (\"{text}\")"));
        }
    }
    errs.extend(required(s, cmd, r));
    errs
}

/// Every `n`th situation from a fixed start (a seeded sample that covers each dimension),
/// every path other than the direct one (each is quick: most reach nothing), and each
/// server that asks for a client certificate, kept alive.
fn sample(all: &[Situation], n: usize, seed: usize) -> Vec<Situation> {
    all.iter()
        .enumerate()
        .filter(|(i, s)| {
            (i + seed) % n == 0
                || s.path != Path::Direct
                || (mtls::asks(s) && s.strategy == "keepalive")
        })
        .map(|(_, s)| *s)
        .collect()
}

/// `ORACLE_PICK=TEXT`: only the situations whose name contains TEXT (to look at a few
/// while working on them; `ORACLE_DUMP=1` prints each run's JSON too).
fn picked(chosen: Vec<Situation>) -> Vec<Situation> {
    match std::env::var("ORACLE_PICK") {
        Ok(pick) => chosen
            .into_iter()
            .filter(|s| s.name().contains(&pick))
            .collect(),
        Err(_) => chosen,
    }
}

#[test]
fn every_claim_holds_over_generated_situations() {
    let _machine = shared();
    let all = situations();
    let full = std::env::var("HANDSHAKE_ORACLE").is_ok_and(|v| v == "full");
    let chosen = picked(if full {
        all.clone()
    } else {
        sample(&all, 6, 1)
    });
    let mut table = String::new();
    let mut wrong = Vec::new();
    for s in &chosen {
        for cmd in [Cmd::Bench, Cmd::Trace, Cmd::Doctor] {
            if cmd == Cmd::Doctor && !s.persistent() {
                continue;
            }
            // Only bench follows redirects (compare's own oracle runs it too).
            if cmd != Cmd::Bench && matches!(s.path, Path::RedirectDown | Path::RedirectUp) {
                continue;
            }
            let r = run(s, cmd);
            if std::env::var("ORACLE_DUMP").is_ok() {
                println!("{} {cmd:?}: {}", s.name(), r.json);
            }
            let errs = judge(s, cmd, &r, PREDICATES);
            table.push_str(&table_row(&s.name(), cmd, &r, &errs));
            wrong.extend(
                errs.into_iter()
                    .map(|e| format!("{} {cmd:?}: {e}", s.name())),
            );
        }
    }
    print_and_check(&table, &wrong, chosen.len());
}

/// One row of the printed table: the situation, the command, the codes it printed,
/// and whether every claim held.
fn table_row(situation: &str, cmd: Cmd, r: &Run, errs: &[String]) -> String {
    let codes: Vec<&str> = r
        .findings(cmd)
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    let verdict = if errs.is_empty() { "true" } else { "FALSE" };
    format!(
        "| {situation} | {cmd:?} | {} | {verdict} |\n",
        codes.join(", ")
    )
}

/// Print the table of situation x command x codes x verdict, then fail on any false or
/// missing claim (or a sample too small to mean anything, unless picked by name).
fn print_and_check(table: &str, wrong: &[String], chosen: usize) {
    println!("| situation | command | codes | verdict |\n| --- | --- | --- | --- |\n{table}");
    assert!(
        wrong.is_empty(),
        "{} false or missing claims:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(
        chosen >= 10 || std::env::var("ORACLE_PICK").is_ok(),
        "a sample of {chosen}"
    );
}

/// An oracle can fail: `judge` finds a true run true with `table`, and false without
/// `code`'s predicate ("no predicate") or with `wrong` in its place ("false").
fn fails_without_or_wrong(
    table: &[Predicate],
    code: &str,
    wrong: fn(&Situation, &str) -> Result<(), String>,
    judge: impl Fn(&[Predicate]) -> Vec<String>,
) {
    assert_eq!(judge(table), Vec::<String>::new());
    let without: Vec<Predicate> = table.iter().filter(|p| p.code != code).copied().collect();
    let errs = judge(&without);
    assert!(
        errs.iter()
            .any(|e| e.starts_with(code) && e.contains("no predicate")),
        "{errs:?}"
    );
    let wrong: Vec<Predicate> = table
        .iter()
        .map(|p| Predicate {
            holds: if p.code == code { wrong } else { p.holds },
            ..*p
        })
        .collect();
    let errs = judge(&wrong);
    assert!(
        errs.iter()
            .any(|e| e.starts_with(code) && e.contains("false")),
        "{errs:?}"
    );
}

/// A true run to show an oracle can fail: the scripted server's `Connection: close` on
/// every response, keep-alive asked.
const CLOSING: Situation = Situation {
    server: Server::Scripted,
    tls: Tls::None,
    policy: Policy::CloseHeader(1),
    status: 200,
    path: Path::Direct,
    strategy: "keepalive",
};

/// The oracle can fail: a code left without a predicate, and a predicate that demands
/// the wrong truth, each make a true run's judgement fail.
#[test]
fn a_code_without_a_predicate_or_a_wrong_predicate_fails() {
    let _machine = shared();
    let s = CLOSING;
    let r = run(&s, Cmd::Bench);
    fails_without_or_wrong(
        PREDICATES,
        "not_reused_server_close_header",
        |s, _| need(s.truth() == Policy::Http10, "wrong on purpose"),
        |table| judge(&s, Cmd::Bench, &r, table),
    );
}

/// docs/findings.md lists every code the oracle knows, and the oracle knows every code
/// it lists: the page of preconditions cannot drift from the predicates.
#[test]
fn the_page_of_preconditions_lists_the_same_codes() {
    let _machine = shared();
    let page =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/findings.md")).unwrap();
    // bench, trace and doctor's table, then audit's (after its heading), watch's and
    // compare's.
    let (servers, rest) = page.split_once("\n## audit").expect("an audit section");
    let (audit, rest) = rest.split_once("\n## watch").expect("a watch section");
    let (watch, compare) = rest.split_once("\n## compare").expect("a compare section");
    let codes = |part: &str| -> Vec<String> {
        part.lines()
            .filter_map(|l| Some(l.strip_prefix("| `")?.split('`').next()?.to_string()))
            .collect()
    };
    let (servers, audit, watch, compare) =
        (codes(servers), codes(audit), codes(watch), codes(compare));
    let known: Vec<&str> = PREDICATES.iter().map(|p| p.code).collect();
    let known_audit: Vec<&str> = clients::AUDIT_PREDICATES.iter().map(|p| p.code).collect();
    let known_watch: Vec<&str> = watched::WATCH_PREDICATES.iter().map(|p| p.code).collect();
    let known_compare: Vec<&str> = compared::COMPARE_PREDICATES
        .iter()
        .map(|p| p.code)
        .collect();
    for (listed, known, part) in [
        (servers, known, "its first table"),
        (audit, known_audit, "## audit"),
        (watch, known_watch, "## watch"),
        (compare, known_compare, "## compare"),
    ] {
        for code in &known {
            assert!(
                listed.iter().any(|l| l == code),
                "{code} not in docs/findings.md ({part})"
            );
        }
        for code in &listed {
            assert!(
                known.contains(&code.as_str()),
                "docs/findings.md lists {code} ({part}), which the oracle has no predicate for"
            );
        }
    }
}

/// Every code `audit` prints holds over real clients whose use of connections is known
/// from how they are called, per program where two run at once; the table of client x
/// codes x verdict is printed.
#[test]
fn every_audit_claim_holds_over_generated_clients() {
    let _machine = shared();
    let go = Dir::new("oracle-go");
    clients::go_clients(&go.0);
    let go = go.0.to_str().unwrap();
    judge_clients(
        "audit",
        clients::situations(),
        |s| clients::run(s, go),
        clients::AUDIT_PREDICATES,
        clients::judge,
    );
}

/// Each client situation run by `run` and judged by `judge` over `predicates` (audit's
/// or watch's): the
/// table of client x codes x verdict printed, and every false or missing claim failing
/// the test.
fn judge_clients(
    tool: &str,
    chosen: impl IntoIterator<Item = clients::ClientSituation>,
    run: impl Fn(&clients::ClientSituation) -> (Option<i32>, Value),
    predicates: &[clients::AuditPredicate],
    judge: fn(
        &clients::ClientSituation,
        Option<i32>,
        &Value,
        &[clients::AuditPredicate],
    ) -> Vec<String>,
) {
    let mut table = String::new();
    let mut wrong = Vec::new();
    for s in chosen {
        let (code, v) = run(&s);
        let errs = judge(&s, code, &v, predicates);
        let mut codes: Vec<&str> = vec![v["headline"]["code"].as_str().unwrap_or("")];
        codes.extend(
            v["verdict"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|f| f["code"].as_str()),
        );
        let verdict = if errs.is_empty() { "true" } else { "FALSE" };
        table.push_str(&format!(
            "| {} | {tool} | {} | {verdict} |\n",
            s.name(),
            codes.join(", ")
        ));
        wrong.extend(
            errs.into_iter()
                .map(|e| format!("{} {tool}: {e}", s.name())),
        );
    }
    println!("| client | command | codes | verdict |\n| --- | --- | --- | --- |\n{table}");
    assert!(
        wrong.is_empty(),
        "{} false or missing claims:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The audit's oracle can fail too: without the predicate of `reused`, or with one that
/// demands the wrong truth, a true run's judgement fails.
#[test]
fn the_audit_oracle_fails_on_a_missing_or_wrong_predicate() {
    let _machine = shared();
    let s = clients::ClientSituation {
        client: clients::Client::CurlUrls,
        status: 200,
    };
    // curl: no Go client is run.
    let (code, v) = clients::run(&s, "/nonexistent");
    can_fail(&s, code, &v, clients::AUDIT_PREDICATES, clients::judge);
}

/// A client oracle (audit's or watch's, `judge` over `all`) can fail: the true run `v`
/// of `s` (curl reusing its connection) is judged true, and false without the predicate
/// of `reused`, or with one that demands the wrong truth.
fn can_fail(
    s: &clients::ClientSituation,
    code: Option<i32>,
    v: &Value,
    all: &[clients::AuditPredicate],
    judge: fn(
        &clients::ClientSituation,
        Option<i32>,
        &Value,
        &[clients::AuditPredicate],
    ) -> Vec<String>,
) {
    assert_eq!(judge(s, code, v, all), Vec::<String>::new());
    let without: Vec<clients::AuditPredicate> =
        all.iter().filter(|p| p.code != "reused").copied().collect();
    let errs = judge(s, code, v, &without);
    assert!(
        errs.iter().any(|e| e.starts_with("reused: no predicate")),
        "{errs:?}"
    );
    let wrong: Vec<clients::AuditPredicate> = all
        .iter()
        .map(|p| clients::AuditPredicate {
            holds: if p.code == "reused" {
                |_, _| Err("demanded the wrong truth".into())
            } else {
                p.holds
            },
            ..*p
        })
        .collect();
    let errs = judge(s, code, v, &wrong);
    assert!(
        errs.iter().any(|e| e.starts_with("reused: false")),
        "{errs:?}"
    );
}

/// Every code `watch` prints holds over the audit's real clients run under it against
/// nginx, per program where two run at once; the table of client x codes x verdict is
/// printed. CI runs the clients against 200 and two of them against 404;
/// `HANDSHAKE_ORACLE=full` runs every client against both.
#[test]
fn every_watch_claim_holds_over_generated_clients() {
    let _machine = shared();
    let Some(n) = watched::server() else {
        return;
    };
    let full = std::env::var("HANDSHAKE_ORACLE").is_ok_and(|v| v == "full");
    let go_dir = Dir::new("oracle-watch-go");
    clients::go_clients(&go_dir.0);
    let go = go_dir.0.to_str().unwrap();
    // Not the mutual-TLS clients: they need the audit's --client-ca.
    let chosen = clients::situations().into_iter().filter(|s| {
        s.certs().is_none()
            && (full
                || s.status == 200
                || matches!(
                    s.client,
                    clients::Client::CurlClose | clients::Client::CurlThenPythonGet
                ))
    });
    judge_clients(
        "watch",
        chosen,
        |s| watched::run(s, n.port, go),
        watched::WATCH_PREDICATES,
        watched::judge,
    );
    // The watch's oracle can fail: without the predicate of `reused`, or with one that
    // demands the wrong truth, a true run's judgement fails.
    let s = clients::ClientSituation {
        client: clients::Client::CurlUrls,
        status: 200,
    };
    let (code, v) = watched::run(&s, n.port, go);
    can_fail(&s, code, &v, watched::WATCH_PREDICATES, watched::judge);
}
