//! Deploys and faults (issue 57): what a run does when it is stopped by a signal, when
//! its report cannot be written, and when the server it loads goes away and comes back.
//! Every count is checked against the server's own log.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

/// Start `cmd` with its output piped, send it `signal` (`-TERM`, `-INT`) after `after`,
/// and again `again` later if given; then its exit status, stdout and stderr, and how
/// long after the first signal it ended.
fn signalled(
    cmd: &mut Command,
    after: Duration,
    signal: &str,
    again: Option<Duration>,
) -> (Option<i32>, String, String, Duration) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(after);
    let kill = || {
        let _ = Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status();
    };
    kill();
    let sent = Instant::now();
    if let Some(d) = again {
        std::thread::sleep(d);
        kill();
    }
    let out = child.wait_with_output().unwrap();
    let took = sent.elapsed();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
        took,
    )
}

/// The requests nginx logged (one line each: `$connection $connection_requests $status`)
/// and the connections they came on.
fn logged(log: &str) -> (u64, u64) {
    std::thread::sleep(Duration::from_millis(200));
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let conns: std::collections::BTreeSet<&str> =
        text.lines().filter_map(|l| l.split(' ').next()).collect();
    (text.lines().count() as u64, conns.len() as u64)
}

/// The requests that failed, all categories together.
fn failed(s: &Value) -> u64 {
    s["requests"]["errors"]
        .as_object()
        .unwrap()
        .values()
        .map(u)
        .sum()
}

/// nginx logged (in `log`) at least `low` and at most `high` requests.
fn logged_within(log: &str, low: u64, high: u64) {
    let (requests, _) = logged(log);
    assert!(
        (low..=high).contains(&requests),
        "nginx logged {requests}, the report says between {low} and {high}"
    );
}

/// SIGTERM (what systemd and Kubernetes send) is handled as SIGINT: the report of what
/// was measured, marked as interrupted by SIGTERM, exit 143; its counts are nginx's; a
/// segment's agent stopped so leaves a report `merge` reads.
#[test]
fn sigterm_keeps_what_bench_measured_and_merge_reads_the_segment() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let Some((n, log)) = Nginx::logging("$connection $connection_requests $status", "") else {
        return;
    };
    let mut cmd = Command::new(bin());
    cmd.args([
        "bench",
        &n.url(),
        "-d",
        "30s",
        "-c",
        "2",
        "--segment",
        "1/2",
        "--json",
        "--no-progress",
    ]);
    let (code, out, err, _) = signalled(&mut cmd, Duration::from_millis(1500), "-TERM", None);
    assert_eq!(code, Some(143), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?} {err}"));
    assert_eq!(v["interrupted"]["code"], "interrupted", "{v}");
    let text = v["interrupted"]["text"].as_str().unwrap();
    assert!(text.starts_with("Interrupted by SIGTERM: "), "{text}");
    let signal = &v["interrupted"]["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["figure"] == "signal")
        .unwrap()["value"];
    assert_eq!(signal.as_f64(), Some(15.0));
    let s = scenario(&v);
    check_accounting(s);
    let ok = u(&s["requests"]["ok"]);
    let given_up = u(&s["requests"]["aborted_at_deadline"]);
    assert!(ok > 0, "{s}");
    let (requests, conns) = logged(&log);
    assert!(
        requests >= ok && requests <= ok + given_up,
        "nginx logged {requests}, the report says {ok} ok (+{given_up} given up)"
    );
    assert_eq!(conns, u(&s["connections"]["opened"]), "{s}");

    // merge reads what the stopped agent left.
    let d = Dir::new("sigterm-segment");
    let file = d.path("seg1.json");
    std::fs::write(&file, &out).unwrap();
    let m = run(&["merge", &file, "--json"]);
    assert_eq!(m.status.code(), Some(0), "{m:?}");
    let merged: Value = serde_json::from_slice(&m.stdout).unwrap();
    assert_eq!(u(&scenario(&merged)["requests"]["ok"]), ok);
}

