//! `-L`/`--location`: redirects followed as curl follows them, each hop a request of its
//! own, against nginx's `return 301`/`302` chains within one origin and across two, a
//! loop, and a chain longer than `--max-redirs`. nginx's log (its port, `$connection`,
//! the request, the status) is the ground truth for the requests and connections.

use std::collections::BTreeSet;

use crate::common::*;
use serde_json::Value;

/// nginx with two servers: A (`ports[0]`) answers `/a` 301 to `/b`, `/b` 302 to B's
/// `/c`, `/loop1` and `/loop2` 301 to each other, `/r1`..`/r5` 301 each to the next and
/// `/r6` 200; B (`ports[1]`) answers `/c` 200.
fn chains() -> Nginx {
    Nginx::start_servers(
        "log_format hop '$server_port $connection $request $status';",
        2,
        |ports, d| {
            let d = d.display();
            let (a, b) = (ports[0], ports[1]);
            let mut hops = String::new();
            for i in 1..=5 {
                hops.push_str(&format!("location = /r{i} {{ return 301 /r{}; }} ", i + 1));
            }
            format!(
                "server {{ listen 127.0.0.1:{a}; access_log {d}/access.log hop; \
                 location = /a {{ return 301 /b; }} \
                 location = /b {{ return 302 http://127.0.0.1:{b}/c; }} \
                 location = /loop1 {{ return 301 /loop2; }} \
                 location = /loop2 {{ return 301 http://127.0.0.1:{a}/loop1; }} \
                 {hops} location = /r6 {{ return 200 \"end\\n\"; }} }}\n\
                 server {{ listen 127.0.0.1:{b}; access_log {d}/access.log hop; \
                 location = /c {{ return 200 \"c\\n\"; }} }}"
            )
        },
    )
    .expect("nginx")
}

/// nginx's log lines since `from`: by server port, (requests, distinct connections).
fn logged(n: &Nginx, from: usize) -> (Vec<(u64, u64)>, Vec<String>) {
    let text = std::fs::read_to_string(n.dir.join("access.log")).unwrap_or_default();
    let lines: Vec<String> = text.lines().skip(from).map(str::to_string).collect();
    let per = n
        .ports
        .iter()
        .map(|p| {
            let mine: Vec<&String> = lines
                .iter()
                .filter(|l| l.starts_with(&format!("{p} ")))
                .collect();
            let conns: BTreeSet<&str> = mine.iter().filter_map(|l| l.split(' ').nth(1)).collect();
            (mine.len() as u64, conns.len() as u64)
        })
        .collect();
    (per, lines)
}

fn lines(n: &Nginx) -> usize {
    logged(n, 0).1.len()
}

fn requests(v: &Value) -> &Value {
    &scenario(v)["requests"]
}

