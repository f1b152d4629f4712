//! The hostile-server table for HTTP/2: servers (written with the `h2` crate, or raw
//! bytes where `h2` would refuse to misbehave) that reset or refuse every stream, allow
//! no streams, end the connection with an error GOAWAY mid-run, stall a response or the
//! flow-control window, send a malformed frame, or answer the preface in HTTP/1. In
//! every case `handshake bench --strategy h2` must exit in bounded time with the
//! failure counted under its category and detail, the accounting invariant holding and
//! connections opened equal to the server's accepted count.

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use bytes::Bytes;
use h2::Reason;
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Behaviour {
    ResetEveryStream,
    RefuseEveryStream,
    ZeroConcurrentStreams,
    /// Answer two streams, then GOAWAY ENHANCE_YOUR_CALM without answering the third.
    ErrorGoawayAfterTwo,
    /// The head and 100 bytes of a 1000-byte body, then nothing.
    StallBody,
    /// An initial window of 0: the client cannot send its request body.
    ZeroWindow,
}

/// A scripted HTTP/2 server on its own thread and runtime, stopped on drop.
struct H2Server {
    addr: std::net::SocketAddr,
    accepted: Arc<AtomicU64>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl H2Server {
    fn start(b: Behaviour) -> H2Server {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let acc = accepted.clone();
        let (tx, mut rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let l = tokio::net::TcpListener::from_std(l).unwrap();
                loop {
                    tokio::select! {
                        _ = &mut rx => break,
                        a = l.accept() => {
                            if let Ok((s, _)) = a {
                                acc.fetch_add(1, Ordering::SeqCst);
                                tokio::spawn(serve(s, b));
                            }
                        }
                    }
                }
            });
        });
        H2Server {
            addr,
            accepted,
            stop: Some(tx),
            thread: Some(thread),
        }
    }

    fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }
}

impl Drop for H2Server {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn serve(s: tokio::net::TcpStream, b: Behaviour) {
    let mut builder = h2::server::Builder::new();
    match b {
        Behaviour::ZeroConcurrentStreams => {
            builder.max_concurrent_streams(0);
        }
        Behaviour::ZeroWindow => {
            builder.initial_window_size(0);
        }
        _ => {}
    }
    let Ok(mut conn) = builder.handshake::<_, Bytes>(s).await else {
        return;
    };
    let mut n = 0;
    // Streams kept open (never answered, or answered in part).
    let mut held = Vec::new();
    let mut held_streams = Vec::new();
    while let Some(Ok((_req, mut respond))) = conn.accept().await {
        n += 1;
        match b {
            Behaviour::ResetEveryStream => respond.send_reset(Reason::INTERNAL_ERROR),
            Behaviour::RefuseEveryStream => respond.send_reset(Reason::REFUSED_STREAM),
            Behaviour::ZeroConcurrentStreams => respond.send_reset(Reason::REFUSED_STREAM),
            Behaviour::ErrorGoawayAfterTwo if n > 2 => {
                conn.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
                held.push(respond);
            }
            Behaviour::ErrorGoawayAfterTwo => {
                let head = http::Response::builder()
                    .header("content-length", 2)
                    .body(())
                    .unwrap();
                if let Ok(mut st) = respond.send_response(head, false) {
                    let _ = st.send_data(Bytes::from_static(b"ok"), true);
                }
            }
            Behaviour::StallBody => {
                let head = http::Response::builder()
                    .header("content-length", 1000)
                    .body(())
                    .unwrap();
                if let Ok(mut st) = respond.send_response(head, false) {
                    let _ = st.send_data(Bytes::from_static(&[b'x'; 100]), false);
                    held_streams.push(st);
                }
            }
            Behaviour::ZeroWindow => held.push(respond),
        }
    }
}

/// Run `bench --strategy h2 --json` with a hard limit on its time.
fn bench_bounded(url: &str, args: &[&str]) -> Value {
    let mut all = vec!["bench", url, "--strategy", "h2", "--json", "--no-progress"];
    all.extend_from_slice(args);
    let mut child = Command::new(bin())
        .args(&all)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut out = String::new();
            child
                .stdout
                .take()
                .unwrap()
                .read_to_string(&mut out)
                .unwrap();
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            let report: Value = serde_json::from_str(&out).unwrap();
            // A run with no successful request exits 1 and says so.
            if report["scenarios"][0]["requests"]["ok"] == 0 {
                assert_eq!(status.code(), Some(1), "{all:?}: {status}\n{err}");
                assert!(err.contains("no request succeeded"), "{all:?}: {err}");
            } else {
                assert!(status.success(), "{all:?}: {status}\n{err}");
            }
            return report;
        }
        if t.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{all:?} hung");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Case {
    name: &'static str,
    args: Vec<&'static str>,
    ok: u64,
    error: Option<(&'static str, &'static str)>,
}

