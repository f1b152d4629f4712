//! Bad and surprising servers: the stale keep-alive race, garbage, resets, short bodies,
//! and the framings a client must get right. Each case checks the error category, the
//! accounting invariant, and the connection count against the server's own count.

mod common;

use std::net::{Shutdown, TcpStream};
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;

/// Run against a scripted server and return the scenario, checking accounting and
/// that connections opened = connections the server accepted.
fn against_script<F>(extra: &[&str], handler: F) -> serde_json::Value
where
    F: Fn(TcpStream, u64) + Send + Sync + 'static,
{
    let (addr, accepted) = script_server(handler);
    let url = format!("http://{addr}/");
    let mut args = vec![url.as_str()];
    args.extend_from_slice(extra);
    if !extra.contains(&"--timeout") {
        args.extend_from_slice(&["--timeout", "3s"]);
    }
    let r = bench_json(&args);
    let s = scenario(&r).clone();
    check_accounting(&s);
    assert_eq!(
        u(&s["connections"]["opened"]),
        accepted.load(Ordering::SeqCst),
        "opened = accepted: {s}"
    );
    s
}

fn err(s: &serde_json::Value, kind: &str) -> u64 {
    u(&s["requests"]["errors"][kind])
}

#[test]
fn stale_idle_connections_are_retried_once_and_counted() {
    let srv = start(ServerConfig {
        idle_timeout: Duration::from_millis(100),
        ..ServerConfig::default()
    });
    let url = srv.http_url().unwrap();
    let r = bench_json(&[&url, "-n", "4", "-c", "1", "--rate", "4"]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(
        u(&s["requests"]["ok"]),
        4,
        "retries hide no failure and lose no request"
    );
    assert_eq!(u(&s["requests"]["retries"]["stale_connection"]), 3);
    assert_eq!(close_reason(s, "server_idle_close"), 3);
    assert_eq!(
        u(&s["connections"]["opened"]),
        srv.snapshot().connections_accepted
    );
    assert_eq!(u(&s["connections"]["opened"]), 4);
    let d = s["diagnosis"].as_array().unwrap();
    assert!(d.iter().any(|x| x.as_str().unwrap().contains("closed") && x.as_str().unwrap().contains("idle")), "{d:?}");
    srv.stop();
}

#[test]
fn non_idempotent_requests_are_not_retried_on_stale_connections() {
    let srv = start(ServerConfig {
        idle_timeout: Duration::from_millis(100),
        ..ServerConfig::default()
    });
    let url = srv.http_url().unwrap();
    let r = bench_json(&[
        &url, "-n", "4", "-c", "1", "--rate", "4", "-m", "POST", "--body", "x",
    ]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["requests"]["retries"]["stale_connection"]), 0);
    assert_eq!(u(&s["requests"]["ok"]), 2);
    assert_eq!(err(s, "closed_before_response") + err(s, "reset"), 2);
    assert_eq!(close_reason(s, "server_idle_close"), 2);
    assert_eq!(
        u(&s["connections"]["opened"]),
        srv.snapshot().connections_accepted
    );
    srv.stop();
}

#[test]
fn garbage_is_a_protocol_error() {
    let s = against_script(&["-n", "3", "-c", "1"], |mut st, _| {
        if read_head(&mut st).is_some() {
            write(&mut st, b"SSH-2.0-OpenSSH_9.0\r\n\r\n");
        }
    });
    assert_eq!(err(&s, "protocol"), 3);
    assert_eq!(
        close_reason(&s, "error"),
        3,
        "a broken connection is never reused"
    );
}

#[test]
fn empty_reply_is_closed_before_response() {
    let s = against_script(&["-n", "3", "-c", "1"], |mut st, _| {
        let _ = read_head(&mut st);
    });
    assert_eq!(err(&s, "closed_before_response"), 3);
}

#[test]
fn reset_before_response_is_a_reset() {
    let s = against_script(&["-n", "3", "-c", "1"], |mut st, _| {
        let _ = read_head(&mut st);
        reset(st);
    });
    assert_eq!(err(&s, "reset") + err(&s, "closed_before_response"), 3);
    assert!(err(&s, "reset") >= 1, "{s}");
}

#[test]
fn short_body_is_body_incomplete() {
    let s = against_script(&["-n", "2", "-c", "1"], |mut st, _| {
        if read_head(&mut st).is_some() {
            write(&mut st, b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
            let _ = st.shutdown(Shutdown::Both);
        }
    });
    assert_eq!(err(&s, "body_incomplete"), 2);
}

#[test]
fn chunked_1xx_and_close_delimited_bodies_succeed() {
    // Keep-alive server that answers with 100 Continue, then a chunked response.
    let s = against_script(&["-n", "5", "-c", "1"], |mut st, _| {
        while read_head(&mut st).is_some() {
            write(&mut st, b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=y\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n");
        }
    });
    assert_eq!(u(&s["requests"]["ok"]), 5);
    assert_eq!(
        u(&s["connections"]["opened"]),
        1,
        "chunked responses keep the connection"
    );
    assert_eq!(u(&s["throughput"]["body_bytes_received"]), 55);
    // HTTP/1.0 server with a body delimited by close: success, never reused.
    let s = against_script(&["-n", "4", "-c", "1"], |mut st, _| {
        if read_head(&mut st).is_some() {
            write(&mut st, b"HTTP/1.0 200 OK\r\n\r\n0123456789");
        }
    });
    assert_eq!(u(&s["requests"]["ok"]), 4);
    assert_eq!(u(&s["connections"]["opened"]), 4);
    assert_eq!(close_reason(&s, "server_http10"), 4);
    assert_eq!(u(&s["throughput"]["body_bytes_received"]), 40);
}

#[test]
fn a_server_that_ignores_connection_close_is_reported() {
    let s = against_script(
        &["-n", "4", "-c", "1", "--strategy", "close"],
        |mut st, _| {
            while read_head(&mut st).is_some() {
                write(&mut st, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
        },
    );
    assert_eq!(u(&s["requests"]["ok"]), 4);
    assert_eq!(u(&s["connections"]["opened"]), 4);
    assert_eq!(u(&s["connections"]["server_ignored_close"]), 4);
    let d = s["diagnosis"].as_array().unwrap();
    assert!(
        d.iter()
            .any(|x| x.as_str().unwrap().contains("ignored the request to close")),
        "{d:?}"
    );
}

#[test]
fn a_silent_server_times_out_in_the_wait_phase() {
    let s = against_script(
        &["-n", "2", "-c", "1", "--timeout", "300ms"],
        |mut st, _| {
            let _ = read_head(&mut st);
            std::thread::sleep(Duration::from_secs(2));
        },
    );
    assert_eq!(err(&s, "timeout_wait"), 2);
}

#[test]
fn extra_bytes_after_a_response_prevent_reuse() {
    let s = against_script(&["-n", "3", "-c", "1"], |mut st, _| {
        while read_head(&mut st).is_some() {
            write(
                &mut st,
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokJUNK",
            );
        }
    });
    assert_eq!(u(&s["requests"]["ok"]), 3);
    assert_eq!(
        u(&s["connections"]["opened"]),
        3,
        "a connection with stray bytes is not reused"
    );
    assert_eq!(close_reason(&s, "error"), 3);
}

#[test]
fn connection_refused_is_a_connect_error() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let r = bench_json(&[&format!("http://{addr}/"), "-n", "3", "-c", "1"]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(err(s, "connect"), 3);
    assert_eq!(u(&s["connections"]["opened"]), 0);
}