/// GNU `timeout -s INT` signals the command and then its whole process group: two
/// SIGINTs at once. The second gives up what is in flight at once; the report is still
/// printed, every time.
#[test]
fn timeout_s_int_signals_twice_and_the_report_is_still_printed() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let Some((n, _log)) = Nginx::logging("$connection", "") else {
        return;
    };
    for i in 0..4 {
        let out = Command::new("timeout")
            .args(["-s", "INT", "1.2", bin(), "bench", &n.url()])
            .args(["-d", "20s", "-c", "2", "--json", "--no-progress"])
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        // timeout's own status for a command it had to stop.
        assert_eq!(out.status.code(), Some(124), "run {i}: {stderr}");
        let v: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("run {i}: {e}: {stdout:?} {stderr}"));
        assert_eq!(v["interrupted"]["code"], "interrupted", "run {i}");
        assert!(u(&scenario(&v)["requests"]["ok"]) > 0, "run {i}");
    }
}

/// A server that accepts and never answers, on a free port: the connections it
/// accepted, once `stop` is set.
fn silent_server() -> (
    String,
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    std::thread::JoinHandle<u64>,
) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    listener.set_nonblocking(true).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let held = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => held.push(s),
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            held.len() as u64
        })
    };
    (url, stop, held)
}

/// A second signal ends the wait for requests in flight at once (not after the first's
/// second of grace), and the report is still printed, with them given up.
#[test]
fn a_second_signal_gives_up_what_is_in_flight_and_still_prints() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let (url, stop, held) = silent_server();
    let mut cmd = Command::new(bin());
    cmd.args(["bench", &url, "-d", "30s", "-c", "3", "--timeout", "60s"])
        .args(["--json", "--no-progress"]);
    let (code, out, err, took) = signalled(
        &mut cmd,
        Duration::from_millis(800),
        "-TERM",
        Some(Duration::from_millis(100)),
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let accepted = held.join().unwrap();
    assert_eq!(code, Some(143), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?} {err}"));
    let s = scenario(&v);
    assert_eq!(u(&s["requests"]["aborted_at_deadline"]), 3, "{s}");
    assert_eq!(u(&s["connections"]["opened"]), accepted);
    // The first signal alone would have waited its grace of a second.
    assert!(
        took < Duration::from_millis(900),
        "ended {took:?} after the first signal"
    );
}

/// `serve` stopped by SIGTERM prints its own counts, and exits 143.
#[test]
fn serve_stopped_by_sigterm_prints_its_counts() {
    let _machine = shared();
    let mut child = Command::new(bin())
        .args(["serve", "--listen", "127.0.0.1:0", "--no-tls"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    while !first.ends_with('\n') && stdout.read(&mut byte).unwrap() == 1 {
        first.push(byte[0] as char);
    }
    let url = first.trim().strip_prefix("listening ").unwrap().to_string();
    let r = bench_json(&[&url, "-n", "50", "-c", "2"]);
    let ok = u(&scenario(&r)["requests"]["ok"]);
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{err}");
    assert!(
        err.contains(&format!(
            "2 connections accepted (0 HTTP/2, 0 HTTP/3), {ok} requests"
        )),
        "{err}"
    );
}

/// A report that cannot be written is an error naming the file, after the text report
/// is printed, exit 1; standard output on a full disk likewise names it.
#[test]
fn a_report_that_cannot_be_written_is_an_error_naming_the_file() {
    let _machine = shared();
    let s = start(handshake::api::server::ServerConfig::default());
    let url = s.http_url().unwrap();
    for file in ["/dev/full", "/nonexistent-handshake-dir/report.html"] {
        let out = run(&["bench", &url, "-n", "20", "--html", file, "--no-progress"]);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stdout.contains("20 requests ok"), "{stdout}");
        assert!(
            stderr.contains(&format!(
                "handshake: --html {file}: the report could not be written there: "
            )),
            "{stderr}"
        );
    }
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = Command::new(bin())
        .args(["bench", &url, "-n", "20", "--json"])
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the report could not be written to standard output: No space left"),
        "{stderr}"
    );
}

