//! The embedded server and the audit as a liability: loopback by default, header and
//! body size limits (431/413), the header read timeout (no slowloris, 408), the idle
//! timeout, the connection limit (503); each checked on both. Also the server's TLS 1.2
//! resumption as well as 1.3.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

use handshake::api::audit::Audit;
use serde_json::Value;
use std::time::{Duration, Instant};

use crate::common::*;

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Read until EOF; return what came.
fn read_all(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Run `check` against the embedded server and then against `handshake audit`
/// (answering itself), both with `cfg`'s limits. Returns the server's stats and the
/// audit's report, for the caller's ground-truth checks.
fn on_server_and_audit(
    cfg: ServerConfig,
    check: impl Fn(SocketAddr, &dyn Fn() -> u64),
) -> (handshake::api::server::StatsSnapshot, Value) {
    let srv = start(cfg.clone());
    check(srv.http_addr.unwrap(), &|| srv.snapshot().open_connections);
    let stats = srv.snapshot();
    srv.stop();
    let audit = Audit::start(cfg).unwrap();
    let addr: SocketAddr = audit
        .url()
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .unwrap();
    assert!(addr.ip().is_loopback());
    check(addr, &|| audit.open_connections());
    (stats, audit.finish())
}

/// The audit counted `n` connections that ended as `e`.
fn assert_ending(r: &Value, e: &str, n: u64) {
    let got = r["total"]["endings"][e].as_u64().unwrap_or(0);
    assert_eq!(got, n, "{e} in {}", r["total"]["endings"]);
}

#[test]
fn binds_loopback_by_default() {
    let _machine = shared();
    let srv = server::start(ServerConfig::default()).unwrap();
    assert!(srv.http_addr.unwrap().ip().is_loopback());
    srv.stop();
    // audit's own default is held by a unit test in src/cli.
}

#[test]
fn oversized_head_gets_431_and_oversized_body_413() {
    let _machine = shared();
    let cfg = ServerConfig {
        max_header_bytes: 1024,
        max_body_bytes: 100,
        ..ServerConfig::default()
    };
    let (stats, audit) = on_server_and_audit(cfg, |addr, _| {
        let mut s = connect(addr);
        let big = "x".repeat(2000);
        s.write_all(format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n").as_bytes())
            .unwrap();
        let r = read_all(&mut s);
        assert!(r.starts_with("HTTP/1.1 431 "), "{r}");
        let mut s = connect(addr);
        let many: String = (0..200).map(|i| format!("X-{i}: v\r\n")).collect();
        s.write_all(format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n").as_bytes())
            .unwrap();
        let r = read_all(&mut s);
        assert!(r.starts_with("HTTP/1.1 431 "), "200 headers: {r}");
        let mut s = connect(addr);
        s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n")
            .unwrap();
        let r = read_all(&mut s);
        assert!(r.starts_with("HTTP/1.1 413 "), "{r}");
        // Within the limits, bodies (plain and chunked) are read and the connection kept.
        let mut s = connect(addr);
        s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloPOST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let r = read_all(&mut s);
        assert_eq!(r.matches("HTTP/1.1 200 OK").count(), 3, "{r}");
    });
    assert_eq!(stats.requests, 3);
    assert_eq!(audit["total"]["responses"], 3);
    assert_ending(&audit, "too_large", 3);
    assert!(
        audit["verdict"].as_array().unwrap().iter().any(
            |v| v["code"] == "too_large" && v["text"].as_str().unwrap().contains("431 or 413")
        ),
        "{}",
        audit["verdict"]
    );
}

#[test]
fn slow_headers_are_cut_off_by_the_header_timeout() {
    let _machine = shared();
    let cfg = ServerConfig {
        header_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    };
    let (stats, audit) = on_server_and_audit(cfg, |addr, _| {
        let mut s = connect(addr);
        let t = Instant::now();
        // One byte per 50 ms: slower than the timeout allows for the whole head.
        let mut cut = false;
        for b in b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" {
            if s.write_all(&[*b]).is_err() {
                cut = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
            if t.elapsed() > Duration::from_millis(900) {
                break;
            }
        }
        let r = read_all(&mut s);
        assert!(
            cut || r.starts_with("HTTP/1.1 408 "),
            "slowloris head answered: {r:?}"
        );
        assert!(t.elapsed() < Duration::from_secs(3));
    });
    assert_eq!(stats.requests, 0);
    assert_eq!(audit["total"]["requests"], 0);
    assert_ending(&audit, "stalled", 1);
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout() {
    let _machine = shared();
    let cfg = ServerConfig {
        idle_timeout: Duration::from_millis(200),
        ..ServerConfig::default()
    };
    let (_, audit) = on_server_and_audit(cfg, |addr, _| {
        let mut s = connect(addr);
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        // The whole response (head and 13-byte body, maybe in separate segments).
        let mut got = Vec::new();
        let mut buf = [0u8; 1024];
        while !got.ends_with(&[b'x'; 13]) {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "EOF inside the response");
            got.extend_from_slice(&buf[..n]);
        }
        let t = Instant::now();
        let n = s.read(&mut buf).unwrap();
        assert_eq!(n, 0, "EOF after the idle timeout");
        let waited = t.elapsed();
        assert!(
            waited >= Duration::from_millis(150) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
    });
    assert_ending(&audit, "idle_timeout", 1);
}

#[test]
fn connections_over_the_limit_get_503() {
    let _machine = shared();
    let cfg = ServerConfig {
        max_connections: 2,
        ..ServerConfig::default()
    };
    let (stats, audit) = on_server_and_audit(cfg, |addr, open| {
        let a = connect(addr);
        let b = connect(addr);
        // Make sure both are accepted before the third arrives.
        let t = Instant::now();
        while open() < 2 && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let mut c = connect(addr);
        c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let r = read_all(&mut c);
        assert!(r.starts_with("HTTP/1.1 503 "), "{r}");
        drop((a, b));
    });
    assert_eq!(stats.rejected_connections, 1);
    assert_ending(&audit, "over_limit", 1);
    assert_eq!(audit["total"]["connections"], 3);
    assert!(
        audit["verdict"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["code"] == "over_limit" && v["text"].as_str().unwrap().contains("503")),
        "{}",
        audit["verdict"]
    );
}

#[test]
fn tls12_full_and_resumed_handshakes() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let url = srv.https_url().unwrap();
    let r = bench_json(&[
        &url,
        "-n",
        "40",
        "-c",
        "2",
        "--insecure",
        "--tls-version",
        "1.2",
        "--strategy",
        "close",
    ]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["connections"]["tls_handshakes"]["full"]), 40);
    let r = bench_json(&[
        &url,
        "-n",
        "40",
        "-c",
        "2",
        "--insecure",
        "--tls-version",
        "1.2",
        "--strategy",
        "close-resumed",
    ]);
    let s = scenario(&r);
    assert!(
        u(&s["connections"]["tls_handshakes"]["resumed"]) >= 30,
        "{}",
        s["connections"]
    );
    let snap = srv.snapshot();
    assert_eq!(snap.connections_accepted, 80);
    assert_eq!(snap.tls_handshakes_full + snap.tls_handshakes_resumed, 80);
    assert_eq!(
        snap.tls_handshakes_resumed,
        u(&s["connections"]["tls_handshakes"]["resumed"])
    );
    srv.stop();
}

#[test]
fn hundreds_of_simultaneous_connects_are_not_dropped() {
    let _machine = shared();
    // With a 128-entry accept queue some of 300 simultaneous SYNs are dropped and only
    // retried after a second; the server's queue must hold them.
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let r = bench_json(&[&url, "-c", "300", "-n", "600", "-t", "2"]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["connections"]["opened"]), 300);
    assert_eq!(srv.snapshot().connections_accepted, 300);
    let max = s["phases_ms"]["new"]["connect"]["max"].as_f64().unwrap();
    assert!(
        max < 900.0,
        "a connect took {max} ms: a SYN was dropped and retried"
    );
    srv.stop();
}

#[test]
fn a_response_that_closes_the_connection_leaves_with_the_fin() {
    let _machine = shared();
    // The server's last writes go out with MSG_MORE: the response's end and the FIN
    // leave in one segment, so the client's kernel processes one packet instead of
    // two. Checked on a capture of every segment with a FIN the server sent.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: capturing on loopback needs root");
        return;
    }
    let srv = start(ServerConfig::default());
    let port = srv.http_addr.unwrap().port();
    let dir = Dir::new("server-fin");
    let (cap, log) = (dir.path("fin.pcap"), dir.path("tcpdump.log"));
    let filter = format!("tcp src port {port} and tcp[tcpflags] & tcp-fin != 0");
    let mut tcpdump = std::process::Command::new("tcpdump")
        // A short snapshot: with the default 256 KiB one, a 2 MiB ring holds 8 packets,
        // and the kernel drops the rest when tcpdump is slow to read (tests in parallel).
        .args([
            "-i",
            "lo",
            "-n",
            "-s",
            "128",
            "-B",
            "4096",
            "-U",
            "--immediate-mode",
            "-w",
            &cap,
            &filter,
        ])
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("tcpdump runs (scripts/test installs it)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&log).unwrap().contains("listening") {
        assert!(Instant::now() < deadline, "tcpdump did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    let r = bench_json(&[
        &srv.http_url().unwrap(),
        "-s",
        "close",
        "-n",
        "20",
        "-c",
        "1",
    ]);
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill has no memory-safety preconditions; the PID is our child's.
    unsafe { libc::kill(tcpdump.id() as i32, libc::SIGINT) };
    tcpdump.wait().unwrap();
    let s = scenario(&r);
    assert_eq!(u(&s["requests"]["ok"]), 20);
    assert_eq!(srv.snapshot().connections_accepted, 20);
    let out = std::process::Command::new("tcpdump")
        .args(["-r", &cap, "-n"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let fins: Vec<&str> = text.lines().filter(|l| l.contains("Flags [F")).collect();
    assert_eq!(
        fins.len(),
        20,
        "{text}\n{}",
        std::fs::read_to_string(&log).unwrap()
    );
    for l in &fins {
        let len: u64 = l.rsplit("length ").next().unwrap().trim().parse().unwrap();
        assert!(len > 0, "a FIN without the response's end: {l}");
    }
    srv.stop();
}
