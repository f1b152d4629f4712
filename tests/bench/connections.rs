//! `handshake bench` against the embedded server: every connection figure in the report
//! equals the server's own count of accepted connections, for every strategy.

use std::time::Duration;

use crate::common::*;

fn http(srv: &RunningServer) -> String {
    srv.http_url().unwrap()
}

fn https(srv: &RunningServer) -> String {
    srv.https_url().unwrap()
}

/// Run a bench against `url` and check its connection count against the server's.
fn bench_against(srv: &RunningServer, url: &str, extra: &[&str]) -> serde_json::Value {
    let before = srv.snapshot();
    let mut args = vec![url];
    args.extend_from_slice(extra);
    let r = bench_json(&args);
    let s = scenario(&r).clone();
    check_accounting(&s);
    let after = srv.snapshot();
    assert_eq!(
        u(&s["connections"]["opened"]),
        after.connections_accepted - before.connections_accepted,
        "report's connections opened = server's connections accepted"
    );
    // Requests cut by the run's deadline may have reached the server.
    let served = after.requests - before.requests;
    let answered = u(&s["requests"]["answered"]);
    let aborted = u(&s["requests"]["aborted_at_deadline"]);
    assert!(
        answered <= served && served <= answered + aborted,
        "report's answered requests ({answered}, + {aborted} aborted) = server's requests served ({served})"
    );
    s
}

#[test]
fn keepalive_uses_one_connection_per_worker() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let s = bench_against(&srv, &http(&srv), &["-n", "1000", "-c", "4"]);
    assert_eq!(u(&s["connections"]["opened"]), 4);
    assert_eq!(u(&s["requests"]["ok"]), 1000);
    assert_eq!(u(&s["connections"]["reused_requests"]), 996);
    assert_eq!(close_reason(&s, "end_of_run"), 4);
    assert_eq!(u(&s["connections"]["requests_per_connection"]["min"]), 250);
    assert_eq!(u(&s["connections"]["requests_per_connection"]["max"]), 250);
    assert_eq!(u(&s["phases_ms"]["new"]["connect"]["count"]), 4);
    assert_eq!(
        u(&s["phases_ms"]["reused"]["connect"]["count"]),
        0,
        "a reused connection has no connect phase"
    );
    assert!(
        s["diagnosis"].as_array().unwrap().is_empty(),
        "{}",
        s["diagnosis"]
    );
    srv.stop();
}

#[test]
fn close_opens_a_connection_per_request_and_lets_the_server_close() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let s = bench_against(
        &srv,
        &http(&srv),
        &["-n", "1000", "-c", "4", "--strategy", "close"],
    );
    assert_eq!(u(&s["connections"]["opened"]), 1000);
    assert_eq!(u(&s["connections"]["reused_requests"]), 0);
    assert_eq!(close_reason(&s, "client_policy"), 1000);
    assert_eq!(u(&s["connections"]["server_ignored_close"]), 0);
    assert_eq!(u(&s["phases_ms"]["new"]["connect"]["count"]), 1000);
    srv.stop();
}

#[test]
fn disable_keepalive_alias_means_close() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let s = bench_against(
        &srv,
        &http(&srv),
        &["-n", "50", "-c", "2", "--disable-keepalive"],
    );
    assert_eq!(s["strategy"], "close");
    assert_eq!(u(&s["connections"]["opened"]), 50);
    srv.stop();
}

#[test]
fn http10_without_keepalive_opens_a_connection_per_request() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let s = bench_against(
        &srv,
        &http(&srv),
        &["-n", "1000", "-c", "4", "--strategy", "http10"],
    );
    assert_eq!(u(&s["connections"]["opened"]), 1000);
    assert_eq!(close_reason(&s, "client_policy"), 1000);
    srv.stop();
}

#[test]
fn http10_keepalive_is_reused_when_the_server_honours_it() {
    let _machine = shared();
    let srv = start(ServerConfig {
        http10: true,
        ..ServerConfig::default()
    });
    let s = bench_against(
        &srv,
        &http(&srv),
        &["-n", "1000", "-c", "4", "--strategy", "http10-keepalive"],
    );
    assert_eq!(u(&s["connections"]["opened"]), 4);
    assert_eq!(close_reason(&s, "end_of_run"), 4);
    srv.stop();
}