/// A reader that stops reading early (`2>&1 | head -1`, with --metrics saying its address
/// first) ends the output quietly: no panic (exit 101), the run's own status.
#[test]
fn a_reader_that_stops_early_ends_the_output_quietly() {
    let _machine = shared();
    let s = start(handshake::api::server::ServerConfig::default());
    let url = s.http_url().unwrap();
    let out = Command::new("bash")
        .args([
            "-c",
            "\"$0\" bench \"$1\" -n 2000 --metrics 127.0.0.1:0 --metrics-linger 0s 2>&1 | head -1; exit ${PIPESTATUS[0]}",
            bin(),
            &url,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("handshake: metrics at http://127.0.0.1:"),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
}

/// `audit -- COMMAND` stopped by SIGTERM passes it to the command, prints what it saw,
/// marked as interrupted by SIGTERM, exit 143; its requests are those nginx logged.
#[test]
fn audit_stopped_by_sigterm_keeps_what_it_saw() {
    let _machine = shared();
    let Some((n, log)) = Nginx::logging("$connection $connection_requests $status", "") else {
        return;
    };
    let d = Dir::new("sigterm-audit");
    let pid_file = d.path("client.pid");
    let mut cmd = Command::new(bin());
    cmd.args(["audit", "--json", "--upstream", &n.url(), "--", "sh", "-c"])
        .arg(format!(
            "echo $$ > {pid_file}; while :; do curl -s -o /dev/null \"$HANDSHAKE_URL\"; sleep 0.05; done"
        ));
    let (code, out, err, _) = signalled(&mut cmd, Duration::from_millis(2000), "-TERM", None);
    assert_eq!(code, Some(143), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?} {err}"));
    let text = v["interrupted"]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("Interrupted by SIGTERM after "), "{v}");
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{}", pid.trim())).exists(),
        "the client command was stopped"
    );
    let (requests, _) = logged(&log);
    assert!(requests >= 3, "{requests}");
    assert_eq!(u(&v["total"]["requests"]), requests, "{}", v["total"]);
}

