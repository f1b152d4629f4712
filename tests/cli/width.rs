//! Every command's text report fits the width it is given (`COLUMNS=80` and 120): no
//! line is longer. Tables leave out their least important columns, sentences fold
//! under their indent; the JSON keeps every sentence whole. Each report opens with its
//! headline, and the headline says what the JSON's figures say.

use crate::common::*;
use handshake::api::fmt::ms as fmt_ms;
use serde_json::Value;

/// No line of the output, stdout or stderr, is wider than `width` characters.
fn fits(width: usize, args: &[&str]) -> String {
    let out = run_at_width(width, args);
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let err = String::from_utf8_lossy(&out.stderr);
    for (what, s) in [("stdout", text.as_str()), ("stderr", &err)] {
        for l in s.lines() {
            assert!(
                l.chars().count() <= width,
                "{args:?} at {width} columns: a {}-character line on {what}:\n{l}\n\n{s}",
                l.chars().count()
            );
        }
    }
    assert!(
        !text.trim().is_empty() || args[0] == "lab",
        "{args:?}: a report (the lab's own lines are on stderr)"
    );
    text
}

/// The report's opening paragraphs (up to its first blank line), each folded line
/// joined back: a paragraph starts at column 0, its folds are indented.
fn headline(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in text.lines().take_while(|l| !l.trim().is_empty()) {
        if l.starts_with(' ') {
            let last = out.last_mut().expect("a paragraph before its fold");
            last.push(' ');
            last.push_str(l.trim());
        } else {
            out.push(l.to_string());
        }
    }
    out
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn bench_trace_doctor_audit_and_merge_fit_80_and_120_columns() {
    let _s = serial();
    let srv = start(ServerConfig::default());
    let ca = TempFile::new("ca.pem", srv.ca_pem.as_bytes());
    let https = srv.https_url().unwrap();
    let ca_path = ca.0.to_str().unwrap();
    let json = TempFile::new("bench.json", &run(&["bench", "-n", "200", "--json"]).stdout);
    let audited = "curl -s -o /dev/null {url}a; curl -s -o /dev/null {url}b";
    for w in [80, 120] {
        fits(w, &["bench", "-n", "300", "-c", "4"]);
        fits(w, &["bench", "-s", "close", "-n", "100"]);
        fits(w, &["trace", "--count", "2"]);
        fits(w, &["trace", "-s", "h2", "--count", "2"]);
        fits(w, &["trace", "-s", "h3-0rtt", "--count", "2"]);
        fits(w, &["trace", "-s", "close-resumed", "--count", "2"]);
        fits(w, &["doctor", "--max-idle", "1s", "--max-requests", "20"]);
        fits(
            w,
            &[
                "doctor",
                &https,
                "--cacert",
                ca_path,
                "--max-idle",
                "1s",
                "--max-requests",
                "20",
            ],
        );
        fits(w, &["audit", "--", "sh", "-c", audited]);
        let merged = json.0.to_str().unwrap();
        fits(w, &["merge", "--allow-mismatch", merged, merged]);
    }
    srv.stop();
}

/// bench's headline gives the figures of its own run (its HTML page carries them, and
/// the headline); trace's, the phases it shows.
#[test]
fn bench_and_trace_headlines_say_the_reports_figures() {
    let _s = serial();
    let dir = Dir::new("headline");
    let html = dir.0.join("bench.html");
    let text = fits(
        80,
        &[
            "bench",
            "-n",
            "400",
            "-c",
            "4",
            "--html",
            html.to_str().unwrap(),
        ],
    );
    let data = embedded_json(&html);
    let e = &data["entries"][0];
    let ok = u(&e["ok"]);
    let opened = u(&e["connections"]["opened"]);
    // Setup: each phase's time over the requests that had it, over all the requests on
    // new connections (a lookup that 1 of 4 waited for counts a quarter).
    let new = &e["phases_new"];
    let new_requests = u(&new["requests"]);
    let setup: f64 = ["dns", "connect", "tls"]
        .iter()
        .map(|p| new[*p]["mean"].as_f64().unwrap() * u(&new[*p]["count"]) as f64)
        .sum::<f64>()
        / new_requests as f64;
    let pct = |q: f64| {
        e["percentiles"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p[0].as_f64() == Some(q))
            .map(|p| p[1].as_f64().unwrap())
            .unwrap()
    };
    let says = format!(
        "{ok} requests ok over {opened} connections ({:.1} per connection): p50 {} ms, p99 {} ms, {:.0} requests/s; setting up a new connection took {} ms (mean over {new_requests} requests on new connections).",
        ok as f64 / opened as f64,
        fmt_ms(pct(50.0)),
        fmt_ms(pct(99.0)),
        e["requests_per_s"].as_f64().unwrap(),
        fmt_ms(setup)
    );
    assert_eq!(headline(&text), std::slice::from_ref(&says));
    assert_eq!(data["headline"], serde_json::json!([says]));
    // trace: its text and JSON are of two runs, so the headline is checked in its shape
    // and its figures against the text's own phases.
    let text = fits(80, &["trace", "--count", "3"]);
    let h = headline(&text);
    assert_eq!(h.len(), 1, "{text}");
    let connect = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("connect"))
        .and_then(|l| l.split_whitespace().next())
        .unwrap();
    let total = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("total"))
        .map(|l| l.split_whitespace().next().unwrap())
        .unwrap();
    let says =
        format!("3 requests over 1 connection: the first took {total} ms, {connect} ms of it (");
    assert!(h[0].starts_with(&says), "{}\nwanted {says}", h[0]);
    assert!(
        h[0].contains("setting up its connection; on a reused connection a request took "),
        "{}",
        h[0]
    );
}

