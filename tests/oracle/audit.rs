//! The oracle for `audit`: real clients whose behaviour is known from how they are
//! called (curl with several URLs, with `Connection: close`, over HTTP/1.0, with one
//! URL; Python's `urllib`, `requests.get` and a `requests.Session`; Node's default agent
//! and `agent: false`; Go reading each body to EOF or closing it unread; Ruby's
//! `Net::HTTP.get` and one `Net::HTTP.start`; two programs at once), each against the
//! audit's own answers with a status (200, 404). Every code the audit prints (its headline and its verdict) is
//! checked against a predicate over that truth, per program where there are several.

use std::process::Command;

use serde_json::Value;

use super::common::*;

/// How a client uses its connections, known from how it is called.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Client {
    /// `curl URL URL URL`: one connection.
    CurlUrls,
    /// `curl -H 'Connection: close' URL URL URL`.
    CurlClose,
    /// `curl --http1.0 URL URL URL`: HTTP/1.0 without keep-alive.
    CurlHttp10,
    /// `curl URL`: one request.
    CurlOne,
    /// Three `urllib.request.urlopen` (it sends `Connection: close`).
    PythonUrllib,
    /// Three `requests.get`: a session per call, closed by the client after its answer.
    PythonGet,
    /// One `requests.Session` for three requests.
    PythonSession,
    /// Three `http.get` with Node's default agent (keep-alive since Node 19).
    NodeDefault,
    /// Three `http.get` with `agent: false` (it sends `Connection: close`).
    NodeAgentFalse,
    /// `curl URL URL URL`, then three `requests.get`: two programs.
    CurlThenPythonGet,
    /// One Go `http.Client`, each body read to EOF and closed: one connection.
    GoRead,
    /// One Go `http.Client`, each body closed unread: Go's transport ends the
    /// connection (a plain close, or a reset where response bytes were still unread in
    /// the socket).
    GoUnread,
    /// Three `Net::HTTP.get`: a connection per call, closed by the client after its
    /// answer, without `Connection: close`.
    RubyGet,
    /// Three requests inside one `Net::HTTP.start` block: one connection.
    RubyStart,
    /// Mutual TLS (`--tls --client-ca`): three curl processes with `--cert`, each a full
    /// handshake (curl keeps no session between processes).
    CurlCertEach,
    /// One `requests.Session` with `cert=`: one connection, one certificate.
    PythonSessionCert,
    /// Go with a certificate, a session cache and no keep-alive (`Connection: close`):
    /// the first handshake full, the two after it resumed.
    GoCertResumed,
    /// curl with three URLs and no certificate, `--client-cert optional`: served.
    CurlOptionalNone,
    /// Two curl processes without a certificate where one is required: refused.
    CurlNoCert,
    /// curl with a certificate from another CA: refused (unknown issuer).
    CurlStranger,
}

/// A mutual-TLS client's certificates, known from how it is called: full handshakes
/// with one presented, resumed ones, full ones without (served), and handshakes refused
/// because none was sent or because another CA signed it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Certs {
    pub presented: u64,
    pub resumed: u64,
    pub not_presented: u64,
    pub none_sent: u64,
    pub bad: u64,
    /// `--client-cert optional`.
    pub optional: bool,
}

/// Why a client's connections carried what they did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ends {
    Reused,
    CloseHeader,
    Http10,
    ClosedItself,
    One,
    /// Every handshake refused on the client's certificate: no request.
    Refused,
}

#[derive(Clone, Copy, Debug)]
pub struct ClientSituation {
    pub client: Client,
    pub status: u16,
}