fn check(name: &str, s: &Value, accepted: u64, case_ok: u64, error: Option<(&str, &str)>) {
    check_accounting(s);
    let r = &s["requests"];
    assert_eq!(u(&r["ok"]), case_ok, "{name}: ok in {r}");
    if let Some((kind, detail)) = error {
        let failed = u(&r["attempted"]) - case_ok;
        assert_eq!(u(&r["errors"][kind]), failed, "{name}: {kind} in {r}");
        assert_eq!(
            u(&r["error_details"][detail]),
            failed,
            "{name}: {detail} in {r}"
        );
    }
    assert_eq!(
        u(&s["connections"]["opened"]),
        accepted,
        "{name}: opened = server's accepted"
    );
}

#[test]
fn hostile_h2_servers_are_counted_never_hang() {
    let _machine = shared();
    let cases = [
        (
            Behaviour::ResetEveryStream,
            Case {
                name: "RST_STREAM on every stream",
                args: vec!["-n", "4", "-c", "1"],
                ok: 0,
                error: Some(("reset", "stream_reset")),
            },
        ),
        (
            Behaviour::RefuseEveryStream,
            Case {
                name: "REFUSED_STREAM on every stream (each tried 4 times)",
                args: vec!["-n", "4", "-c", "1"],
                ok: 0,
                error: Some(("reset", "refused_stream")),
            },
        ),
        (
            Behaviour::ZeroConcurrentStreams,
            Case {
                name: "SETTINGS of 0 concurrent streams",
                args: vec!["-n", "3", "-c", "1"],
                ok: 0,
                error: Some(("protocol", "zero_concurrent_streams")),
            },
        ),
        (
            Behaviour::ErrorGoawayAfterTwo,
            Case {
                name: "GOAWAY ENHANCE_YOUR_CALM mid-run",
                args: vec!["-n", "6", "-c", "1"],
                ok: 4,
                error: Some(("closed_before_response", "goaway_error")),
            },
        ),
        (
            Behaviour::StallBody,
            Case {
                name: "response body stalls",
                args: vec!["-n", "2", "-c", "1", "--timeout", "500ms"],
                ok: 0,
                error: None,
            },
        ),
        (
            Behaviour::ZeroWindow,
            Case {
                name: "flow-control window of 0 for the request body",
                args: vec![
                    "-n",
                    "2",
                    "-c",
                    "1",
                    "--timeout",
                    "500ms",
                    "-m",
                    "POST",
                    "--body",
                    "hello",
                ],
                ok: 0,
                error: None,
            },
        ),
    ];
    for (b, case) in cases {
        let srv = H2Server::start(b);
        let rep = bench_bounded(&srv.url(), &case.args);
        let s = &rep["scenarios"][0];
        let accepted = srv.accepted.load(Ordering::SeqCst);
        check(case.name, s, accepted, case.ok, case.error);
        let r = &s["requests"];
        match b {
            Behaviour::ResetEveryStream => {
                // A stream reset leaves the connection usable: one connection.
                assert_eq!(accepted, 1, "{}", case.name);
            }
            Behaviour::RefuseEveryStream => {
                assert_eq!(u(&r["retries"]["refused_stream"]), 4, "{}", case.name);
            }
            Behaviour::ErrorGoawayAfterTwo => {
                assert_eq!(accepted, 2, "{}", case.name);
                let h2 = &s["connections"]["h2"];
                assert_eq!(u(&h2["goaway_codes"]["enhance_your_calm"]), 2, "{h2}");
                assert_eq!(close_reason(s, "server_goaway"), 2);
            }
            Behaviour::StallBody => {
                assert_eq!(u(&r["errors"]["timeout_receive"]), 2, "{r}");
            }
            Behaviour::ZeroWindow => {
                assert_eq!(u(&r["errors"]["timeout_wait"]), 2, "{r}");
            }
            Behaviour::ZeroConcurrentStreams => {
                assert_eq!(close_reason(s, "error"), accepted);
            }
        }
    }
}

/// Raw bytes: what `h2` would not send.
#[test]
fn malformed_frames_and_http1_answers_are_protocol_errors() {
    let _machine = shared();
    // SETTINGS (empty), then DATA on stream 0: a connection error.
    let settings = [0u8, 0, 0, 4, 0, 0, 0, 0, 0];
    let data_on_zero = [0u8, 0, 4, 0, 0, 0, 0, 0, 0, b'a', b'b', b'c', b'd'];
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "DATA on stream 0",
            [&settings[..], &data_on_zero[..]].concat(),
            "h2_protocol_error",
        ),
        (
            "an HTTP/1.1 answer to the preface",
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
            "h2c_refused",
        ),
    ];
    for (name, bytes, detail) in cases {
        let (addr, accepted) = script_server(move |mut s, _| {
            let mut preface = [0u8; 24];
            if s.read_exact(&mut preface).is_err() {
                return;
            }
            let _ = s.write_all(&bytes);
            // Hold the connection until the client leaves.
            let mut sink = [0u8; 1024];
            let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
            while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
        });
        let rep = bench_bounded(&format!("http://{addr}/"), &["-n", "2", "-c", "1"]);
        let s = &rep["scenarios"][0];
        check(
            name,
            s,
            accepted.load(Ordering::SeqCst),
            0,
            Some(("protocol", detail)),
        );
    }
}
