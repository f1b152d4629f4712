//! The hostile-server table: scripted servers send exact bytes and close, reset, stall
//! or trickle at exact points. Each case names the outcome it must produce. In every
//! case `handshake bench` must exit cleanly (no panic, no hang), the accounting
//! invariant must hold, connections opened must equal the server's accepted count, and
//! a connection must not be reused when it must not be.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;

/// One thing a scripted server does on a connection.
#[derive(Clone, Debug)]
enum Step {
    /// Read one request head (the connection ends if the client closed).
    Read,
    Send(Vec<u8>),
    /// Send these bytes one at a time, `ms` apart.
    Trickle(Vec<u8>, u64),
    Sleep(u64),
    Close,
    Reset,
    /// Send `head`, then `block` repeatedly until the client goes (at most 20 s).
    Endless {
        head: Vec<u8>,
        block: Vec<u8>,
    },
}

use Step::*;

fn send(b: &[u8]) -> Step {
    Send(b.to_vec())
}

/// What a case must produce over `attempts` requests sent one after another.
struct Case {
    name: &'static str,
    /// Run on each connection, again from the start after the last step if the
    /// connection is still open.
    script: Vec<Step>,
    args: Vec<&'static str>,
    ok: u64,
    /// The category of the failed attempts (all `attempts - ok` of them).
    error: Option<&'static str>,
    /// Their sub-reason, when the case pins one.
    detail: Option<&'static str>,
    /// Connections opened (= accepted by the server).
    opened: u64,
    /// Peak client RSS must stay under this (KiB), for the endless cases.
    max_rss_kib: Option<u64>,
}

const ATTEMPTS: u64 = 2;

fn ok_case(name: &'static str, script: Vec<Step>, opened: u64) -> Case {
    Case {
        name,
        script,
        args: vec![],
        ok: ATTEMPTS,
        error: None,
        detail: None,
        opened,
        max_rss_kib: None,
    }
}

/// A response answered on a fresh connection each time, failing every attempt.
fn err_case(name: &'static str, script: Vec<Step>, error: &'static str, detail: &str) -> Case {
    Case {
        name,
        script,
        args: vec![],
        ok: 0,
        error: Some(error),
        detail: if detail.is_empty() {
            None
        } else {
            Some(Box::leak(detail.to_string().into_boxed_str()))
        },
        opened: ATTEMPTS,
        max_rss_kib: None,
    }
}

/// A server that sends `head` and then `block` without end: the client's timeout (1 s)
/// must cut it while its memory stays flat.
fn endless_body(name: &'static str, head: Vec<u8>, block: Vec<u8>) -> Case {
    Case {
        max_rss_kib: Some(64 * 1024),
        ..with(
            err_case(
                name,
                vec![Read, Endless { head, block }],
                "timeout_receive",
                "",
            ),
            &["--timeout", "1s"],
        )
    }
}

/// Read the request, send `bytes`, close.
fn reply_close(bytes: &[u8]) -> Vec<Step> {
    vec![Read, send(bytes), Close]
}

/// Read the request, send `bytes`, keep the connection.
fn reply(bytes: &[u8]) -> Vec<Step> {
    vec![Read, send(bytes)]
}

