//! `--fail-if EXPR`: a run fails (exit 1) when a threshold on its figures holds, with a
//! line naming each one and its value; a malformed expression is a usage error (exit 2)
//! before anything runs. The figures checked are the report's, and the report's are the
//! server's: close against keep-alive on the embedded server, curl with and without
//! `Connection: close` under audit.

use crate::common::*;
use handshake::api::server::ServerConfig;
use serde_json::Value;

/// `handshake ARGS`: its exit status, its JSON report and its stderr.
fn checked(args: &[&str]) -> (Option<i32>, Value, String) {
    let out = run(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("{args:?}: {err}{}", String::from_utf8_lossy(&out.stdout)));
    (out.status.code(), v, err)
}

fn results(v: &Value) -> &Vec<Value> {
    v["thresholds"]
        .as_array()
        .expect("thresholds in the report")
}

#[test]
fn bench_fails_when_connections_are_not_reused() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let (code, v, err) = checked(&[
        "bench",
        &url,
        "-s",
        "close",
        "-n",
        "40",
        "-c",
        "2",
        "--json",
        "--no-progress",
        "--fail-if",
        "reuse_ratio<0.9",
        "--fail-if",
        "connections>10",
        "--fail-if",
        "error_rate>1%",
    ]);
    assert_eq!(code, Some(1), "{err}");
    let s = srv.snapshot();
    // The figures checked are the server's: 40 connections for 40 requests.
    assert_eq!((s.connections_accepted, s.requests), (40, 40));
    let r = results(&v);
    assert_eq!(r.len(), 3);
    assert_eq!(r[0]["figure"], "connections.reuse_ratio");
    assert_eq!(r[0]["value"].as_f64(), Some(0.0));
    assert_eq!(r[0]["failed"], true);
    assert_eq!(r[1]["value"].as_f64(), Some(s.connections_accepted as f64));
    assert_eq!(r[1]["failed"], true);
    assert_eq!(r[2]["value"].as_f64(), Some(0.0));
    assert_eq!(r[2]["failed"], false);
    assert!(
        err.contains(
            "fail-if reuse_ratio<0.9: failed for close: connections.reuse_ratio is 0 (0%)"
        ),
        "{err}"
    );
    assert!(
        err.contains("fail-if connections>10: failed for close: connections.opened is 40"),
        "{err}"
    );
    assert!(
        err.contains("fail-if: 2 of 3 checks failed (3 expressions)"),
        "{err}"
    );
    srv.stop();

    // Keep-alive: 2 connections for 40 requests, reuse 0.95: every threshold passes.
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let (code, v, err) = checked(&[
        "bench",
        &url,
        "-n",
        "40",
        "-c",
        "2",
        "--json",
        "--no-progress",
        "--fail-if",
        "reuse_ratio<0.9",
        "--fail-if",
        "connections>10",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let s = srv.snapshot();
    let r = results(&v);
    assert_eq!(r[1]["value"].as_f64(), Some(s.connections_accepted as f64));
    let reuse = 1.0 - s.connections_accepted as f64 / s.requests as f64;
    assert!(
        (r[0]["value"].as_f64().unwrap() - reuse).abs() < 1e-9,
        "{r:?}"
    );
    assert!(err.contains("fail-if: 0 of 2 checks failed"), "{err}");
    srv.stop();
}

#[test]
fn bench_fails_when_every_request_fails() {
    let _machine = shared();
    // A port nothing listens on: every request is an error. The run measured nothing, so
    // it has failed (exit 1) with or without --fail-if; the thresholds are still checked.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/");
    let args = [
        "bench",
        &url,
        "-n",
        "5",
        "-c",
        "1",
        "--json",
        "--no-progress",
    ];
    let (code, _, err) = checked(&args);
    assert_eq!(code, Some(1));
    assert!(err.contains("no request succeeded"), "{err}");
    let mut with = args.to_vec();
    with.extend(["--fail-if", "error_rate>1%", "--fail-if", "p99>10s"]);
    let (code, v, err) = checked(&with);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(results(&v)[0]["value"].as_f64(), Some(1.0));
    assert!(err.contains("error_rate is 1 (100%)"), "{err}");
}

#[test]
fn compare_checks_every_strategy_or_the_ones_named() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let base = [
        "compare",
        url.as_str(),
        "--strategies",
        "close,keepalive",
        "-n",
        "30",
        "-c",
        "2",
        "--rounds",
        "2",
        "--json",
        "--no-progress",
    ];
    let with = |exprs: &[&str]| {
        let mut a = base.to_vec();
        for e in exprs {
            a.extend(["--fail-if", e]);
        }
        checked(&a)
    };
    // On every strategy: close does not reuse, so the run fails, naming close only.
    let (code, v, err) = with(&["reuse_ratio<0.5"]);
    assert_eq!(code, Some(1), "{err}");
    let r = results(&v);
    assert_eq!(r.len(), 2);
    let by = |name: &str| r.iter().find(|x| x["scenario"] == name).unwrap();
    assert_eq!(by("close")["failed"], true);
    assert_eq!(by("keepalive")["failed"], false);
    assert!(
        err.contains("failed for close:") && !err.contains("failed for keepalive"),
        "{err}"
    );
    // Named: keep-alive reuses, and is not 2 times slower than the best.
    let (code, v, err) = with(&["keepalive:reuse_ratio<0.5", "keepalive:times_slower>2"]);
    assert_eq!(code, Some(0), "{err}");
    let r = results(&v);
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(|x| x["scenario"] == "keepalive"));
    let row = v["comparison"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "keepalive")
        .unwrap()
        .clone();
    assert_eq!(r[1]["value"], row["times_slower"]);
    // Every connection the rows opened, the server accepted.
    let opened = opened_in_all(&v);
    assert!(opened <= srv.snapshot().connections_accepted);
    // A strategy not in the comparison: a usage error naming the rows.
    let (code, _, err) = {
        let mut a = base.to_vec();
        a.extend(["--fail-if", "h2:p99>1s"]);
        let out = run(&a);
        (
            out.status.code(),
            (),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("names no row") && err.contains("keepalive"),
        "{err}"
    );
    srv.stop();
}

