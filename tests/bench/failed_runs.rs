//! A run that measured nothing has failed: exit 1, one line naming the leading error
//! with its message and a hint, no latency table of zeros; compare never ranks a row
//! without successful requests. Against closed ports, the embedded server's listeners
//! used with the wrong scheme, an untrusted certificate, and a scripted server that
//! answers HTTP/1.1 and resets HTTP/1.0. Beside them, what the tool says must be the
//! real cause: statuses by class and what a run of 4xx/5xx means, units that say what
//! they are, a body delimited by the close told from `Connection: close`.

use std::sync::atomic::Ordering;

use crate::common::*;
use handshake::api::server::ServerConfig;
use serde_json::Value;

/// `bench` with text output: (exit code, stdout, stderr).
fn bench_text(args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["bench", "--no-progress"];
    all.extend_from_slice(args);
    let out = run(&all);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bench_with_no_successful_request_exits_1_and_says_why() {
    let _machine = shared();
    let url = format!("http://127.0.0.1:{}/", free_port());
    let (code, out, err) = bench_text(&[&url, "-n", "10"]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {err}");
    assert!(
        lines[0].contains("no request succeeded")
            && lines[0].contains("10 of 10 attempts failed with connect (refused)")
            && lines[0].contains("Connection refused")
            && lines[0].contains("is the server running"),
        "{err}"
    );
    // No table of zeros: the latency is said to be unmeasured.
    assert!(!out.contains("Latency (ms)"), "{out}");
    assert!(!out.contains("Connection Times"), "{out}");
    assert!(out.contains("none measured"), "{out}");
    // The diagnosis carries the example and the hint too.
    assert!(out.contains("Leading error: connect (refused)"), "{out}");

    // The JSON keeps one full message per detail beside its count.
    let r = bench_json(&[&url, "-n", "10"]);
    let req = &scenario(&r)["requests"];
    assert_eq!(u(&req["error_details"]["refused"]), 10);
    let example = req["error_examples"]["refused"].as_str().unwrap();
    assert!(example.contains("Connection refused"), "{example}");
    let errors = schema_violations("report.schema.json", &r);
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn the_wrong_scheme_and_an_untrusted_certificate_get_their_hints() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let http = srv.http_url().unwrap();
    let https = srv.https_url().unwrap();
    let port = |u: &str| {
        u.rsplit(':')
            .next()
            .unwrap()
            .trim_end_matches('/')
            .to_string()
    };
    // http:// to the TLS port: the server's answer is a TLS record.
    let (code, _, err) = bench_text(&[
        &format!("http://127.0.0.1:{}/", port(&https)),
        "-n",
        "3",
        "-c",
        "1",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("bad_version") && err.contains("try https://"),
        "{err}"
    );
    // https:// to the plain port: the answer to the ClientHello is not TLS.
    let (code, _, err) = bench_text(&[
        &format!("https://127.0.0.1:{}/", port(&http)),
        "-n",
        "3",
        "-c",
        "1",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("tls (not_tls)") && err.contains("try http://"),
        "{err}"
    );
    // A certificate from a CA the client was not given.
    let (code, _, err) = bench_text(&[&https, "-n", "3", "-c", "1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("cert_unknown_issuer")
            && err.contains("--cacert")
            && err.contains("--insecure"),
        "{err}"
    );
    // The same with --insecure succeeds: exit 0, nothing on stderr.
    let (code, _, err) = bench_text(&[&https, "-n", "3", "-c", "1", "--insecure"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.is_empty(), "{err}");
    // Every one of those attempts reached the server.
    assert!(srv.snapshot().connections_accepted >= 9);
    srv.stop();
}

/// Compare's JSON report and exit status.
fn compare_checked(args: &[&str]) -> (std::process::Output, Value) {
    let (out, v) = compare_ran(args);
    check_exit(&[&["compare"], args].concat(), &out, &v);
    (out, v)
}

#[test]
fn compare_never_ranks_a_row_without_successful_requests() {
    let _machine = shared();
    // Nothing listening: every row failed, none is best, exit 1.
    let url = format!("http://127.0.0.1:{}/", free_port());
    let (out, v) = compare_checked(&[&url, "-n", "10", "--rounds", "2"]);
    assert_eq!(out.status.code(), Some(1));
    let rows = v["comparison"]["rows"].as_array().unwrap();
    assert!(!rows.is_empty());
    for r in rows {
        assert_eq!(u(&r["failed_rounds"]), 2, "{r}");
        assert_eq!(r["best"], false, "{r}");
        assert_eq!(r["significant"], false, "{r}");
    }
    let why = v["comparison"]["explanations"].as_array().unwrap();
    assert!(
        why.iter().all(
            |e| e["text"].as_str().unwrap().contains("failed, not ranked")
                && e["code"] == "row_failed"
        ),
        "{why:?}"
    );

    // A server that answers HTTP/1.1 and resets HTTP/1.0: the http10 rows fail, the
    // others are ranked among themselves, and the run exits 1 (a row failed entirely).
    let (addr, accepted) = script_server(|mut s, _| {
        while let Some(head) = read_head(&mut s) {
            if head.windows(8).any(|w| w == b"HTTP/1.0") {
                reset(s);
                return;
            }
            write(
                &mut s,
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok",
            );
        }
    });
    let url = format!("http://{addr}/");
    let (out, v) = compare_checked(&[
        &url,
        "-n",
        "20",
        "-c",
        "1",
        "--rounds",
        "6",
        "--strategies",
        "http10,keepalive,close",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let row = |name: &str| {
        v["comparison"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(u(&row("http10")["failed_rounds"]), 6);
    assert_eq!(row("http10")["best"], false);
    assert_eq!(u(&row("keepalive")["failed_rounds"]), 0);
    assert_eq!(row("keepalive")["best"], true, "{}", v["comparison"]);
    assert_eq!(u(&row("close")["failed_rounds"]), 0);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("http10: no request succeeded") && err.contains("reset"),
        "{err}"
    );
    assert!(!err.contains("keepalive: no request"), "{err}");
    // Ground truth: the server accepted a connection per request for http10 (each
    // reset) and close, and one per round for keepalive.
    let opened = opened_in_all(&v);
    assert_eq!(accepted.load(Ordering::SeqCst), opened);
}

#[test]
fn statuses_are_counted_by_class_and_explained_first() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let url = format!("{}status/401", srv.http_url().unwrap());
    let r = bench_json(&[&url, "-m", "POST", "-n", "20", "-c", "2"]);
    let s = scenario(&r);
    let req = &s["requests"];
    // Answered, but none ok: every one was a 401, as the server counted: no success,
    // so exit 1 (bench_json checks it and the line on stderr).
    assert_eq!(srv.snapshot().requests, 20);
    assert_eq!(u(&req["answered"]), 20);
    assert_eq!((u(&req["ok"]), u(&req["error_status"])), (0, 20));
    assert_eq!(u(&req["status_classes"]["4xx"]), 20);
    assert_eq!(u(&req["status_classes"]["2xx"]), 0);
    assert_eq!(u(&req["non_2xx"]), 20);
    let first = s["diagnosis"][0]["text"].as_str().unwrap();
    assert!(
        first.contains("20 of 20 were 401 (Unauthorized)") && first.contains("-H 'Authorization"),
        "{first}"
    );
    // The text says it beside the codes.
    let (code, out, err) = bench_text(&[&url, "-n", "20", "-c", "2"]);
    assert_eq!(code, Some(1));
    assert!(out.contains("401: 20 (4xx 20; non-2xx 20 of 20)"), "{out}");
    assert!(
        err.contains("no response was a success: 20 of 20 were 401"),
        "{err}"
    );
    // Meant: exit 0.
    let (code, _, err) = bench_text(&[&url, "-n", "20", "-c", "2", "--ok-status", "401"]);
    assert_eq!(code, Some(0), "{err}");
    // All 2xx: said so, and no status sentence.
    let ok = bench_json(&[&srv.http_url().unwrap(), "-n", "10"]);
    assert_eq!(u(&scenario(&ok)["requests"]["non_2xx"]), 0);
    assert!(!scenario(&ok)["diagnosis"]
        .to_string()
        .contains("Most responses"));
    srv.stop();

    // A server shedding load with 429 and Retry-After: the diagnosis names both.
    let (addr, accepted) = script_server(|mut s, _| {
        while read_head(&mut s).is_some() {
            write(
                &mut s,
                b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\nContent-Length: 0\r\n\r\n",
            );
        }
    });
    let r = bench_json(&[&format!("http://{addr}/"), "-n", "6", "-c", "1"]);
    let s = scenario(&r);
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    assert_eq!(u(&s["requests"]["status_codes"]["429"]), 6);
    assert_eq!(u(&s["requests"]["retry_after_s"]), 30);
    let first = s["diagnosis"][0]["text"].as_str().unwrap();
    assert!(
        first.contains("shedding load") && first.contains("Retry-After: 30 s"),
        "{first}"
    );
}

#[test]
fn units_are_explicit_before_any_traffic() {
    let _machine = shared();
    let (addr, accepted) = script_server(|_s, _| {});
    let url = format!("http://{addr}/");
    for (args, says) in [
        (
            vec!["bench", "--rtt", "5"],
            "\"5\" has no unit: write 5ms or 5s",
        ),
        (vec!["bench", &url, "--timeout", "10"], "write 10ms or 10s"),
        (
            vec!["bench", "--loss", "5"],
            "write 5% for a percentage, or 0.05",
        ),
        (
            vec!["compare", &url, "--noise-threshold", "5"],
            "write 5% for a percentage",
        ),
        (
            vec!["bench", &url, "--fail-if", "reuse_ratio<90"],
            "write 90% or 0.9",
        ),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "no traffic before the checks"
    );
}

#[test]
fn a_body_ended_by_the_close_is_its_own_close_reason() {
    let _machine = shared();
    // HTTP/1.1, no Content-Length, not chunked, no Connection header: the body runs to
    // the close. Not `server_close_header`: no such header was sent.
    let (addr, accepted) = script_server(|mut s, _| {
        if read_head(&mut s).is_some() {
            write(
                &mut s,
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nhello",
            );
        }
    });
    let r = bench_json(&[&format!("http://{addr}/"), "-n", "5", "-c", "1"]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["requests"]["ok"]), 5);
    assert_eq!(accepted.load(Ordering::SeqCst), 5);
    assert_eq!(u(&s["connections"]["opened"]), 5);
    assert_eq!(close_reason(s, "server_close_delimited"), 5);
    assert_eq!(close_reason(s, "server_close_header"), 0);
    let d = s["diagnosis"].to_string();
    assert!(
        d.contains("without a length") && !d.contains("Connection: close"),
        "{d}"
    );
}

#[test]
fn exit_statuses_are_documented_in_one_place() {
    let _machine = shared();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    assert!(
        readme.contains(handshake::api::cli::EXIT_STATUS),
        "README's Exit status"
    );
    for cmd in [
        vec!["--help"],
        vec!["bench", "--help"],
        vec!["compare", "--help"],
    ] {
        let out = run(&cmd);
        assert!(out.status.success());
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(
            help.contains(handshake::api::cli::EXIT_STATUS),
            "{cmd:?}: {help}"
        );
    }
}

/// nginx with `limit_req` (1 request a minute, no burst) in front of a static file,
/// logging each request's status.
fn nginx_limited() -> Option<Nginx> {
    Nginx::start_servers(
        "log_format s '$status'; limit_req_zone $binary_remote_addr zone=one:1m rate=1r/m;",
        1,
        |ports, d| {
            std::fs::write(d.join("index.html"), "ok\n").unwrap();
            format!(
                "server {{ listen 127.0.0.1:{}; access_log {d}/access.log s; \
                 location / {{ limit_req zone=one; root {d}; }} }}",
                ports[0],
                d = d.display()
            )
        },
    )
}

/// The statuses nginx logged, by code.
fn logged_statuses(n: &Nginx) -> std::collections::BTreeMap<String, u64> {
    std::thread::sleep(std::time::Duration::from_millis(200));
    let text = std::fs::read_to_string(n.dir.join("access.log")).unwrap_or_default();
    let mut by = std::collections::BTreeMap::new();
    for l in text.lines() {
        *by.entry(l.trim().to_string()).or_insert(0) += 1;
    }
    std::fs::write(n.dir.join("access.log"), "").unwrap();
    by
}

/// The metrics a run serves while it lingers, read once its requests are all counted.
fn lingering_metrics(args: &[&str], port: u16, requests: u64) -> String {
    let addr = format!("127.0.0.1:{port}");
    let mut all = vec!["bench", "--no-progress", "--metrics-linger", "20s"];
    all.extend_from_slice(args);
    all.extend(["--metrics", &addr]);
    let mut child = std::process::Command::new(bin())
        .args(&all)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = std::time::Instant::now();
    let want = "handshake_requests_total{scenario=";
    let mut last = String::new();
    while t.elapsed() < std::time::Duration::from_secs(15) {
        let out = std::process::Command::new("curl")
            .args(["-s", &format!("http://{addr}/metrics")])
            .output()
            .unwrap();
        last = String::from_utf8_lossy(&out.stdout).into_owned();
        let total = last
            .lines()
            .find(|l| l.starts_with(want))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok());
        if total == Some(requests as f64) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    stop_child(&mut child, "-INT");
    last
}

/// A metric's one value in an exposition.
fn metric(exposition: &str, name: &str) -> Option<f64> {
    exposition
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{")))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

/// "ok" is a status the user counts as ok, the same in the summary, the headline, the
/// JSON, the timeline and the metrics; the other answers are counted as answered with an
/// error status, apart from failures. Against nginx's limit_req, which answers all but
/// the first request 503, with nginx's own log as the truth.
#[test]
fn ok_means_an_ok_status_everywhere_and_error_statuses_are_counted_apart() {
    let _machine = shared();
    let Some(n) = nginx_limited() else { return };
    let url = n.url();
    let r = bench_json(&[&url, "-n", "50", "-c", "2"]);
    let logged = logged_statuses(&n);
    let (ok, limited) = (logged["200"], logged["503"]);
    assert_eq!((ok + limited, logged.len()), (50, 2), "{logged:?}");
    let s = scenario(&r);
    let req = &s["requests"];
    assert_eq!(u(&req["ok"]), ok, "{req}");
    assert_eq!(u(&req["error_status"]), limited, "{req}");
    assert_eq!(u(&req["answered"]), 50, "{req}");
    check_accounting(s);
    let headline = s["headline"]["text"].as_str().unwrap();
    assert!(
        headline.contains(&format!(
            "50 requests answered ({ok} ok, {limited} with an error status)"
        )),
        "{headline}"
    );
    let (code, out, _) = bench_text(&[&url, "-n", "50", "-c", "2"]);
    assert_eq!(code, Some(1), "no 200 left in nginx's minute: {out}");
    assert!(
        out.contains("50 attempted, 0 ok, 50 with an error status, 0 failed"),
        "{out}"
    );
    assert_eq!(logged_statuses(&n).get("503"), Some(&50));
    // The metrics: answered and ok apart, as the report has them; --ok-status 503 makes
    // them ok everywhere.
    let m = lingering_metrics(&[&url, "-n", "20", "-c", "2"], free_port(), 20);
    assert_eq!(metric(&m, "handshake_requests_total"), Some(20.0), "{m}");
    assert_eq!(metric(&m, "handshake_requests_ok_total"), Some(0.0), "{m}");
    let accepted = bench_json(&[&url, "-n", "20", "-c", "2", "--ok-status", "503"]);
    let req = &scenario(&accepted)["requests"];
    assert_eq!((u(&req["ok"]), u(&req["error_status"])), (20, 0), "{req}");
    check_accounting(scenario(&accepted));
    assert_eq!(logged_statuses(&n).get("503"), Some(&40));
}