#[test]
fn a_chain_across_two_origins_is_followed_hop_by_hop_on_kept_connections() {
    let _machine = shared();
    let n = chains();
    let url = format!("http://127.0.0.1:{}/a", n.ports[0]);
    let from = lines(&n);
    let out = run(&["bench", &url, "-L", "-n", "20", "-c", "2"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("redirects followed    40 of 60 requests"),
        "{text}"
    );
    // The redirects followed are hops, not the answers: no finding says the run
    // measured redirects.
    assert!(!text.contains("Most responses were redirects"), "{text}");
    let seen: Vec<u64> = logged(&n, from).0.iter().map(|p| p.0).collect();
    assert_eq!(seen, vec![40, 20]);
    for p in &n.ports {
        assert!(text.contains(&format!("http://127.0.0.1:{p} 2")), "{text}");
    }
    assert!(
        text.contains("  by origin             http://127.0.0.1:"),
        "{text}"
    );
    let from = lines(&n);
    let v = bench_json(&[&url, "-L", "-n", "20", "-c", "2"]);
    let (per, log) = logged(&n, from);
    // Each of the 20 goes /a (301), /b (302), then B's /c (200): 60 requests, 40 of them
    // redirects, on one connection per worker to each origin.
    assert_eq!(per, vec![(40, 2), (20, 2)], "{log:?}");
    let r = requests(&v);
    assert_eq!((u(&r["attempted"]), u(&r["ok"])), (60, 60), "{r}");
    assert_eq!(u(&r["redirects"]), 40);
    assert_eq!(u(&r["status_codes"]["301"]), 20);
    assert_eq!(u(&r["status_codes"]["302"]), 20);
    assert_eq!(u(&r["status_codes"]["200"]), 20);
    let c = &scenario(&v)["connections"];
    assert_eq!(u(&c["opened"]), per.iter().map(|p| p.1).sum::<u64>(), "{c}");
    // Connections per origin: each origin's as nginx counted them.
    for (i, p) in n.ports.iter().enumerate() {
        assert_eq!(
            u(&c["by_origin"][format!("http://127.0.0.1:{p}")]),
            per[i].1,
            "{c}"
        );
    }
    check_accounting(scenario(&v));

    // Without -L: the 301 is the answer; nothing follows, no redirects figure.
    let from = lines(&n);
    let v = bench_json(&[&url, "-n", "10", "-c", "1"]);
    let (per, _) = logged(&n, from);
    assert_eq!(per, vec![(10, 1), (0, 0)]);
    assert_eq!(u(&requests(&v)["status_codes"]["301"]), 10);
    assert!(requests(&v).get("redirects").is_none());
    let d = v["scenarios"][0]["diagnosis"].to_string();
    assert!(
        d.contains("mostly_redirects") && d.contains("follow redirects with -L"),
        "{d}"
    );

    // A new connection per request: every hop opens one, to its own origin.
    let from = lines(&n);
    let v = bench_json(&[&url, "-L", "-s", "close", "-n", "6", "-c", "1"]);
    let (per, _) = logged(&n, from);
    assert_eq!(per, vec![(12, 12), (6, 6)]);
    assert_eq!(u(&scenario(&v)["connections"]["opened"]), 18);
    let b = n.ports[1];
    assert_eq!(
        u(&scenario(&v)["connections"]["by_origin"][format!("http://127.0.0.1:{b}")]),
        6
    );
    assert!(
        schema_violations("report.schema.json", &v).is_empty(),
        "{:?}",
        schema_violations("report.schema.json", &v)
    );
    assert_eq!(u(&requests(&v)["redirects"]), 12);
}

#[test]
fn a_loop_and_a_chain_past_max_redirs_are_redirect_errors() {
    let _machine = shared();
    let n = chains();
    let a = n.ports[0];
    // /loop1 -> /loop2 -> /loop1: the second answer would lead back; it is the error.
    let from = lines(&n);
    let url = format!("http://127.0.0.1:{a}/loop1");
    let out = run(&["bench", &url, "-L", "-n", "5", "-c", "1", "--json"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("a report");
    assert_eq!(out.status.code(), Some(1), "errors fail the run");
    let (per, _) = logged(&n, from);
    assert_eq!(per[0].0, 10, "two requests each");
    let r = requests(&v);
    assert_eq!(u(&r["attempted"]), 10, "{r}");
    assert_eq!(u(&r["redirects"]), 5);
    assert_eq!(u(&r["errors"]["redirect"]), 5, "{r}");
    assert_eq!(u(&r["error_details"]["redirect_loop"]), 5);
    let example = r["error_examples"]["redirect_loop"].as_str().unwrap();
    assert!(
        example.contains("/loop1") && example.contains("already visited"),
        "{example}"
    );

    // /r1 .. /r6 is five redirects: with --max-redirs 3 the fourth is the error.
    let from = lines(&n);
    let url = format!("http://127.0.0.1:{a}/r1");
    let out = run(&[
        "bench",
        &url,
        "-L",
        "--max-redirs",
        "3",
        "-n",
        "4",
        "-c",
        "1",
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("a report");
    let (per, _) = logged(&n, from);
    assert_eq!(per[0].0, 16, "r1..r4 each time");
    let r = requests(&v);
    assert_eq!(u(&r["attempted"]), 16);
    assert_eq!(u(&r["redirects"]), 12);
    assert_eq!(u(&r["error_details"]["too_many_redirects"]), 4);
    // The default of 10 follows it to the end.
    let from = lines(&n);
    let v = bench_json(&[&url, "-L", "-n", "2", "-c", "1"]);
    assert_eq!(logged(&n, from).0[0].0, 12);
    assert_eq!(u(&requests(&v)["redirects"]), 10);
    assert_eq!(u(&requests(&v)["status_codes"]["200"]), 2);
}

#[test]
fn redirect_flags_misused_are_usage_errors() {
    let _machine = shared();
    for (args, says) in [
        (
            vec!["bench", "http://127.0.0.1:1/", "--max-redirs", "3"],
            "-L",
        ),
        (
            vec!["bench", "http://127.0.0.1:1/", "-L", "--max-redirs", "-2"],
            "--max-redirs",
        ),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn compare_says_how_many_requests_were_redirects() {
    let _machine = shared();
    let n = chains();
    let url = format!("http://127.0.0.1:{}/a", n.ports[0]);
    let args = [
        "compare",
        &url,
        "-L",
        "--strategies",
        "keepalive,close",
        "-n",
        "6",
        "-c",
        "1",
        "--rounds",
        "2",
        "--no-progress",
    ];
    let from = lines(&n);
    let out = run(&[&args[..], &["--json"]].concat());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Two rows, two rounds, 6 chains of three requests each.
    let (per, log) = logged(&n, from);
    assert_eq!((per[0].0, per[1].0), (48, 24), "{log:?}");
    let rows = v["comparison"]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for r in rows {
        assert_eq!(r["redirects"]["median"], 12.0, "{r}");
    }
    let out = run(&args);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("redirects followed per round: keepalive 12, close 12"),
        "{text}"
    );
}

/// HTTP/2 over TLS (ALPN h2): a redirect to another origin; each hop a stream, one
/// connection to each origin (one thread), as nginx counts them.
#[test]
fn http2_follows_a_redirect_to_another_origin_on_a_connection_of_its_own() {
    let _machine = shared();
    let n = Nginx::start_servers(
        "log_format hop '$server_port $connection $request $status';",
        2,
        |ports, d| {
            write_certs(d, &["localhost"]);
            let d = d.display();
            let (a, b) = (ports[0], ports[1]);
            let tls = format!(
                "ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem; access_log {d}/access.log hop;"
            );
            format!(
                "server {{ listen 127.0.0.1:{a} ssl http2; {tls} location = /a {{ return 301 https://localhost:{b}/c; }} }}\n\
                 server {{ listen 127.0.0.1:{b} ssl http2; {tls} location = /c {{ return 200 \"c\\n\"; }} }}"
            )
        },
    )
    .expect("nginx");
    let ca = n.dir.join("ca.pem").display().to_string();
    let url = format!("https://localhost:{}/a", n.ports[0]);
    let v = bench_json(&[
        &url, "-L", "-s", "h2", "--cacert", &ca, "-n", "10", "-c", "2", "-t", "1",
    ]);
    let (per, log) = logged(&n, 0);
    assert_eq!(per, vec![(10, 1), (10, 1)], "{log:?}");
    assert!(log.iter().all(|l| l.contains("HTTP/2.0")), "{log:?}");
    let r = requests(&v);
    assert_eq!((u(&r["attempted"]), u(&r["redirects"])), (20, 10), "{r}");
    let by = &scenario(&v)["connections"]["by_origin"];
    for p in &n.ports {
        assert_eq!(u(&by[format!("https://localhost:{p}")]), 1, "{by}");
    }
}