impl ClientSituation {
    /// (requests, connections, why) of a single-program client.
    pub fn truth(&self) -> (u64, u64, Ends) {
        match self.client {
            Client::CurlUrls | Client::PythonSession | Client::NodeDefault => (3, 1, Ends::Reused),
            Client::CurlClose | Client::PythonUrllib | Client::NodeAgentFalse => {
                (3, 3, Ends::CloseHeader)
            }
            Client::CurlHttp10 => (3, 3, Ends::Http10),
            Client::CurlOne => (1, 1, Ends::One),
            Client::PythonGet => (3, 3, Ends::ClosedItself),
            Client::CurlThenPythonGet => (6, 4, Ends::Reused),
            Client::GoRead => (3, 1, Ends::Reused),
            Client::GoUnread => (3, 3, Ends::ClosedItself),
            Client::RubyGet => (3, 3, Ends::ClosedItself),
            Client::RubyStart => (3, 1, Ends::Reused),
            Client::CurlCertEach => (3, 3, Ends::ClosedItself),
            Client::PythonSessionCert | Client::CurlOptionalNone => (3, 1, Ends::Reused),
            Client::GoCertResumed => (3, 3, Ends::CloseHeader),
            Client::CurlNoCert => (0, 2, Ends::Refused),
            Client::CurlStranger => (0, 1, Ends::Refused),
        }
    }

    /// With `--client-ca`: the client's certificates.
    pub fn certs(&self) -> Option<Certs> {
        let c = Certs::default();
        Some(match self.client {
            Client::CurlCertEach => Certs { presented: 3, ..c },
            Client::PythonSessionCert => Certs { presented: 1, ..c },
            Client::GoCertResumed => Certs {
                presented: 1,
                resumed: 2,
                ..c
            },
            Client::CurlOptionalNone => Certs {
                not_presented: 1,
                optional: true,
                ..c
            },
            Client::CurlNoCert => Certs { none_sent: 2, ..c },
            Client::CurlStranger => Certs { bad: 1, ..c },
            _ => return None,
        })
    }

    /// The members of a two-program client, with their own situations.
    pub fn members(&self) -> Vec<(&'static str, ClientSituation)> {
        let as_ = |client| ClientSituation { client, ..*self };
        match self.client {
            Client::CurlThenPythonGet => vec![
                ("curl", as_(Client::CurlUrls)),
                ("python3", as_(Client::PythonGet)),
            ],
            _ => Vec::new(),
        }
    }

    pub fn name(&self) -> String {
        format!("{:?} {}", self.client, self.status)
    }