/// The figures the HTML page draws, as it embeds them.
fn embedded_json(html: &std::path::Path) -> Value {
    let page = std::fs::read_to_string(html).unwrap();
    let start = page
        .find("id=\"handshake-data\">")
        .expect("the JSON in the page")
        + "id=\"handshake-data\">".len();
    let end = start + page[start..].find("</script>").unwrap();
    serde_json::from_str(&page[start..end]).unwrap()
}

/// compare's table fits 80 and 120 columns with its explanations (`-v`); at 80 it keeps
/// the time per request, the verdict and the CPU. The headline, one per group, is the
/// JSON's, which names the group's best row and its costliest with the ms it saves.
#[test]
fn compare_fits_and_opens_with_what_the_cheapest_saves() {
    let _s = serial();
    let dir = Dir::new("compare-width");
    for w in [80, 120] {
        let html = dir.0.join(format!("compare-{w}.html"));
        let text = fits(
            w,
            &[
                "compare",
                "-n",
                "60",
                "--rounds",
                "6",
                "-v",
                "--html",
                html.to_str().unwrap(),
            ],
        );
        let data = embedded_json(&html);
        let said: Vec<String> = data["headline"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_string())
            .collect();
        assert_eq!(headline(&text), said, "{text}");
        for h in &said {
            assert!(!h.contains('\n'), "the JSON's sentences are whole: {h}");
        }
        for g in ["http", "https"] {
            let rows: Vec<&Value> = data["entries"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| &e["row"])
                .filter(|r| r["group"] == g && r["failed_rounds"] == 0)
                .collect();
            let best = rows.iter().find(|r| r["best"] == true).unwrap();
            let worst = rows
                .iter()
                .max_by(|a, b| {
                    let t = |r: &Value| r["time_per_request_ms"]["median"].as_f64().unwrap();
                    t(a).total_cmp(&t(b))
                })
                .unwrap();
            let h = said
                .iter()
                .find(|h| h.contains(&format!("{} ", best["name"].as_str().unwrap())))
                .unwrap_or_else(|| panic!("a headline for {g}: {said:?}"));
            if worst["significant"] == true {
                let says = format!(
                    "{} saves {} ms",
                    best["name"].as_str().unwrap(),
                    fmt_ms(worst["extra_ms_per_request"].as_f64().unwrap())
                );
                assert!(h.starts_with(&says), "{h}\nwanted {says}");
                let against = format!(
                    " per request against {} ({:.2}x the time).",
                    worst["name"].as_str().unwrap(),
                    worst["times_slower"].as_f64().unwrap()
                );
                assert!(h.contains(&against), "{h}\nwanted {against}");
            } else {
                assert!(
                    h.starts_with("No strategy costs measurably more than"),
                    "{h}"
                );
            }
        }
        if w == 80 {
            let table = text
                .lines()
                .find(|l| l.trim_start().starts_with("strategy "))
                .unwrap();
            for col in ["ms/req", "vs best", "CPU µs cli/srv"] {
                assert!(table.contains(col), "{table}");
            }
            assert!(text.contains("\nWhy\n"), "-v gives the explanations");
        }
    }
    // Without -v the explanations are in the JSON and the HTML, and the text says so.
    let text = fits(
        80,
        &[
            "compare",
            "-n",
            "20",
            "--rounds",
            "2",
            "--strategies",
            "close,keepalive",
        ],
    );
    assert!(!text.contains("\nWhy\n"), "{text}");
    assert!(
        text.contains("Why each row costs what it costs: -v, or the JSON and HTML reports."),
        "{text}"
    );
}

/// Across the lab's link: compare's RTT sweep (its table of RTTs in as many tables as
/// fit, its chart) and the lab's own lines on stderr fit 80 and 120 columns.
#[test]
fn the_rtt_sweep_and_the_lab_fit() {
    let _s = serial();
    if !root() {
        eprintln!("SKIPPED: needs root to create network namespaces");
        return;
    }
    for w in [80, 120] {
        let text = fits(
            w,
            &[
                "compare",
                "--rtt",
                "0ms,2ms,5ms,10ms,20ms,40ms",
                "-n",
                "10",
                "--rounds",
                "2",
                "--strategies",
                "close,keepalive",
            ],
        );
        assert!(text.contains("=== Time per request (ms) against round-trip time"));
        fits(
            w,
            &[
                "lab",
                "--rtt",
                "5ms",
                "--",
                "curl",
                "-s",
                "-o",
                "/dev/null",
                "{url}",
            ],
        );
    }
}

/// watch's text fits, and its headline is the JSON's.
#[test]
fn watch_fits() {
    let _s = serial();
    if !root() {
        eprintln!("SKIPPED: watch needs root");
        return;
    }
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let script = format!("curl -s -o /dev/null {url}a; curl -s -o /dev/null {url}b");
    for w in [80, 120] {
        let text = fits(w, &["watch", "--", "sh", "-c", &script]);
        assert_eq!(
            headline(&text),
            ["2 requests over 2 connections: not reused, because the client closed each connection itself after one response, without asking the server to (no `Connection: close`), on 2 of 2 connections."],
            "{text}"
        );
    }
    srv.stop();
}