/// `bench URL -d 4s -c 10 --json --no-progress ARGS` started in the background, its
/// output piped.
fn bench_in_background(url: &str, args: &[&str]) -> std::process::Child {
    Command::new(bin())
        .args([
            "bench",
            url,
            "-d",
            "4s",
            "-c",
            "10",
            "--json",
            "--no-progress",
        ])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// An RFC 3339 time of the report's, on the system clock.
fn at(v: &Value) -> std::time::SystemTime {
    let t = time::OffsetDateTime::parse(
        v.as_str().unwrap(),
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    std::time::SystemTime::from(t)
}

/// How far apart two times are, in ms (either way).
fn apart_ms(a: std::time::SystemTime, b: std::time::SystemTime) -> f64 {
    match a.duration_since(b) {
        Ok(d) => d.as_secs_f64() * 1e3,
        Err(e) => e.duration().as_secs_f64() * 1e3,
    }
}

/// nginx killed (SIGKILL, as a crash) at 2 s and started again at 4 s during
/// `bench -d 6s -c 10`: one outage, its bounds the test's own kill and start times
/// (within 100 ms), its connects tried in the tens or hundreds (not one per refused
/// loop turn), the run's ok requests those nginx logged, and `--fail-if` on it.
#[test]
fn nginx_killed_and_started_again_is_one_outage_window() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let Some((mut n, log)) = Nginx::logging("$connection $connection_requests $status", "") else {
        return;
    };
    let child = Command::new(bin())
        .args([
            "bench",
            &n.url(),
            "-d",
            "6s",
            "-c",
            "10",
            "--json",
            "--no-progress",
        ])
        .args(["--fail-if", "longest_outage>1s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let began = Instant::now();
    std::thread::sleep(Duration::from_secs(2));
    let killed = std::time::SystemTime::now();
    n.kill();
    std::thread::sleep(Duration::from_secs(4).saturating_sub(began.elapsed()));
    n.start_again();
    let started = std::time::SystemTime::now();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    // The outage was longer than a second: --fail-if holds.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("longest_outage"), "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(
        schema_violations("report.schema.json", &v),
        Vec::<String>::new()
    );
    let s = scenario(&v);
    check_accounting(s);
    let o = &s["outages"];
    assert_eq!(u(&o["count"]), 1, "{o}");
    let w = &o["windows"][0];
    assert_eq!(w["hop"], n.url().trim_end_matches('/'), "{w}");
    let (from, to) = (at(&w["start_at"]), at(&w["end_at"]));
    assert!(
        apart_ms(from, killed) <= 100.0,
        "began {w}, killed {killed:?}"
    );
    assert!(
        apart_ms(to, started) <= 100.0,
        "ended {w}, started {started:?}"
    );
    // Refused, or reset by a listener that went away with the connect in its queue.
    let refused = u(&w["connects_refused"]);
    assert!((1..1000).contains(&refused), "{w}");
    assert!(u(&w["connects_other"]) <= 10, "{w}");
    assert_eq!(u(&w["connects_timed_out"]), 0, "{w}");
    let refused = refused + u(&w["connects_other"]);
    // The requests in flight when nginx died failed; the connects tried meanwhile are
    // the other requests lost, and the only other failures.
    let lost = u(&o["requests_lost"]);
    assert_eq!(lost, refused + u(&w["failed_in_flight"]));
    let errors = failed(s);
    assert_eq!(errors, lost, "{}", s["requests"]);
    // What nginx logged: every request the report calls ok but those whose worker was
    // killed after answering and before logging (one a connection at most), and at most
    // those that failed in flight or were given up at the end besides.
    let ok = u(&s["requests"]["ok"]);
    let slack = u(&w["failed_in_flight"]) + u(&s["requests"]["aborted_at_deadline"]);
    logged_within(&log, ok.saturating_sub(10), ok + slack);
    assert!(ok > 0);
}

/// nginx reloaded (`-s reload`: SIGHUP to its master) during `bench -c 10`: a graceful
/// restart (the connections its old worker ended were retried on new ones, its listening
/// socket stayed), no window, no request lost, and nginx's access log holds every request
/// the report calls ok.
#[test]
fn nginx_reloaded_is_a_graceful_restart_that_loses_nothing() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let Some((n, log)) = Nginx::logging("$connection $connection_requests $status", "") else {
        return;
    };
    let child = bench_in_background(&n.url(), &["--fail-if", "requests_lost>0"]);
    std::thread::sleep(Duration::from_millis(1500));
    let reloaded = std::time::SystemTime::now();
    n.signal("-HUP");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        schema_violations("report.schema.json", &v),
        Vec::<String>::new()
    );
    let s = scenario(&v);
    check_accounting(s);
    let o = &s["outages"];
    assert_eq!(u(&o["count"]), 0, "{o}");
    assert_eq!(u(&o["requests_lost"]), 0, "{o}");
    let restarts = o["restarts"].as_array().unwrap();
    // Once (in a full run, never alone) no restart was seen: say what nginx did, to tell
    // a reload that did not happen (the old worker's connections, 10, served to the end)
    // from one the report missed.
    let (requests, connections) = logged(&log);
    let error_log = std::fs::read_to_string(n.dir.join("error.log")).unwrap_or_default();
    assert_eq!(
        restarts.len(),
        1,
        "{o}; nginx logged {requests} requests on {connections} connections; its error log: {error_log}; the report's connections: {}",
        s["connections"]
    );
    let r = &restarts[0];
    assert_eq!(r["verdict"], "graceful", "{r}");
    assert_eq!(u(&r["failed_in_flight"]), 0, "{r}");
    assert!(u(&r["retried"]) + u(&r["closed_after_answer"]) >= 2, "{r}");
    assert!(r.get("unreachable_for_s").is_none(), "{r}");
    // After the reload was asked for, once nginx's old worker ended its connections.
    let after = at(&r["at"]).duration_since(reloaded);
    assert!(
        after.as_ref().is_ok_and(|d| *d < Duration::from_secs(1)),
        "{r} {after:?}"
    );
    // The retries are the requests counted apart, each once.
    assert_eq!(
        u(&s["requests"]["retries"]["stale_connection"]),
        u(&r["retried"])
    );
    let errors = failed(s);
    assert_eq!(errors, 0, "{}", s["requests"]);
    let ok = u(&s["requests"]["ok"]);
    let given_up = u(&s["requests"]["aborted_at_deadline"]);
    logged_within(&log, ok, ok + given_up);
}

