//! A new user's first hour with `trace` (and what doctor and compare say beside it): the
//! usual mistakes and situations, each set up in a real nginx (its own access log the
//! ground truth: one line per request with its connection serial, the requests on that
//! connection, its status, whether TLS resumed and whether the request came in early data),
//! run through the commands a user would try, asserting the exit status, the headline's
//! claim and each finding's evidence against nginx's count. Every sentence printed must be
//! true of what nginx saw.

use crate::common;
use crate::common::first_hour::{
    access_log, connections, evidence, nginx_http, nginx_tls, SlowDns,
};
use crate::common::{bin, run, write_certs, Nginx};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

// Row 3 through trace, doctor and compare: each says what nginx said and fails; none
// goes on to keep-alive.
#[test]
fn plain_http_to_a_tls_port_through_trace_doctor_and_compare() {
    let _machine = crate::common::shared();
    let Some(n) = nginx_tls(|d| write_certs(d, &["localhost"]), "") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/", n.port);
    // trace: each response and what nginx said, and it fails too (exit 1; 0 with
    // --ok-status 4xx); nginx logged the two requests.
    let before = access_log(&n).len();
    let out = Command::new(bin())
        .args(["trace", &url, "--count", "2"])
        .env("COLUMNS", "400")
        .output()
        .unwrap();
    let (text, err) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{text}{err}");
    assert_eq!(access_log(&n).len() - before, 2);
    assert!(
        text.contains("Said        HTTP/1.1 400 Bad Request: \""),
        "{text}"
    );
    assert!(
        text.starts_with("Every response was an error (2 of 2 were 400: HTTP/1.1 400 Bad Request: \"400 The plain HTTP request was sent to HTTPS port"),
        "{text}"
    );
    assert!(
        err.contains("no response was a success: 2 of 2 were 400"),
        "{err}"
    );
    let out = run(&["trace", &url, "--ok-status", "4xx", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    let t: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The headline is the finding, with its count: nginx's one more request.
    let h = &t["headline"];
    assert_eq!(h["code"], "no_success_status", "{h}");
    assert_eq!(evidence(h, "steps.status.400")["value"], 1.0, "{h}");
    assert_eq!(evidence(h, "steps.status.400")["of"], 1, "{h}");
    assert_eq!(access_log(&n).len() - before, 3);
    assert!(
        h["text"]
            .as_str()
            .unwrap()
            .starts_with("Every response was an error (1 of 1 was 400"),
        "{h}"
    );
    assert_eq!(t["findings"][0]["code"], "no_success_status", "{t}");
    assert!(
        t["status_examples"]["400"]
            .as_str()
            .unwrap()
            .contains("plain HTTP request was sent to HTTPS port"),
        "{t}"
    );
    // doctor: the 400 and nginx's words, not "turn keep-alive on" (nginx closes after an
    // error whatever its keep-alive).
    let out = run(&["doctor", &url, "--json", "--no-progress"]);
    assert_eq!(out.status.code(), Some(1));
    let d: Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &d["problems"];
    assert_eq!(p.as_array().unwrap().len(), 1, "{p}");
    assert_eq!(p[0]["code"], "error_status", "{p}");
    assert_eq!(evidence(&p[0], "http11.status")["value"], 400.0);
    assert!(
        p[0]["text"]
            .as_str()
            .unwrap()
            .contains("plain HTTP request was sent to HTTPS port"),
        "{p}"
    );
    assert!(!d.to_string().contains("keep-alive on"), "{d}");
    assert!(
        d["policy"]["text"]
            .as_str()
            .unwrap()
            .contains("answered 400"),
        "{d}"
    );
    compare_ranks_no_row_of_errors(&url, &n);
}

/// compare against `url`, where every answer is a 400: each row is a run of errors, so
/// it fails, says so in the server's words, and ranks no row (text and JSON).
fn compare_ranks_no_row_of_errors(url: &str, n: &Nginx) {
    let args = [
        "compare",
        url,
        "--strategies",
        "keepalive,close",
        "-n",
        "4",
        "-c",
        "1",
        "--rounds",
        "2",
        "--no-progress",
    ];
    let out = run(&args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no response was a success"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("plain HTTP request was sent to HTTPS port"),
        "{text}"
    );
    assert!(
        text.contains("not ranked: every response an error"),
        "{text}"
    );
    assert!(!text.contains("is the cheapest"), "{text}");
    // The same in JSON: no row ranked, and the report is the schema's.
    let before = access_log(n).len();
    let out = run(&[&args[..], &["--json"]].concat());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(common::schema_violations("report.schema.json", &v).is_empty());
    // Each row's headline is its run of errors, with its count of 400s: together,
    // the requests nginx logged (2 rows, 2 rounds of 4).
    let logged = access_log(n).len() - before;
    assert_eq!(logged, 16);
    let heads = v["comparison"]["headline"].as_array().unwrap();
    assert_eq!(heads.len(), 2, "{heads:?}");
    let mut said = 0.0;
    for h in heads {
        assert_eq!(h["code"], "no_success_status", "{h}");
        said += evidence(h, "requests.status_codes.400")["value"]
            .as_f64()
            .unwrap();
    }
    assert_eq!(said, logged as f64);
    for r in v["comparison"]["rows"].as_array().unwrap() {
        assert_eq!(
            (r["no_success"].as_bool(), r["best"].as_bool()),
            (Some(true), Some(false)),
            "{r}"
        );
    }
}

// Row 1 through trace and compare: trace's first request waits for the slow lookup (the
// resolver's one lookup) and says so in its headline's evidence; the reused requests do
// not look up. compare's setup per new connection is a mean over its new connections
// (the lookup counted once), not the 50 ms of the one that waited.
#[test]
fn slow_dns_through_trace_and_compare() {
    let _machine = crate::common::shared();
    let Some(n) = nginx_http("", "return 200 \"hi\\n\";") else {
        return;
    };
    let dns = SlowDns::start(Duration::from_millis(50));
    let url = format!("http://slow.test:{}/", n.port);
    let server = format!("127.0.0.1:{}", dns.port);
    let out = run(&[
        "trace",
        &url,
        "--dns-servers",
        &server,
        "--count",
        "3",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let t: Value = serde_json::from_slice(&out.stdout).unwrap();
    let looked_up = dns.queries.load(std::sync::atomic::Ordering::Relaxed);
    assert!((1..=2).contains(&looked_up), "{looked_up} queries");
    let log = access_log(&n);
    assert_eq!((log.len(), connections(&log).len()), (3, 1));
    let steps = t["steps"].as_array().unwrap();
    assert!(steps[0]["dns_ms"].as_f64().unwrap() >= 50.0, "{t}");
    assert!(
        steps[1..]
            .iter()
            .all(|s| s["reused"] == true && s["dns_ms"].is_null()),
        "{t}"
    );
    let h = &t["headline"];
    assert_eq!(h["code"], "measured", "{h}");
    assert_eq!(evidence(h, "steps (new connection)")["value"], 1.0);
    let setup = evidence(h, "steps[0] setup")["value"].as_f64().unwrap();
    assert!(setup >= 50.0, "{h}");
    // compare: close opens 2 rounds x 20 connections; the lookup is cached after the
    // first.
    let before = access_log(&n).len();
    let out = run(&[
        "compare",
        &url,
        "--dns-servers",
        &server,
        "--strategies",
        "keepalive,close",
        "-n",
        "20",
        "-c",
        "1",
        "--rounds",
        "2",
        "--json",
        "--no-progress",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(access_log(&n).len() - before, 80);
    let close = v["comparison"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["strategy"] == "close")
        .unwrap();
    let s = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["strategy"] == "close")
        .unwrap();
    assert_eq!(s["connections"]["opened"], 40);
    let setup = close["setup_ms_per_new_connection"]["median"]
        .as_f64()
        .unwrap();
    assert!(setup < 10.0, "setup {setup} ms per new connection: {close}");
}