    /// The shell command, `{url}`, `{path}` and `{go}` (the directory of the Go clients
    /// [`go_clients`] built) in it.
    pub fn command(&self) -> String {
        let curl = "curl -s -o /dev/null";
        let py_get = "python3 -c 'import requests, sys\nfor i in range(3): requests.get(sys.argv[1])' {url}{path}";
        let node = |agent: &str| {
            format!(
                "node -e 'const http = require(\"http\"); (async () => {{ for (let i = 0; i < 3; i++) await new Promise((ok, bad) => http.get(process.argv[1], {{ {agent} }}, (r) => {{ r.resume(); r.on(\"end\", ok); }}).on(\"error\", bad)); }})().then(() => process.exit(0), () => process.exit(1));' {{url}}{{path}}"
            )
        };
        match self.client {
            Client::CurlUrls => format!("{curl} {{url}}{{path}} {{url}}{{path}} {{url}}{{path}}"),
            Client::CurlClose => format!(
                "{curl} -H 'Connection: close' {{url}}{{path}} {{url}}{{path}} {{url}}{{path}}"
            ),
            Client::CurlHttp10 => {
                format!("{curl} --http1.0 {{url}}{{path}} {{url}}{{path}} {{url}}{{path}}")
            }
            Client::CurlOne => format!("{curl} {{url}}{{path}}"),
            Client::PythonUrllib => "python3 -c 'import urllib.request, sys\nfor i in range(3):\n  try: urllib.request.urlopen(sys.argv[1]).read()\n  except Exception: pass' {url}{path}".into(),
            Client::PythonGet => py_get.into(),
            Client::PythonSession => "python3 -c 'import requests, sys\ns = requests.Session()\nfor i in range(3): s.get(sys.argv[1])' {url}{path}".into(),
            Client::NodeDefault => node(""),
            Client::NodeAgentFalse => node("agent: false"),
            Client::CurlThenPythonGet => format!(
                "{curl} {{url}}{{path}} {{url}}{{path}} {{url}}{{path}} && {py_get}"
            ),
            Client::GoRead => "{go}/read {url}{path}".into(),
            Client::GoUnread => "{go}/unread {url}{path}".into(),
            Client::RubyGet => "ruby -e 'require \"net/http\"; 3.times { Net::HTTP.get(URI(ARGV[0])) }' {url}{path}".into(),
            Client::RubyStart => "ruby -e 'require \"net/http\"; u = URI(ARGV[0]); Net::HTTP.start(u.host, u.port) { |h| 3.times { h.get(u.path) } }' {url}{path}".into(),
            Client::CurlCertEach => format!("for i in 1 2 3; do {curl} --cacert \"$CA\" --cert \"$CERT\" --key \"$KEY\" {{url}}{{path}}; done"),
            Client::PythonSessionCert => "python3 -c 'import requests, sys, os\ns = requests.Session()\nfor i in range(3): s.get(sys.argv[1], cert=(os.environ[\"CERT\"], os.environ[\"KEY\"]), verify=os.environ[\"CA\"])' {url}{path}".into(),
            Client::GoCertResumed => "{go}/mtls {url}{path} 3".into(),
            Client::CurlOptionalNone => format!("{curl} --cacert \"$CA\" {{url}}{{path}} {{url}}{{path}} {{url}}{{path}}"),
            Client::CurlNoCert => format!("{curl} --cacert \"$CA\" {{url}}{{path}}; {curl} --cacert \"$CA\" {{url}}{{path}}; true"),
            Client::CurlStranger => format!("{curl} --cacert \"$CA\" --cert \"$D/other/client.pem\" --key \"$D/other/client.key\" {{url}}{{path}}; true"),
        }
    }
}

pub fn situations() -> Vec<ClientSituation> {
    let mut out = Vec::new();
    for status in [200, 404] {
        for client in [
            Client::CurlUrls,
            Client::CurlClose,
            Client::CurlHttp10,
            Client::CurlOne,
            Client::PythonUrllib,
            Client::PythonGet,
            Client::PythonSession,
            Client::NodeDefault,
            Client::NodeAgentFalse,
            Client::CurlThenPythonGet,
            Client::GoRead,
            Client::GoUnread,
            Client::RubyGet,
            Client::RubyStart,
        ] {
            out.push(ClientSituation { client, status });
        }
    }
    for client in [
        Client::CurlCertEach,
        Client::PythonSessionCert,
        Client::GoCertResumed,
        Client::CurlOptionalNone,
        Client::CurlNoCert,
        Client::CurlStranger,
    ] {
        out.push(ClientSituation {
            client,
            status: 200,
        });
    }
    out
}

/// The Go clients of [`Client::GoRead`], [`Client::GoUnread`] and
/// [`Client::GoCertResumed`], built into `dir` (as `read`, `unread` and `mtls`) before any
/// is run, so that a run measures the client and not the compiler; and the client
/// certificates of the mutual-TLS clients.
pub fn go_clients(dir: &std::path::Path) {
    for (name, read) in [
        ("read", "io.Copy(io.Discard, resp.Body)\n\t\t"),
        ("unread", ""),
    ] {
        go_build(
            dir,
            name,
            &format!(
                "package main\n\nimport (\n\t\"io\"\n\t\"net/http\"\n\t\"os\"\n)\n\nfunc main() {{\n\tc := &http.Client{{}}\n\tfor i := 0; i < 3; i++ {{\n\t\tresp, err := c.Get(os.Args[1])\n\t\tif err != nil {{\n\t\t\tos.Exit(1)\n\t\t}}\n\t\t{read}resp.Body.Close()\n\t}}\n\t_ = io.Discard\n}}\n"
            ),
        );
    }
    go_build(dir, "mtls", crate::common::mtls::GO_MTLS_CLIENT);
    crate::common::mtls::write_client_cert_set(dir);
}