/// A server that closes every connection after its answer (`Content-Length`, no
/// `Connection` header) ends all of them in a burst under a short run, but nothing
/// restarted: that is its policy from the first connection to the last, with no steady
/// state of reused connections for a restart to interrupt. No restart is reported, by
/// either HTTP/1 loop, and the connections are the server's own count.
#[test]
fn a_server_that_closes_every_connection_is_a_policy_not_a_restart() {
    let _machine = shared();
    let (addr, accepted) = script_server(|mut s, _| {
        if read_head(&mut s).is_some() {
            write(&mut s, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
        }
    });
    let url = format!("http://{addr}/");
    let accepted = || accepted.load(std::sync::atomic::Ordering::SeqCst);
    for tasks in [false, true] {
        let before = accepted();
        let v = bench_json_way(tasks, &[&url, "-n", "200", "-c", "2"]);
        let s = scenario(&v);
        check_accounting(s);
        assert_eq!(u(&s["requests"]["ok"]), 200, "{}", s["requests"]);
        assert_eq!(u(&s["connections"]["opened"]), accepted() - before);
        let o = &s["outages"];
        assert_eq!(o["restarts"], serde_json::json!([]), "tasks {tasks}: {o}");
    }
    let out = run(&["bench", &url, "-n", "200", "-c", "2", "--no-progress"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("200"), "{text}");
    assert!(
        !text.contains("restart") && !text.contains("hard stop"),
        "{text}"
    );
}

/// nginx with answers that take half a second to send (a 256 KB body at 512 KB/s),
/// killed mid-answer and started again a second later: a hard stop (requests in flight
/// failed, cut in their bodies), the window that followed about a second long, and every
/// attempt accounted for: the errors are the requests the window lost.
#[test]
fn nginx_killed_mid_answer_is_a_hard_stop() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let Some(mut n) = Nginx::start_servers(
        "log_format fields '$connection $connection_requests $status';",
        1,
        |ports, d| {
            std::fs::write(d.join("big"), vec![b'x'; 256 * 1024]).unwrap();
            format!(
                "server {{ listen 127.0.0.1:{}; access_log {}/access.log fields; \
                 location / {{ root {}; limit_rate 512k; try_files /big =404; }} }}",
                ports[0],
                d.display(),
                d.display()
            )
        },
    ) else {
        return;
    };
    let child = bench_in_background(&n.url(), &[]);
    std::thread::sleep(Duration::from_millis(1800));
    let killed = std::time::SystemTime::now();
    n.kill();
    std::thread::sleep(Duration::from_secs(1));
    n.start_again();
    let started = std::time::SystemTime::now();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = scenario(&v);
    check_accounting(s);
    let o = &s["outages"];
    // The restart at the kill (within 100 ms): the first, as nothing ended before it.
    let r = &o["restarts"][0];
    assert!(apart_ms(at(&r["at"]), killed) <= 100.0, "{o}");
    assert_eq!(r["verdict"], "hard", "{o}");
    assert!(u(&r["failed_in_flight"]) >= 1, "{r}");
    let gone = r["unreachable_for_s"]
        .as_f64()
        .unwrap_or_else(|| panic!("{o}"));
    let expected = started.duration_since(killed).unwrap().as_secs_f64();
    assert!(
        (gone - expected).abs() <= 0.1,
        "{gone} s against {expected} s: {o}"
    );
    assert_eq!(u(&o["count"]), 1, "{o}");
    let w = &o["windows"][0];
    assert!(apart_ms(at(&w["start_at"]), killed) <= 100.0, "{w}");
    assert!(apart_ms(at(&w["end_at"]), started) <= 100.0, "{w}");
    // Cut in their bodies (or reset): the requests in flight.
    let req = &s["requests"];
    let cut = u(&req["errors"]["body_incomplete"]) + u(&req["errors"]["reset"]);
    assert!(cut >= 1, "{req}");
    let errors = failed(s);
    assert_eq!(errors, u(&o["requests_lost"]), "{req} {o}");
}

/// nginx over TLS (HTTP/1.1 and h2 by ALPN) on one port, its CA in its directory.
fn nginx_https() -> Option<Nginx> {
    Nginx::start_servers(
        "log_format fields '$connection $connection_requests $status';",
        1,
        |ports, d| {
            write_certs(d, &["localhost"]);
            format!(
                "server {{ listen 127.0.0.1:{} ssl http2; ssl_certificate {d}/cert.pem; \
                 ssl_certificate_key {d}/key.pem; access_log {d}/access.log fields; \
                 location / {{ return 200 \"ok\\n\"; }} }}",
                ports[0],
                d = d.display()
            )
        },
    )
}

/// `bench URL ARGS -d 4s -c 10 --json` while nginx is killed at 1.5 s and started again
/// at 2.5 s: the report, and the test's own kill and start times.
fn through_a_crash(
    n: &mut Nginx,
    url: &str,
    args: &[&str],
) -> (Value, std::time::SystemTime, std::time::SystemTime) {
    let child = bench_in_background(url, args);
    let began = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    let killed = std::time::SystemTime::now();
    n.kill();
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(began.elapsed()));
    n.start_again();
    let started = std::time::SystemTime::now();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    (v, killed, started)
}

