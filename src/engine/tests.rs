//! What each driver hands the collector, in order, against a scripted peer: one close
//! for every connection opened, with the reason its path gives, on each way a
//! connection ends (the server's `Connection: close` after its limit, an idle close and
//! the retry, a reset in the middle of a response, the client's own policy, a GOAWAY,
//! the end of the run).

use std::cell::Cell;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{collect, h1, h2, open, worker};
use crate::net::dns::Resolver;
use crate::plan::build::{self, LoadConfig, RequestConfig};
use crate::plan::{LoadShape, Scenario, StopWhen, Strategy};
use crate::record::Outcome;
use crate::stats::event::{ConnEvent, Note};
use crate::stats::Recorder;

/// `n` GETs of `url` by one worker.
fn scenario(url: &str, strategy: Strategy, n: u64) -> Scenario {
    let req = RequestConfig {
        urls: vec![(url.to_string(), build::parse_url(url).unwrap())],
        method: "GET".to_string(),
        headers: Vec::new(),
        body: None,
        tls: crate::net::tls::TlsOptions::default(),
        resolve: Vec::new(),
        connect_to: Vec::new(),
        unix_socket: None,
        proxy: Default::default(),
        local_addrs: Vec::new(),
        dns: crate::net::dns::DnsSettings::default(),
    };
    let load = LoadConfig {
        redirects: None,
        task_per_worker: false,
        concurrency: 1,
        threads: 1,
        load: LoadShape::Closed,
        stop: StopWhen {
            requests: Some(n),
            duration: None,
        },
        timeout: Duration::from_secs(5),
        limits: crate::plan::PhaseLimits::default(),
    };
    build::scenario("t", strategy, None, &req, &load).unwrap()
}

/// One worker's run of `sc` over the driver `make` builds, and what it handed the
/// collector, in order (after every task of the run has ended).
fn notes_of<D: worker::Driver + 'static>(
    sc: Scenario,
    make: impl FnOnce(&Scenario, open::Opener, collect::Notes, Instant) -> D,
) -> Vec<Note> {
    let rt = crate::runtime_thread::current_thread_runtime().unwrap();
    let local = tokio::task::LocalSet::new();
    let (notes, mut rx) = collect::queue();
    let sc = Arc::new(sc);
    let start = Instant::now();
    {
        let _guard = rt.enter();
        let opener = open::Opener {
            dns: Arc::new(worker::Dns {
                resolver: Resolver::none(),
                cache: None,
            }),
            tally: notes.clone(),
            run_deadline: None,
            next_local: 0,
            turns: None,
            gates: None,
        };
        let driver = make(&sc, opener, notes.clone(), start);
        let seat = worker::Seat {
            id: 0,
            notes,
            run_deadline: None,
            in_flight: Rc::new(Cell::new(0)),
            hops: Default::default(),
            gates: Arc::new(super::gate::Gates::of_scenario(&sc)),
        };
        local.spawn_local(worker::run(sc, seat, driver, None));
    }
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(20), local).await })
        .expect("the run ends");
    let mut out = Vec::new();
    while let Ok(n) = rx.try_recv() {
        out.push(n.expect("no stop without an interrupt"));
    }
    out
}

/// The notes in short: `open`, `close REASON REQUESTS`, `ok new`, `ok reused`, `error`,
/// `ignored-close`, `goaway-ended CODE`; the kernel's and TLS's readings left out.
fn said(notes: &[Note]) -> Vec<String> {
    notes
        .iter()
        .filter_map(|n| match n {
            Note::Conn(ConnEvent::Opened { .. }) => Some("open".to_string()),
            Note::Conn(ConnEvent::Closed { reason, requests }) => {
                Some(format!("close {} {requests}", reason.name()))
            }
            Note::Conn(ConnEvent::ServerIgnoredClose { .. }) => Some("ignored-close".to_string()),
            Note::Conn(ConnEvent::StreamsEnded {
                goaway_code: Some(c),
                ..
            }) => Some(format!("goaway-ended {c}")),
            Note::Request(r) => Some(match r.outcome {
                Outcome::Ok { .. } if r.reused => "ok reused".to_string(),
                Outcome::Ok { .. } => "ok new".to_string(),
                Outcome::Error(_) => "error".to_string(),
            }),
            _ => None,
        })
        .collect()
}