#[test]
fn http10_keepalive_on_a_server_that_ignores_it() {
    let _machine = shared();
    let srv = start(ServerConfig {
        http10: true,
        keepalive: false,
        ..ServerConfig::default()
    });
    let s = bench_against(
        &srv,
        &http(&srv),
        &["-n", "1000", "-c", "4", "--strategy", "http10-keepalive"],
    );
    assert_eq!(u(&s["connections"]["opened"]), 1000);
    assert_eq!(close_reason(&s, "server_http10"), 1000);
    let diag = s["diagnosis"][0]["text"].as_str().unwrap();
    assert!(
        diag.contains("HTTP/1.0 without keep-alive, ignoring the request's `Connection: keep-alive`, on every connection"),
        "{diag}"
    );
    srv.stop();
}

#[test]
fn requests_per_connection_reconnects_every_n() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let s = bench_against(
        &srv,
        &http(&srv),
        &["-n", "1000", "-c", "4", "--requests-per-connection", "10"],
    );
    assert_eq!(u(&s["connections"]["opened"]), 100);
    assert_eq!(close_reason(&s, "client_policy"), 100);
    assert_eq!(u(&s["connections"]["requests_per_connection"]["max"]), 10);
    assert_eq!(u(&s["connections"]["reused_requests"]), 900);
    srv.stop();
}

#[test]
fn server_max_requests_per_connection_is_named() {
    let _machine = shared();
    let srv = start(ServerConfig {
        max_requests_per_connection: Some(50),
        ..ServerConfig::default()
    });
    let s = bench_against(&srv, &http(&srv), &["-n", "1000", "-c", "1"]);
    assert_eq!(u(&s["connections"]["opened"]), 20);
    assert_eq!(close_reason(&s, "server_max_requests"), 20);
    assert_eq!(
        s["connections"]["requests_per_connection"]["mean"].as_f64(),
        Some(50.0)
    );
    srv.stop();
}

#[test]
fn server_keepalive_off_is_diagnosed_in_one_sentence() {
    let _machine = shared();
    let srv = start(ServerConfig {
        keepalive: false,
        ..ServerConfig::default()
    });
    let s = bench_against(&srv, &http(&srv), &["-n", "200", "-c", "2"]);
    assert_eq!(u(&s["connections"]["opened"]), 200);
    assert_eq!(close_reason(&s, "server_close_header"), 200);
    let d = s["diagnosis"].as_array().unwrap();
    assert_eq!(d.len(), 1, "{d:?}");
    let d = d[0]["text"].as_str().unwrap();
    assert!(
        d.contains("`Connection: close` (its keep-alive is off) on every connection")
            && d.contains("Turn keep-alive on"),
        "{d}"
    );
    srv.stop();
}

#[test]
fn n_not_divisible_by_c_sends_exactly_n() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let s = bench_against(&srv, &http(&srv), &["-n", "1001", "-c", "4"]);
    assert_eq!(u(&s["requests"]["attempted"]), 1001);
    assert_eq!(u(&s["requests"]["ok"]), 1001);
    let s = bench_against(&srv, &http(&srv), &["-n", "3", "-c", "8"]);
    assert_eq!(u(&s["requests"]["attempted"]), 3);
    assert_eq!(u(&s["connections"]["opened"]), 3);
    srv.stop();
}

fn cacert(srv: &RunningServer) -> tempfile_path::TempPath {
    let p = tempfile_path::TempPath::new("ca.pem");
    std::fs::write(&p.0, &srv.ca_pem).unwrap();
    p
}

mod tempfile_path {
    /// A file in the temp dir, removed on drop.
    pub struct TempPath(pub std::path::PathBuf);
    impl TempPath {
        pub fn new(name: &str) -> TempPath {
            static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            TempPath(
                std::env::temp_dir()
                    .join(format!("handshake-test-{}-{n}-{name}", std::process::id())),
            )
        }
        pub fn s(&self) -> &str {
            self.0.to_str().unwrap()
        }
    }
    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[test]
fn tls_close_does_a_full_handshake_per_connection() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let ca = cacert(&srv);
    let s = bench_against(
        &srv,
        &https(&srv),
        &[
            "-n",
            "200",
            "-c",
            "2",
            "--strategy",
            "close",
            "--cacert",
            ca.s(),
        ],
    );
    let opened = u(&s["connections"]["opened"]);
    assert_eq!(opened, 200);
    assert_eq!(u(&s["connections"]["tls_handshakes"]["full"]), opened);
    assert_eq!(u(&s["connections"]["tls_handshakes"]["resumed"]), 0);
    assert_eq!(
        srv.snapshot().tls_handshakes_full,
        200,
        "the server saw 200 full handshakes"
    );
    assert_eq!(u(&s["phases_ms"]["new"]["tls"]["count"]), 200);
    srv.stop();
}

