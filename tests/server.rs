//! The embedded server as a liability: loopback by default, header and body size
//! limits (431/413), the header read timeout (no slowloris), the idle timeout, the
//! connection limit (503), and TLS 1.2 resumption as well as 1.3.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::*;

fn connect(srv: &RunningServer) -> TcpStream {
    let s = TcpStream::connect(srv.http_addr.unwrap()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Read until EOF; return what came.
fn read_all(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn binds_loopback_by_default() {
    let srv = server::start(ServerConfig::default()).unwrap();
    assert!(srv.http_addr.unwrap().ip().is_loopback());
    srv.stop();
}

#[test]
fn oversized_head_gets_431_and_oversized_body_413() {
    let srv = start(ServerConfig {
        max_header_bytes: 1024,
        max_body_bytes: 100,
        ..ServerConfig::default()
    });
    let mut s = connect(&srv);
    let big = "x".repeat(2000);
    s.write_all(format!("GET / HTTP/1.1\r\nHost: x\r\nX-Big: {big}\r\n\r\n").as_bytes())
        .unwrap();
    let r = read_all(&mut s);
    assert!(r.starts_with("HTTP/1.1 431 "), "{r}");
    let mut s = connect(&srv);
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n")
        .unwrap();
    let r = read_all(&mut s);
    assert!(r.starts_with("HTTP/1.1 413 "), "{r}");
    // Within the limits, bodies (plain and chunked) are read and the connection kept.
    let mut s = connect(&srv);
    s.write_all(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloPOST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let r = read_all(&mut s);
    assert_eq!(r.matches("HTTP/1.1 200 OK").count(), 3, "{r}");
    assert_eq!(srv.snapshot().requests, 3);
    srv.stop();
}

#[test]
fn slow_headers_are_cut_off_by_the_header_timeout() {
    let srv = start(ServerConfig {
        header_timeout: Duration::from_millis(300),
        ..ServerConfig::default()
    });
    let mut s = connect(&srv);
    let t = Instant::now();
    // One byte at a time, slower than the timeout allows for the whole head.
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
    assert_eq!(srv.snapshot().requests, 0);
    srv.stop();
}

#[test]
fn idle_connections_are_closed_after_the_idle_timeout() {
    let srv = start(ServerConfig {
        idle_timeout: Duration::from_millis(200),
        ..ServerConfig::default()
    });
    let mut s = connect(&srv);
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).unwrap();
    assert!(n > 0);
    let t = Instant::now();
    let n = s.read(&mut buf).unwrap();
    assert_eq!(n, 0, "EOF after the idle timeout");
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(150) && waited < Duration::from_secs(2),
        "{waited:?}"
    );
    srv.stop();
}

#[test]
fn connections_over_the_limit_get_503() {
    let srv = start(ServerConfig {
        max_connections: 2,
        ..ServerConfig::default()
    });
    let a = connect(&srv);
    let b = connect(&srv);
    // Make sure both are accepted before the third arrives.
    let t = Instant::now();
    while srv.snapshot().open_connections < 2 && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut c = connect(&srv);
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let r = read_all(&mut c);
    assert!(r.starts_with("HTTP/1.1 503 "), "{r}");
    assert_eq!(srv.snapshot().rejected_connections, 1);
    drop((a, b));
    srv.stop();
}

#[test]
fn tls12_full_and_resumed_handshakes() {
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
