//! HTTP/1 over plain TCP runs in one readiness loop per thread (`engine::h1loop`); the
//! task per worker (`HANDSHAKE_H1_TASKS`) is the other way. The two count the same
//! against nginx, each equal to nginx's own log: requests, connections, the requests each
//! connection carried, why each closed.

use std::collections::BTreeMap;

use crate::common::*;
use serde_json::Value;

/// nginx logging each request's connection and that connection's request number, and
/// closing its connections after 7 requests.
fn nginx() -> Option<(Nginx, String)> {
    Nginx::logging("$connection $connection_requests", "keepalive_requests 7;")
}

/// What nginx logged since `from` lines: requests, and connections.
fn logged(log: &str, from: usize) -> (u64, u64) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut conns: BTreeMap<&str, u64> = BTreeMap::new();
    let mut requests = 0;
    for line in text.lines().skip(from) {
        if let Some(c) = line.split_whitespace().next() {
            *conns.entry(c).or_default() += 1;
            requests += 1;
        }
    }
    (requests, conns.len() as u64)
}

fn lines(log: &str) -> usize {
    std::fs::read_to_string(log).map_or(0, |t| t.lines().count())
}

/// One bench run, the loop's way or the tasks': its scenario.
fn run_way(tasks: bool, args: &[&str]) -> Value {
    scenario(&bench_json_way(tasks, args)).clone()
}

/// The counts both ways must agree on.
fn counts(s: &Value) -> Vec<(String, u64)> {
    let mut v = vec![
        ("ok".into(), u(&s["requests"]["ok"])),
        ("attempted".into(), u(&s["requests"]["attempted"])),
        ("opened".into(), u(&s["connections"]["opened"])),
        ("reused".into(), u(&s["connections"]["reused_requests"])),
        (
            "kernel closed".into(),
            u(&s["connections"]["kernel"]["closed"]),
        ),
        (
            "most per connection".into(),
            u(&s["connections"]["requests_per_connection"]["max"]),
        ),
        (
            "ignored close".into(),
            u(&s["connections"]["server_ignored_close"]),
        ),
    ];
    for r in [
        "client_policy",
        "server_max_requests",
        "server_close_header",
        "server_http10",
        "end_of_run",
        "error",
    ] {
        v.push((r.into(), close_reason(s, r)));
    }
    v
}

#[test]
fn the_loop_and_the_tasks_count_what_nginx_logged() {
    let _machine = shared();
    let Some((nginx, log)) = nginx() else {
        return;
    };
    let url = nginx.url();
    for args in [
        vec!["-n", "700", "-c", "10"],
        vec!["-n", "300", "-c", "10", "-s", "close"],
        vec!["-n", "300", "-c", "10", "-s", "http10"],
        vec!["-n", "300", "-c", "10", "--requests-per-connection", "5"],
        vec!["-n", "301", "-c", "3", "-t", "2"],
    ] {
        let mut seen = Vec::new();
        for tasks in [false, true] {
            let mut a = vec![url.as_str()];
            a.extend(&args);
            let from = lines(&log);
            let s = run_way(tasks, &a);
            check_accounting(&s);
            // nginx writes its log line as it ends each request: by the time bench
            // has the response it may not be there yet.
            std::thread::sleep(std::time::Duration::from_millis(200));
            let (requests, conns) = logged(&log, from);
            let n: u64 = args[1].parse().unwrap();
            assert_eq!(u(&s["requests"]["ok"]), n, "{args:?} tasks={tasks}");
            assert_eq!(requests, n, "nginx answered {args:?} tasks={tasks}");
            assert_eq!(
                u(&s["connections"]["opened"]),
                conns,
                "nginx's connections, {args:?} tasks={tasks}"
            );
            seen.push(counts(&s));
        }
        assert_eq!(seen[0], seen[1], "the loop and the tasks for {args:?}");
    }
}

/// A name (`localhost`) is looked up beside the loop: both ways count the same, and
/// nginx's log; with the cache on, one lookup for the run and a cache hit or a wait for
/// it for every other connection; with it off, a lookup per connection.
#[test]
fn a_name_is_looked_up_beside_the_loop_as_the_tasks_do() {
    let _machine = shared();
    let Some((nginx, log)) = nginx() else {
        return;
    };
    let url = nginx.url().replace("127.0.0.1", "localhost");
    for cache in ["on", "off"] {
        let args = [
            url.as_str(),
            "-n",
            "200",
            "-c",
            "10",
            "-t",
            "2",
            "-s",
            "close",
            "--dns-cache",
            cache,
        ];
        let mut seen = Vec::new();
        for tasks in [false, true] {
            let from = lines(&log);
            let s = run_way(tasks, &args);
            check_accounting(&s);
            std::thread::sleep(std::time::Duration::from_millis(200));
            let (requests, conns) = logged(&log, from);
            assert_eq!(u(&s["requests"]["ok"]), 200, "cache {cache} tasks={tasks}");
            assert_eq!(requests, 200, "nginx answered, cache {cache} tasks={tasks}");
            let opened = u(&s["connections"]["opened"]);
            assert_eq!(
                opened, conns,
                "nginx's connections, cache {cache} tasks={tasks}"
            );
            let d = &s["dns"];
            let (lookups, hits, joined) = (u(&d["lookups"]), u(&d["cache_hits"]), u(&d["joined"]));
            assert_eq!(lookups + hits + joined, opened, "{d} tasks={tasks}");
            let expected = if cache == "on" { 2 } else { opened };
            // With the cache on, each of the 2 threads may ask before the other's answer
            // is in: one lookup, or two at most; the rest are hits or joined waits.
            assert!(
                (1..=expected).contains(&lookups),
                "lookups, cache {cache} tasks={tasks}: {d}"
            );
            assert_eq!(
                u(&s["phases_ms"]["new"]["dns"]["count"]),
                lookups + joined,
                "the dns phase only where a lookup was waited for, tasks={tasks}"
            );
            seen.push(counts(&s));
        }
        assert_eq!(seen[0], seen[1], "the loop and the tasks, cache {cache}");
    }
}