#[test]
fn tls_close_resumed_resumes_sessions() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let ca = cacert(&srv);
    let s = bench_against(
        &srv,
        &https(&srv),
        &[
            "-n",
            "200",
            "-c",
            "2",
            "--strategy",
            "close-resumed",
            "--cacert",
            ca.s(),
        ],
    );
    let resumed = u(&s["connections"]["tls_handshakes"]["resumed"]);
    let full = u(&s["connections"]["tls_handshakes"]["full"]);
    assert!(resumed > 0, "some handshakes resumed");
    assert_eq!(full + resumed, 200);
    let snap = srv.snapshot();
    assert_eq!(
        snap.tls_handshakes_resumed, resumed,
        "the server counted the same resumptions"
    );
    assert_eq!(snap.tls_handshakes_full, full);
    srv.stop();
}

#[test]
fn tls_keepalive_reuses_and_unknown_ca_fails_as_tls_error() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let ca = cacert(&srv);
    let s = bench_against(
        &srv,
        &https(&srv),
        &["-n", "100", "-c", "2", "--cacert", ca.s()],
    );
    assert_eq!(u(&s["connections"]["opened"]), 2);
    // Without the CA the certificate is not trusted: every attempt is a tls error.
    let s = bench_against(&srv, &https(&srv), &["-n", "5", "-c", "1"]);
    assert_eq!(u(&s["requests"]["errors"]["tls"]), 5);
    assert_eq!(u(&s["connections"]["opened"]), 5);
    assert_eq!(close_reason(&s, "error"), 5);
    // --insecure accepts it.
    let s = bench_against(&srv, &https(&srv), &["-n", "5", "-c", "1", "--insecure"]);
    assert_eq!(u(&s["requests"]["ok"]), 5);
    srv.stop();
}

#[test]
fn urls_from_file_keeps_one_connection_per_host_and_port() {
    let _machine = shared();
    let a = start(ServerConfig::default());
    let b = start(ServerConfig::default());
    let list = tempfile_path::TempPath::new("urls.txt");
    let text = format!(
        "{}bytes/10\n# comment\n{}bytes/20\n{}status/204\n",
        http(&a),
        http(&b),
        http(&a)
    );
    std::fs::write(&list.0, text).unwrap();
    let r = bench_json(&["--urls-from-file", list.s(), "-n", "300", "-c", "2"]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["urls"]), 3);
    assert_eq!(a.snapshot().connections_accepted, 2);
    assert_eq!(b.snapshot().connections_accepted, 2);
    assert_eq!(u(&s["connections"]["opened"]), 4);
    assert_eq!(a.snapshot().requests, 200);
    assert_eq!(b.snapshot().requests, 100);
    assert_eq!(u(&s["requests"]["status_codes"]["204"]), 100);
    assert_eq!(
        u(&s["throughput"]["body_bytes_received"]),
        100 * 10 + 100 * 20
    );
    a.stop();
    b.stop();
}

/// Report 003's 520 downloads are 520 requests: without -n or -d each URL of the list
/// is requested once (by bench, and by each round of compare).
#[test]
fn urls_from_file_without_n_requests_each_url_once() {
    let _machine = shared();
    let a = start(ServerConfig::default());
    let b = start(ServerConfig::default());
    let list = tempfile_path::TempPath::new("urls-once.txt");
    let text = format!(
        "{}bytes/10\n{}bytes/20\n{}status/204\n",
        http(&a),
        http(&b),
        http(&a)
    );
    std::fs::write(&list.0, text).unwrap();
    let r = bench_json(&["--urls-from-file", list.s(), "-c", "2"]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["requests"]["attempted"]), 3, "{}", s["requests"]);
    assert_eq!((a.snapshot().requests, b.snapshot().requests), (2, 1));
    assert_eq!(u(&s["requests"]["status_codes"]["204"]), 1);
    let v = compare_json(&[
        "--urls-from-file",
        list.s(),
        "--strategies",
        "keepalive,close",
        "--rounds",
        "2",
        "-c",
        "1",
    ]);
    assert_eq!(
        u(&v["comparison"]["requests_per_round"]),
        3,
        "{}",
        v["comparison"]
    );
    assert_eq!(
        (a.snapshot().requests, b.snapshot().requests),
        (2 + 8, 1 + 4)
    );
    a.stop();
    b.stop();
}