fn with(mut c: Case, args: &[&'static str]) -> Case {
    c.args.extend_from_slice(args);
    c
}

fn many_headers(n: usize) -> Vec<u8> {
    let mut h = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..n {
        h.extend_from_slice(format!("X-H{i}: v\r\n").as_bytes());
    }
    h.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
    h
}

fn cases() -> Vec<Case> {
    let long_head = {
        let mut h = b"HTTP/1.1 200 OK\r\nX-Long: ".to_vec();
        h.extend_from_slice(&[b'a'; 70 * 1024]);
        h.extend_from_slice(b"\r\nContent-Length: 2\r\n\r\nok");
        h
    };
    let endless_headers = {
        // Headers without end: the 100-header limit must stop it.
        let mut h = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..3000 {
            h.extend_from_slice(format!("X-Endless-{i}: {}\r\n", "v".repeat(40)).as_bytes());
        }
        h
    };
    vec![
        // --- malformed status lines ---
        err_case("version HTTP/2.0", reply_close(b"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok"), "protocol", "bad_version"),
        err_case("version HTTP/1.01", reply_close(b"HTTP/1.01 200 OK\r\nContent-Length: 2\r\n\r\nok"), "protocol", "bad_version"),
        err_case("version HTTP/1.", reply_close(b"HTTP/1. 200 OK\r\n\r\n"), "protocol", "bad_version"),
        err_case("lowercase http/1.1", reply_close(b"http/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), "protocol", "bad_version"),
        err_case("ICY protocol", reply_close(b"ICY 200 OK\r\n\r\n"), "protocol", "bad_version"),
        err_case("not HTTP at all", reply_close(b"SSH-2.0-OpenSSH_9.2\r\n"), "protocol", "bad_version"),
        err_case("two-digit status", reply_close(b"HTTP/1.1 20 OK\r\nContent-Length: 2\r\n\r\nok"), "protocol", "bad_status_code"),
        err_case("four-digit status", reply_close(b"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok"), "protocol", "bad_status_code"),
        err_case("status not digits", reply_close(b"HTTP/1.1 2x0 OK\r\nContent-Length: 2\r\n\r\nok"), "protocol", "bad_status_code"),
        err_case("status 099", reply_close(b"HTTP/1.1 099 Low\r\nContent-Length: 2\r\n\r\nok"), "protocol", "bad_status_code"),
        err_case("no status code", reply_close(b"HTTP/1.1 \r\nContent-Length: 2\r\n\r\nok"), "protocol", "bad_status_code"),
        // --- headers ---
        err_case("header without colon", reply_close(b"HTTP/1.1 200 OK\r\nNoColonHere\r\nContent-Length: 2\r\n\r\nok"), "protocol", "bad_header"),
        err_case("space in header name", reply_close(b"HTTP/1.1 200 OK\r\nBad Name: x\r\nContent-Length: 2\r\n\r\nok"), "protocol", "bad_header"),
        err_case("NUL in header value", reply_close(b"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 2\r\n\r\nok"), "protocol", "bad_header"),
        ok_case("bare LF line ends", reply(b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok"), 1),
        ok_case("no reason phrase", reply(b"HTTP/1.1 200 \r\nContent-Length: 2\r\n\r\nok"), 1),
        // Counted, not an error; a run of nothing but 599s fails unless accepted.
        Case {
            args: vec!["--ok-status", "599"],
            ..ok_case("status 599 counted, not an error", reply(b"HTTP/1.1 599 Odd\r\nContent-Length: 2\r\n\r\nok"), 1)
        },
        ok_case("exactly 100 headers", reply(&many_headers(99)), 1),
        err_case("101 headers", reply_close(&many_headers(101)), "too_large", "too_many_headers"),
        err_case("head over 64 KiB", reply_close(&long_head), "too_large", "head_too_long"),
        err_case("endless stream of headers", vec![Read, Send(endless_headers), Sleep(3000), Close], "too_large", "too_many_headers"),
        err_case("endless header line", vec![Read, Endless { head: b"HTTP/1.1 200 OK\r\nX-Endless: ".to_vec(), block: vec![b'v'; 4096] }], "too_large", "head_too_long"),
        // --- where the connection ends before a response ---
        err_case("empty reply", vec![Read, Close], "closed_before_response", "empty_reply"),
        err_case("EOF inside the status line", reply_close(b"HTTP/1.1 20"), "closed_before_response", "eof_in_head"),
        err_case("EOF inside the headers", reply_close(b"HTTP/1.1 200 OK\r\nContent-Le"), "closed_before_response", "eof_in_head"),
        err_case("RST before any byte", vec![Read, Reset], "reset", "reset_in_head"),
        err_case("RST inside the head", vec![Read, send(b"HTTP/1.1 200 OK\r\nContent-"), Sleep(50), Reset], "reset", "reset_in_head"),
        err_case("RST inside the body", vec![Read, send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhalf"), Sleep(50), Reset], "reset", "reset_in_body"),
        err_case("RST inside a chunked body", vec![Read, send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nhalf\r\n"), Sleep(50), Reset], "reset", "reset_in_body"),
        // --- Content-Length ---
        err_case("conflicting Content-Length headers", reply_close(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok"), "protocol", "conflicting_content_length"),
        err_case("conflicting Content-Length list", reply_close(b"HTTP/1.1 200 OK\r\nContent-Length: 2, 3\r\n\r\nok"), "protocol", "conflicting_content_length"),
        ok_case("repeated equal Content-Length", reply(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok"), 1),
        err_case("negative Content-Length", reply_close(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nok"), "protocol", "bad_content_length"),
        err_case("Content-Length overflows", reply_close(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\nok"), "protocol", "bad_content_length"),
        err_case("Content-Length with a sign", reply_close(b"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok"), "protocol", "bad_content_length"),
        err_case("Transfer-Encoding with Content-Length", reply_close(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n"), "protocol", "transfer_encoding_with_content_length"),
        err_case("body shorter than Content-Length, then close", reply_close(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello"), "body_incomplete", "short_body"),
        // --- chunked ---
        ok_case("chunked with extensions and trailers", reply(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;name=v\r\nok\r\n1\r\n!\r\n0\r\nX-Trailer: t\r\n\r\n"), 1),
        ok_case("chunked, uppercase hex", reply(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n"), 1),
        err_case("chunk size not hex", reply_close(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nok\r\n0\r\n\r\n"), "protocol", "bad_chunk"),
        err_case("negative chunk size", reply_close(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-2\r\nok\r\n0\r\n\r\n"), "protocol", "bad_chunk"),
        err_case("chunk size overflows 64 bits", reply_close(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\nok\r\n"), "too_large", "chunk_too_large"),
        err_case("chunk data without CRLF", reply_close(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nokXX0\r\n\r\n"), "protocol", "bad_chunk"),
        err_case("chunk size line with bare LF", reply_close(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n"), "protocol", "bad_chunk"),
        err_case("missing last chunk, then close", reply_close(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n"), "body_incomplete", "missing_last_chunk"),
        err_case("missing final CRLF, then close", reply_close(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n"), "body_incomplete", "missing_last_chunk"),
        // --- framing that ends the connection, and bytes that must not be read as the next response ---
        ok_case("close-delimited HTTP/1.0 body", reply_close(b"HTTP/1.0 200 OK\r\n\r\nbody until close"), 2),
        ok_case("close-delimited HTTP/1.1 body", reply_close(b"HTTP/1.1 200 OK\r\n\r\nbody until close"), 2),
        ok_case("non-chunked Transfer-Encoding is close-delimited", reply_close(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzzzz"), 2),
        ok_case("HTTP/1.0 with keep-alive is reused", reply(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok"), 1),
        ok_case("Connection: close ends the connection", reply_close(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"), 2),
        ok_case("extra bytes after a complete response", reply(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA"), 2),
        ok_case("a second response nobody asked for", reply(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), 2),
        ok_case("204 with body bytes", reply(b"HTTP/1.1 204 No Content\r\n\r\nsurprise"), 2),
        ok_case("304 with body bytes", reply(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\nhello"), 2),
        ok_case("204 without body is reused", reply(b"HTTP/1.1 204 No Content\r\n\r\n"), 1),
        with(ok_case("HEAD answered with body bytes", reply(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"), 2), &["-m", "HEAD"]),
        with(ok_case("HEAD answered without body is reused", reply(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), 1), &["-m", "HEAD"]),
        // --- 1xx and upgrades ---
        ok_case("100 Continue before the response", reply(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), 1),
        ok_case("103 Early Hints with headers", reply(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), 1),
        ok_case("three 1xx in a row", reply(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), 1),
        err_case("unrequested 101 Switching Protocols", reply_close(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"), "protocol", "unrequested_upgrade"),
        // --- silence, lateness and trickling ---
        with(err_case("silent server", vec![Read, Sleep(2000)], "timeout_wait", ""), &["--timeout", "300ms"]),
        with(err_case("silent server, --wait-timeout", vec![Read, Sleep(2000)], "timeout_wait", ""), &["--timeout", "10s", "--wait-timeout", "200ms"]),
        with(err_case("response after the timeout counts once, as a timeout", vec![Read, Sleep(600), send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")], "timeout_wait", ""), &["--timeout", "300ms"]),
        with(err_case("stall inside the head", vec![Read, send(b"HTTP/1.1 200 OK\r\n"), Sleep(2000)], "timeout_receive", ""), &["--timeout", "300ms"]),
        with(err_case("stall inside the body", vec![Read, send(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhal"), Sleep(2000)], "timeout_receive", ""), &["--timeout", "300ms"]),
        with(err_case("head trickled one byte per 50 ms", vec![Read, Trickle(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".to_vec(), 50)], "timeout_receive", "below_min_speed"), &["--timeout", "10s", "--min-speed", "1k", "--min-speed-window", "300ms"]),
        with(err_case("body trickled one byte per 50 ms", vec![Read, send(b"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n"), Trickle(vec![b'x'; 40], 50)], "timeout_receive", "below_min_speed"), &["--timeout", "10s", "--min-speed", "1k", "--min-speed-window", "300ms"]),
        with(ok_case("a slow response above the minimum speed", vec![Read, send(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n"), Trickle(b"slow".to_vec(), 100)], 1), &["--timeout", "10s", "--min-speed", "2", "--min-speed-window", "300ms"]),
        // --- endless bodies: memory stays flat ---
        endless_body("endless Content-Length body", b"HTTP/1.1 200 OK\r\nContent-Length: 1000000000000\r\n\r\n".to_vec(), vec![b'x'; 64 * 1024]),
        endless_body("endless chunked body", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(), [b"ffff\r\n".to_vec(), vec![b'y'; 0xffff], b"\r\n".to_vec()].concat()),
        endless_body("endless close-delimited body", b"HTTP/1.0 200 OK\r\n\r\n".to_vec(), vec![b'z'; 64 * 1024]),
    ]
}

/// Play `script` on one accepted connection.
fn play(mut s: TcpStream, script: &[Step]) {
    let _ = s.set_nodelay(true);
    loop {
        for step in script {
            match step {
                Read => {
                    if read_head(&mut s).is_none() {
                        return;
                    }
                }
                Send(b) => {
                    if s.write_all(b).is_err() {
                        return;
                    }
                }
                Trickle(b, ms) => {
                    for byte in b {
                        if s.write_all(std::slice::from_ref(byte)).is_err() {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(*ms));
                    }
                }
                Sleep(ms) => std::thread::sleep(Duration::from_millis(*ms)),
                Close => return,
                Reset => {
                    reset(s);
                    return;
                }
                Endless { head, block } => {
                    let until = Instant::now() + Duration::from_secs(20);
                    if s.write_all(head).is_err() {
                        return;
                    }
                    while Instant::now() < until {
                        if s.write_all(block).is_err() {
                            return;
                        }
                    }
                    return;
                }
            }
        }
    }
}

/// The peak resident memory of process `pid` (its `VmHWM`, KiB), once it runs
/// `handshake`: before its exec the process is this one's copy, whose memory is not
/// its. Not `wait4`'s `ru_maxrss` either: Linux carries the peak of the process that
/// forked it over the exec, and this test process holds every test's memory.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    if comm.trim() != "handshake" {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Run `handshake` with a deadline; returns its stdout, stderr, exit status and peak RSS
/// (read every 5 ms while it runs).
fn run_watched(args: &[&str], limit: Duration) -> Result<(Vec<u8>, String, i32, u64), String> {
    let mut child = Command::new(bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = String::new();
        let _ = err.read_to_string(&mut v);
        v
    });
    let pid = child.id() as libc::pid_t;
    let deadline = Instant::now() + limit;
    let mut status = 0;
    let mut peak = 0;
    loop {
        peak = peak.max(peak_rss_kib(child.id()).unwrap_or(0));
        // SAFETY: waiting for our own child; status is a valid pointer, no rusage asked.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, std::ptr::null_mut()) };
        if r == pid {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            // SAFETY: as above; reap the killed child.
            unsafe { libc::wait4(pid, &mut status, 0, std::ptr::null_mut()) };
            return Err(format!("hung: still running after {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -libc::WTERMSIG(status)
    };
    Ok((out_t.join().unwrap(), err_t.join().unwrap(), code, peak))
}

/// Run one case; `Err` says what was wrong.
// The list of what every hostile case must hold (counted, named, no crash, nothing
// lost), checked in order against one run.
#[allow(clippy::too_many_lines)]
fn check(case: &Case) -> Result<String, String> {
    let script = case.script.clone();
    let (addr, accepted) = script_server(move |s, _| play(s, &script));
    let url = format!("http://{addr}/");
    let n = ATTEMPTS.to_string();
    let mut args = vec![
        "bench",
        "--json",
        "--no-progress",
        url.as_str(),
        "-n",
        &n,
        "-c",
        "1",
    ];
    args.extend_from_slice(&case.args);
    if !case.args.contains(&"--timeout") {
        args.extend_from_slice(&["--timeout", "5s"]);
    }
    let (stdout, stderr, code, rss) = run_watched(&args, Duration::from_secs(30))?;
    // A run in which no request succeeded has failed: exit 1 and one line naming the
    // leading error (its detail, where the case names one).
    let want_code = if case.ok == 0 { 1 } else { 0 };
    if stderr.contains("panicked") || code != want_code {
        return Err(format!("exit {code} (want {want_code}): {stderr}"));
    }
    if case.ok == 0 {
        let named = case.detail.or(case.error).unwrap_or("attempts failed");
        if !stderr.contains("no request succeeded") || !stderr.contains(named) {
            return Err(format!(
                "no line naming {named} for a run that measured nothing: {stderr}"
            ));
        }
    }
    let r: serde_json::Value =
        serde_json::from_slice(&stdout).map_err(|e| format!("bad JSON ({e}): {stderr}"))?;
    let s = scenario(&r).clone();
    let outcome = std::panic::catch_unwind(|| check_accounting(&s));
    if outcome.is_err() {
        return Err(format!("accounting broken: {s}"));
    }
    let got = |v: &serde_json::Value| v.as_u64().unwrap_or(0);
    let req = &s["requests"];
    let mut problems = Vec::new();
    if got(&req["attempted"]) != ATTEMPTS {
        problems.push(format!("attempted {}", req["attempted"]));
    }
    if got(&req["ok"]) != case.ok {
        problems.push(format!("ok {} (want {})", req["ok"], case.ok));
    }
    let failed = ATTEMPTS - case.ok;
    if let Some(kind) = case.error {
        if got(&req["errors"][kind]) != failed {
            problems.push(format!("errors {} (want {failed} {kind})", req["errors"]));
        }
    }
    if let Some(d) = case.detail {
        if got(&req["error_details"][d]) != failed {
            problems.push(format!(
                "error_details {} (want {failed} {d})",
                req["error_details"]
            ));
        }
    }
    if case.detail.is_none()
        && case.error.is_none()
        && !req["error_details"].as_object().unwrap().is_empty()
    {
        problems.push(format!("unexpected error_details {}", req["error_details"]));
    }
    let opened = got(&s["connections"]["opened"]);
    // The server may still be accepting when the client is done; give it a moment.
    let until = Instant::now() + Duration::from_secs(2);
    while accepted.load(Ordering::SeqCst) < opened && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(5));
    }
    let acc = accepted.load(Ordering::SeqCst);
    if opened != case.opened || acc != opened {
        problems.push(format!(
            "opened {opened}, server accepted {acc} (want {})",
            case.opened
        ));
    }
    let closed_on_error = got(&s["connections"]["close_reasons"]["error"]);
    if case.ok == 0 && closed_on_error != opened {
        problems.push(format!(
            "{closed_on_error} of {opened} connections closed as `error`"
        ));
    }
    if let Some(max) = case.max_rss_kib {
        let body = got(&s["throughput"]["body_bytes_received"]);
        if body < 50_000_000 {
            problems.push(format!(
                "only {body} body bytes arrived: the case proves nothing"
            ));
        }
        if rss > max {
            problems.push(format!("peak RSS {rss} KiB > {max} KiB"));
        }
    }
    if problems.is_empty() {
        Ok(format!(
            "ok {} errors {} details {} opened {opened} body {} B rss {rss} KiB",
            req["ok"],
            req["errors"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(_, v)| got(v) > 0)
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
            req["error_details"],
            s["throughput"]["body_bytes_received"]
        ))
    } else {
        Err(format!("{}\n    report: {s}", problems.join("; ")))
    }
}

#[test]
fn hostile_servers() {
    let _machine = shared();
    let cases = cases();
    assert!(cases.len() >= 50, "{} cases", cases.len());
    let cases = Arc::new(cases);
    let next = Arc::new(AtomicU64::new(0));
    let results = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..6)
        .map(|_| {
            let (cases, next, results) = (cases.clone(), next.clone(), results.clone());
            std::thread::spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst) as usize;
                let Some(case) = cases.get(i) else { break };
                let r = check(case);
                results.lock().unwrap().push((i, r));
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let mut results = results.lock().unwrap().clone();
    results.sort_by_key(|r| r.0);
    let mut failures = Vec::new();
    for (i, r) in &results {
        match r {
            Ok(summary) => eprintln!("pass  {:<55} {summary}", cases[*i].name),
            Err(e) => {
                eprintln!("FAIL  {:<55} {e}", cases[*i].name);
                failures.push(cases[*i].name);
            }
        }
    }
    assert_eq!(results.len(), cases.len());
    assert!(
        failures.is_empty(),
        "{} of {} cases failed: {failures:?}",
        failures.len(),
        cases.len()
    );
}

/// A certificate authority for the TLS cases.
struct Ca {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
}

fn new_ca(name: &str) -> Ca {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, name);
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = p.self_signed(&key).unwrap();
    Ca {
        issuer: rcgen::Issuer::new(p, key),
        pem: cert.pem(),
    }
}

/// A rustls server config with a leaf for `names`, valid between the given years,
/// signed by `ca`, offering `alpn`.
fn tls_server(
    ca: &Ca,
    names: &[&str],
    years: (i32, i32),
    alpn: &[&[u8]],
) -> Arc<rustls::ServerConfig> {
    use rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
    let key = rcgen::KeyPair::generate().unwrap();
    let mut p =
        rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .unwrap();
    p.not_before = rcgen::date_time_ymd(years.0, 1, 1);
    p.not_after = rcgen::date_time_ymd(years.1, 1, 1);
    let leaf = p.signed_by(&key, &ca.issuer).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    cfg.alpn_protocols = alpn.iter().map(|a| a.to_vec()).collect();
    Arc::new(cfg)
}

/// Serve TLS with `cfg`: handshake, then answer requests on the connection.
fn serve_tls(cfg: Arc<rustls::ServerConfig>) -> (std::net::SocketAddr, Arc<AtomicU64>) {
    script_server(move |s, _| {
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let conn = rustls::ServerConnection::new(cfg.clone()).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, s);
        while read_head_from(&mut tls).is_some() {
            if tls
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .is_err()
            {
                return;
            }
        }
    })
}

/// (name, server config, ok, expected detail, connections)
type TlsCase = (
    &'static str,
    Arc<rustls::ServerConfig>,
    u64,
    Option<&'static str>,
    u64,
);

#[test]
fn tls_failures_have_their_own_sub_reasons() {
    let _machine = shared();
    let ca = new_ca("hostile test CA");
    let other = new_ca("a CA nobody trusts");
    let dir = std::env::temp_dir().join(format!("handshake-hostile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca_file = dir.join("ca.pem");
    std::fs::write(&ca_file, &ca.pem).unwrap();
    let local = ["127.0.0.1", "localhost"];
    let h11: &[&[u8]] = &[b"http/1.1"];
    let cases: Vec<TlsCase> = vec![
        (
            "valid certificate",
            tls_server(&ca, &local, (2020, 2090), h11),
            2,
            None,
            1,
        ),
        (
            "expired certificate",
            tls_server(&ca, &local, (2000, 2001), h11),
            0,
            Some("cert_expired"),
            2,
        ),
        (
            "not yet valid certificate",
            tls_server(&ca, &local, (2090, 2091), h11),
            0,
            Some("cert_not_yet_valid"),
            2,
        ),
        (
            "unknown CA",
            tls_server(&other, &local, (2020, 2090), h11),
            0,
            Some("cert_unknown_issuer"),
            2,
        ),
        (
            "wrong name",
            tls_server(&ca, &["example.com"], (2020, 2090), h11),
            0,
            Some("cert_wrong_name"),
            2,
        ),
        (
            "ALPN mismatch (server speaks only h2)",
            tls_server(&ca, &local, (2020, 2090), &[b"h2"]),
            0,
            Some("alpn_mismatch"),
            2,
        ),
    ];
    let mut failures = Vec::new();
    for (name, cfg, ok, detail, opened) in cases {
        let (addr, accepted) = serve_tls(cfg);
        let url = format!("https://{addr}/");
        let s = scenario(&bench_json(&[
            &url,
            "-n",
            "2",
            "-c",
            "1",
            "--cacert",
            ca_file.to_str().unwrap(),
            "--timeout",
            "5s",
        ]))
        .clone();
        check_accounting(&s);
        let req = &s["requests"];
        let got_opened = u(&s["connections"]["opened"]);
        let good = u(&req["ok"]) == ok
            && got_opened == opened
            && accepted.load(Ordering::SeqCst) == opened
            && match detail {
                Some(d) => {
                    u(&req["errors"]["tls"]) == 2 - ok
                        && req["error_details"][d].as_u64() == Some(2 - ok)
                }
                None => req["error_details"].as_object().unwrap().is_empty(),
            };
        eprintln!(
            "{}  {name:<40} ok {} errors tls {} details {} opened {got_opened}",
            if good { "pass" } else { "FAIL" },
            req["ok"],
            req["errors"]["tls"],
            req["error_details"]
        );
        if !good {
            failures.push(name);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "failed: {failures:?}");
}

#[test]
fn connect_timeout_bounds_a_stalled_tls_handshake() {
    let _machine = shared();
    // A TCP server that accepts and never answers the ClientHello.
    let (addr, accepted) = script_server(|mut st, _| {
        let mut b = [0u8; 512];
        let until = Instant::now() + Duration::from_secs(5);
        while Instant::now() < until && st.read(&mut b).is_ok_and(|n| n > 0) {}
    });
    let url = format!("https://{addr}/");
    let t = Instant::now();
    let s = scenario(&bench_json(&[
        &url,
        "-n",
        "2",
        "-c",
        "1",
        "--insecure",
        "--timeout",
        "10s",
        "--connect-timeout",
        "200ms",
    ]))
    .clone();
    check_accounting(&s);
    assert_eq!(u(&s["requests"]["errors"]["timeout_tls"]), 2, "{s}");
    assert_eq!(u(&s["connections"]["opened"]), 2);
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
}