/// The run through a crash had one window, its bounds the test's own kill and start
/// times (within 100 ms), and every attempt accounted for: each error is a request the
/// window lost (a connect that failed, or a request in flight), each retry counted apart.
fn one_window_accounted_for(
    v: &Value,
    (killed, started): (std::time::SystemTime, std::time::SystemTime),
) {
    assert_eq!(
        schema_violations("report.schema.json", v),
        Vec::<String>::new()
    );
    let s = scenario(v);
    check_accounting(s);
    let o = &s["outages"];
    assert_eq!(u(&o["count"]), 1, "{o}");
    let w = &o["windows"][0];
    assert!(apart_ms(at(&w["start_at"]), killed) <= 100.0, "{w}");
    assert!(apart_ms(at(&w["end_at"]), started) <= 100.0, "{w}");
    let failed_connects =
        u(&w["connects_refused"]) + u(&w["connects_other"]) + u(&w["connects_timed_out"]);
    assert!((1..1000).contains(&failed_connects), "{w}");
    let errors = failed(s);
    assert_eq!(errors, u(&o["requests_lost"]), "{} {o}", s["requests"]);
    assert!(u(&s["requests"]["ok"]) > 0);
}

/// The crash over HTTPS (HTTP/1.1 keep-alive through TLS) and over h2.
#[test]
fn nginx_killed_under_https_and_h2_is_one_window() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let Some(mut n) = nginx_https() else {
        return;
    };
    let url = format!("https://localhost:{}/", n.port);
    let ca = n.dir.join("ca.pem").display().to_string();
    let resolve = format!("localhost:{}:127.0.0.1", n.port);
    for strategy in ["keepalive", "h2"] {
        let args = [
            "--cacert",
            &ca,
            "--resolve",
            &resolve,
            "--strategy",
            strategy,
        ];
        let (v, killed, started) = through_a_crash(&mut n, &url, &args);
        one_window_accounted_for(&v, (killed, started));
    }
}

/// The crash with a new connection per request (`--strategy close`): every worker meets
/// it at its next connect.
#[test]
fn nginx_killed_under_close_is_one_window() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let Some((mut n, _log)) = Nginx::logging("$connection", "") else {
        return;
    };
    let url = n.url();
    let (v, killed, started) = through_a_crash(&mut n, &url, &["--strategy", "close"]);
    one_window_accounted_for(&v, (killed, started));
}

/// squid, the forward proxy, killed at 1.5 s and started again at 2.5 s (its own
/// configuration) while bench goes through it to nginx: one window, named for the proxy,
/// its bounds the test's own times; what squid logged is what the report counts.
#[test]
fn the_proxy_killed_and_started_again_is_its_window() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let Some((n, log)) = Nginx::logging("$connection", "") else {
        return;
    };
    let mut squid = squid();
    let proxy = format!("http://127.0.0.1:{}", squid.port);
    let child = Command::new(bin())
        .args(["bench", &n.url(), "-x", &proxy, "-d", "4s", "-c", "10"])
        .args(["--json", "--no-progress"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let began = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    let killed = std::time::SystemTime::now();
    let _ = squid.child.kill();
    let _ = squid.child.wait();
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(began.elapsed()));
    squid.child = Command::new("squid")
        .args(["-N", "-n", &format!("hs{}", squid.port), "-f"])
        .arg(squid._dir.0.join("squid.conf"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_listening(squid.port, "squid", &squid._dir.0.join("cache.log"));
    let started = std::time::SystemTime::now();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = scenario(&v);
    let w = &s["outages"]["windows"][0];
    assert_eq!(w["hop"], format!("the proxy {proxy}"), "{w}");
    one_window_accounted_for(&v, (killed, started));
    // nginx, behind it, answered every request counted ok, and at most those that
    // failed in flight, were given up at the end, or were sent twice besides: a request
    // squid passed on and died before answering was retried (counted apart, once).
    let ok = u(&s["requests"]["ok"]);
    let slack = u(&w["failed_in_flight"])
        + u(&s["requests"]["aborted_at_deadline"])
        + u(&s["requests"]["retries"]["stale_connection"]);
    logged_within(&log, ok, ok + slack);
}

/// The HTML report of a run through a crash shades the window on its timeline and says
/// the outage and the restart in the text report's words (checked in Chromium against
/// the JSON).
#[test]
fn the_html_report_shows_the_window_and_says_it() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let Some((mut n, _log)) = Nginx::logging("$connection", "") else {
        return;
    };
    let url = n.url();
    let crash = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1200));
        n.kill();
        std::thread::sleep(Duration::from_millis(1000));
        n.start_again();
        n
    });
    let v = check_html(&["bench", &url, "-d", "3.5s", "-c", "4"], "outage");
    let _n = crash.join().unwrap();
    if let Some(v) = v {
        assert_eq!(u(&scenario(&v)["outages"]["count"]), 1);
    }
}