/// `handshake audit --json -- sh -c COMMAND`, the Go clients and the client
/// certificates in `go` (with `--tls --client-ca` for a mutual-TLS client, its
/// certificates in `$CA`, `$CERT`, `$KEY` and `$D`): (exit code, report).
pub fn run(s: &ClientSituation, go: &str) -> (Option<i32>, Value) {
    // The audit's own answers: `/status/N` answers N. The URL ends in a slash.
    let path = if s.status == 200 {
        String::new()
    } else {
        format!("status/{}", s.status)
    };
    let command = s.command().replace("{path}", &path).replace("{go}", go);
    let mut c = Command::new(bin());
    c.args(["audit", "--json"]);
    if let Some(certs) = s.certs() {
        let d = std::path::Path::new(go);
        let ca = d.join("audit_ca.pem").display().to_string();
        c.args(["--tls", "--cacert-out", &ca, "--client-ca"])
            .arg(d.join("client_ca.pem"));
        if certs.optional {
            c.args(["--client-cert", "optional"]);
        }
        c.env("CA", &ca)
            .env("CERT", d.join("client.pem"))
            .env("KEY", d.join("client.key"))
            .env("D", d);
    }
    let out = without_proxy_env(c.args(["--", "sh", "-c", &command]))
        .output()
        .unwrap();
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
    )
}

/// An audit finding's code and the predicate its claim needs of the client's truth.
#[derive(Clone, Copy)]
pub struct AuditPredicate {
    pub code: &'static str,
    pub holds: fn(&ClientSituation, &str) -> Result<(), String>,
}

pub fn need(ok: bool, why: &str) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(why.to_string())
    }
}

pub fn never(_: &ClientSituation, _: &str) -> Result<(), String> {
    Err("nothing in these situations makes it true".into())
}

/// The counts a sentence gives are the client's own: "3 requests over 1 connection".
pub fn counted(s: &ClientSituation, text: &str) -> Result<(), String> {
    let (r, c, _) = s.truth();
    let said = format!(
        "{r} request{} over {c} connection{}",
        if r == 1 { "" } else { "s" },
        if c == 1 { "" } else { "s" }
    );
    need(text.contains(&said), &format!("the client made {said}"))
}

/// Where a sentence gives the fix of a client that closed itself, it is the program's
/// own: Python's `Session`, Go's body read to the end.
pub fn own_fix(s: &ClientSituation, t: &str) -> Result<(), String> {
    // A headline gives no fix.
    if !t.contains("Reuse one client") {
        return Ok(());
    }
    match s.client {
        Client::PythonGet => need(
            t.contains("For Python: one `requests.Session()`"),
            "the fix names the program's own way (it is Python)",
        ),
        Client::GoUnread => need(
            t.contains("whose bodies are read to the end"),
            "the fix names Go's own way (read each body to EOF)",
        ),
        Client::RubyGet => need(
            t.contains("For Ruby: `Net::HTTP.start(host, port)"),
            "the fix names Ruby's own way (one Net::HTTP.start block)",
        ),
        _ => Ok(()),
    }
}

/// A client that closed its connections with response bytes unread: Go's, closing each
/// body unread (whether bytes were still in its socket is the scheduler's).
pub fn unread(s: &ClientSituation, _: &str) -> Result<(), String> {
    need(
        s.client == Client::GoUnread,
        "the client read every response to the end",
    )
}

pub fn ends(s: &ClientSituation, want: Ends, why: &str) -> Result<(), String> {
    need(s.members().is_empty() && s.truth().2 == want, why)
}