#[test]
fn resolve_skips_dns_and_a_name_is_resolved_once_per_run_or_per_connection() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let port = srv.http_addr.unwrap().port();
    let url = format!("http://handshake.invalid:{port}/");
    let resolve = format!("handshake.invalid:{port}:127.0.0.1");
    let s = bench_against(&srv, &url, &["-n", "20", "-c", "2", "--resolve", &resolve]);
    assert_eq!(
        u(&s["phases_ms"]["new"]["dns"]["count"]),
        0,
        "dns is absent with --resolve"
    );
    assert_eq!(u(&s["dns"]["lookups"]), 0);
    // localhost (from /etc/hosts or RFC 6761): one lookup per run with the cache on,
    // one per new connection with it off.
    let url = format!("http://localhost:{port}/");
    let s = bench_against(&srv, &url, &["-n", "20", "-c", "2", "--strategy", "close"]);
    assert_eq!(u(&s["requests"]["ok"]), 20);
    assert_eq!(u(&s["dns"]["lookups"]), 1, "{}", s["dns"]);
    let waited = u(&s["dns"]["lookups"]) + u(&s["dns"]["joined"]);
    assert_eq!(u(&s["phases_ms"]["new"]["dns"]["count"]), waited);
    assert_eq!(waited + u(&s["dns"]["cache_hits"]), 20);
    let s = bench_against(
        &srv,
        &url,
        &[
            "-n",
            "20",
            "-c",
            "2",
            "--strategy",
            "close",
            "--dns-cache",
            "off",
        ],
    );
    assert_eq!(u(&s["phases_ms"]["new"]["dns"]["count"]), 20);
    assert_eq!(u(&s["dns"]["lookups"]), 20, "one lookup per new connection");
    srv.stop();
}

#[test]
fn open_loop_paces_and_records_blocked_time() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let t = std::time::Instant::now();
    let s = bench_against(&srv, &http(&srv), &["-n", "50", "-c", "2", "--rate", "200"]);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(240),
        "50 requests at 200/s take at least ~0.25 s, took {took:?}"
    );
    assert_eq!(u(&s["requests"]["attempted"]), 50);
    assert_eq!(s["load"]["rate"].as_f64(), Some(200.0));
    let blocked = u(&s["phases_ms"]["new"]["blocked"]["count"])
        + u(&s["phases_ms"]["reused"]["blocked"]["count"]);
    assert_eq!(blocked, 50, "every open-loop request has a blocked phase");
    srv.stop();
}

#[test]
fn duration_run_counts_every_attempt() {
    let _machine = shared();
    let srv = start(ServerConfig {
        delay: Duration::from_millis(20),
        ..ServerConfig::default()
    });
    let s = bench_against(&srv, &http(&srv), &["-d", "300ms", "-c", "4"]);
    let attempted = u(&s["requests"]["attempted"]);
    let aborted = u(&s["requests"]["aborted_at_deadline"]);
    assert!(attempted >= 20, "{attempted}");
    // At most one request per worker is in flight when the deadline comes.
    assert!(aborted <= 4);
    assert_eq!(
        s["requests"]["errors"]
            .as_object()
            .unwrap()
            .values()
            .map(u)
            .sum::<u64>(),
        0
    );
    assert!(s["duration_s"].as_f64().unwrap() < 0.6);
    srv.stop();
}

