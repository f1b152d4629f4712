//! HTTP/2: the `h2` strategy's connection and stream counts against the server's own
//! counts — the embedded server, and real nginx over cleartext (prior knowledge) and
//! TLS (ALPN) with its `stub_status` — and its close reasons: GOAWAY at a request limit
//! and at the idle timeout, the client's own limit, the end of the run.

use std::time::Duration;

use crate::common::*;
use serde_json::Value;

fn h2(s: &Value) -> &Value {
    &s["connections"]["h2"]
}

/// Requests and streams as the server counted them, before and after.
fn delta(srv: &RunningServer, before: server::StatsSnapshot) -> (u64, u64, u64) {
    let after = srv.snapshot();
    (
        after.connections_accepted - before.connections_accepted,
        after.h2_connections - before.h2_connections,
        after.h2_streams - before.h2_streams,
    )
}

fn run_h2(srv: &RunningServer, url: &str, args: &[&str]) -> Value {
    let before = srv.snapshot();
    let mut all = vec![url, "--strategy", "h2"];
    all.extend_from_slice(args);
    let rep = bench_json(&all);
    let s = scenario(&rep).clone();
    check_accounting(&s);
    assert_eq!(s["protocol"], "h2");
    let (accepted, h2_conns, streams) = delta(srv, before);
    let c = &s["connections"];
    assert_eq!(u(&c["opened"]), accepted, "opened = server's accepted: {c}");
    assert_eq!(accepted, h2_conns, "every connection spoke HTTP/2");
    assert_eq!(
        u(&s["requests"]["ok"]),
        streams,
        "ok requests = streams the server answered (refused ones are not)"
    );
    s
}

#[test]
fn workers_share_one_connection_by_default_over_h2c_and_tls() {
    let _g = serial();
    let srv = start(ServerConfig::default());
    let ca = TempFile::new("ca.pem", srv.ca_pem.as_bytes());
    let http = srv.http_url().unwrap();
    let https = srv.https_url().unwrap();
    for (url, extra) in [
        (http.as_str(), vec![]),
        (https.as_str(), vec!["--cacert", ca.s()]),
    ] {
        let mut args = vec!["-n", "800", "-c", "16"];
        args.extend(extra.iter().copied());
        let s = run_h2(&srv, url, &args);
        let c = &s["connections"];
        assert_eq!(u(&c["opened"]), 1, "{url}: one shared connection");
        assert_eq!(u(&c["reused_requests"]), 799);
        assert_eq!(close_reason(&s, "end_of_run"), 1);
        assert_eq!(u(&c["requests_per_connection"]["max"]), 800);
        // 16 workers, 128 streams allowed: all 16 in flight at once at some point.
        let peak = u(&h2(&s)["peak_concurrent_streams"]["max"]);
        assert!((2..=16).contains(&peak), "peak {peak}");
        assert_eq!(u(&h2(&s)["server_settings"]["max_concurrent_streams"]), 128);
        assert!(s["phases_ms"]["new"]["h2_setup"]["count"] == 1);
        if url.starts_with("https") {
            assert_eq!(u(&c["tls_handshakes"]["full"]), 1);
        }
    }
    srv.stop();
}

#[test]
fn connections_flag_and_requests_per_connection_set_the_count() {
    let _g = serial();
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let s = run_h2(&srv, &url, &["-n", "600", "-c", "16", "--connections", "4"]);
    assert_eq!(u(&s["connections"]["opened"]), 4);
    assert_eq!(u(&h2(&s)["connections_per_origin"]), 4);
    let s = run_h2(
        &srv,
        &url,
        &["-n", "60", "-c", "4", "--requests-per-connection", "1"],
    );
    assert_eq!(u(&s["connections"]["opened"]), 60);
    assert_eq!(close_reason(&s, "client_policy"), 60);
    assert_eq!(u(&s["connections"]["reused_requests"]), 0);
    let s = run_h2(
        &srv,
        &url,
        &["-n", "100", "-c", "3", "--requests-per-connection", "10"],
    );
    assert_eq!(u(&s["connections"]["opened"]), 10);
    assert_eq!(u(&s["connections"]["requests_per_connection"]["max"]), 10);
    srv.stop();
}