/// The recorder the collector makes of `notes`, and the accounting every run keeps:
/// each connection opened is closed once, the close reasons add up to the closes, and
/// every response is counted on the one connection that carried it.
fn accounted(notes: &[Note]) -> Recorder {
    let mut rec = Recorder::new();
    for n in notes {
        rec.take(n);
    }
    let c = &rec.counts;
    assert_eq!(c.connections_opened, c.connections_closed, "{notes:?}");
    assert_eq!(
        rec.close_reasons.iter().sum::<u64>(),
        c.connections_closed,
        "{notes:?}"
    );
    assert_eq!(c.rpc_sum, c.answered, "{notes:?}");
    rec
}

/// What the scripted HTTP/1 peer does with the next request on a connection.
#[derive(Clone, Copy)]
enum Act {
    /// Answer 200, keep the connection.
    Ok,
    /// Answer 200 with `Connection: close`, then close.
    OkThenClose,
    /// Close without reading the next request (as an idle timeout does).
    Close,
    /// Send part of a response head, then reset.
    Reset,
}

/// An HTTP/1 peer on loopback: one script per connection, accepted in turn.
fn h1_peer(script: Vec<Vec<Act>>) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let peer = std::thread::spawn(move || {
        for (i, acts) in script.into_iter().enumerate() {
            // The client opens each scripted connection within 10 s, or the test fails
            // (rather than waiting for it forever).
            let waited = Instant::now();
            let mut s = loop {
                match listener.accept() {
                    Ok((s, _)) => break s,
                    Err(_) if waited.elapsed() < Duration::from_secs(10) => {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    Err(e) => panic!("the client did not open connection {}: {e}", i + 1),
                }
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            for &act in &acts {
                if !matches!(act, Act::Close) {
                    read_head(&mut s);
                }
                match act {
                    Act::Ok => s
                        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                        .unwrap(),
                    Act::OkThenClose => s
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                        )
                        .unwrap(),
                    Act::Close => {}
                    Act::Reset => {
                        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Le").unwrap();
                        s.flush().unwrap();
                        std::thread::sleep(Duration::from_millis(20));
                        rustix::net::sockopt::set_socket_linger(&s, Some(Duration::ZERO)).unwrap();
                    }
                }
                if matches!(act, Act::OkThenClose | Act::Close | Act::Reset) {
                    break;
                }
            }
            // What the script leaves open, the client closes: read to its end.
            if matches!(acts.last(), Some(Act::Ok)) {
                let _ = s.read_to_end(&mut Vec::new());
            }
        }
    });
    (url, peer)
}

/// Read one request head (GETs carry no body).
fn read_head(s: &mut TcpStream) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => panic!("the client's request head ended early: {head:?}"),
        }
    }
}

fn h1_notes(script: Vec<Vec<Act>>, strategy: Strategy, n: u64) -> Vec<Note> {
    let (url, peer) = h1_peer(script);
    let notes = notes_of(scenario(&url, strategy, n), |sc, opener, _, start| {
        h1::H1::new(sc, opener, start)
    });
    peer.join().unwrap();
    notes
}

#[test]
fn h1_the_servers_limit_closes_after_its_third_response() {
    let notes = h1_notes(
        vec![
            vec![Act::Ok, Act::Ok, Act::OkThenClose],
            vec![Act::Ok, Act::Ok],
        ],
        Strategy::KeepAlive,
        5,
    );
    assert_eq!(
        said(&notes),
        [
            "open",
            "ok new",
            "ok reused",
            "close server_max_requests 3",
            "ok reused",
            "open",
            "ok new",
            "ok reused",
            "close end_of_run 2",
        ]
    );
    let rec = accounted(&notes);
    // Each plain TCP connection is read by the kernel as it closes.
    assert_eq!(rec.tcp.closed, 2);
}