#[test]
fn audit_fails_when_a_client_stops_reusing_connections() {
    let _machine = shared();
    if !have("curl") {
        panic!("curl is needed (Debian package curl; .ci/run installs it)");
    }
    let curl = |close: bool| {
        let mut c = vec![
            "audit",
            "--json",
            "--fail-if",
            "reuse_ratio<0.5",
            "--",
            "curl",
            "-s",
        ];
        if close {
            c.extend(["-H", "Connection: close"]);
        }
        c.extend([
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "{url}a",
            "{url}b",
            "{url}c",
            "-w",
            "%{num_connects}\n",
        ]);
        let out = run(&c);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        // curl's own count of the connections it opened (its -w output went to stderr).
        let connects: u64 = String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter_map(|l| l.trim().parse::<u64>().ok())
            .sum();
        (out.status.code(), v, connects)
    };
    let (code, v, connects) = curl(false);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(connects, 1, "curl opened one connection");
    assert_eq!(u(&total(&v)["connections"]), connects);
    let r = results(&v);
    assert_eq!(r[0]["figure"], "total.reuse_ratio");
    assert!(
        (r[0]["value"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-9,
        "{r:?}"
    );
    assert!(r[0].get("scenario").is_none());

    let (code, v, connects) = curl(true);
    assert_eq!(code, Some(1), "{v}");
    assert_eq!(connects, 3, "curl opened one connection per request");
    assert_eq!(u(&total(&v)["connections"]), connects);
    assert_eq!(results(&v)[0]["value"].as_f64(), Some(0.0));

    // The command's own failure wins over the thresholds'.
    let out = run(&[
        "audit",
        "--fail-if",
        "connections>0",
        "--",
        "sh",
        "-c",
        "curl -s -o /dev/null \"$HANDSHAKE_URL\"; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7));
}

#[test]
fn malformed_expressions_are_usage_errors_before_the_run() {
    let _machine = shared();
    for (cmd, expr, says) in [
        ("bench", "p99", "no comparison"),
        ("bench", "p99>fast", "cannot read the value 'fast'"),
        ("bench", "latency>1ms", "unknown figure 'latency'"),
        ("bench", "reuse_ratio<5ms", "a ratio takes %"),
        // Units are explicit: a bare ratio from 1 up, a bare time.
        ("bench", "reuse_ratio<90", "write 90% or 0.9"),
        ("bench", "error_rate>1", "write 1% or 0.01"),
        ("bench", "p99>200", "write 200ms or 200s"),
        // A path that cannot exist is found before the run.
        (
            "bench",
            "connections.nothing_here>0",
            "'nothing_here' is not in the report",
        ),
        ("bench", "requests.status_codes.ok>0", "cannot be a key"),
        ("bench", "keepalive:p99>1", "only compare"),
        ("compare", "connections>2%", "plain number"),
        ("audit", "p99>1ms", "not a figure of this report"),
    ] {
        // A URL nothing answers: the usage error must come before any request.
        let t = std::time::Instant::now();
        let out = match cmd {
            "audit" => run(&["audit", "--fail-if", expr, "--", "true"]),
            _ => run(&[cmd, "http://127.0.0.1:9/", "--fail-if", expr, "-n", "1"]),
        };
        assert_eq!(out.status.code(), Some(2), "{cmd} {expr}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--fail-if") && err.contains(says),
            "{cmd} {expr}: {err}"
        );
        assert!(t.elapsed().as_secs() < 5);
    }
    // A key of a map that did not occur is 0: a status that never came fails the check
    // (exit 1), it does not make the report "not have" it.
    let srv = start(ServerConfig::default());
    let url = format!("{}status/401", srv.http_url().unwrap());
    let (code, v, err) = checked(&[
        "bench",
        &url,
        "-n",
        "20",
        "-c",
        "2",
        "--json",
        "--no-progress",
        "--fail-if",
        "requests.status_codes.200<20",
        "--fail-if",
        "non_2xx>0",
        "--fail-if",
        "status_5xx>0",
    ]);
    assert_eq!(code, Some(1), "{err}");
    let r = results(&v);
    assert_eq!(r[0]["value"].as_f64(), Some(0.0));
    assert_eq!(r[0]["failed"], true);
    // non_2xx and status_4xx are the server's count of requests, all answered 401.
    assert_eq!(r[1]["value"].as_f64(), Some(srv.snapshot().requests as f64));
    assert_eq!(r[1]["failed"], true);
    assert_eq!(r[2]["value"].as_f64(), Some(0.0));
    assert_eq!(r[2]["failed"], false);
    srv.stop();
}
