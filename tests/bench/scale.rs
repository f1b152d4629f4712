//! Many connections from one machine (issue 46): source addresses from a list or a range
//! (each with ports of its own), counted per address against nginx's own log; the
//! open-file limit raised to what -c needs, or a clear error naming `ulimit -n` and the
//! number when it cannot be.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use crate::common::*;

/// nginx logging each request's client address and connection number.
fn nginx_logging_sources() -> Option<(Nginx, String)> {
    Nginx::logging("$remote_addr $connection", "")
}

/// nginx's connections by client address: distinct connection numbers per address.
fn connections_by_address(log: &str) -> BTreeMap<String, u64> {
    let mut seen: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in std::fs::read_to_string(log).unwrap_or_default().lines() {
        let mut f = line.split_whitespace();
        if let (Some(addr), Some(conn)) = (f.next(), f.next()) {
            seen.entry(addr.into()).or_default().insert(conn.into());
        }
    }
    seen.into_iter().map(|(a, c)| (a, c.len() as u64)).collect()
}

/// A list and a range of source addresses: connections spread over each in turn, and
/// the report's count from each equals nginx's count of connections from it.
#[test]
fn source_addresses_are_counted_as_the_server_saw_them() {
    let _machine = shared();
    let Some((nginx, log)) = nginx_logging_sources() else {
        return;
    };
    let r = bench_json(&[
        &nginx.url(),
        "-n",
        "600",
        "-c",
        "60",
        "-s",
        "close",
        "--local-addr",
        "127.0.0.2-127.0.0.4,127.0.0.9",
    ]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["requests"]["ok"]), 600);
    let by = &s["connections"]["by_source_address"];
    let ours: BTreeMap<String, u64> = by
        .as_object()
        .expect("by_source_address")
        .iter()
        .map(|(a, n)| (a.clone(), u(n)))
        .collect();
    let theirs = connections_by_address(&log);
    assert_eq!(ours, theirs, "the report's connections by source = nginx's");
    assert_eq!(ours.len(), 4, "{ours:?}");
    assert!(ours.values().all(|n| *n >= 100), "used in turn: {ours:?}");
    assert_eq!(ours.values().sum::<u64>(), u(&s["connections"]["opened"]));
    let raw = &s["raw"];
    assert_eq!(
        raw["shape"]["local_addrs"].as_array().map(Vec::len),
        Some(4)
    );
    assert!(schema_violations("report.schema.json", &r).is_empty());

    let text = run(&[
        "bench",
        "--no-progress",
        &nginx.url(),
        "-n",
        "20",
        "-c",
        "2",
        "--local-addr",
        "127.0.0.5",
    ]);
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(text.contains("from source address   127.0.0.5 2"), "{text}");
}