#[test]
fn h1_an_idle_close_is_counted_once_and_the_request_goes_again() {
    let notes = h1_notes(
        vec![vec![Act::Ok, Act::Close], vec![Act::Ok]],
        Strategy::KeepAlive,
        2,
    );
    assert_eq!(
        said(&notes),
        [
            "open",
            "ok new",
            "close server_idle_close 1",
            "open",
            "ok new",
            "close end_of_run 1",
        ]
    );
    let rec = accounted(&notes);
    assert_eq!(rec.counts.stale_retries, 1);
}

#[test]
fn h1_a_reset_in_the_head_fails_the_request_and_closes_in_error() {
    let notes = h1_notes(
        vec![vec![Act::Reset], vec![Act::Ok]],
        Strategy::KeepAlive,
        2,
    );
    assert_eq!(
        said(&notes),
        [
            "open",
            "close error 0",
            "error",
            "open",
            "ok new",
            "close end_of_run 1",
        ]
    );
    let rec = accounted(&notes);
    assert_eq!(rec.errors_total(), 1);
    assert_eq!(rec.counts.stale_retries, 0);
}

#[test]
fn h1_the_clients_close_that_the_server_ignored_is_said() {
    let notes = h1_notes(vec![vec![Act::Ok], vec![Act::Ok]], Strategy::Close, 2);
    assert_eq!(
        said(&notes),
        [
            "open",
            "ignored-close",
            "close client_policy 1",
            "ok new",
            "open",
            "ignored-close",
            "close client_policy 1",
            "ok new",
        ]
    );
    let rec = accounted(&notes);
    assert_eq!(rec.counts.server_ignored_close, 2);
}

/// An HTTP/2 peer (the `h2` crate's server): its first connection answers `before`
/// streams and then sends GOAWAY (NO_ERROR); its second answers until the client
/// leaves.
fn h2_peer(before: usize) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let peer = std::thread::spawn(move || {
        let rt = crate::runtime_thread::current_thread_runtime().unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(listener).unwrap();
            for first in [true, false] {
                let accepted = tokio::time::timeout(Duration::from_secs(10), l.accept()).await;
                let Ok(Ok((sock, _))) = accepted else {
                    panic!("the client did not open a connection (the first: {first})");
                };
                let mut c = ::h2::server::handshake(sock).await.unwrap();
                let mut served = 0;
                while let Some(Ok((_req, mut respond))) = c.accept().await {
                    let head = http::Response::builder().status(200).body(()).unwrap();
                    let mut body = respond.send_response(head, false).unwrap();
                    body.send_data(bytes::Bytes::from_static(b"ok"), true)
                        .unwrap();
                    served += 1;
                    if first && served == before {
                        c.graceful_shutdown();
                    }
                }
            }
        });
    });
    (url, peer)
}

#[test]
fn h2_a_goaway_closes_the_connection_once_with_its_code() {
    let (url, peer) = h2_peer(3);
    let sc = scenario(&url, Strategy::H2, 5);
    let notes = notes_of(sc, |sc, opener, notes, start| {
        h2::H2::new(h2::Pool::new(sc, 1, notes), opener, start)
    });
    peer.join().unwrap();
    let s = said(&notes);
    let closes: Vec<&String> = s.iter().filter(|l| l.starts_with("close")).collect();
    assert_eq!(
        closes,
        ["close server_goaway 3", "close end_of_run 2"],
        "{s:?}"
    );
    let goaways: Vec<&String> = s.iter().filter(|l| l.starts_with("goaway")).collect();
    assert_eq!(goaways, ["goaway-ended 0"], "{s:?}");
    assert_eq!(s.iter().filter(|l| *l == "open").count(), 2, "{s:?}");
    assert_eq!(s.iter().filter(|l| *l == "ok new").count(), 2, "{s:?}");
    assert_eq!(s.iter().filter(|l| *l == "ok reused").count(), 3, "{s:?}");
    // The server's SETTINGS came on each connection; the first is kept.
    let settings = notes
        .iter()
        .filter(|n| matches!(n, Note::Conn(ConnEvent::ServerSettings(_))))
        .count();
    assert_eq!(settings, 2, "{notes:?}");
    let rec = accounted(&notes);
    assert!(rec.server_settings.is_some());
    assert_eq!(rec.peak_streams_max, 1);
}