#[test]
fn server_request_limit_ends_connections_with_goaway() {
    let _g = serial();
    let srv = start(ServerConfig {
        max_requests_per_connection: Some(50),
        ..ServerConfig::default()
    });
    let url = srv.http_url().unwrap();
    let s = run_h2(&srv, &url, &["-n", "400", "-c", "8"]);
    assert_eq!(u(&s["requests"]["ok"]), 400, "every request answered");
    let opened = u(&s["connections"]["opened"]);
    assert!(
        opened >= 8,
        "a new connection after each 50 streams: {opened}"
    );
    let goaway = close_reason(&s, "server_goaway");
    assert!(goaway >= opened - 1, "{goaway} of {opened} ended by GOAWAY");
    assert_eq!(u(&h2(&s)["goaway_codes"]["no_error"]), goaway);
    assert!(u(&s["connections"]["requests_per_connection"]["max"]) <= 50);
    srv.stop();
}

#[test]
fn idle_timeout_goaway_is_counted_and_the_next_request_reconnects() {
    let _g = serial();
    let srv = start(ServerConfig {
        idle_timeout: Duration::from_millis(150),
        ..ServerConfig::default()
    });
    let url = srv.http_url().unwrap();
    // One request every 400 ms: each connection goes idle past the server's timeout.
    let s = run_h2(&srv, &url, &["-n", "4", "-c", "1", "--rate", "2.5"]);
    assert_eq!(u(&s["requests"]["ok"]), 4);
    assert_eq!(u(&s["connections"]["opened"]), 4);
    assert_eq!(close_reason(&s, "server_goaway"), 3, "{}", s["connections"]);
    assert_eq!(u(&h2(&s)["goaway_codes"]["no_error"]), 3);
    srv.stop();
}

/// nginx's own count of accepted connections and requests (`stub_status`, read over
/// HTTP/1.0 on its status port; the counts include this status request).
fn stub_status(port: u16) -> (u64, u64) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n").unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    let line = body
        .lines()
        .skip_while(|l| !l.contains("accepts"))
        .nth(1)
        .unwrap_or_else(|| panic!("stub_status: {body}"));
    let n: Vec<u64> = line
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (n[0], n[2])
}

