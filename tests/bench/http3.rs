//! HTTP/3 over QUIC (strategies h3, h3-close, h3-resumed, h3-0rtt) against a server
//! that is not handshake's own: `tests/h3_server.py`, on Python's aioquic (PyPI), which
//! counts the QUIC connections it created, the handshakes that resumed a session, and
//! the requests that arrived in 0-RTT (before the handshake completed). The report's
//! connections, resumed handshakes and accepted early-data requests must equal them.
//! Bad input: a server that drops all UDP, one that answers with a version negotiation,
//! one that closes with an application error, one that rejects 0-RTT.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::common::*;
use serde_json::Value;

/// The aioquic server, stopped by its PID and its directory removed on drop.
struct AioQuic {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl AioQuic {
    fn start(args: &[&str]) -> AioQuic {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("handshake-h3-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_certs(&dir, &["127.0.0.1", "localhost"]);
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/h3_server.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg("--cert")
            .arg(dir.join("cert.pem"))
            .arg("--key")
            .arg(dir.join("key.pem"))
            .arg("--stats")
            .arg(dir.join("stats.json"))
            .args(["--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs (scripts/test installs aioquic)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| {
                let _ = child.kill();
                panic!("tests/h3_server.py did not say its port (is aioquic installed?): {line:?}")
            });
        AioQuic { child, port, dir }
    }

    fn url(&self) -> String {
        format!("https://127.0.0.1:{}/", self.port)
    }

    fn ca(&self) -> String {
        self.dir.join("ca.pem").to_str().unwrap().to_string()
    }

    /// The server's own counts.
    fn stats(&self) -> Value {
        let text = std::fs::read_to_string(self.dir.join("stats.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// `bench` against it; the report must match the JSON schema.
    fn bench(&self, strategy: &str, extra: &[&str]) -> Value {
        let (url, ca) = (self.url(), self.ca());
        let mut args = vec![url.as_str(), "--cacert", &ca, "--strategy", strategy];
        args.extend_from_slice(extra);
        let r = bench_json(&args);
        let errors = schema_violations("report.schema.json", &r);
        assert!(errors.is_empty(), "{strategy}: schema: {errors:?}");
        r
    }
}

impl Drop for AioQuic {
    fn drop(&mut self) {
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn n(v: &Value) -> u64 {
    u(v)
}

#[test]
fn per_request_connections_equal_the_servers_counts() {
    let _s = serial();
    // h3-close: a full handshake per request.
    let srv = AioQuic::start(&[]);
    let r = srv.bench("h3-close", &["-n", "20", "-c", "2"]);
    let s = scenario(&r);
    check_accounting(s);
    let st = srv.stats();
    let c = &s["connections"];
    assert_eq!(s["protocol"], "h3");
    assert_eq!(n(&s["requests"]["ok"]), 20, "{s}");
    assert_eq!(n(&c["opened"]), n(&st["connections"]), "{st}");
    assert_eq!(n(&c["opened"]), 20);
    assert_eq!(n(&c["tls_handshakes"]["full"]), 20);
    assert_eq!(n(&c["tls_handshakes"]["resumed"]), n(&st["resumed"]));
    assert_eq!(n(&st["resumed"]), 0);
    assert_eq!(n(&st["requests"]), 20);
    assert_eq!(n(&c["reused_requests"]), 0);
    assert_eq!(close_reason(s, "client_policy"), 20);
    let q = &c["quic"];
    assert_eq!(n(&q["handshake_ms"]["count"]), 20, "{q}");
    assert!(q["handshake_ms"]["mean"].as_f64().unwrap() > 0.0);
    assert_eq!(n(&q["connections_ended"]), 20);
    assert!(n(&q["packets_sent"]) >= 20 * 3, "{q}");
    let hs = &s["phases_ms"]["new"]["quic_handshake"];
    assert_eq!(n(&hs["count"]), 20);
    drop(srv);

    // h3-resumed: all but the first connections of each worker resume; the server's
    // count of resumed handshakes is the report's.
    let srv = AioQuic::start(&[]);
    let r = srv.bench("h3-resumed", &["-n", "30", "-c", "2"]);
    let s = scenario(&r);
    check_accounting(s);
    let st = srv.stats();
    let hs = &s["connections"]["tls_handshakes"];
    assert_eq!(n(&s["requests"]["ok"]), 30);
    assert_eq!(n(&s["connections"]["opened"]), n(&st["connections"]));
    assert_eq!(n(&hs["resumed"]), n(&st["resumed"]), "{hs} vs {st}");
    assert_eq!(n(&hs["full"]) + n(&hs["resumed"]), 30);
    assert!(n(&hs["resumed"]) >= 24, "most connections resume: {hs}");
    assert_eq!(n(&s["connections"]["early_data"]["attempted"]), 0);
    assert_eq!(n(&st["early_requests"]), 0);
    drop(srv);

    // h3-0rtt: the requests the server saw before the handshake completed are the
    // report's accepted early data.
    let srv = AioQuic::start(&[]);
    let r = srv.bench("h3-0rtt", &["-n", "30", "-c", "2"]);
    let s = scenario(&r);
    check_accounting(s);
    let st = srv.stats();
    let c = &s["connections"];
    let ed = &c["early_data"];
    assert_eq!(n(&s["requests"]["ok"]), 30);
    assert_eq!(n(&c["opened"]), n(&st["connections"]));
    assert_eq!(n(&ed["accepted"]), n(&st["early_requests"]), "{ed} vs {st}");
    assert_eq!(n(&ed["rejected"]), 0);
    assert_eq!(n(&ed["attempted"]), n(&ed["accepted"]));
    assert!(n(&ed["accepted"]) >= 20, "most requests go in 0-RTT: {ed}");
    assert_eq!(n(&c["tls_handshakes"]["resumed"]), n(&st["resumed"]));
    let lead = &c["quic"]["early_request_lead_ms"];
    assert_eq!(n(&lead["count"]), n(&ed["accepted"]), "{lead}");
}

#[test]
fn shared_connections_carry_every_request() {
    let _s = serial();
    let srv = AioQuic::start(&[]);
    let r = srv.bench("h3", &["-n", "60", "-c", "4", "--connections", "2"]);
    let s = scenario(&r);
    check_accounting(s);
    let st = srv.stats();
    let c = &s["connections"];
    assert_eq!(n(&s["requests"]["ok"]), 60);
    assert_eq!(n(&st["requests"]), 60);
    assert_eq!(n(&c["opened"]), 2);
    assert_eq!(n(&st["connections"]), 2, "{st}");
    assert_eq!(n(&c["reused_requests"]), 58);
    assert_eq!(n(&c["quic"]["connections_per_origin"]), 2);
    assert!(n(&c["quic"]["peak_concurrent_streams"]["max"]) >= 2, "{c}");
    assert_eq!(close_reason(s, "end_of_run"), 2);

    // --requests-per-connection ends each connection after 10 streams.
    let before = n(&srv.stats()["connections"]);
    let r = srv.bench(
        "h3",
        &["-n", "40", "-c", "1", "--requests-per-connection", "10"],
    );
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(n(&s["connections"]["opened"]), 4);
    assert_eq!(n(&srv.stats()["connections"]) - before, 4);
    assert_eq!(close_reason(s, "client_policy"), 4);
}

#[test]
fn rejected_early_data_is_counted_and_the_request_still_answered() {
    let _s = serial();
    let srv = AioQuic::start(&["--early-data", "off"]);
    let r = srv.bench("h3-0rtt", &["-n", "12", "-c", "1"]);
    let s = scenario(&r);
    check_accounting(s);
    let st = srv.stats();
    let ed = &s["connections"]["early_data"];
    assert_eq!(n(&s["requests"]["ok"]), 12, "{s}");
    assert_eq!(
        n(&st["requests"]),
        12,
        "every request reached the server once: {st}"
    );
    assert_eq!(n(&st["early_requests"]), 0);
    assert_eq!(n(&ed["accepted"]), 0);
    assert!(n(&ed["rejected"]) >= 6, "{ed}");
    assert_eq!(n(&ed["attempted"]), n(&ed["rejected"]));
    assert_eq!(
        n(&s["connections"]["tls_handshakes"]["resumed"]),
        n(&st["resumed"])
    );
}

/// A server that answers badly: every attempt is counted under an error with its
/// detail, nothing hangs, and the accounting holds.
#[test]
fn bad_quic_servers_are_counted_not_hung() {
    let _s = serial();
    let cases = [
        ("drop", "quic_timeout", None),
        ("version-negotiation", "quic", Some("quic_version_mismatch")),
        ("app-error", "quic", Some("quic_application_close")),
    ];
    for (mode, kind, detail) in cases {
        let srv = AioQuic::start(&["--mode", mode]);
        let t = std::time::Instant::now();
        let (url, ca) = (srv.url(), srv.ca());
        let out = run(&[
            "bench",
            &url,
            "--cacert",
            &ca,
            "--strategy",
            "h3-close",
            "-n",
            "3",
            "-c",
            "1",
            "--timeout",
            "1s",
            "--json",
            "--no-progress",
        ]);
        assert!(t.elapsed().as_secs() < 20, "{mode}: bounded");
        let r: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{mode}: {}", String::from_utf8_lossy(&out.stderr)));
        let s = scenario(&r);
        check_accounting(s);
        assert_eq!(n(&s["requests"]["attempted"]), 3, "{mode}: {s}");
        assert_eq!(
            n(&s["requests"]["errors"][kind]),
            3,
            "{mode}: {}",
            s["requests"]
        );
        if let Some(d) = detail {
            assert_eq!(
                n(&s["requests"]["error_details"][d]),
                3,
                "{mode}: {}",
                s["requests"]
            );
        }
    }
}

#[test]
fn usage_errors() {
    let _machine = shared();
    for (args, says) in [
        (vec!["bench", "http://127.0.0.1:1/", "-s", "h3"], "https://"),
        (
            vec![
                "bench",
                "https://127.0.0.1:1/",
                "-s",
                "h3-close",
                "--tls-version",
                "1.2",
            ],
            "TLS 1.3",
        ),
        (
            vec![
                "bench",
                "https://127.0.0.1:1/",
                "-s",
                "h3-0rtt",
                "-m",
                "POST",
            ],
            "idempotent",
        ),
        (
            vec![
                "bench",
                "https://127.0.0.1:1/",
                "-s",
                "h3-close",
                "--connections",
                "2",
            ],
            "--connections",
        ),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// The embedded server answers HTTP/3 at its HTTPS port; its own counts of QUIC
/// connections, resumed handshakes, requests and requests in 0-RTT equal the report's.
#[test]
fn embedded_server_counts_equal_the_report() {
    let _s = serial();
    for (strategy, n_req) in [
        ("h3-close", 20),
        ("h3-resumed", 30),
        ("h3-0rtt", 30),
        ("h3", 40),
    ] {
        let r = bench_json(&["--strategy", strategy, "-n", &n_req.to_string(), "-c", "2"]);
        let s = scenario(&r);
        check_accounting(s);
        let srv = &r["server"];
        let c = &s["connections"];
        assert_eq!(n(&s["requests"]["ok"]), n_req, "{strategy}: {s}");
        assert_eq!(n(&srv["h3_requests"]), n_req, "{strategy}: {srv}");
        assert_eq!(
            n(&c["opened"]),
            n(&srv["h3_connections"]),
            "{strategy}: {srv}"
        );
        assert_eq!(
            n(&c["opened"]),
            n(&srv["connections_accepted"]),
            "{strategy}"
        );
        let hs = &c["tls_handshakes"];
        assert_eq!(
            n(&hs["full"]),
            n(&srv["tls_handshakes_full"]),
            "{strategy}: {srv}"
        );
        assert_eq!(
            n(&hs["resumed"]),
            n(&srv["tls_handshakes_resumed"]),
            "{strategy}: {srv}"
        );
        match strategy {
            "h3-close" => assert_eq!(n(&hs["resumed"]), 0),
            "h3" => assert_eq!(n(&c["opened"]), 1),
            _ => assert!(n(&hs["resumed"]) >= n_req - 6, "{strategy}: {hs}"),
        }
        if strategy == "h3-0rtt" {
            let ed = &c["early_data"];
            assert_eq!(n(&ed["attempted"]), n(&hs["resumed"]), "{ed}");
            assert_eq!(n(&ed["accepted"]), n(&ed["attempted"]), "{ed}");
            // The server's own counts: connections that read 0-RTT packets, and
            // requests that came in them.
            assert_eq!(
                n(&ed["accepted"]),
                n(&srv["h3_early_data_connections"]),
                "{srv}"
            );
            assert_eq!(n(&ed["accepted"]), n(&srv["early_data_requests"]), "{srv}");
            assert_eq!(
                n(&ed["accepted"]),
                n(&srv["h3_early_data_requests"]),
                "{srv}"
            );
        } else {
            assert_eq!(n(&srv["early_data_requests"]), 0, "{strategy}: {srv}");
            assert_eq!(n(&srv["h3_early_data_connections"]), 0, "{strategy}: {srv}");
        }
    }
    // Busier: the connections that read 0-RTT stay exact; the per-request count is a
    // lower bound (a stream taken after the client's Finished counts as 1-RTT).
    let r = bench_json(&["--strategy", "h3-0rtt", "-n", "300", "-c", "16"]);
    let s = scenario(&r);
    check_accounting(s);
    let (ed, srv) = (&s["connections"]["early_data"], &r["server"]);
    assert!(n(&ed["accepted"]) > 0, "{ed}");
    assert_eq!(
        n(&ed["accepted"]),
        n(&srv["h3_early_data_connections"]),
        "{srv}"
    );
    assert!(
        n(&srv["early_data_requests"]) <= n(&ed["accepted"]),
        "{srv}"
    );
    assert_eq!(
        n(&srv["early_data_requests"]),
        n(&srv["h3_early_data_requests"]),
        "{srv}"
    );
}

/// compare sets the HTTP/3 strategies beside the TCP ones (https group only); the
/// embedded server's count of QUIC connections equals the h3 rows' connections, and the
/// "Why" lines name the QUIC handshake and the requests that went in 0-RTT.
#[test]
fn compare_sets_h3_beside_tcp() {
    let _s = serial();
    let r = compare_json(&[
        "--strategies",
        "keepalive,h3-close,h3-0rtt,h3",
        "-n",
        "200",
        "--rounds",
        "6",
    ]);
    let scenarios = r["scenarios"].as_array().unwrap();
    let names: Vec<&str> = scenarios
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "http keepalive",
            "https keepalive",
            "https h3-close",
            "https h3-0rtt",
            "https h3"
        ]
    );
    let h3_opened: u64 = scenarios
        .iter()
        .filter(|s| s["protocol"] == "h3")
        .map(|s| n(&s["connections"]["opened"]))
        .sum();
    let h3_ok: u64 = scenarios
        .iter()
        .filter(|s| s["protocol"] == "h3")
        .map(|s| n(&s["requests"]["ok"]))
        .sum();
    assert_eq!(
        n(&r["server"]["h3_connections"]),
        h3_opened,
        "{}",
        r["server"]
    );
    assert_eq!(n(&r["server"]["h3_requests"]), h3_ok);
    let early: u64 = n(&scenarios[3]["connections"]["early_data"]["accepted"]);
    let why = r["comparison"]["explanations"].to_string();
    assert!(
        why.contains("QUIC handshake with a full TLS 1.3 inside"),
        "{why}"
    );
    assert!(
        why.contains(&format!(
            "{early} of 1200 requests went in TLS 1.3 early data"
        )),
        "{why}"
    );
    let close = r["comparison"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "https h3-close")
        .unwrap();
    assert_eq!(close["significant"], true, "{close}");
}

/// For an https:// URL compare probes HTTP/3 (one request on a QUIC connection) and
/// 0-RTT (two requests on new connections, over TCP and over QUIC): the h3 strategies
/// are in its default set when the server answers HTTP/3, close-0rtt and h3-0rtt when
/// it takes early data, and not otherwise.
#[test]
fn compare_includes_h3_and_0rtt_where_the_server_offers_them() {
    let _s = serial();
    for (h3, early) in [(true, false), (false, false), (true, true)] {
        let srv = start(handshake::api::server::ServerConfig {
            h3,
            early_data: early,
            ..Default::default()
        });
        let ca = TempFile::new("ca.pem", srv.ca_pem.as_bytes());
        let url = srv.https_url().unwrap();
        let r = compare_json(&[&url, "--cacert", ca.s(), "-n", "40", "--rounds", "2"]);
        let names: Vec<String> = r["comparison"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["strategy"].as_str().unwrap().to_string())
            .collect();
        let has = |s: &str| names.contains(&s.to_string());
        assert_eq!(has("h3-close"), h3, "{names:?}");
        assert_eq!(has("h3"), h3, "{names:?}");
        assert_eq!(has("close-0rtt"), early, "{names:?}");
        assert_eq!(has("h3-0rtt"), h3 && early, "{names:?}");
        let s = srv.snapshot();
        // The probes' connections (1 for HTTP/3, then 2 for its 0-RTT), then the h3
        // rows' own.
        let rows_h3: u64 = r["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["protocol"] == "h3")
            .map(|s| n(&s["connections"]["opened"]))
            .sum();
        let probes = if h3 { 3 } else { 0 };
        assert_eq!(s.h3_connections, rows_h3 + probes, "{s:?}");
        srv.stop();
    }
}

/// The embedded server advertises HTTP/3 (`Alt-Svc: h3=":PORT"`) on its HTTP/1.1 and
/// HTTP/2 responses over TLS, as real curl sees them, and not over plain HTTP.
#[test]
fn embedded_server_advertises_h3_by_alt_svc() {
    let _s = serial();
    if !have("curl") {
        return;
    }
    let srv = start(handshake::api::server::ServerConfig::default());
    let ca = TempFile::new("ca.pem", srv.ca_pem.as_bytes());
    let https = srv.https_url().unwrap();
    let port = srv.https_addr.unwrap().port();
    let want = format!("h3=\":{port}\"; ma=86400");
    let headers = |args: &[&str]| -> String {
        let out = Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-D", "-", "--cacert", ca.s()])
            .args(args)
            .output()
            .expect("curl runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_ascii_lowercase()
    };
    for (args, what) in [
        (vec!["--http1.1", https.as_str()], "HTTP/1.1"),
        (
            vec!["--http1.1", &format!("{https}bytes/100000")],
            "HTTP/1.1, not the default route",
        ),
        (vec!["--http2", https.as_str()], "HTTP/2"),
    ] {
        let h = headers(&args);
        assert!(h.contains(&format!("alt-svc: {want}")), "{what}: {h}");
    }
    let h = headers(&[srv.http_url().unwrap().as_str()]);
    assert!(!h.contains("alt-svc"), "plain HTTP: {h}");
    // With HTTP/3 off, no advertisement.
    let off = start(handshake::api::server::ServerConfig {
        h3: false,
        ..Default::default()
    });
    let ca_off = TempFile::new("ca.pem", off.ca_pem.as_bytes());
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-D", "-", "--cacert", ca_off.s()])
        .arg(off.https_url().unwrap())
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stdout)
        .to_ascii_lowercase()
        .contains("alt-svc"));
    off.stop();
    srv.stop();
}

fn doctor(args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec![
        "doctor",
        "--json",
        "--max-requests",
        "20",
        "--max-idle",
        "1s",
    ];
    all.extend_from_slice(args);
    let out = run(&all);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("doctor {args:?}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), v)
}

fn texts(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s["text"].as_str().unwrap().to_string())
        .collect()
}

/// What doctor's HTTP/3 probes did on the wire equals aioquic's own counts: QUIC
/// connections (handshakes), resumed handshakes and requests taken in 0-RTT.
fn same_counts_as_aioquic(h: &Value, st: &Value) {
    assert_eq!(
        n(&h["connections_opened"]),
        n(&st["handshakes"]),
        "{h} {st}"
    );
    assert_eq!(n(&h["handshakes_resumed"]), n(&st["resumed"]), "{h} {st}");
    assert_eq!(
        n(&h["early_data_accepted"]),
        n(&st["early_requests"]),
        "{h} {st}"
    );
}

/// doctor against aioquic (with an HTTPS/1.1 origin on TCP at the same port that
/// advertises it by Alt-Svc): HTTP/3 found, QUIC sessions resumed, 0-RTT taken or not
/// as the server is set; the QUIC connections, resumed handshakes and 0-RTT requests
/// doctor made equal the server's own counts.
#[test]
fn doctor_finds_h3_resumption_and_0rtt_as_aioquic_counts_them() {
    let _s = serial();
    for early in ["on", "off"] {
        let srv = AioQuic::start(&["--tcp", "on", "--early-data", early]);
        let (url, ca) = (srv.url(), srv.ca());
        let (_, v) = doctor(&[&url, "--cacert", &ca]);
        let h = &v["h3"];
        assert_eq!(h["advertised"], true, "{h}");
        assert_eq!(h["answered"], true, "{h}");
        assert_eq!(n(&h["port"]), u64::from(srv.port));
        assert_eq!(h["resumption"], true, "{h}");
        assert!(h["full_handshake_ms"].as_f64().unwrap() > 0.0, "{h}");
        assert!(h["resumed_handshake_ms"].as_f64().unwrap() > 0.0, "{h}");
        assert_eq!(h["early_data"]["accepted"], early == "on", "{h}");
        same_counts_as_aioquic(h, &srv.stats());
        let f = texts(&v["findings"]);
        assert!(f.iter().any(|s| s.contains("HTTP/3: advertised")), "{f:?}");
        let zero_rtt = if early == "on" {
            "QUIC 0-RTT: accepted"
        } else {
            "rejected the request sent in it"
        };
        assert!(f.iter().any(|s| s.contains(zero_rtt)), "{f:?}");
        assert!(
            !texts(&v["problems"]).iter().any(|p| p.contains("QUIC")),
            "{v}"
        );
    }
}

/// doctor against an HTTP/3-only server (aioquic with no TCP listener): TCP is refused,
/// so it probes QUIC at the same port first-hand and reports it, rather than exit 2;
/// the QUIC connections and resumed handshakes it made equal aioquic's own counts.
#[test]
fn doctor_examines_an_http3_only_server() {
    let _s = serial();
    let srv = AioQuic::start(&["--tcp", "off"]);
    let (url, ca) = (srv.url(), srv.ca());
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", srv.port)).is_err(),
        "no TCP listener"
    );
    let (code, v) = doctor(&[&url, "--cacert", &ca]);
    assert_eq!(code, Some(0), "{v}");
    let h = &v["h3"];
    assert_eq!(h["answered"], true, "{h}");
    assert_eq!(h["advertised"], false, "{h}");
    assert_eq!(h["resumption"], true, "{h}");
    same_counts_as_aioquic(h, &srv.stats());
    assert!(
        v["http10"].is_null() && v["tls"].is_null() && v["h2"].is_null(),
        "{v}"
    );
    assert!(
        v["http11"]["error"].as_str().unwrap().contains("refused"),
        "{v}"
    );
    let f = texts(&v["findings"]);
    assert!(
        f[0].starts_with("TCP: no connection (")
            && f[0].contains("answers only over QUIC (HTTP/3)"),
        "{f:?}"
    );
    assert!(
        f.iter()
            .any(|s| s.contains("answered over QUIC at UDP port")),
        "{f:?}"
    );
}

/// A server that advertises HTTP/3 but drops UDP: a problem naming the error, found
/// within the timeout; one that neither advertises nor answers it (the embedded server
/// with --h3 off): a finding, no problem.
#[test]
fn doctor_flags_advertised_h3_that_does_not_answer() {
    let _s = serial();
    let srv = AioQuic::start(&["--tcp", "on", "--mode", "drop"]);
    let (url, ca) = (srv.url(), srv.ca());
    let started = std::time::Instant::now();
    let (code, v) = doctor(&[&url, "--cacert", &ca, "--timeout", "2s"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(code, Some(1), "{v}");
    let h = &v["h3"];
    assert_eq!(h["advertised"], true);
    assert_eq!(h["answered"], false);
    assert!(h["error"].as_str().unwrap().contains("quic_timeout"), "{h}");
    assert_eq!(n(&h["connections_opened"]), 0);
    let p = texts(&v["problems"]);
    assert!(
        p.iter()
            .any(|s| s.contains("advertises HTTP/3") && s.contains("quic_timeout")),
        "{p:?}"
    );
    drop(srv);

    let srv = start(ServerConfig {
        h3: false,
        ..Default::default()
    });
    let ca = TempFile::new("ca.pem", srv.ca_pem.as_bytes());
    let (code, v) = doctor(&[&srv.https_url().unwrap(), "--cacert", ca.s()]);
    srv.stop();
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["h3"]["advertised"], false);
    assert_eq!(v["h3"]["answered"], false);
    assert!(v["h3"]["alt_svc"].is_null());
    let f = texts(&v["findings"]);
    assert!(f.iter().any(|s| s.contains("HTTP/3: not offered")), "{f:?}");
}

/// doctor against the embedded server with early data on: HTTP/3 advertised and
/// answered, QUIC resumed, 0-RTT accepted; its QUIC connections and those that read
/// 0-RTT packets equal the server's counts.
#[test]
fn doctor_on_the_embedded_server_matches_its_quic_counts() {
    let _s = serial();
    let srv = start(ServerConfig {
        early_data: true,
        ..Default::default()
    });
    let ca = TempFile::new("ca.pem", srv.ca_pem.as_bytes());
    let (code, v) = doctor(&[&srv.https_url().unwrap(), "--cacert", ca.s()]);
    let st = srv.snapshot();
    srv.stop();
    assert_eq!(code, Some(0), "{v}");
    let h = &v["h3"];
    assert_eq!(h["advertised"], true, "{h}");
    assert_eq!(h["answered"], true, "{h}");
    assert_eq!(h["resumption"], true, "{h}");
    assert_eq!(h["early_data"]["accepted"], true, "{h}");
    assert_eq!(n(&h["connections_opened"]), st.h3_connections, "{h} {st:?}");
    assert_eq!(
        n(&h["early_data_accepted"]),
        st.h3_early_data_connections,
        "{h} {st:?}"
    );
}

/// `trace` against aioquic, as JSON; the exit status too.
fn trace(srv: &AioQuic, args: &[&str]) -> (Option<i32>, Value) {
    let (url, ca) = (srv.url(), srv.ca());
    let mut all = vec!["trace", url.as_str(), "--cacert", &ca, "--json"];
    all.extend_from_slice(args);
    let out = run(&all);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "{args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

/// `trace --http3` lays out one QUIC connection: its handshake on the first step, each
/// request on a new stream of it; per-request strategies open one per step, resume,
/// and send in 0-RTT. Every connection, resumed handshake and 0-RTT request it shows
/// is one aioquic counted.
#[test]
fn trace_http3_shows_what_aioquic_counts() {
    let _s = serial();
    let srv = AioQuic::start(&[]);
    let (code, t) = trace(&srv, &["--http3", "--count", "3"]);
    assert_eq!(code, Some(0), "{t}");
    assert_eq!(t["protocol"], "h3");
    let steps = t["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    let st = srv.stats();
    assert_eq!(n(&st["connections"]), 1, "{st}");
    assert_eq!(n(&st["requests"]), 3, "{st}");
    for (i, s) in steps.iter().enumerate() {
        assert_eq!(s["status"], 200, "{s}");
        assert_eq!(s["http_version"], "HTTP/3");
        assert_eq!(
            n(&s["stream_id"]),
            4 * i as u64,
            "client streams 0, 4, 8: {s}"
        );
        assert_eq!(s["reused"], i > 0, "{s}");
        let q = &s["quic"];
        assert!(q["rtt_ms"].as_f64().unwrap() > 0.0, "{q}");
        assert!(n(&q["packets_sent"]) >= 3, "{q}");
        assert!(n(&q["datagrams_received"]) >= 2, "{q}");
    }
    let first = &steps[0];
    assert!(
        first["quic_handshake_ms"].as_f64().unwrap() > 0.0,
        "{first}"
    );
    assert!(first["connect_ms"].is_null() && first["tls_ms"].is_null());
    assert_eq!(first["tls"]["alpn"], "h3");
    assert_eq!(first["tls"]["resumed"], false);
    assert!(steps[1]["quic_handshake_ms"].is_null());
    // The same connection throughout: quinn's packet count only grows.
    assert!(n(&steps[2]["quic"]["packets_sent"]) > n(&steps[0]["quic"]["packets_sent"]));
    drop(srv);

    // h3-0rtt: the first connection is full (no session yet); the next ones resume and
    // their request goes before the handshake's end, as aioquic saw it.
    let srv = AioQuic::start(&[]);
    let (code, t) = trace(&srv, &["-s", "h3-0rtt", "--count", "3"]);
    assert_eq!(code, Some(0), "{t}");
    let steps = t["steps"].as_array().unwrap();
    let st = srv.stats();
    assert_eq!(n(&st["connections"]), 3, "{st}");
    assert_eq!(n(&st["requests"]), 3, "{st}");
    let accepted = steps
        .iter()
        .filter(|s| s["early_data"] == "accepted")
        .count() as u64;
    let resumed = steps.iter().filter(|s| s["tls"]["resumed"] == true).count() as u64;
    assert_eq!(accepted, n(&st["early_requests"]), "{st}");
    assert_eq!(accepted, 2, "{t}");
    assert_eq!(resumed, n(&st["resumed"]), "{st}");
    assert_eq!(steps[0]["early_data"], "unavailable", "no session yet");
    assert!(steps[0]["request_left_ms"].is_null());
    assert_eq!(steps[0]["session_ticket"], true, "{}", steps[0]);
    for s in &steps[1..] {
        assert_eq!(s["reused"], false);
        assert_eq!(
            n(&s["stream_id"]),
            0,
            "a new connection's first stream: {s}"
        );
        let left = s["request_left_ms"].as_f64().unwrap();
        let hs = s["quic_handshake_ms"].as_f64().unwrap();
        assert!(
            left < hs,
            "the request left before the handshake's end: {s}"
        );
    }
    drop(srv);

    // 0-RTT refused: shown as rejected, the request answered after the handshake.
    let srv = AioQuic::start(&["--early-data", "off"]);
    let (code, t) = trace(&srv, &["-s", "h3-0rtt", "--count", "2"]);
    assert_eq!(code, Some(0), "{t}");
    let st = srv.stats();
    let second = &t["steps"][1];
    assert_eq!(second["early_data"], "rejected", "{second}");
    assert_eq!(second["status"], 200);
    assert!(second["request_left_ms"].is_null());
    assert_eq!(n(&st["early_requests"]), 0);
    assert_eq!(n(&st["requests"]), 2, "{st}");
    assert_eq!(n(&st["connections"]), 2);
    drop(srv);

    // A server that drops all UDP: a quic_timeout within the step's limit.
    let srv = AioQuic::start(&["--mode", "drop"]);
    let started = std::time::Instant::now();
    let (code, t) = trace(&srv, &["--http3", "--timeout", "1s"]);
    assert!(started.elapsed().as_secs() < 10);
    assert_eq!(code, Some(1), "{t}");
    let e = t["error"].as_str().unwrap();
    assert!(e.contains("quic_timeout"), "{e}");
    assert!(t["steps"].as_array().unwrap().is_empty());
}

/// Text: the waterfall names the QUIC handshake and quinn's figures; `--http3` with
/// `--strategy` or on http:// is a usage error.
#[test]
fn trace_http3_text_and_usage() {
    let _machine = shared();
    // Wide enough that no sentence is folded.
    let out = std::process::Command::new(bin())
        .args(["trace", "-s", "h3-0rtt", "--count", "2"])
        .env("COLUMNS", "300")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    for says in [
        "quic_hs",
        "h3_setup",
        "TLSv1.3 inside QUIC, ALPN h3",
        "RTT estimate",
        "resumed handshake; the request went in early data (0-RTT), accepted",
        "0-RTT       the request left",
        "the server sent a session ticket",
    ] {
        assert!(text.contains(says), "{says:?} in:\n{text}");
    }
    for (args, says) in [
        (vec!["trace", "--http3", "-s", "h3"], "--strategy"),
        (vec!["trace", "--http3", "--http2"], "--http2"),
        (vec!["trace", "http://127.0.0.1:1/", "--http3"], "https://"),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// An HTTP/3 error response is quoted as HTTP/1's are: aioquic's 400 ("bad bytes") with
/// its status line as curl prints it; the run of 400s fails (exit 1); aioquic counted the
/// requests.
#[test]
fn http3_error_statuses_are_quoted() {
    let _s = serial();
    let srv = AioQuic::start(&[]);
    let (url, ca) = (format!("{}?bytes=many", srv.url()), srv.ca());
    let out = run(&[
        "bench",
        &url,
        "--cacert",
        &ca,
        "--strategy",
        "h3",
        "-n",
        "4",
        "-c",
        "1",
        "--json",
        "--no-progress",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = scenario(&r);
    assert_eq!(n(&s["requests"]["answered"]), 4, "{s}");
    assert_eq!(n(&s["requests"]["error_status"]), 4, "{s}");
    assert_eq!(n(&s["requests"]["ok"]), 0, "{s}");
    assert_eq!(n(&srv.stats()["requests"]), 4, "{}", srv.stats());
    assert_eq!(
        s["requests"]["status_examples"]["400"], "HTTP/3 400: \"bad bytes\"",
        "{s}"
    );
    let h = &s["headline"];
    assert_eq!(h["code"], "no_success_status", "{h}");
    assert!(
        h["text"]
            .as_str()
            .unwrap()
            .contains("HTTP/3 400: \"bad bytes\""),
        "{h}"
    );
}

/// A UDP relay in front of a QUIC server that holds back the second Initial datagram
/// of each connection (a ClientHello with a post-quantum key share fills two) for
/// `hold`: the server has the connection, but not yet the client's transport
/// parameters, when the first one arrives. Stops with its threads on drop.
struct SplitHello {
    port: u16,
    /// Connections whose second Initial was held back.
    held: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl SplitHello {
    fn start(server: std::net::SocketAddr, hold: std::time::Duration) -> SplitHello {
        use std::net::UdpSocket;
        let front = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = UdpSocket::bind("127.0.0.1:0").unwrap();
        back.connect(server).unwrap();
        let tick = Some(std::time::Duration::from_millis(20));
        front.set_read_timeout(tick).unwrap();
        back.set_read_timeout(tick).unwrap();
        let port = front.local_addr().unwrap().port();
        let (held, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let client = Arc::new(Mutex::new(None));
        // The connection IDs the server chose: the client's later Initials go to them.
        let server_ids = Arc::new(Mutex::new(std::collections::HashSet::<Vec<u8>>::new()));
        let up = {
            let (front, back) = (front.try_clone().unwrap(), back.try_clone().unwrap());
            let (held, stop, client) = (held.clone(), stop.clone(), client.clone());
            let server_ids = server_ids.clone();
            std::thread::spawn(move || {
                let mut initials: std::collections::HashMap<Vec<u8>, u32> = Default::default();
                let mut buf = [0u8; 65_536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((len, from)) = front.recv_from(&mut buf) else {
                        continue;
                    };
                    *client.lock().unwrap() = Some(from);
                    let d = &buf[..len];
                    // A long header (bit 7), a version, packet type 0 (Initial), then
                    // the destination connection ID the client chose.
                    let initial = len > 6 && d[0] & 0x80 != 0 && (d[0] >> 4) & 0x03 == 0;
                    let dcid = (len >= 6 + d[5] as usize).then(|| d[6..6 + d[5] as usize].to_vec());
                    let nth = match dcid {
                        Some(id) if initial && !server_ids.lock().unwrap().contains(&id) => {
                            let n = initials.entry(id).or_default();
                            *n += 1;
                            *n
                        }
                        _ => 0,
                    };
                    if nth == 2 {
                        held.fetch_add(1, Ordering::Relaxed);
                        let (back, d) = (back.try_clone().unwrap(), d.to_vec());
                        std::thread::spawn(move || {
                            std::thread::sleep(hold);
                            let _ = back.send(&d);
                        });
                    } else {
                        let _ = back.send(d);
                    }
                }
            })
        };
        let down = {
            let stop = stop.clone();
            let server_ids = server_ids.clone();
            std::thread::spawn(move || {
                let mut buf = [0u8; 65_536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok(len) = back.recv(&mut buf) else {
                        continue;
                    };
                    // A long header: the destination ID (the client's), then the source
                    // ID, the server's.
                    let d = &buf[..len];
                    if len > 6 && d[0] & 0x80 != 0 {
                        let at = 6 + d[5] as usize;
                        if let Some(&l) = d.get(at) {
                            if let Some(id) = d.get(at + 1..at + 1 + l as usize) {
                                server_ids.lock().unwrap().insert(id.to_vec());
                            }
                        }
                    }
                    if let Some(to) = *client.lock().unwrap() {
                        let _ = front.send_to(&buf[..len], to);
                    }
                }
            })
        };
        SplitHello {
            port,
            held,
            stop,
            threads: vec![up, down],
        }
    }
}

impl Drop for SplitHello {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A ClientHello whose second Initial comes 80 ms after the first (a delayed or
/// reordered datagram, as on a real path): the embedded server still reads each request
/// and answers it. It used to open its HTTP/3 control streams before it had the client's
/// stream limits and wait on them for good, so the request timed out (one connection in
/// about a hundred over the lab's 40 ms link).
#[test]
fn a_client_hello_in_two_initials_apart_is_still_answered() {
    let _s = serial();
    let srv = start(ServerConfig {
        h3: true,
        ..ServerConfig::default()
    });
    let ca = TempFile::new("ca.pem", srv.ca_pem.as_bytes());
    let relay = SplitHello::start(
        srv.https_addr.unwrap(),
        std::time::Duration::from_millis(80),
    );
    let url = format!("https://127.0.0.1:{}/", relay.port);
    for strategy in ["h3-close", "h3-0rtt"] {
        let before = srv.snapshot();
        let held = relay.held.load(Ordering::Relaxed);
        let r = bench_json(&[
            &url,
            "--cacert",
            ca.s(),
            "--strategy",
            strategy,
            "-n",
            "3",
            "-c",
            "1",
            "--timeout",
            "3s",
        ]);
        let s = scenario(&r);
        check_accounting(s);
        let after = srv.snapshot();
        // Each connection's ClientHello came in two Initials, the second held back.
        let opened = n(&s["connections"]["opened"]);
        assert_eq!(opened, 3, "{strategy}: {s}");
        assert_eq!(
            relay.held.load(Ordering::Relaxed) - held,
            opened,
            "{strategy}: one held-back Initial per connection"
        );
        assert_eq!(n(&s["requests"]["ok"]), 3, "{strategy}: {}", s["requests"]);
        assert_eq!(after.h3_requests - before.h3_requests, 3, "{strategy}");
        assert_eq!(after.h3_connections - before.h3_connections, opened);
        if strategy == "h3-0rtt" {
            // The early data still counted on both sides.
            let ed = &s["connections"]["early_data"];
            assert_eq!(
                n(&ed["accepted"]),
                after.h3_early_data_connections - before.h3_early_data_connections,
                "{ed}"
            );
        }
    }
}

/// -L over HTTP/3: aioquic's `?to=/end` answers 301; each hop is a request on the
/// shared QUIC connection, as the server counts them.
#[test]
fn h3_follows_a_redirect_as_the_server_counts_it() {
    let _s = serial();
    let srv = AioQuic::start(&[]);
    let url = format!("{}?to=/end", srv.url());
    let ca = srv.ca();
    let r = bench_json(&[
        &url, "--cacert", &ca, "-s", "h3", "-L", "-n", "6", "-c", "1",
    ]);
    let s = scenario(&r);
    let st = srv.stats();
    assert_eq!(n(&s["requests"]["attempted"]), 12, "{s}");
    assert_eq!(n(&st["requests"]), 12, "{st}");
    assert_eq!(n(&s["requests"]["redirects"]), 6);
    assert_eq!(n(&s["requests"]["status_codes"]["301"]), 6);
    assert_eq!(
        n(&s["connections"]["opened"]),
        n(&st["connections"]),
        "{st}"
    );
}