/// Bad `--local-addr` values: exit 2 naming what was wrong.
#[test]
fn bad_source_addresses_are_usage_errors() {
    let _machine = shared();
    for (arg, says) in [
        ("127.0.0.9-127.0.0.4", "ends before it starts"),
        ("127.0.0.1-127.0.10.4", "at most 1024"),
        ("127.0.0.1-::1", "of one family"),
        ("127.0.0.1-nope", "not an IP address or a range"),
        ("192.0.2.1", "not an address of this machine"),
    ] {
        let out = run(&[
            "bench",
            "http://127.0.0.1:9/",
            "-n",
            "1",
            "--local-addr",
            arg,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{arg}: {err}");
        assert!(err.contains(says), "{arg}: {err}");
    }
}

/// A run whose connections need more descriptors than the hard limit allows, by a
/// process that may not raise it: exit 2 before anything is sent, naming `ulimit -n`
/// and the number needed. Within the hard limit the same run raises its soft limit and
/// completes, every connection counted by the server.
#[test]
fn the_open_file_limit_is_raised_or_named() {
    let _machine = shared();
    if !root("the open-file limit test (it drops root to show the error)") {
        return;
    }
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let before = srv.snapshot();
    let cmd = format!(
        "ulimit -Sn 400 && ulimit -Hn 400 && exec setpriv --reuid=65534 --regid=65534 --clear-groups {} bench {url} -n 700 -c 700",
        bin()
    );
    let out = Command::new("bash").args(["-c", &cmd]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("need about 956 open files")
            && err.contains("may open 400 (ulimit -n)")
            && err.contains("ulimit -n 956"),
        "{err}"
    );
    assert_eq!(
        srv.snapshot().connections_accepted,
        before.connections_accepted,
        "nothing was sent"
    );

    // A soft limit below the need and a hard limit above it: raised, and the run
    // completes (past the hard limit needs CAP_SYS_RESOURCE, which root may lack in a
    // container: this machine's is 20,000 and fixed).
    let cmd = format!(
        "ulimit -Sn 400 && ulimit -Hn 2000 && exec {} bench {url} -n 1400 -c 700 --json",
        bin()
    );
    let out = Command::new("bash").args(["-c", &cmd]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = scenario(&r);
    assert_eq!(u(&s["requests"]["ok"]), 1400);
    assert_eq!(u(&s["connections"]["opened"]), 700);
    assert_eq!(
        srv.snapshot().connections_accepted - before.connections_accepted,
        700,
        "the server's count"
    );
}

/// nginx's time of each request (`$msec`) in its log: the first and the last.
fn first_and_last(log: &str, from: usize) -> (f64, f64, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let times: Vec<f64> = text
        .lines()
        .skip(from)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    let first = times.iter().copied().fold(f64::MAX, f64::min);
    let last = times.iter().copied().fold(0.0, f64::max);
    (first, last, times.len())
}

/// `--connect-rate`: 300 new connections at 150 a second take two seconds by nginx's
/// own clock, each counted by it, both ways a run may take (the readiness loop and the
/// tasks); the waits are the requests' blocked phase, and the report says the rate.
/// Unpaced, the same connections come at once. Bad values are usage errors.
#[test]
fn connects_are_paced_at_the_rate_asked() {
    let _machine = shared();
    let Some((nginx, log)) = Nginx::logging("$msec $connection", "") else {
        return;
    };
    let lines = || std::fs::read_to_string(&log).map_or(0, |t| t.lines().count());
    for (tasks, rate) in [(false, Some("150")), (true, Some("150")), (false, None)] {
        let from = lines();
        let url = nginx.url();
        let mut args = vec![
            url.as_str(),
            "-n",
            "300",
            "-c",
            "30",
            "-t",
            "2",
            "-s",
            "close",
        ];
        if let Some(r) = rate {
            args.extend(["--connect-rate", r]);
        }
        let r = bench_json_way(tasks, &args);
        let s = scenario(&r);
        check_accounting(s);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (first, last, n) = first_and_last(&log, from);
        assert_eq!(n, 300, "nginx answered them all (tasks={tasks})");
        assert_eq!(u(&s["connections"]["opened"]), 300, "tasks={tasks}");
        let spread = last - first;
        if rate.is_some() {
            // The first turn of each thread is at once: 299 intervals of 1/150 s.
            assert!(
                (1.7..4.0).contains(&spread),
                "300 connects at 150/s by nginx's clock: {spread:.3} s (tasks={tasks})"
            );
            assert_eq!(s["load"]["connect_rate"].as_f64(), Some(150.0));
            let blocked = &s["phases_ms"]["new"]["blocked"];
            assert!(
                blocked["p50"].as_f64().is_some_and(|p| p > 10.0),
                "the waits are blocked: {blocked} (tasks={tasks})"
            );
            assert!(schema_violations("report.schema.json", &r).is_empty());
        } else {
            assert!(spread < 1.5, "unpaced: {spread:.3} s");
            assert!(s["load"].get("connect_rate").is_none());
        }
    }
    let text = run(&[
        "bench",
        "--no-progress",
        &nginx.url(),
        "-n",
        "4",
        "-c",
        "2",
        "--connect-rate",
        "100",
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("new connections at most 100 a second"),
        "{text}"
    );
    for bad in ["0", "-5", "nan"] {
        let out = run(&[
            "bench",
            "http://127.0.0.1:9/",
            "-n",
            "1",
            &format!("--connect-rate={bad}"),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("--connect-rate"), "{bad}: {err}");
    }
}