#[test]
fn against_nginx_over_h2c_and_tls_counts_equal_stub_status() {
    let _g = serial();
    let Some(ng) = Nginx::start_servers("keepalive_requests 100;", 3, |p, dir| {
        write_certs(dir, &["127.0.0.1", "localhost"]);
        let d = dir.display();
        format!(
            "server {{ listen 127.0.0.1:{} http2; location / {{ return 200 \"hello\\n\"; }} }}\n\
             server {{ listen 127.0.0.1:{} ssl http2; ssl_certificate {d}/cert.pem; \
               ssl_certificate_key {d}/key.pem; location / {{ return 200 \"hello\\n\"; }} }}\n\
             server {{ listen 127.0.0.1:{}; location / {{ stub_status; }} }}",
            p[0], p[1], p[2]
        )
    }) else {
        return;
    };
    let status_port = ng.ports[2];
    let ca = ng.dir.join("ca.pem");
    let h2c = format!("http://127.0.0.1:{}/", ng.ports[0]);
    let tls = format!("https://127.0.0.1:{}/", ng.ports[1]);
    let mut counted = stub_status(status_port);
    let mut check = |url: &str, args: &[&str]| -> Value {
        let mut all = vec![url, "--strategy", "h2", "--cacert", ca.to_str().unwrap()];
        all.extend_from_slice(args);
        let s = scenario(&bench_json(&all)).clone();
        check_accounting(&s);
        // Less the status request itself: one connection, one request.
        let now = stub_status(status_port);
        let (conns, reqs) = (now.0 - counted.0 - 1, now.1 - counted.1 - 1);
        counted = now;
        assert_eq!(u(&s["connections"]["opened"]), conns, "{url} {args:?}");
        assert_eq!(
            u(&s["requests"]["ok"]),
            reqs,
            "{url} {args:?}: nginx's requests (streams above a GOAWAY's last id are not)"
        );
        s
    };
    for url in [h2c.as_str(), tls.as_str()] {
        // -c 16 over h2: one connection.
        let s = check(url, &["-n", "90", "-c", "16"]);
        assert_eq!(u(&s["connections"]["opened"]), 1, "{url}");
        assert_eq!(u(&s["requests"]["ok"]), 90);
        // --connections 3: three.
        let s = check(url, &["-n", "90", "-c", "16", "--connections", "3"]);
        assert_eq!(u(&s["connections"]["opened"]), 3, "{url}");
        // --requests-per-connection 1: one per request.
        let s = check(
            url,
            &["-n", "30", "-c", "4", "--requests-per-connection", "1"],
        );
        assert_eq!(u(&s["connections"]["opened"]), 30, "{url}");
        // keepalive_requests 100: GOAWAY after 100 streams, every request still ok.
        let s = check(url, &["-n", "450", "-c", "8"]);
        assert_eq!(u(&s["requests"]["ok"]), 450, "{url}");
        let goaway = close_reason(&s, "server_goaway");
        assert!(
            goaway >= 4,
            "{url}: {goaway} GOAWAYs in {}",
            s["connections"]
        );
        assert_eq!(u(&h2(&s)["goaway_codes"]["no_error"]), goaway);
        assert!(u(&s["connections"]["requests_per_connection"]["max"]) <= 100);
        if url.starts_with("https") {
            assert_eq!(
                u(&s["connections"]["tls_handshakes"]["full"])
                    + u(&s["connections"]["tls_handshakes"]["resumed"]),
                u(&s["connections"]["opened"])
            );
        }
    }
}

/// nginx over h2c with `keepalive_requests 5`: a GOAWAY (NO_ERROR) after every five
/// streams, while eight workers keep four streams in flight on each of two connections.
/// The streams above each GOAWAY's last stream id were never processed (RFC 9113 6.8):
/// they go again on a new connection, are counted as retried, and none fails; nothing is
/// called a reset (no RST was sent). nginx's own counts (stub_status) are the connections
/// and the requests.
#[test]
fn streams_above_a_goaway_are_sent_again_and_none_fails() {
    let _g = serial();
    let Some(ng) = Nginx::start_servers("keepalive_requests 5;", 2, |p, _| {
        format!(
            "server {{ listen 127.0.0.1:{} http2; location / {{ return 200 \"hello\\n\"; }} }}\n\
             server {{ listen 127.0.0.1:{}; location / {{ stub_status; }} }}",
            p[0], p[1]
        )
    }) else {
        return;
    };
    let before = stub_status(ng.ports[1]);
    let url = format!("http://127.0.0.1:{}/", ng.ports[0]);
    let load = ["-s", "h2", "-c", "8", "--connections", "2", "-n", "200"];
    let v = bench_json(&[&[url.as_str()][..], &load].concat());
    let s = scenario(&v);
    check_accounting(s);
    let after = stub_status(ng.ports[1]);
    let r = &s["requests"];
    assert_eq!(u(&r["ok"]), 200, "{r}");
    assert_eq!(u(&r["attempted"]), 200, "{r}");
    // Less the second status request: one connection, one request.
    assert_eq!(u(&s["connections"]["opened"]), after.0 - before.0 - 1);
    assert_eq!(
        u(&r["ok"]),
        after.1 - before.1 - 1,
        "nginx processed each once"
    );
    assert!(u(&r["retries"]["refused_stream"]) > 0, "{r}");
    // Each connection carried at most nginx's five, and ended by its GOAWAY but those
    // the run's end found open.
    let c = &s["connections"];
    assert!(u(&c["requests_per_connection"]["max"]) <= 5, "{c}");
    let goaway = close_reason(s, "server_goaway");
    assert_eq!(
        goaway + close_reason(s, "end_of_run"),
        u(&c["opened"]),
        "{c}"
    );
    assert_eq!(u(&h2(s)["goaway_codes"]["no_error"]), goaway);
    let out = run(&[&["bench", url.as_str()][..], &load, &["--no-progress"]].concat());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("200"), "{text}");
    assert!(!text.contains("reset"), "{text}");
}

