//! The timeline: what happened second by second. Against a server with a 1 s idle
//! timeout, requests 2 s apart each find their connection closed and open a new one: the
//! new connections fall in the seconds the requests went, and nowhere else; the server
//! accepted exactly those. The buckets add up to the totals (also checked for every
//! scenario in `check_accounting`).

use std::time::Duration;

use crate::common::*;
use handshake::api::server::ServerConfig;

#[test]
fn new_connections_fall_in_the_seconds_after_each_idle_close() {
    let _machine = shared();
    let srv = start(ServerConfig {
        idle_timeout: Duration::from_secs(1),
        ..ServerConfig::default()
    });
    let url = srv.http_url().unwrap();
    // Open loop, one request every 2 s for 5.5 s: at 0, 2 and 4 s.
    let r = bench_json(&[&url, "--rate", "0.5", "-d", "5.5s", "-c", "1"]);
    let s = scenario(&r);
    check_accounting(s);
    let t = s["timeline"].as_array().unwrap();
    let per_second: Vec<u64> = t.iter().map(|b| u(&b["new_connections"])).collect();
    assert_eq!(&per_second[..5], &[1, 0, 1, 0, 1], "{t:?}");
    let requests: Vec<u64> = t.iter().map(|b| u(&b["requests"])).collect();
    assert_eq!(&requests[..5], &[1, 0, 1, 0, 1], "{t:?}");
    // Ground truth: the server accepted one connection per request, and closed each
    // after its idle second.
    let snap = srv.snapshot();
    assert_eq!(snap.connections_accepted, 3);
    assert_eq!(per_second.iter().sum::<u64>(), snap.connections_accepted);
    for (i, b) in t.iter().enumerate() {
        // 1 s each; the last one ends with the run (its last response).
        let w = b["width_s"].as_f64().unwrap();
        if i + 1 < t.len() {
            assert_eq!(w, 1.0, "{b}");
        } else {
            assert!(w > 0.0 && w <= 1.0, "{b}");
        }
        if u(&b["ok"]) > 0 {
            let p50 = b["p50_ms"].as_f64().unwrap();
            assert!(p50 > 0.0 && p50 <= b["p99_ms"].as_f64().unwrap(), "{b}");
        }
    }
    srv.stop();
}

/// The last bucket ends with the run; a run of 2.5 s has buckets at 0, 1 and 2 s.
#[test]
fn buckets_cover_the_run() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let r = bench_json(&[&url, "--rate", "20", "-d", "2.5s", "-c", "2"]);
    let s = scenario(&r);
    check_accounting(s);
    let t = s["timeline"].as_array().unwrap();
    assert_eq!(t.len(), 3, "{t:?}");
    let wall = s["duration_s"].as_f64().unwrap();
    let last = &t[2];
    assert_eq!(last["t_s"].as_f64(), Some(2.0));
    assert!(
        (last["width_s"].as_f64().unwrap() - (wall - 2.0)).abs() < 1e-9,
        "{last}"
    );
    // 20 requests a second: each full second holds about 20.
    for b in &t[..2] {
        let n = u(&b["requests"]);
        assert!((18..=22).contains(&n), "{b}");
    }
    srv.stop();
}

/// A run whose last response ends just past a second's boundary: requests at 0, 2 and
/// 4 s, the last one answered a fraction of a millisecond into the fifth second. The text
/// timeline draws that sliver with the second before (4 characters, a rate of 1/s), not
/// as a fifth second at one request per fraction of a millisecond (thousands per second).
#[test]
fn a_last_sliver_of_a_second_is_no_rate_of_its_own() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let out = run(&[
        "bench",
        &url,
        "--rate",
        "0.5",
        "-d",
        "4.5s",
        "-c",
        "1",
        "--no-progress",
    ]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(srv.snapshot().requests, 3, "{text}");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("requests/s ") && l.contains('|'))
        .unwrap_or_else(|| panic!("no requests/s timeline line in\n{text}"));
    assert_eq!(line.trim(), "requests/s      |█ ██| max 1.00", "{text}");
    srv.stop();
}
