//! `handshake compare`: every strategy's connection count against the server's own
//! count, the "x times slower" figures from the printed medians, usage errors, the JSON
//! schema, and the HTML report opened in a real headless Chromium.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::*;

fn compare_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["compare", "--json", "--no-progress"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(
        out.status.success(),
        "compare {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

fn schema() -> jsonschema::Validator {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/report.schema.json"
    ))
    .unwrap();
    jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
}

fn rows(r: &serde_json::Value) -> &Vec<serde_json::Value> {
    r["comparison"]["rows"].as_array().unwrap()
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn each_strategys_connections_equal_the_servers_count() {
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let r = compare_json(&[&url, "-n", "60", "--rounds", "2"]);
    let names: Vec<&str> = rows(&r)
        .iter()
        .map(|x| x["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["close", "http10", "http10-keepalive", "keepalive"],
        "default strategies for http"
    );
    let mut total = 0;
    for s in r["scenarios"].as_array().unwrap() {
        check_accounting(s);
        assert_eq!(u(&s["requests"]["ok"]), 120, "2 rounds of 60");
        total += u(&s["connections"]["opened"]);
    }
    assert_eq!(
        total,
        srv.snapshot().connections_accepted,
        "sum of connections opened = server's count"
    );
    let opened = |name: &str| {
        let s = r["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["strategy"] == name)
            .unwrap();
        u(&s["connections"]["opened"])
    };
    assert_eq!(opened("close"), 120);
    assert_eq!(opened("http10"), 120);
    assert_eq!(opened("http10-keepalive"), 2);
    assert_eq!(opened("keepalive"), 2);
    assert!(schema().is_valid(&r));
    srv.stop();
}

#[test]
fn embedded_server_compares_http_and_https_and_counts_match() {
    let r = compare_json(&["-n", "40", "--rounds", "2"]);
    let rs = rows(&r);
    assert_eq!(rs.len(), 9, "4 http and 5 https strategies");
    let mut total = 0;
    for (row, s) in rs.iter().zip(r["scenarios"].as_array().unwrap()) {
        check_accounting(s);
        assert_eq!(row["name"], s["name"]);
        let opened = u(&s["connections"]["opened"]);
        assert_eq!(
            u(&row["server_connections_accepted"]),
            opened,
            "{}: the server's own count",
            row["name"]
        );
        total += opened;
        assert!(row["server_cpu_us_per_request"]["median"].as_f64().unwrap() > 0.0);
        let full = u(&s["connections"]["tls_handshakes"]["full"]);
        let resumed = u(&s["connections"]["tls_handshakes"]["resumed"]);
        match row["name"].as_str().unwrap() {
            "https close" | "https http10" => assert_eq!((full, resumed), (80, 0)),
            "https close-resumed" => {
                assert!(resumed >= 78 && full + resumed == 80, "{full}/{resumed}")
            }
            n if n.starts_with("http ") => assert_eq!(full + resumed, 0),
            _ => assert_eq!(full + resumed, 2),
        }
    }
    assert_eq!(total, u(&r["server"]["connections_accepted"]));
    assert!(
        schema().is_valid(&r),
        "{:?}",
        schema()
            .iter_errors(&r)
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
    );
    let why = r["comparison"]["explanations"].as_array().unwrap();
    assert!(
        why.iter().any(|e| e
            .as_str()
            .unwrap()
            .starts_with("https close pays 1 TCP handshake")
            && e.as_str()
                .unwrap()
                .contains("1 full TLS 1.3 handshake (~1.0 RTT +")),
        "{why:?}"
    );
}

#[test]
fn times_slower_comes_from_the_printed_medians() {
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let r = compare_json(&[
        &url,
        "-n",
        "50",
        "--rounds",
        "3",
        "--strategies",
        "close,keepalive",
    ]);
    let rs = rows(&r);
    let best = rs.iter().find(|x| x["best"] == true).unwrap();
    let best_t = f(&best["time_per_request_ms"]["median"]);
    for row in rs {
        let t = f(&row["time_per_request_ms"]["median"]);
        assert!((f(&row["times_slower"]) - t / best_t).abs() < 1e-9);
        assert!((f(&row["extra_ms_per_request"]) - (t - best_t)).abs() < 1e-9);
        let sp = &row["time_per_request_ms"];
        assert!(f(&sp["min"]) <= t && t <= f(&sp["max"]));
    }
    // The text table: "N.Nx slower, +X ms/req" agrees with the medians it prints.
    let out = run(&[
        "compare",
        &url,
        "-n",
        "50",
        "--strategies",
        "keepalive,close",
        "--no-progress",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let line = |name: &str| {
        text.lines()
            .find(|l| {
                l.trim_start().starts_with(name)
                    && !l.contains("ms/request")
                    && (l.contains("best") || l.contains("slower"))
            })
            .unwrap_or_else(|| panic!("no row {name} in\n{text}"))
            .to_string()
    };
    // Columns: name, wall s, ms/request median, ...
    let median = |l: &str| l.split_whitespace().nth(2).unwrap().parse::<f64>().unwrap();
    let (ka, cl) = (line("keepalive"), line("close"));
    let (slow, fast) = if cl.contains("best") {
        (ka, cl)
    } else {
        (cl, ka)
    };
    let printed: f64 = slow
        .split("x slower")
        .next()
        .unwrap()
        .split_whitespace()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    let ratio = median(&slow) / median(&fast);
    // Printed medians carry 3 decimals; allow for that rounding.
    assert!(
        (printed - ratio).abs() <= 0.05 + ratio * 0.02,
        "{printed} vs {ratio} in\n{slow}\n{fast}"
    );
    assert!(text.contains("█"), "bar chart drawn");
    srv.stop();
}

#[test]
fn unknown_strategy_exits_2_and_names_the_known_ones() {
    let out = run(&[
        "compare",
        "http://127.0.0.1:1/",
        "--strategies",
        "close,warp",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("\"warp\"")
            && err.contains("close, close-resumed, http10, http10-keepalive, keepalive"),
        "{err}"
    );
    let out = run(&["compare", "http://127.0.0.1:1/", "--rounds", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

/// Where the browser check lives, and whether it can run here.
fn browser_check() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser"));
    let ready = dir.join("node_modules/playwright-core").exists()
        && std::path::Path::new(&std::env::var("CHROMIUM").unwrap_or("/usr/bin/chromium".into()))
            .exists();
    if ready {
        return Some(dir);
    }
    if std::env::var_os("HANDSHAKE_SKIP_BROWSER").is_some() {
        eprintln!("skipping the browser check (HANDSHAKE_SKIP_BROWSER set)");
        return None;
    }
    panic!(
        "the HTML check needs Chromium (Debian package chromium) and playwright-core \
         (cd tests/browser && npm ci); .ci/run installs both. Set HANDSHAKE_SKIP_BROWSER=1 to skip."
    );
}

fn check_html(args: &[&str], tag: &str) {
    let Some(dir) = browser_check() else { return };
    let tmp = std::env::temp_dir().join(format!("handshake-html-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let html = tmp.join("report.html");
    let json = tmp.join("report.json");
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend([
        "--json".into(),
        "--no-progress".into(),
        "--html".into(),
        html.to_str().unwrap().into(),
    ]);
    let out = Command::new(bin()).args(&all).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&json, &out.stdout).unwrap();
    let shot = tmp.join("report.png");
    let check = Command::new("node")
        .arg(dir.join("check_report.mjs"))
        .args([&html, &json, &shot])
        .output()
        .expect("node runs");
    assert!(
        check.status.success(),
        "browser check failed:\n{}\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "a real screenshot was taken"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn compare_html_report_draws_the_reports_numbers_in_chromium() {
    check_html(&["compare", "-n", "30", "--rounds", "2"], "compare");
}

#[test]
fn bench_html_report_draws_the_reports_numbers_in_chromium() {
    check_html(&["bench", "-n", "300", "-c", "3"], "bench");
}