#[test]
fn head_post_and_status_paths() {
    let _machine = shared();
    let srv = start(ServerConfig {
        body_size: 1000,
        ..ServerConfig::default()
    });
    let s = bench_against(&srv, &http(&srv), &["-n", "20", "-c", "1", "-m", "HEAD"]);
    assert_eq!(
        u(&s["throughput"]["body_bytes_received"]),
        0,
        "HEAD has no body"
    );
    assert_eq!(
        u(&s["connections"]["opened"]),
        1,
        "HEAD responses leave the connection reusable"
    );
    let s = bench_against(
        &srv,
        &http(&srv),
        &[
            "-n",
            "20",
            "-c",
            "1",
            "-m",
            "POST",
            "--body",
            "hello",
            "-H",
            "X-Test: 1",
        ],
    );
    assert_eq!(u(&s["requests"]["ok"]), 20);
    assert_eq!(u(&s["connections"]["opened"]), 1);
    assert_eq!(u(&s["throughput"]["body_bytes_received"]), 20_000);
    let url = format!("{}status/503", http(&srv));
    let s = bench_against(&srv, &url, &["-n", "10", "-c", "1"]);
    assert_eq!(
        u(&s["requests"]["status_codes"]["503"]),
        10,
        "non-2xx are statuses, not errors"
    );
    assert_eq!(
        s["requests"]["errors"]
            .as_object()
            .unwrap()
            .values()
            .map(u)
            .sum::<u64>(),
        0
    );
    let url = format!("{}bytes/300000", http(&srv));
    let s = bench_against(&srv, &url, &["-n", "5", "-c", "1"]);
    assert_eq!(u(&s["throughput"]["body_bytes_received"]), 1_500_000);
    srv.stop();
}

#[test]
fn large_default_bodies_and_delays_are_served_whole() {
    let _machine = shared();
    let srv = start(ServerConfig {
        body_size: 100_000,
        ..ServerConfig::default()
    });
    let s = bench_against(&srv, &http(&srv), &["-n", "6", "-c", "2"]);
    assert_eq!(u(&s["throughput"]["body_bytes_received"]), 600_000);
    assert_eq!(u(&s["connections"]["opened"]), 2);
    let url = format!("{}delay/30", http(&srv));
    let s = bench_against(&srv, &url, &["-n", "4", "-c", "1"]);
    assert!(
        s["latency_ms"]["p50"].as_f64().unwrap() >= 29.0,
        "{}",
        s["latency_ms"]
    );
    assert!(s["phases_ms"]["reused"]["wait"]["min"].as_f64().unwrap() >= 29.0);
    srv.stop();
}

#[test]
fn tls_verifies_the_certificate_name_sent_by_sni() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let ca = cacert(&srv);
    let port = srv.https_addr.unwrap().port();
    // The certificate names localhost: verified, with SNI, through --resolve.
    let url = format!("https://localhost:{port}/");
    let resolve = format!("localhost:{port}:127.0.0.1");
    let s = bench_against(
        &srv,
        &url,
        &[
            "-n",
            "4",
            "-c",
            "1",
            "--cacert",
            ca.s(),
            "--resolve",
            &resolve,
        ],
    );
    assert_eq!(u(&s["requests"]["ok"]), 4);
    // A name the certificate does not carry fails the handshake, as a tls error.
    let url = format!("https://wrong.invalid:{port}/");
    let resolve = format!("wrong.invalid:{port}:127.0.0.1");
    let s = bench_against(
        &srv,
        &url,
        &[
            "-n",
            "3",
            "-c",
            "1",
            "--cacert",
            ca.s(),
            "--resolve",
            &resolve,
        ],
    );
    assert_eq!(u(&s["requests"]["errors"]["tls"]), 3);
    assert_eq!(u(&s["requests"]["ok"]), 0);
    srv.stop();
}

/// An open loop of up to 700 workers under a soft limit of 1024 open descriptors (the
/// usual default): bench raises the soft limit within the hard one, so every worker it
/// hires connects and every request succeeds; the server accepted exactly the
/// connections the report counts, at most one per worker.
#[test]
fn an_open_loop_of_many_workers_fits_a_1024_descriptor_limit() {
    let _machine = shared();
    let srv = start(ServerConfig {
        delay: Duration::from_millis(100),
        ..ServerConfig::default()
    });
    let url = http(&srv);
    let before = srv.snapshot();
    let script = format!(
        "ulimit -Sn 1024 && exec {} bench {url} --rate 5000 -c 700 -n 1400 --json --no-progress",
        bin()
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["requests"]["ok"]), 1400, "{}", s["requests"]);
    let opened = u(&s["connections"]["opened"]);
    // 5,000 requests a second of 100 ms each: about 500 at once.
    assert!((300..=700).contains(&opened), "{opened}");
    let after = srv.snapshot();
    assert_eq!(
        after.connections_accepted - before.connections_accepted,
        opened
    );
    srv.stop();
}

