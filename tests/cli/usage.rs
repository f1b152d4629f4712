//! The command line as a user meets it: usage errors (exit 2, naming what was wrong),
//! the text report, the JSON report against its schema, and `serve` as a process.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;

fn usage_error(args: &[&str], expect: &str) {
    let out = run(args);
    assert_eq!(out.status.code(), Some(2), "{args:?} exits 2");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(expect),
        "{args:?}: stderr {err:?} should mention {expect:?}"
    );
}

#[test]
fn bad_input_exits_2_and_names_it() {
    let _machine = shared();
    usage_error(
        &["bench", "http://127.0.0.1:1/", "--strategy", "turbo"],
        "known strategies: close, close-resumed, close-0rtt, http10, http10-keepalive, keepalive, h2",
    );
    usage_error(
        &["bench", "http://127.0.0.1:1/", "-c", "0"],
        "-c/--concurrency",
    );
    usage_error(&["bench", "ftp://127.0.0.1/"], "http:// or https://");
    // One reader of host:port for URLs, proxies and CONNECT (net::authority).
    usage_error(
        &["bench", "http://127.0.0.1:abc/"],
        "invalid URL \"http://127.0.0.1:abc/\": \"abc\" is not a port",
    );
    usage_error(&["bench", "http://[::1/"], "an IPv6 address without its ]");
    usage_error(
        &["bench", "http://127.0.0.1:1/", "-x", "http://[::1:8080"],
        "an IPv6 address without its ]",
    );
    usage_error(
        &["bench", "http://127.0.0.1:1/", "-H", "Connection: close"],
        "--strategy",
    );
    usage_error(
        &["bench", "http://127.0.0.1:1/", "-d", "soon"],
        "-d/--duration",
    );
    usage_error(
        &[
            "bench",
            "http://127.0.0.1:1/",
            "--strategy",
            "close-resumed",
        ],
        "https://",
    );
    usage_error(&["bench", "http://127.0.0.1:1/", "--rate", "0"], "--rate");
    usage_error(
        &[
            "bench",
            "http://127.0.0.1:1/",
            "--cacert",
            "/nonexistent/ca.pem",
        ],
        "--cacert",
    );
    usage_error(&["bench", "--no-such-flag"], "--no-such-flag");
    usage_error(&["serve", "--keepalive", "maybe"], "--keepalive");
    // Asking clients for a certificate: over TLS, from a file that holds a CA.
    usage_error(
        &["serve", "--no-tls", "--client-ca", "/dev/null"],
        "--client-ca asks TLS clients: it needs the HTTPS listener (not --no-tls)",
    );
    usage_error(
        &["serve", "--client-ca", "/nonexistent/ca.pem"],
        "--client-ca",
    );
    usage_error(&["serve", "--client-cert", "optional"], "--client-ca");
    usage_error(
        &[
            "lab",
            "--https",
            "--client-ca",
            "/nonexistent/ca.pem",
            "--",
            "true",
        ],
        "--client-ca",
    );
}

#[test]
fn json_report_matches_its_schema() {
    let _machine = shared();
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/docs/report.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let srv = start(ServerConfig::default());
    for extra in [
        vec!["-n", "200", "-c", "4"],
        vec![
            "-n",
            "50",
            "-c",
            "2",
            "--strategy",
            "close",
            "--rate",
            "500",
        ],
        vec!["-n", "200", "-c", "8", "--strategy", "h2"],
    ] {
        let mut args = vec![srv.http_url().unwrap()];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let report = bench_json(&args);
        let errors: Vec<String> = validator
            .iter_errors(&report)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(errors.is_empty(), "schema violations: {errors:#?}");
    }
    // Without a URL the embedded server's counts are included and agree.
    let report = bench_json(&["-n", "300", "-c", "3"]);
    assert!(validator.is_valid(&report));
    assert_eq!(u(&report["server"]["connections_accepted"]), 3);
    assert_eq!(
        u(&report["server"]["connections_accepted"]),
        u(&scenario(&report)["connections"]["opened"])
    );
    // A non-conforming document is rejected: the check can fail.
    let mut broken = report.clone();
    broken["scenarios"][0]["connections"]["opened"] = serde_json::json!("four");
    assert!(!validator.is_valid(&broken));
    srv.stop();
}