pub const AUDIT_PREDICATES: &[AuditPredicate] = &[
    AuditPredicate {
        code: "reused",
        holds: |s, t| {
            ends(s, Ends::Reused, "the client did not reuse its connection")?;
            counted(s, t)
        },
    },
    AuditPredicate {
        code: "not_reused",
        holds: |s, t| {
            let e = s.truth().2;
            need(
                s.members().is_empty()
                    && matches!(e, Ends::CloseHeader | Ends::Http10 | Ends::ClosedItself),
                "the client reused its connection, or made one request",
            )?;
            counted(s, t)
        },
    },
    AuditPredicate {
        code: "not_reused_client_close_header",
        holds: |s, _| {
            ends(
                s,
                Ends::CloseHeader,
                "the client sent no `Connection: close`",
            )
        },
    },
    AuditPredicate {
        code: "not_reused_client_http10",
        holds: |s, _| ends(s, Ends::Http10, "the client spoke HTTP/1.1"),
    },
    AuditPredicate {
        code: "not_reused_client_closed_itself",
        holds: |s, t| {
            ends(
                s,
                Ends::ClosedItself,
                "the client asked to close, or kept its connection",
            )?;
            own_fix(s, t)
        },
    },
    AuditPredicate {
        code: "one_request",
        holds: |s, _| ends(s, Ends::One, "the client made more than one request"),
    },
    AuditPredicate {
        code: "mostly_error_status",
        holds: |s, t| {
            need(
                s.status >= 400 && t.contains(&format!("were {}", s.status)),
                "the audit answered each request 200",
            )
        },
    },
    AuditPredicate {
        code: "by_program",
        holds: |s, t| {
            need(
                !s.members().is_empty()
                    && s.members()
                        .iter()
                        .all(|(p, _)| t.contains(&format!(" {p}: "))),
                "one program made the requests",
            )
        },
    },
    AuditPredicate {
        code: "answered_by_audit",
        holds: never,
    },
    AuditPredicate {
        code: "no_request",
        holds: |s, t| {
            need(s.truth().0 == 0, "the client made requests")?;
            need(
                s.truth().2 != Ends::Refused
                    || t.contains("the audit refused each handshake on the client's certificate"),
                "every handshake was refused on the certificate",
            )
        },
    },
    AuditPredicate {
        code: "partly_reused",
        holds: never,
    },
    AuditPredicate {
        code: "unused_connections",
        holds: never,
    },
    AuditPredicate {
        code: "client_reset_unread",
        holds: unread,
    },
    AuditPredicate {
        code: "not_reused_client_http10_close",
        holds: never,
    },
    AuditPredicate {
        code: "not_reused_proxy_close_header",
        holds: never,
    },
    AuditPredicate {
        code: "not_reused_client_reset_unread",
        holds: unread,
    },
    AuditPredicate {
        code: "not_reused_tunnels_closed_after_one",
        holds: never,
    },
    AuditPredicate {
        code: "not_reused_client_closed_tunnels",
        holds: never,
    },
    AuditPredicate {
        code: "not_reused_origin_closed_tunnels",
        holds: never,
    },
    AuditPredicate {
        code: "not_reused_server_closed",
        holds: never,
    },
    AuditPredicate {
        code: "not_reused_mixed",
        holds: never,
    },
    AuditPredicate {
        code: "tls_never_resumed",
        holds: |s, t| {
            let c = certs_of(s)?;
            need(
                c.resumed == 0 && c.presented + c.not_presented > 1,
                "a session was resumed, or one handshake was made",
            )?;
            need(
                t.contains(&format!(
                    "in all {} handshakes",
                    c.presented + c.not_presented
                )),
                "the client's handshakes",
            )
        },
    },
    AuditPredicate {
        code: "tls_resumed",
        holds: |s, t| {
            let c = certs_of(s)?;
            need(c.resumed > 0, "no session was resumed")?;
            need(
                t.contains(&format!(
                    "{} of {} handshakes resumed",
                    c.resumed,
                    c.resumed + c.presented + c.not_presented
                )),
                "the client's resumed handshakes",
            )
        },
    },
    AuditPredicate {
        code: "h2_not_multiplexed",
        holds: |s, t| {
            let (r, c, _) = s.truth();
            need(
                speaks_h2(s) && r == c && r > 1,
                "no HTTP/2, or a connection carried two requests",
            )?;
            need(
                t.starts_with(&format!("{r} streams over {c} HTTP/2 connections")),
                "the client's streams and connections",
            )
        },
    },
    AuditPredicate {
        code: "h2_multiplexed",
        holds: |s, t| {
            let (r, c, _) = s.truth();
            need(
                speaks_h2(s) && c == 1 && r > 1,
                "no HTTP/2, or a connection per request",
            )?;
            // curl sends its URLs one after another.
            need(
                t.starts_with(&format!(
                    "HTTP/2: {r} streams over 1 HTTP/2 connection, one at a time"
                )),
                "the client's streams, one at a time",
            )
        },
    },
    AuditPredicate {
        code: "h2_not_shared",
        holds: never,
    },
    AuditPredicate {
        code: "client_cert_not_sent",
        holds: |s, t| {
            let c = certs_of(s)?;
            need(c.none_sent > 0, "the client sent its certificate")?;
            need(
                t.starts_with(&format!("{} handshake", c.none_sent))
                    && t.contains("curl --cert/--key"),
                "the handshakes refused, and how to give a certificate",
            )
        },
    },
    AuditPredicate {
        code: "client_cert_refused",
        holds: |s, t| {
            let c = certs_of(s)?;
            need(c.bad > 0, "no certificate was refused")?;
            need(
                t.contains("unknown issuer (no CA in --client-ca signed it)"),
                "another CA signed it",
            )
        },
    },
    AuditPredicate {
        code: "client_cert_optional_none",
        holds: |s, t| {
            let c = certs_of(s)?;
            need(
                c.optional && c.not_presented > 0,
                "every handshake presented one",
            )?;
            need(
                t.starts_with(&format!(
                    "{} of {} full handshakes carried no client certificate",
                    c.not_presented,
                    c.not_presented + c.presented
                )),
                "the handshakes without one",
            )
        },
    },
    AuditPredicate {
        code: "client_cert_never_resumed",
        holds: |s, t| {
            let c = certs_of(s)?;
            need(
                c.presented > 1 && c.resumed == 0,
                "the client resumed, or presented once",
            )?;
            need(
                t.contains(&format!(
                    "in each of its {} full handshakes and resumed none",
                    c.presented
                )) && t.contains(&format!("({} signatures here)", c.presented)),
                "the client's full handshakes",
            )
        },
    },
    AuditPredicate {
        code: "client_cert_resumed",
        holds: |s, t| {
            let c = certs_of(s)?;
            need(c.resumed > 0, "the client resumed nothing")?;
            need(
                t.contains(&format!(
                    "in {} full handshakes and resumed {}",
                    c.presented, c.resumed
                )),
                "the client's full and resumed handshakes",
            )
        },
    },
    AuditPredicate {
        code: "through_proxy",
        holds: never,
    },
];

