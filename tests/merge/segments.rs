//! Scale-out: agents each run their share of one workload (`bench --segment I/N`, or
//! `--segments N` with `$JOB_COMPLETION_INDEX` as a Kubernetes Indexed Job sets it), and
//! `handshake merge` adds their reports up. The shares sum to `-n` and `-c`; the merged
//! counts equal the server's own (nginx's stub_status, the embedded server's); merging is
//! independent of the inputs' order and associative; mismatched runs are refused.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

use crate::common::*;
use serde_json::Value;

/// nginx's stub_status: (accepted connections, requests), read over a connection of its
/// own (counted in both: the caller subtracts it).
fn nginx_counts(port: u16) -> (u64, u64) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).unwrap();
    // "Active connections: 1 \nserver accepts handled requests\n 5 5 9 \n..."
    let line = body
        .lines()
        .skip_while(|l| !l.contains("accepts handled requests"))
        .nth(1)
        .unwrap_or_else(|| panic!("stub_status: {body}"));
    let n: Vec<u64> = line
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (n[0], n[2])
}

/// A file in this test's own temporary directory (`tag`), removed by its `Cleanup`.
fn tmp(tag: &str, name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("handshake-merge-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Removes a test's temporary directory when dropped: also when the test fails.
struct Cleanup(&'static str);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(tmp(self.0, "x").parent().unwrap());
    }
}

/// `handshake merge ARGS... --json`: must exit 0.
fn merge_json(args: &[&str]) -> Value {
    let mut all = vec!["merge", "--json"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(
        out.status.success(),
        "merge {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut v: Value = serde_json::from_slice(&out.stdout).unwrap();
    // The merge's own run (its command line, when it ran) is checked, then set aside:
    // the figures are what must be the same every way.
    let run = v
        .as_object_mut()
        .unwrap()
        .remove("run")
        .expect("a merge says what it ran");
    assert_eq!(run["command"], "merge", "{run}");
    assert_eq!(run["command_line"][1], "merge", "{run}");
    let urls: Vec<&Value> = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["url"])
        .collect();
    for u in urls {
        assert!(run["urls"].as_array().unwrap().contains(u), "{run}");
    }
    v
}

/// Agents started at once, each with its own `args`, writing their reports to files.
fn agents(
    tag: &str,
    common_args: &[&str],
    each: &[Vec<String>],
    envs: &[Option<String>],
) -> Vec<String> {
    let children: Vec<(std::process::Child, std::path::PathBuf)> = each
        .iter()
        .zip(envs)
        .enumerate()
        .map(|(i, (extra, env))| {
            let path = tmp(tag, &format!("agent-{i}.json"));
            let mut cmd = Command::new(bin());
            cmd.args(common_args)
                .args(extra)
                .stdout(std::fs::File::create(&path).unwrap())
                .stderr(Stdio::piped());
            if let Some(e) = env {
                cmd.env("JOB_COMPLETION_INDEX", e);
            }
            (cmd.spawn().unwrap(), path)
        })
        .collect();
    children
        .into_iter()
        .map(|(child, path)| {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "agent: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            path.to_str().unwrap().to_string()
        })
        .collect()
}

/// Three agents share -n 301 -c 5 against nginx (keepalive, 10 requests per
/// connection): their shares are 101/100/100 requests and 2/2/1 workers; the merged
/// requests and connections equal nginx's own counts; merge(a,b,c) = merge(c,a,b) =
/// merge(merge(a,b),c) = merge(a,merge(b,c)); the HTML of the merge holds every figure.
#[test]
fn three_segments_add_up_to_nginxs_counts_in_any_order() {
    let _machine = shared();
    let _cleanup = Cleanup("segments");
    let Some(nginx) = Nginx::start(
        "keepalive_requests 1000;",
        "return 200 \"ok\\n\"; } location /status { stub_status;",
    ) else {
        return;
    };
    let (acc0, req0) = nginx_counts(nginx.port);
    let url = nginx.url();
    let segs: Vec<Vec<String>> = (1..=3)
        .map(|i| vec!["--segment".to_string(), format!("{i}/3")])
        .collect();
    let files = agents(
        "segments",
        &[
            "bench",
            &url,
            "-n",
            "301",
            "-c",
            "5",
            "--requests-per-connection",
            "10",
            "--json",
            "--no-progress",
        ],
        &segs,
        &[None, None, None],
    );
    let (acc1, req1) = nginx_counts(nginx.port);
    // Each share, from the agents' own reports.
    let shares: Vec<(u64, u64)> = files
        .iter()
        .map(|f| {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            let s = scenario(&v);
            check_accounting(s);
            (u(&s["requests"]["attempted"]), u(&s["concurrency"]))
        })
        .collect();
    assert_eq!(shares, vec![(101, 2), (100, 2), (100, 1)]);
    let (a, b, c) = (files[0].as_str(), files[1].as_str(), files[2].as_str());
    let merged = merge_json(&[a, b, c]);
    let s = scenario(&merged);
    check_accounting(s);
    check_timeline(s);
    // nginx counted one connection and one request of our own for the first status read.
    assert_eq!(u(&s["requests"]["attempted"]), 301);
    assert_eq!(u(&s["requests"]["ok"]), 301);
    assert_eq!(u(&s["requests"]["ok"]), req1 - req0 - 1, "nginx's requests");
    assert_eq!(
        u(&s["connections"]["opened"]),
        acc1 - acc0 - 1,
        "nginx's connections"
    );
    // 2 workers of 51 and 50 requests, 10 per connection: 6 + 5; then 5 + 5; then 10.
    assert_eq!(u(&s["connections"]["opened"]), 31);
    assert_eq!(u(&s["load"]["requests"]), 301);
    assert_eq!(u(&s["concurrency"]), 5);
    let agents = merged["agents"].as_array().unwrap();
    let rows: Vec<(String, u64)> = agents
        .iter()
        .map(|a| {
            (
                format!("{}/{}", a["segment"]["index"], a["segment"]["count"]),
                u(&a["requests"]),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("1/3".into(), 101),
            ("2/3".into(), 100),
            ("3/3".into(), 100)
        ]
    );
    // Order-free and associative: the same JSON every way.
    assert_eq!(merge_json(&[c, a, b]), merged, "merge(c,a,b)");
    let ab = tmp("segments", "ab.json");
    std::fs::write(&ab, serde_json::to_vec(&merge_json(&[a, b])).unwrap()).unwrap();
    assert_eq!(
        merge_json(&[ab.to_str().unwrap(), c]),
        merged,
        "merge(merge(a,b),c)"
    );
    let bc = tmp("segments", "bc.json");
    std::fs::write(&bc, serde_json::to_vec(&merge_json(&[c, b])).unwrap()).unwrap();
    assert_eq!(
        merge_json(&[a, bc.to_str().unwrap()]),
        merged,
        "merge(a,merge(c,b))"
    );
    // The text names each agent; the HTML draws every figure of the merged JSON.
    let out = run(&["merge", a, b, c]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Agents (3;"), "{text}");
    check_html(&["merge", a, b, c], "merge");
    drop(nginx);
}

/// The Job's contract: agents started with JOB_COMPLETION_INDEX=0..2 and --segments 3 and
/// one --start-at, their standard outputs concatenated (as `kubectl logs` gives them) and
/// piped to `handshake merge -`: the sum equals the embedded server's counts, and the
/// agents started together at the time given.
#[test]
fn indexed_job_agents_piped_to_merge_match_the_server() {
    let _machine = shared();
    let _cleanup = Cleanup("job");
    let srv = start(handshake::api::server::ServerConfig::default());
    let url = srv.http_url().unwrap();
    let start = time::OffsetDateTime::now_utc() + time::Duration::seconds(2);
    let at = start
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    let files = agents(
        "job",
        &[
            "bench",
            &url,
            "-n",
            "200",
            "-c",
            "4",
            "--strategy",
            "close",
            "--segments",
            "3",
            "--start-at",
            &at,
            "--json",
            "--no-progress",
        ],
        &[vec![], vec![], vec![]],
        &[Some("0".into()), Some("1".into()), Some("2".into())],
    );
    let mut logs = Vec::new();
    for f in &files {
        logs.extend(std::fs::read(f).unwrap());
    }
    let mut child = Command::new(bin())
        .args(["merge", "-", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&logs).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = scenario(&merged);
    check_accounting(s);
    let stats = srv.snapshot();
    assert_eq!(u(&s["requests"]["ok"]), 200);
    assert_eq!(u(&s["requests"]["ok"]), stats.requests);
    assert_eq!(u(&s["connections"]["opened"]), stats.connections_accepted);
    let agents = merged["agents"].as_array().unwrap();
    let segs: Vec<u64> = agents.iter().map(|a| u(&a["segment"]["index"])).collect();
    assert_eq!(segs, vec![1, 2, 3]);
    let requests: Vec<u64> = agents.iter().map(|a| u(&a["requests"])).collect();
    assert_eq!(requests, vec![67, 67, 66]);
    for a in agents {
        let t = time::OffsetDateTime::parse(
            a["started_at"].as_str().unwrap(),
            &time::format_description::well_known::Rfc3339,
        )
        .unwrap();
        // started_at is written to the millisecond (truncated).
        let late = (t - start).as_seconds_f64();
        assert!(
            (-0.001..0.5).contains(&late),
            "agent started {late} s after --start-at"
        );
    }
    srv.stop();
}

/// Runs of different workloads, a segment run twice, text that is not a report, a
/// compare report: each refused with exit 2 and a message naming it; --allow-mismatch
/// merges anyway. Bad segment options are usage errors.
/// Agents that ran segments 1/3 and 3/3 of a workload: the merge says that no agent ran
/// 2/3, and of how much of the workload its figures are (the embedded server's own count
/// of requests is theirs); with 2/3 merged too, nothing is missing. A report of another
/// schema version is refused, naming both versions.
#[test]
fn a_missing_segment_is_said_and_another_schema_version_is_refused() {
    let _machine = shared();
    let _cleanup = Cleanup("missing");
    let srv = start(handshake::api::server::ServerConfig::default());
    let url = srv.http_url().unwrap();
    let bench = |i: u32| {
        let seg = format!("{i}/3");
        let out = run(&[
            "bench",
            &url,
            "-n",
            "30",
            "-c",
            "3",
            "--segment",
            &seg,
            "--json",
            "--no-progress",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let p = tmp("missing", &format!("{i}.json"));
        std::fs::write(&p, &out.stdout).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (one, two, three) = (bench(1), bench(2), bench(3));
    let merged = merge_json(&[&one, &three]);
    assert_eq!(u(&scenario(&merged)["requests"]["ok"]), 20);
    let cov = merged["coverage"].as_array().unwrap();
    assert_eq!(cov.len(), 1, "{cov:?}");
    assert_eq!(cov[0]["code"], "segments_missing");
    let text = cov[0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("No agent ran 2/3 of the workload: the report above is of 66.7 % of it, not the whole run"),
        "{text}"
    );
    let e = &cov[0]["evidence"][0];
    assert_eq!(
        (e["value"].as_f64(), e["of"].as_f64()),
        (Some(2.0), Some(3.0)),
        "{e}"
    );
    let out = run(&["merge", &three, &one]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("No agent ran 2/3 of the workload"));
    let whole = merge_json(&[&one, &two, &three]);
    assert_eq!(whole["coverage"], serde_json::json!([]));
    assert_eq!(
        u(&scenario(&whole)["requests"]["ok"]),
        srv.snapshot().requests
    );
    // Another schema version's figures may not mean the same.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&two).unwrap()).unwrap();
    v["schema_version"] = 2.into();
    let other = tmp("missing", "v2.json");
    std::fs::write(&other, v.to_string()).unwrap();
    let out = run(&["merge", &one, other.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("a report of schema version 2, and this handshake reads version 1"),
        "{err}"
    );
}

#[test]
fn mismatches_and_bad_input_are_refused() {
    let _machine = shared();
    let _cleanup = Cleanup("refused");
    let srv = start(handshake::api::server::ServerConfig::default());
    let url = srv.http_url().unwrap();
    let bench = |extra: &[&str], name: &str| {
        let mut args = vec![
            "bench",
            url.as_str(),
            "-n",
            "20",
            "-c",
            "2",
            "--json",
            "--no-progress",
        ];
        args.extend_from_slice(extra);
        let out = run(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let p = tmp("refused", name);
        std::fs::write(&p, &out.stdout).unwrap();
        p.to_str().unwrap().to_string()
    };
    let a = bench(&["--segment", "1/2"], "a.json");
    let b = bench(&["--segment", "2/2", "--strategy", "close"], "b.json");
    let a2 = bench(&["--segment", "1/2"], "a2.json");
    let refused = |args: &[&str], says: &str| {
        let mut all = vec!["merge"];
        all.extend_from_slice(args);
        let out = run(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "merge {args:?}: {err}");
        assert!(err.contains(says), "merge {args:?}: {err}");
    };
    refused(&[&a, &b], "different workloads");
    refused(&[&a, &a2], "overlap");
    let merged = merge_json(&[&a, &a2, "--allow-mismatch"]);
    assert_eq!(u(&scenario(&merged)["requests"]["attempted"]), 20);
    let junk = tmp("refused", "junk.json");
    std::fs::write(&junk, "{\"tool\": \"handshake\"}\nerror: something else\n").unwrap();
    refused(&[junk.to_str().unwrap()], "not a JSON report at line 2");
    let cmp = run(&[
        "compare",
        &url,
        "-n",
        "10",
        "--rounds",
        "1",
        "--strategies",
        "close",
        "--json",
    ]);
    let cmp_file = tmp("refused", "compare.json");
    std::fs::write(&cmp_file, &cmp.stdout).unwrap();
    refused(&[cmp_file.to_str().unwrap()], "a compare report");
    refused(&["/nonexistent/report.json"], "/nonexistent/report.json");
    // Segment options.
    for (args, says) in [
        (vec!["--segment", "4/3"], "1 <= I <= N"),
        (vec!["--segment", "two"], "expected I/N"),
        (vec!["--segment", "3/3", "-c", "2"], "no workers"),
        (vec!["--segments", "3"], "JOB_COMPLETION_INDEX"),
        (vec!["--start-at", "tomorrow"], "RFC 3339"),
    ] {
        let mut all = vec!["bench", url.as_str(), "-n", "10"];
        all.extend_from_slice(&args);
        let out = Command::new(bin())
            .args(&all)
            .env_remove("JOB_COMPLETION_INDEX")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    srv.stop();
}