/// An open loop's workers follow the rate and the latency, not -c: 200 requests a second
/// of 50 ms each keep about 10 under way, so of -c 500 a few tens are hired (each its
/// own connection, the server's count); with -c 4 the four are all the loop has, it
/// carries 80 a second, and the rest of the schedule waits (counted late, in `blocked`).
#[test]
fn an_open_loop_hires_the_workers_its_rate_needs() {
    let _machine = shared();
    let srv = start(ServerConfig {
        delay: Duration::from_millis(50),
        ..ServerConfig::default()
    });
    let url = http(&srv);
    let before = srv.snapshot();
    let s = scenario(&bench_json(&[
        &url, "--rate", "200", "-c", "500", "-d", "2s",
    ]))
    .clone();
    check_accounting(&s);
    let opened = u(&s["connections"]["opened"]);
    assert!(
        (8..=60).contains(&opened),
        "{opened} workers for about 10 under way"
    );
    let mid = srv.snapshot();
    assert_eq!(
        mid.connections_accepted - before.connections_accepted,
        opened
    );
    let rps = s["throughput"]["requests_per_s"].as_f64().unwrap();
    assert!((180.0..=220.0).contains(&rps), "the rate asked: {rps}");

    let s = scenario(&bench_json(&[&url, "--rate", "200", "-c", "4", "-d", "2s"])).clone();
    check_accounting(&s);
    assert_eq!(u(&s["connections"]["opened"]), 4);
    assert_eq!(
        srv.snapshot().connections_accepted - mid.connections_accepted,
        4
    );
    let rps = s["throughput"]["requests_per_s"].as_f64().unwrap();
    assert!((60.0..=85.0).contains(&rps), "four workers of 50 ms: {rps}");
    let blocked = s["phases_ms"]["reused"]["blocked"]["p50"].as_f64().unwrap();
    assert!(
        blocked > 50.0,
        "the schedule waited: blocked p50 {blocked} ms"
    );
    srv.stop();
}

/// Without -t, a persistent strategy against this machine takes half the cores (the
/// server needs the rest), a new connection per request all of them, and -t is as given;
/// the connections each run opened are the server's count either way.
#[test]
fn threads_default_to_half_the_cores_for_a_persistent_strategy_on_this_machine() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    let url = http(&srv);
    let local = url.replace("127.0.0.1", "localhost");
    for (url, extra, threads) in [
        (&url, &["--strategy", "keepalive"][..], (cpus / 2).max(1)),
        (&local, &["--strategy", "keepalive"][..], (cpus / 2).max(1)),
        (&url, &["--strategy", "h2"][..], (cpus / 2).max(1)),
        (&url, &["--strategy", "close"][..], cpus.min(8)),
        (&url, &["--strategy", "keepalive", "-t", "2"][..], 2),
    ] {
        let mut args = vec!["-n", "200", "-c", "8"];
        args.extend_from_slice(extra);
        let s = bench_against(&srv, url, &args);
        assert_eq!(u(&s["threads"]), threads, "{url} {extra:?}");
    }
    srv.stop();
}

#[test]
fn responses_that_close_the_connection_arrive_whole() {
    let _machine = shared();
    // The server's last writes on a connection go out with MSG_MORE, so the end of the
    // response leaves with the FIN; a body larger than the socket's send buffer makes
    // its writes block and the connection ask the reactor for writes. Over both, every
    // byte arrives and the connection ends cleanly.
    use std::io::{Read, Write};
    const BODY: usize = 3_000_000;
    let srv = start(ServerConfig {
        body_size: BODY,
        ..ServerConfig::default()
    });
    let addr = srv.http_addr.unwrap();
    let mut raw = std::net::TcpStream::connect(addr).unwrap();
    raw.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    raw.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut got = Vec::new();
    raw.read_to_end(&mut got).expect("EOF, not a reset");
    let head_end = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&got[..head_end]).to_lowercase();
    assert!(head.contains(&format!("content-length: {BODY}")), "{head}");
    assert!(head.contains("connection: close"), "{head}");
    assert_eq!(got.len() - head_end, BODY);

    let ca = cacert(&srv);
    for url in [http(&srv), https(&srv)] {
        let s = bench_against(
            &srv,
            &url,
            &[
                "-n",
                "20",
                "-c",
                "2",
                "--strategy",
                "close",
                "--cacert",
                ca.s(),
            ],
        );
        assert_eq!(u(&s["requests"]["ok"]), 20, "{url}");
        assert_eq!(u(&s["connections"]["opened"]), 20, "{url}");
        assert_eq!(
            u(&s["throughput"]["body_bytes_received"]),
            20 * BODY as u64,
            "{url}"
        );
    }
    srv.stop();
}
