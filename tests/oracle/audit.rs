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
}

/// Why a client's connections carried what they did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ends {
    Reused,
    CloseHeader,
    Http10,
    ClosedItself,
    One,
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
        }
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
    out
}

/// The Go clients of [`Client::GoRead`] and [`Client::GoUnread`], built into `dir` (as
/// `read` and `unread`) before any is run, so that a run measures the client and not the
/// compiler.
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
}

/// `handshake audit --json -- sh -c COMMAND`, the Go clients in `go`: (exit code,
/// report).
pub fn run(s: &ClientSituation, go: &str) -> (Option<i32>, Value) {
    // The audit's own answers: `/status/N` answers N. The URL ends in a slash.
    let path = if s.status == 200 {
        String::new()
    } else {
        format!("status/{}", s.status)
    };
    let command = s.command().replace("{path}", &path).replace("{go}", go);
    let mut c = Command::new(bin());
    let out = without_proxy_env(c.args(["audit", "--json", "--", "sh", "-c", &command]))
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
        holds: never,
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
        holds: never,
    },
    AuditPredicate {
        code: "through_proxy",
        holds: never,
    },
];

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
    };
    for w in [want]
        .into_iter()
        .chain((s.status >= 400).then_some("mostly_error_status"))
    {
        if !codes.contains(&w) {
            errs.push(format!("{w} not said (said {codes:?})"));
        }
    }
    errs
}