/// HAProxy in front of nginx reloaded the way its packagers do (`haproxy -sf OLDPID`: a
/// new process takes the port, the old one finishes what it holds and ends): a graceful
/// restart, no window (the port never stopped accepting), no request lost, and nginx
/// behind it answered every request counted ok.
#[test]
fn haproxy_reloaded_with_sf_is_a_graceful_restart() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let Some((n, log)) = Nginx::logging("$connection $connection_requests $status", "") else {
        return;
    };
    let d = Dir::new("haproxy-sf");
    let port = free_port();
    let cfg = d.path("haproxy.cfg");
    std::fs::write(
        &cfg,
        format!(
            "defaults\n  mode http\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n\
             frontend f\n  bind 127.0.0.1:{port}\n  default_backend b\n\
             backend b\n  server n1 127.0.0.1:{}\n",
            n.port
        ),
    )
    .unwrap();
    let haproxy = |extra: &[String]| {
        let mut c = Command::new("/usr/sbin/haproxy")
            .args(["-db", "-f", &cfg])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("haproxy (Debian package haproxy; scripts/test installs it)");
        let t = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "haproxy did not start"
            );
            assert!(c.try_wait().unwrap().is_none(), "haproxy exited");
            std::thread::sleep(Duration::from_millis(10));
        }
        c
    };
    let mut old = haproxy(&[]);
    let url = format!("http://127.0.0.1:{port}/");
    let child = bench_in_background(&url, &[]);
    std::thread::sleep(Duration::from_millis(1500));
    let reloaded = std::time::SystemTime::now();
    let mut new = haproxy(&["-sf".into(), old.id().to_string()]);
    let out = child.wait_with_output().unwrap();
    stop_child(&mut new, "-USR1");
    stop_child(&mut old, "-USR1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = scenario(&v);
    check_accounting(s);
    let o = &s["outages"];
    assert_eq!(u(&o["count"]), 0, "{o}");
    let errors = failed(s);
    assert_eq!(errors, 0, "{}", s["requests"]);
    let restarts = o["restarts"].as_array().unwrap();
    assert_eq!(restarts.len(), 1, "{o}");
    let r = &restarts[0];
    assert_eq!(r["verdict"], "graceful", "{r}");
    let after = at(&r["at"]).duration_since(reloaded);
    assert!(
        after.as_ref().is_ok_and(|d| *d < Duration::from_secs(2)),
        "{r} {after:?}"
    );
    let ok = u(&s["requests"]["ok"]);
    let slack =
        u(&s["requests"]["aborted_at_deadline"]) + u(&s["requests"]["retries"]["stale_connection"]);
    logged_within(&log, ok, ok + slack);
}

/// dnsmasq answering `svc.handshake.test` on `port`, by its PID (stopped on drop).
struct Resolver(std::process::Child);

impl Resolver {
    fn start(port: u16) -> Resolver {
        let child = Command::new("/usr/sbin/dnsmasq")
            .args([
                "--keep-in-foreground",
                "--conf-file=/dev/null",
                "--no-resolv",
                "--no-hosts",
                "--bind-interfaces",
                "--listen-address=127.0.0.1",
                "--pid-file=",
                "--user=root",
                "--address=/svc.handshake.test/127.0.0.1",
            ])
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dnsmasq (Debian package dnsmasq-base; scripts/test installs it)");
        // Ready once its UDP port is taken.
        let t = Instant::now();
        while std::net::UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "dnsmasq did not start"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        Resolver(child)
    }
}

impl Drop for Resolver {
    fn drop(&mut self) {
        stop_child(&mut self.0, "-TERM");
    }
}

