//! The oracle for `watch`: the audit's real clients (curl, Python, Node, two programs at
//! once), whose use of connections is known from how they are called, run under
//! `handshake watch -- sh -c COMMAND` against nginx (keep-alive on, answering 200, or 404
//! at `/status/404`). Every code watch prints (its headline and its verdict) is checked
//! against a predicate over that truth, per program where there are several; the counts
//! it gives must be the client's own, and the cause of no reuse must be said. Its causes
//! come from the same model as audit's (`report::reuse`), read from the wire instead of
//! from a server's side.

use std::process::Command;

use serde_json::Value;

use super::clients::{counted, ends, judge_report, need, never, own_fix, ClientSituation, Ends};
use super::common::*;

/// A watch finding's code and the predicate its claim needs of the client's truth (the
/// audit's shape).
pub use super::clients::AuditPredicate as WatchPredicate;

pub const WATCH_PREDICATES: &[WatchPredicate] = &[
    WatchPredicate {
        code: "reused",
        holds: |s, t| {
            ends(s, Ends::Reused, "the client did not reuse its connection")?;
            counted(s, t)
        },
    },
    WatchPredicate {
        code: "not_reused_client_close_header",
        holds: |s, t| {
            ends(
                s,
                Ends::CloseHeader,
                "the client sent no `Connection: close`",
            )?;
            counted(s, t)
        },
    },
    WatchPredicate {
        code: "not_reused_client_http10",
        holds: |s, t| {
            ends(s, Ends::Http10, "the client spoke HTTP/1.1")?;
            counted(s, t)
        },
    },
    WatchPredicate {
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
    WatchPredicate {
        code: "one_request",
        holds: |s, t| {
            ends(s, Ends::One, "the client made more than one request")?;
            counted(s, t)
        },
    },
    WatchPredicate {
        code: "mostly_error_status",
        holds: |s, t| {
            need(
                s.status >= 400 && t.contains(&format!("were {}", s.status)),
                "nginx answered each request 200",
            )
        },
    },
    WatchPredicate {
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
    // nginx keeps every connection (keep-alive on, 75 s), the clients' own ways are
    // known, and no TLS or capture limit is in these situations.
    WatchPredicate {
        code: "not_reused",
        holds: never,
    },
    WatchPredicate {
        code: "not_reused_server_closed",
        holds: never,
    },
    WatchPredicate {
        code: "not_reused_server_idle_close",
        holds: never,
    },
    WatchPredicate {
        code: "not_reused_mixed",
        holds: never,
    },
    WatchPredicate {
        code: "no_request",
        holds: never,
    },
    WatchPredicate {
        code: "no_connection",
        holds: never,
    },
    WatchPredicate {
        code: "unanswered_requests",
        holds: never,
    },
    WatchPredicate {
        code: "tls_never_resumed",
        holds: never,
    },
    WatchPredicate {
        code: "capture_drops",
        holds: never,
    },
    WatchPredicate {
        code: "attribution_lost",
        holds: never,
    },
];

/// nginx for the watched clients: 200 at `/`, 404 at `/status/404`, keep-alive on.
pub fn server() -> Option<Nginx> {
    Nginx::start_servers("", 1, |ports, _| {
        format!(
            "server {{ listen 127.0.0.1:{}; location / {{ return 200 \"hello\\n\"; }} location /status/404 {{ return 404 \"no\\n\"; }} }}",
            ports[0]
        )
    })
}

/// `handshake watch --json -- sh -c COMMAND` against `port`, the Go clients in `go`:
/// (exit code, report).
pub fn run(s: &ClientSituation, port: u16, go: &str) -> (Option<i32>, Value) {
    let path = if s.status == 200 {
        String::new()
    } else {
        format!("status/{}", s.status)
    };
    let command = s
        .command()
        .replace("{url}", &format!("http://127.0.0.1:{port}/"))
        .replace("{path}", &path)
        .replace("{go}", go);
    let mut c = Command::new(bin());
    let out = without_proxy_env(c.args(["watch", "--json", "--", "sh", "-c", &command]))
        .output()
        .unwrap();
    (
        out.status.code(),
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null),
    )
}

/// The false claims of one watch: each code without a predicate or whose predicate does
/// not hold (per program where there are several: "curl (from 127.0.0.1): …"); then the
/// counts and the cause that must be said, as for audit.
pub fn judge(
    s: &ClientSituation,
    code: Option<i32>,
    v: &Value,
    table: &[WatchPredicate],
) -> Vec<String> {
    judge_report(s, code, v, table, "watch", " (from ")
}