/// What a mutual-TLS client's certificates make the audit say.
fn cert_wants(s: &ClientSituation) -> Vec<&'static str> {
    let Some(c) = s.certs() else {
        return Vec::new();
    };
    let mut w = Vec::new();
    w.extend((c.none_sent > 0).then_some("client_cert_not_sent"));
    w.extend((c.bad > 0).then_some("client_cert_refused"));
    w.extend((c.not_presented > 0).then_some("client_cert_optional_none"));
    w.extend((c.presented > 1 && c.resumed == 0).then_some("client_cert_never_resumed"));
    w.extend((c.presented > 0 && c.resumed > 0).then_some("client_cert_resumed"));
    w
}

/// The client speaks HTTP/2 to the audit: curl over TLS (ALPN h2); Python's requests and
/// Go with its own TLS configuration speak HTTP/1.1.
fn speaks_h2(s: &ClientSituation) -> bool {
    matches!(
        s.client,
        Client::CurlCertEach | Client::CurlOptionalNone | Client::CurlNoCert | Client::CurlStranger
    )
}

/// The certificates of a mutual-TLS client, or why a sentence about them is false.
fn certs_of(s: &ClientSituation) -> Result<Certs, String> {
    s.certs()
        .ok_or_else(|| "the audit asked for no client certificate".into())
}