#[test]
fn text_report_has_summary_tables_and_connections() {
    let _machine = shared();
    let out = run(&["bench", "-n", "500", "-c", "5", "--no-progress"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "Summary",
        "500 attempted, 500 ok, 0 with an error status, 0 failed",
        "Latency (ms)",
        "p99.9",
        "Connection Times (ms), new connections (5 requests)",
        "Connection Times (ms), reused connections (495 requests)",
        "min     mean  [+/-sd]   median      max",
        "opened                5",
        "Embedded server: 5 connections accepted, 500 requests served",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
}

#[test]
fn serve_runs_as_a_process_with_its_policy_and_stats() {
    let _machine = shared();
    let dir = std::env::temp_dir().join(format!("handshake-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    let mut child = Command::new(bin())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--tls-listen",
            "127.0.0.1:0",
            "--max-requests-per-connection",
            "10",
            "-d",
            "60s",
            "--cacert-out",
        ])
        .arg(&ca)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let http = lines
        .next()
        .unwrap()
        .unwrap()
        .strip_prefix("listening ")
        .unwrap()
        .to_string();
    let https = lines
        .next()
        .unwrap()
        .unwrap()
        .strip_prefix("listening ")
        .unwrap()
        .to_string();
    assert!(http.starts_with("http://127.0.0.1:") && https.starts_with("https://127.0.0.1:"));

    let r = bench_json(&[
        &https,
        "-n",
        "100",
        "-c",
        "2",
        "--cacert",
        ca.to_str().unwrap(),
    ]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["connections"]["opened"]), 10);
    assert_eq!(close_reason(s, "server_max_requests"), 10);

    // The stats endpoint is the server's own count (this request included).
    let addr = http.trim_start_matches("http://").trim_end_matches('/');
    let mut st = std::net::TcpStream::connect(addr).unwrap();
    st.write_all(b"GET /__handshake/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut resp = String::new();
    st.read_to_string(&mut resp).unwrap();
    let body = resp.split("\r\n\r\n").nth(1).unwrap();
    let stats: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(u(&stats["connections_accepted"]), 11);
    assert_eq!(u(&stats["requests"]), 101);
    assert!(u(&stats["open_connections"]) >= 1);

    // Stop it by its PID.
    unsafe_kill(pid);
    let t = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "serve did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn unsafe_kill(pid: u32) {
    let _ = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status();
}

#[test]
fn local_addr_must_be_an_address_of_this_machine() {
    let _machine = shared();
    for (value, words) in [
        ("nonsense", "not an IP address"),
        ("192.0.2.77", "not an address of this machine"),
    ] {
        let out = run(&[
            "bench",
            "http://127.0.0.1:9/",
            "-n",
            "1",
            "--local-addr",
            value,
        ]);
        assert_eq!(out.status.code(), Some(2), "{value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--local-addr") && err.contains(words), "{err}");
    }
}

/// The progress line: on a terminal's stderr (a pseudo-terminal from `script`) for runs
/// over a second, with requests/s, new connections/s, errors and the time; never with
/// --json, never when stderr is not a terminal.
#[test]
fn progress_line_only_on_a_terminal_and_never_with_json() {
    let _machine = shared();
    let srv = start(handshake::api::server::ServerConfig::default());
    let url = srv.http_url().unwrap();
    let in_pty = |args: &str| {
        let out = std::process::Command::new("script")
            .args([
                "-qec",
                &format!("{} bench {url} {args}", bin()),
                "/dev/null",
            ])
            .output()
            .expect("script (util-linux) runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let shown = in_pty("-d 2.5s -c 2 -s close");
    for says in ["req/s", "new conn/s", "0 errors", "s of 2.5 s"] {
        assert!(shown.contains(says), "{says:?} in {shown}");
    }
    // Under close every request opens a connection: the rates shown are not 0.
    let rates: Vec<u64> = shown
        .split(" new conn/s")
        .filter_map(|before| before.rsplit(' ').next()?.parse().ok())
        .collect();
    assert!(rates.iter().any(|&r| r > 0), "{rates:?} in {shown}");
    let json = in_pty("-d 1.5s -c 2 --json");
    assert!(!json.contains("req/s"), "{json}");
    serde_json::from_str::<serde_json::Value>(json.trim()).expect("only the JSON report");
    let out = run(&["bench", &url, "-d", "1.5s", "-c", "2"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("req/s"));
    srv.stop();
}

/// A server that keeps every request it gets (head and Content-Length body) and answers
/// each with an empty 200 that closes the connection.
fn recording_server() -> (String, Arc<Mutex<Vec<Vec<u8>>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    let (addr, _) = script_server(move |mut s, _| {
        let Some(mut req) = read_head(&mut s) else {
            return;
        };
        let head = String::from_utf8_lossy(&req).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        let mut body = vec![0u8; len];
        s.read_exact(&mut body).unwrap();
        req.extend_from_slice(&body);
        keep.lock().unwrap().push(req);
        write(
            &mut s,
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    });
    (format!("http://{addr}/in"), seen)
}

/// The request `trace` sends with `args`, as the server received it (its Host `HOST`).
fn request_sent(args: &[&str]) -> String {
    request_sent_fed(args, b"")
}

/// The same, with `stdin` on the client's standard input.
fn request_sent_fed(args: &[&str], stdin: &[u8]) -> String {
    let (url, seen) = recording_server();
    let mut all = vec!["trace", url.as_str()];
    all.extend_from_slice(args);
    let mut child = Command::new(bin())
        .args(&all)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = seen.lock().unwrap();
    assert_eq!(got.len(), 1, "{all:?}: one request");
    // Each run has a server of its own: its port in the Host header is not compared.
    let authority = url.trim_start_matches("http://").trim_end_matches("/in");
    String::from_utf8_lossy(&got[0]).replace(authority, "HOST")
}

/// curl's, hey's and ab's flags send the same request as their long forms here: the
/// server's own record of the bytes is compared.
#[test]
fn flags_of_curl_hey_and_ab_send_the_same_request_as_the_long_forms() {
    let _machine = shared();
    let file = TempFile::new("body.json", br#"{"u":1}"#);
    let long = request_sent(&[
        "--method",
        "PUT",
        "--body-file",
        file.s(),
        "--content-type",
        "application/json",
    ]);
    assert!(long.starts_with("PUT /in HTTP/1.1\r\n"), "{long}");
    assert!(
        long.contains("\r\nContent-Type: application/json\r\n"),
        "{long}"
    );
    assert!(long.ends_with(r#"{"u":1}"#), "{long}");
    let at_file = format!("@{}", file.s());
    for short in [
        vec![
            "-X",
            "PUT",
            "--data",
            at_file.as_str(),
            "-T",
            "application/json",
        ],
        vec![
            "-m",
            "PUT",
            "--data-binary",
            at_file.as_str(),
            "-T",
            "application/json",
        ],
        vec![
            "-X",
            "PUT",
            "--data",
            r#"{"u":1}"#,
            "-T",
            "application/json",
        ],
        vec![
            "-X",
            "PUT",
            "--body",
            r#"{"u":1}"#,
            "-H",
            "Content-Type: application/json",
        ],
    ] {
        assert_eq!(request_sent(&short), long, "{short:?}");
    }
    // @- reads the body from standard input.
    assert_eq!(
        request_sent_fed(
            &["-X", "PUT", "--data", "@-", "-T", "application/json"],
            br#"{"u":1}"#
        ),
        long
    );
    // As in curl, a body given with --data makes a POST unless -X says otherwise.
    let post = request_sent(&["--data", "a=1"]);
    assert!(post.starts_with("POST /in HTTP/1.1\r\n"), "{post}");
    assert!(post.ends_with("\r\n\r\na=1"), "{post}");
    // -z is hey's and oha's duration: the same stop as -d.
    let url = recording_server().0;
    let shape = |flag: &str| {
        let v = bench_json(&[&url, flag, "300ms", "-c", "1"]);
        scenario(&v)["load"]["duration_s"].clone()
    };
    assert_eq!(shape("-z"), shape("-d"));
    assert_eq!(shape("-z").as_f64(), Some(0.3));
}

/// Flags from elsewhere that mean something else (or nothing) here get a message naming
/// the flag to use, and exit 2.
#[test]
fn flags_from_other_tools_name_the_right_flag() {
    let _machine = shared();
    usage_error(
        &["bench", "http://127.0.0.1:1/", "-d", r#"{"a":1}"#],
        "to send a request body, use --data",
    );
    usage_error(
        &[
            "bench",
            "http://127.0.0.1:1/",
            "--data",
            "@/nonexistent/body",
        ],
        "--data @/nonexistent/body: cannot read",
    );
    usage_error(
        &["bench", "http://127.0.0.1:1/", "--vus", "10"],
        "--vus is k6's virtual users elsewhere; here use -c/--concurrency",
    );
    usage_error(
        &["bench", "http://127.0.0.1:1/", "-q", "100"],
        "here use -r/--rate",
    );
    usage_error(
        &["bench", "-s", "http://127.0.0.1:1/"],
        "curl's -s is --silent",
    );
    usage_error(
        &["trace", "http://127.0.0.1:1/", "-w", "%{time_connect}"],
        "handshake trace URL",
    );
    // A flag nobody has is still clap's error, naming it.
    usage_error(&["bench", "--no-such-flag"], "--no-such-flag");
}

/// `--help` lists every strategy with its line; `-h` stays short.
#[test]
fn help_lists_every_strategy() {
    let _machine = shared();
    for cmd in ["bench", "trace", "compare"] {
        // At 80 columns, no strategy's line is wrapped.
        let out = Command::new(bin())
            .args([cmd, "--help"])
            .env("COLUMNS", "80")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        let help = String::from_utf8_lossy(&out.stdout);
        for s in handshake::api::strategy::Strategy::ALL {
            let line = format!("{:16}  {}", s.name(), s.summary());
            assert!(
                help.lines()
                    .any(|l| l.trim_start().starts_with(line.trim_end())),
                "{cmd} --help lists {}: {help}",
                s.name()
            );
        }
        let short = run(&[cmd, "-h"]);
        let short = String::from_utf8_lossy(&short.stdout);
        assert!(!short.contains(handshake::api::strategy::Strategy::H3ZeroRtt.summary()));
    }
}

/// `--help` and `-h` of every command fit the width: `COLUMNS`, else 80 columns when
/// stdout is not a terminal.
#[test]
fn help_fits_the_width() {
    let _machine = shared();
    for cmd in [
        "bench", "compare", "trace", "doctor", "audit", "serve", "lab", "merge", "watch",
    ] {
        for (columns, width) in [(None, 80), (Some("80"), 80), (Some("120"), 120)] {
            for flag in ["-h", "--help"] {
                let mut c = Command::new(bin());
                c.args([cmd, flag]);
                c.env_remove("COLUMNS");
                if let Some(v) = columns {
                    c.env("COLUMNS", v);
                }
                let out = c.output().unwrap();
                assert_eq!(out.status.code(), Some(0), "{cmd} {flag}");
                let text = String::from_utf8_lossy(&out.stdout);
                for l in text.lines() {
                    assert!(
                        l.chars().count() <= width,
                        "{cmd} {flag} at COLUMNS={columns:?}: {} columns: {l:?}",
                        l.chars().count()
                    );
                }
            }
        }
    }
}

/// Every command that opens TLS to an origin takes the same TLS flags, spelled the same
/// (curl's): --cacert, -k/--insecure, --cert, --key, --tls-version, --tls-groups.
#[test]
fn the_tls_flags_are_the_same_in_every_command_that_opens_tls() {
    let _machine = shared();
    for cmd in ["bench", "compare", "trace", "doctor"] {
        let help = String::from_utf8_lossy(&run(&[cmd, "--help"]).stdout).into_owned();
        for flag in [
            "--cacert <FILE>",
            "-k, --insecure",
            "--cert <FILE>",
            "--key <FILE>",
            "--tls-version <VERSION>",
            "--tls-groups <GROUP[,GROUP...]>",
        ] {
            assert!(help.contains(flag), "{cmd} lacks {flag}: {help}");
        }
    }
}
