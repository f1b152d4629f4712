//! A new user's first hour with `audit`: the usual mistakes and situations, each set up in
//! a real nginx (its own access log the ground truth: one line per request with its
//! connection serial, the requests on that connection, its status, whether TLS resumed and
//! whether the request came in early data), run through the commands a user would try,
//! asserting the exit status, the headline's claim and each finding's evidence against
//! nginx's count. Every sentence printed must be true of what nginx saw.

use crate::common;
use crate::common::first_hour::{
    access_log, connections, ended, evidence, interrupt_after, nginx_http,
};
use crate::common::{bin, run};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// A client loop for audit and watch: curl, one request per process, against
/// `$HANDSHAKE_URL` (or `url`), until a signal ends it; its shell's PID in `pid_file`.
fn curl_loop(url: &str, pid_file: &std::path::Path) -> Vec<String> {
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "echo $$ > {}; while :; do curl -s -o /dev/null {url}; sleep 0.05; done",
            pid_file.display()
        ),
    ]
}

// Row 8 for audit and watch: Ctrl-C ends the client command they run (it gets the
// interrupt and a second to end), and the report of what was seen is printed, marked
// interrupted, exit 130; its requests are those nginx logged.
#[test]
fn ctrl_c_keeps_what_audit_and_watch_saw() {
    let _machine = crate::common::shared();
    let Some(n) = nginx_http("", "return 200 \"hi\\n\";") else {
        return;
    };
    let dir = common::Dir::new("ctrl-c-audit");
    let pid_file = std::path::PathBuf::from(dir.path("client.pid"));
    let mut cmd = Command::new(bin());
    cmd.args(["audit", "--json", "--upstream", &n.url(), "--"])
        .args(curl_loop("\"$HANDSHAKE_URL\"", &pid_file));
    let (code, out, err) = interrupt_after(cmd, Duration::from_millis(2000));
    assert_eq!(code, Some(130), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?} {err}"));
    assert_eq!(v["interrupted"]["code"], "interrupted", "{v}");
    assert!(ended(&pid_file), "the client was stopped");
    let logged = access_log(&n).len() as u64;
    let t = &v["total"];
    assert!(logged >= 3, "{logged}");
    assert_eq!(t["requests"], logged, "{t}");
    // curl in a new process each time: one connection per request.
    assert_eq!(t["connections"], logged, "{t}");
    // watch: the same loop straight to nginx.
    if !common::root("watch") {
        return;
    }
    let before = access_log(&n);
    let pid_file = std::path::PathBuf::from(dir.path("watched.pid"));
    let mut cmd = Command::new(bin());
    cmd.args(["watch", "--json", "--port", &n.ports[0].to_string(), "--"])
        .args(curl_loop(&n.url(), &pid_file));
    let (code, out, err) = interrupt_after(cmd, Duration::from_millis(2500));
    assert_eq!(code, Some(130), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?} {err}"));
    assert_eq!(v["interrupted"]["code"], "interrupted", "{v}");
    assert!(common::schema_violations("watch.schema.json", &v).is_empty());
    assert!(ended(&pid_file), "the watched command was stopped");
    let log = access_log(&n);
    let new = &log[before.len()..];
    let t = &v["total"];
    assert!(new.len() >= 3, "{}", new.len());
    assert_eq!(t["requests"], new.len() as u64, "{t}");
    assert_eq!(t["connections"], connections(new).len() as u64, "{t}");
    // In text, the mark comes first.
    let mut cmd = Command::new(bin());
    cmd.args(["audit", "-d", "30s"]);
    let (code, out, err) = interrupt_after(cmd, Duration::from_millis(800));
    assert_eq!(code, Some(130), "{err}");
    assert!(
        out.starts_with("Interrupted by SIGINT (Ctrl-C) after "),
        "{out}"
    );
}

// audit of a program that makes 5 one-shot calls (requests.get) and 5 on a Session: the
// headline says the five one-shot connections were not reused beside the one that was,
// instead of a mean of 1.7 per connection; nginx behind audit answered all ten.
#[test]
fn audit_does_not_hide_one_shot_connections_behind_a_mean() {
    let _machine = crate::common::shared();
    let Some(n) = nginx_http("", "return 200 \"hi\\n\";") else {
        return;
    };
    let prog = "import requests,sys\nu=sys.argv[1]\nfor _ in range(5): requests.get(u).content\ns=requests.Session()\nfor _ in range(5): s.get(u).content\n";
    let out = run(&[
        "audit",
        "--json",
        "--upstream",
        &n.url(),
        "--",
        "python3",
        "-c",
        prog,
        "{url}",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(access_log(&n).len(), 10);
    let t = &v["total"];
    assert_eq!(t["requests"], 10, "{t}");
    assert_eq!(t["connections"], 6, "{t}");
    assert_eq!(t["one_request_connections"], 5, "{t}");
    let h = v["headline"]["text"].as_str().unwrap();
    assert_eq!(v["headline"]["code"], "partly_reused");
    let e = evidence(&v["headline"], "total.one_request_connections");
    assert_eq!(
        (e["value"].as_f64(), e["of"].as_u64()),
        (Some(5.0), Some(6))
    );
    assert_eq!(evidence(&v["headline"], "total.requests")["value"], 10.0);
    assert_eq!(
        h,
        "10 requests over 6 connections: partly reused: 5 of 6 connections carried one request each (not reused); the other connection carried the other 5 (5.0 per connection)."
    );
}

/// `TcpExtListenOverflows` of this network namespace, as the test reads it itself.
// audit of a client whose requests the upstream (nginx) answers 404, and one whose
// requests get 200s: the first says most answers were errors, in its headline and first
// in its verdict, with nginx's count of 404s; its reuse verdict stands (audit keeps the
// client's connection whatever the status); the second says nothing of statuses.
#[test]
fn audit_says_when_most_answers_were_errors() {
    let _machine = crate::common::shared();
    let Some(n) = nginx_http("", "return 404; } location /ok { return 200 \"hi\\n\";") else {
        return;
    };
    let audit = |path: &str| -> Value {
        let out = run(&[
            "audit",
            "--json",
            "--upstream",
            &n.url(),
            "--",
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            &format!("{{url}}{path}"),
            &format!("{{url}}{path}"),
            &format!("{{url}}{path}"),
        ]);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)))
    };
    let v = audit("missing");
    let log = access_log(&n);
    assert_eq!(log.iter().filter(|l| l.status == 404).count(), 3, "{log:?}");
    let t = &v["total"];
    assert_eq!(t["status_codes"]["404"], 3, "{t}");
    let h = &v["headline"];
    assert_eq!(h["code"], "reused", "{h}");
    assert!(
        h["text"].as_str().unwrap().ends_with(
            "reused (3.0 requests per connection). Most answers were errors: 3 of 3 were 404 (Not Found), 3 were 4xx or 5xx in all."
        ),
        "{h}"
    );
    let first = &v["verdict"][0];
    assert_eq!(first["code"], "mostly_error_status", "{first}");
    let e = evidence(first, "total.status_codes.404");
    assert_eq!(
        (e["value"].as_f64(), e["of"].as_u64()),
        (Some(3.0), Some(3))
    );
    let codes: Vec<&str> = v["verdict"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"reused"), "{codes:?}");
    // 200s: nothing said of statuses.
    let v = audit("ok");
    assert_eq!(v["total"]["status_codes"]["200"], 3, "{}", v["total"]);
    assert_eq!(access_log(&n).len(), 6);
    assert!(!v.to_string().contains("mostly_error_status"), "{v}");
}