/// The member a finding of a two-program verdict is about (audit's "curl: …", watch's
/// "curl (from 127.0.0.1): …", after `name` comes `after_name`): its situation, or the
/// situation itself.
fn about<'a>(s: &ClientSituation, text: &'a str, after_name: &str) -> (ClientSituation, &'a str) {
    for (name, member) in s.members() {
        if let Some(rest) = text.strip_prefix(&format!("{name}{after_name}")) {
            return (member, rest);
        }
    }
    (*s, text)
}

/// The false claims of one audit: each code without a predicate or whose predicate does
/// not hold (per program where there are several); then the counts and the cause that
/// must be said.
pub fn judge(
    s: &ClientSituation,
    code: Option<i32>,
    v: &Value,
    table: &[AuditPredicate],
) -> Vec<String> {
    judge_report(s, code, v, table, "audit", ": ")
}

/// The false claims of one report of `tool` (audit or watch, whose reports share the
/// shape: a headline, a verdict, `total`) over a client; a member's findings begin with
/// its program's name and then `after_name`.
pub fn judge_report(
    s: &ClientSituation,
    code: Option<i32>,
    v: &Value,
    table: &[AuditPredicate],
    tool: &str,
    after_name: &str,
) -> Vec<String> {
    let mut errs = Vec::new();
    if code != Some(0) {
        errs.push(format!(
            "{tool} exited {code:?}: the client's own exit is 0"
        ));
    }
    let (r, c, e) = s.truth();
    let t = &v["total"];
    if (u(&t["requests"]), u(&t["connections"])) != (r, c) {
        errs.push(format!(
            "counts {} over {}, not {r} over {c}",
            t["requests"], t["connections"]
        ));
    }
    let mut findings: Vec<&Value> = vec![&v["headline"]];
    findings.extend(v["verdict"].as_array().into_iter().flatten());
    let mut codes = Vec::new();
    for (i, f) in findings.iter().enumerate() {
        let code = f["code"].as_str().unwrap_or("(none)");
        let text = f["text"].as_str().unwrap_or("");
        // The headline of two programs is theirs together; a verdict's line is one's.
        let (who, text) = if i == 0 {
            (*s, text)
        } else {
            about(s, text, after_name)
        };
        codes.push(code);
        match table.iter().find(|p| p.code == code) {
            None => errs.push(format!("{code}: no predicate (\"{text}\")")),
            Some(p) => {
                if let Err(why) = (p.holds)(&who, text) {
                    errs.push(format!("{code}: false: {why} (\"{text}\")"));
                }
            }
        }
    }
    let want = match (s.members().is_empty(), e) {
        (false, _) => "by_program",
        (true, Ends::Reused) => "reused",
        (true, Ends::CloseHeader) => "not_reused_client_close_header",
        (true, Ends::Http10) => "not_reused_client_http10",
        (true, Ends::ClosedItself) => "not_reused_client_closed_itself",
        (true, Ends::One) => "one_request",
        (true, Ends::Refused) => "no_request",
    };
    for w in [want]
        .into_iter()
        .chain((s.status >= 400).then_some("mostly_error_status"))
        .chain(cert_wants(s))
    {
        if !codes.contains(&w) {
            errs.push(format!("{w} not said (said {codes:?})"));
        }
    }
    errs
}