/// The resolver stopped at 1.5 s and started again at 2.5 s while every request looks
/// its name up (`--dns-cache off`, a connection per request, lookups bounded by
/// `--connect-timeout 300ms`, -c 10 so that the run looks every 50 ms): one window, from
/// the first lookup that went unanswered to
/// the first connect after the resolver came back (within 100 ms of the test's own
/// times), its cost in lookups that failed, and nothing else lost.
#[test]
fn the_resolver_stopped_and_started_again_is_one_window() {
    // One at a time: a port a killed server freed could be handed to another test's
    // server meanwhile, and a loaded machine would stretch the times checked.
    let _one = serial();
    let Some((n, _log)) = Nginx::logging("$connection", "") else {
        return;
    };
    let dns_port = free_port();
    let mut dns = Resolver::start(dns_port);
    let url = format!("http://svc.handshake.test:{}/", n.port);
    let servers = format!("127.0.0.1:{dns_port}");
    let child = Command::new(bin())
        .args([
            "bench",
            &url,
            "--dns-servers",
            &servers,
            "--dns-cache",
            "off",
        ])
        .args(["--strategy", "close", "--connect-timeout", "300ms"])
        .args(["-d", "4s", "-c", "10", "--json", "--no-progress"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let began = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    let stopped = std::time::SystemTime::now();
    stop_child(&mut dns.0, "-KILL");
    std::thread::sleep(Duration::from_millis(2500).saturating_sub(began.elapsed()));
    dns = Resolver::start(dns_port);
    let started = std::time::SystemTime::now();
    let out = child.wait_with_output().unwrap();
    drop(dns);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        schema_violations("report.schema.json", &v),
        Vec::<String>::new()
    );
    let s = scenario(&v);
    check_accounting(s);
    let o = &s["outages"];
    assert_eq!(u(&o["count"]), 1, "{o}");
    let w = &o["windows"][0];
    assert!(apart_ms(at(&w["start_at"]), stopped) <= 100.0, "{w}");
    assert!(apart_ms(at(&w["end_at"]), started) <= 100.0, "{w}");
    assert!(u(&w["lookups_failed"]) >= 1, "{w}");
    let errors = failed(s);
    assert_eq!(errors, u(&o["requests_lost"]), "{} {o}", s["requests"]);
    assert_eq!(
        errors,
        u(&s["requests"]["errors"]["timeout_dns"]) + u(&s["requests"]["errors"]["dns"])
    );
}

/// The same wrong port under `-d 2s -c 4`: with no count of requests to spend, failing
/// fast would send connects for the whole run, so the tries wait as for a hop that went
/// away (together at most one every 125 ms, 500 ms over the four workers): tens of
/// refused connects, not tens of thousands, each counted once in one window.
#[test]
fn a_timed_run_at_a_port_never_reached_backs_off() {
    let _machine = shared();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let out = run(&[
        "bench",
        &url,
        "-d",
        "2s",
        "-c",
        "4",
        "--json",
        "--no-progress",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = scenario(&v);
    check_accounting(s);
    let refused = u(&s["requests"]["errors"]["connect"]);
    assert!(
        (4..=60).contains(&refused),
        "{refused} connects: {}",
        s["requests"]
    );
    let o = &s["outages"];
    assert_eq!(u(&o["count"]), 1, "{o}");
    assert_eq!(u(&o["windows"][0]["connects_refused"]), refused, "{o}");
}

/// A port where nothing listens (a newcomer's wrong port): no backoff (the hop was never
/// reached, so every try fails at once), one window to the run's end with every connect
/// refused, and a sentence that claims no earlier answer.
#[test]
fn a_port_never_reached_fails_fast_and_its_window_claims_no_answer() {
    let _machine = shared();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}/");
    let t = Instant::now();
    let v = bench_json(&[&url, "-n", "20", "-c", "2"]);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let o = &scenario(&v)["outages"];
    assert_eq!(u(&o["count"]), 1, "{o}");
    let w = &o["windows"][0];
    assert!(w.get("end_s").is_none(), "{w}");
    assert_eq!(u(&w["connects_refused"]), 20, "{w}");
    let text = run(&["bench", &url, "-n", "20", "-c", "2", "--no-progress"]);
    // As printed, its folds undone.
    let out = String::from_utf8_lossy(&text.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        out.contains("to the run's end, no connect succeeding after it: 20 connects refused"),
        "{out}"
    );
    assert!(!out.contains("again"), "{out}");
}