/// A server that speaks only HTTP/2 (Node's http2 server, h2c by prior knowledge, which
/// counts its sessions and streams) answers an HTTP/1.1 request with its SETTINGS frame:
/// bench says the server speaks only HTTP/2 and names `--strategy h2`, with no word of a
/// restart; with `-s h2` every request is one of Node's streams.
#[test]
fn a_server_that_speaks_only_http2_is_said_to_with_the_strategy_that_works() {
    let _g = shared();
    use std::io::BufRead;
    assert!(have("node"), "node is needed for this test");
    let dir = Dir::new("h2-only");
    let stats = dir.path("stats.json");
    let mut srv = std::process::Command::new("node")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/h2c_server.js"))
        .arg(&stats)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(srv.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    struct Stop(std::process::Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            stop_child(&mut self.0, "-TERM");
        }
    }
    let _stop = Stop(srv);
    let port: u16 = line.trim().strip_prefix("PORT ").unwrap().parse().unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let out = run(&["bench", &url, "-n", "20", "-c", "2", "--no-progress"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        err.contains("an HTTP/2 frame")
            && err.contains(&format!(
                "the server at 127.0.0.1:{port} speaks only HTTP/2 here (h2c, by prior knowledge): run with --strategy h2"
            )),
        "{err}"
    );
    assert!(
        !text.contains("restart") && !text.contains("hard stop"),
        "{text}"
    );
    let counts = || {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        (u(&v["sessions"]), u(&v["streams"]))
    };
    let before = counts();
    let v = bench_json(&[&url, "-s", "h2", "-n", "20", "-c", "2"]);
    let s = scenario(&v);
    check_accounting(s);
    let after = counts();
    assert_eq!(u(&s["requests"]["ok"]), 20);
    assert_eq!(after.1 - before.1, 20, "Node's streams");
    assert_eq!(
        u(&s["connections"]["opened"]),
        after.0 - before.0,
        "Node's sessions"
    );
}

#[test]
fn a_server_without_h2_is_an_alpn_error_not_a_hang() {
    let _g = serial();
    let srv = start(ServerConfig {
        h2: false,
        ..ServerConfig::default()
    });
    let ca = TempFile::new("ca.pem", srv.ca_pem.as_bytes());
    let url = srv.https_url().unwrap();
    let rep = bench_json(&[&url, "-s", "h2", "-n", "3", "-c", "1", "--cacert", ca.s()]);
    let s = scenario(&rep);
    check_accounting(s);
    assert_eq!(u(&s["requests"]["ok"]), 0);
    assert_eq!(u(&s["requests"]["errors"]["tls"]), 3);
    assert_eq!(u(&s["requests"]["error_details"]["alpn_mismatch"]), 3);
    assert_eq!(
        u(&s["connections"]["opened"]),
        srv.snapshot().connections_accepted
    );
    srv.stop();
}

#[test]
fn connections_flag_needs_a_multiplexed_strategy() {
    let _machine = shared();
    let out = run(&[
        "bench",
        "http://127.0.0.1:9/",
        "-s",
        "keepalive",
        "--connections",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--connections"));
}

fn compare_rows(args: &[&str]) -> Vec<Value> {
    let mut all = vec!["compare", "--json", "--no-progress", "--rounds", "2"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(
        out.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["comparison"]["rows"].as_array().unwrap().clone()
}

#[test]
fn compare_includes_h2_where_the_server_offers_it() {
    let _g = serial();
    let names = |rows: &[Value]| -> Vec<String> {
        rows.iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    // The embedded server: h2 in the https group; in the http group with --h2c.
    let rows = compare_rows(&["-n", "40"]);
    let n = names(&rows);
    assert!(n.contains(&"https h2".to_string()), "{n:?}");
    assert!(!n.contains(&"http h2".to_string()), "{n:?}");
    let rows = compare_rows(&["-n", "40", "--h2c"]);
    assert!(names(&rows).contains(&"http h2".to_string()));
    // A URL: h2 when the server chooses it by ALPN, not when it does not.
    for offer in [true, false] {
        let srv = start(ServerConfig {
            h2: offer,
            ..ServerConfig::default()
        });
        let ca = TempFile::new("ca.pem", srv.ca_pem.as_bytes());
        let url = srv.https_url().unwrap();
        let rows = compare_rows(&[&url, "--cacert", ca.s(), "-n", "40"]);
        let h2 = rows.iter().find(|r| r["strategy"] == "h2");
        assert_eq!(
            h2.is_some(),
            offer,
            "h2 offered: {offer}: {:?}",
            names(&rows)
        );
        if let Some(h2) = h2 {
            assert_eq!(h2["connections_opened"]["median"], 1.0);
        }
        srv.stop();
    }
}

fn json_of(args: &[&str]) -> (Option<i32>, Value) {
    let out = run(args);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), v)
}

#[test]
fn trace_http2_shows_the_setup_then_each_stream() {
    let _g = serial();
    let srv = start(ServerConfig {
        max_requests_per_connection: Some(2),
        ..ServerConfig::default()
    });
    let ca = TempFile::new("ca.pem", srv.ca_pem.as_bytes());
    for url in [srv.http_url().unwrap(), srv.https_url().unwrap()] {
        let before = srv.snapshot();
        let (code, t) = json_of(&[
            "trace",
            &url,
            "--http2",
            "--count",
            "3",
            "--json",
            "--cacert",
            ca.s(),
        ]);
        assert_eq!(code, Some(0), "{t}");
        assert_eq!(t["protocol"], "h2");
        assert_eq!(t["h2_settings"]["max_concurrent_streams"], 128);
        let steps = t["steps"].as_array().unwrap();
        let ids: Vec<u64> = steps.iter().map(|s| u(&s["stream_id"])).collect();
        // Two streams on the first connection, then GOAWAY: the third on a new one.
        assert_eq!(ids, [1, 3, 1], "{t}");
        let reused: Vec<bool> = steps.iter().map(|s| s["reused"] == true).collect();
        assert_eq!(reused, [false, true, false]);
        for s in steps {
            assert_eq!(s["status"], 200);
            let new = s["reused"] == false;
            assert_eq!(s["h2_setup_ms"].as_f64().is_some(), new, "{s}");
            assert_eq!(s["connect_ms"].as_f64().is_some(), new);
        }
        assert!(steps[1]["after_response"]
            .as_str()
            .unwrap()
            .contains("GOAWAY"));
        let (accepted, h2_conns, streams) = delta(&srv, before);
        assert_eq!((accepted, h2_conns, streams), (2, 2, 3), "{url}");
    }
    srv.stop();
}

#[test]
fn doctor_over_h2_finds_settings_request_limit_idle_timeout_and_concurrency() {
    let _g = serial();
    let srv = start(ServerConfig {
        max_concurrent_streams: 10,
        max_requests_per_connection: Some(40),
        idle_timeout: Duration::from_millis(600),
        ..ServerConfig::default()
    });
    let ca = TempFile::new("ca.pem", srv.ca_pem.as_bytes());
    let url = srv.https_url().unwrap();
    let (code, v) = json_of(&[
        "doctor",
        &url,
        "--cacert",
        ca.s(),
        "--max-idle",
        "2s",
        "--json",
    ]);
    assert_eq!(code, Some(1), "problems found: {v}");
    let h = &v["h2"];
    assert_eq!(h["settings"]["max_concurrent_streams"], 10, "{h}");
    assert_eq!(h["max_requests"]["limit"], 40, "{h}");
    let idle = &h["idle_timeout"];
    let (lo, hi) = (
        idle["at_least_s"].as_f64().unwrap(),
        idle["at_most_s"].as_f64().unwrap(),
    );
    assert!(lo <= 0.6 && (0.6..1.2).contains(&hi), "{idle}");
    let c = &h["concurrency"];
    assert_eq!((u(&c["tried"]), u(&c["answered"])), (10, 10), "{c}");
    let p = problems(&v).join("\n");
    assert!(p.contains("only 10 concurrent HTTP/2 streams"), "{p}");
    assert!(p.contains("GOAWAY after 40 HTTP/2 streams"), "{p}");
    assert!(p.contains("idle HTTP/2 connections"), "{p}");
    // Without --h2c an http:// URL gets no HTTP/2 probes; with it, it does.
    let http = srv.http_url().unwrap();
    let (_, v) = json_of(&["doctor", &http, "--max-idle", "1s", "--json"]);
    assert!(v["h2"].is_null());
    let (_, v) = json_of(&["doctor", &http, "--max-idle", "1s", "--h2c", "--json"]);
    assert_eq!(v["h2"]["settings"]["max_concurrent_streams"], 10);
    srv.stop();
}

#[test]
fn doctor_over_h2_against_nginx() {
    let _g = serial();
    let Some(ng) = Nginx::start_servers(
        "keepalive_requests 300; keepalive_timeout 1s;",
        1,
        |p, dir| {
            write_certs(dir, &["127.0.0.1", "localhost"]);
            let d = dir.display();
            format!(
                "server {{ listen 127.0.0.1:{} ssl http2; ssl_certificate {d}/cert.pem; \
               ssl_certificate_key {d}/key.pem; location / {{ return 200 \"hello\\n\"; }} }}",
                p[0]
            )
        },
    ) else {
        return;
    };
    let url = format!("https://127.0.0.1:{}/", ng.port);
    let ca = ng.dir.join("ca.pem");
    let (_, v) = json_of(&[
        "doctor",
        &url,
        "--cacert",
        ca.to_str().unwrap(),
        "--max-idle",
        "3s",
        "--max-requests",
        "400",
        "--json",
    ]);
    let h = &v["h2"];
    assert_eq!(v["tls"]["offers_h2"], true);
    // nginx's defaults: 128 concurrent streams; our keepalive_requests and timeout.
    assert_eq!(h["settings"]["max_concurrent_streams"], 128, "{h}");
    assert_eq!(h["max_requests"]["limit"], 300, "{h}");
    let c = &h["concurrency"];
    assert_eq!((u(&c["tried"]), u(&c["answered"])), (100, 100), "{c}");
    let idle = &h["idle_timeout"];
    let hi = idle["at_most_s"].as_f64().unwrap();
    assert!((0.9..1.6).contains(&hi), "{idle}");
    let p = problems(&v).join("\n");
    assert!(!p.contains("concurrent HTTP/2 streams"), "{p}");
    assert!(!p.contains("HTTP/2 streams: a busy"), "{p}");
}

/// The client's SETTINGS as a server reads them off the wire: the first connection
/// to a listener that answers nothing (the client then fails, which is not the point).
fn client_settings(args: impl Fn(&str) -> Vec<String>) -> Vec<(u16, u32)> {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        // The preface, then the first frame (SETTINGS): 9 bytes of header, its payload.
        let mut head = [0u8; 24 + 9];
        s.read_exact(&mut head).unwrap();
        assert_eq!(&head[..24], b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        let f = &head[24..];
        assert_eq!(f[3], 0x4, "the first frame is SETTINGS");
        let len = usize::from(f[0]) << 16 | usize::from(f[1]) << 8 | usize::from(f[2]);
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).unwrap();
        payload
            .chunks(6)
            .map(|c| {
                (
                    u16::from_be_bytes([c[0], c[1]]),
                    u32::from_be_bytes([c[2], c[3], c[4], c[5]]),
                )
            })
            .collect::<Vec<_>>()
    });
    let a = args(&url);
    let out = std::process::Command::new(bin()).args(&a).output().unwrap();
    let settings = reader.join().unwrap();
    assert_ne!(out.status.code(), Some(0), "{a:?}: nothing answered");
    settings
}

/// bench's connections and trace's probe (doctor's HTTP/2 probes open theirs the same
/// way) are opened by one HTTP/2 client: the same SETTINGS on the wire (push off, a
/// 16 MiB stream window). Before, the probes kept h2's 64 KiB default window.
#[test]
fn bench_and_trace_open_the_same_http2_connection() {
    let _machine = shared();
    let bench = client_settings(|u| {
        [
            "bench",
            u,
            "-s",
            "h2",
            "-n",
            "1",
            "--timeout",
            "1s",
            "--no-progress",
        ]
        .map(String::from)
        .to_vec()
    });
    let trace = client_settings(|u| {
        ["trace", u, "--http2", "--timeout", "1s"]
            .map(String::from)
            .to_vec()
    });
    // SETTINGS_ENABLE_PUSH (0x2) off, SETTINGS_INITIAL_WINDOW_SIZE (0x4) 16 MiB.
    assert!(bench.contains(&(0x2, 0)), "{bench:?}");
    assert!(bench.contains(&(0x4, 16 << 20)), "{bench:?}");
    assert_eq!(trace, bench);
}

/// `trace --http2` sends the request's body as bench does (they share proto's
/// exchange): nginx logs both POSTs whole, 200 with the body's Content-Length and its
/// bytes counted in the request's length. Before, the probe ended the stream with the
/// head, so a Content-Length of 5 came with no DATA, which nginx refuses (400).
#[test]
fn trace_http2_sends_the_body_as_bench_does() {
    let _g = serial();
    let Some(ng) = Nginx::start_servers(
        "log_format body '$status $content_length $request_length';",
        1,
        |p, dir| {
            format!(
                "server {{ listen 127.0.0.1:{} http2; access_log {}/access.log body; \
                 location / {{ return 200 \"hello\\n\"; }} }}",
                p[0],
                dir.display()
            )
        },
    ) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/", ng.ports[0]);
    let body = ["-X", "POST", "--data", "12345"];
    let mut trace = vec!["trace", &url, "--http2", "--json"];
    trace.extend_from_slice(&body);
    let (code, _) = json_of(&trace);
    assert_eq!(code, Some(0));
    let mut bench = vec![url.as_str(), "--strategy", "h2", "-n", "1"];
    bench.extend_from_slice(&body);
    let s = scenario(&bench_json(&bench)).clone();
    assert_eq!(u(&s["requests"]["ok"]), 1);
    std::thread::sleep(Duration::from_millis(200));
    let log = std::fs::read_to_string(ng.dir.join("access.log")).unwrap();
    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split(' ').collect()).collect();
    assert_eq!(lines.len(), 2, "{log}");
    for l in &lines {
        assert_eq!(l[..2], ["200", "5"], "{log}");
    }
    // The same request on the wire from both: the same length, body included.
    assert_eq!(lines[0][2], lines[1][2], "{log}");
}
