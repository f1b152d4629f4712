//! Progress on long work: on a terminal (a pty from `script`), doctor, compare, the lab's
//! link check and merge draw one line in place on stderr (what runs, `k/n`, the time so
//! far) that fits the terminal and is cleared before the report; `--no-progress` draws
//! nothing. Off a terminal, lab and merge say nothing on stderr (doctor and compare write
//! a line per step: tests/compare/strategies.rs, tests/doctor/policies.rs).

use std::process::Command;

use crate::common::*;
use handshake::api::server::ServerConfig;
use serde_json::Value;

/// The terminal's width in these runs.
const COLS: usize = 100;

/// What `handshake args… >stdout` wrote to a terminal of `COLS` columns (stderr only:
/// stdout goes to a file), with that file's text.
fn on_terminal(args: &[&str]) -> (String, String) {
    let out = TempFile::new("progress-stdout", b"");
    let quoted: Vec<String> = std::iter::once(bin())
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let line = format!(
        "stty cols {COLS} rows 40; {} > {}",
        quoted.join(" "),
        out.s()
    );
    let run = Command::new("script")
        .args(["-qefc", &line, "/dev/null"])
        .output()
        .expect("script runs (util-linux)");
    let tty = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(run.status.success(), "{args:?}: {:?}\n{tty}", run.status);
    let stdout = std::fs::read_to_string(out.s()).expect("stdout file");
    (tty, stdout)
}

/// The bar's frames: the text between indicatif's "clear the line" sequences.
fn frames(tty: &str) -> Vec<&str> {
    tty.split("\r\x1b[2K")
        .map(str::trim_end)
        .filter(|f| !f.is_empty())
        .collect()
}

/// Every frame fits the terminal, and (`cleared`) the last thing written is the clear: the
/// bar is gone before the report. Returns the frames that are the bar (`name [`).
fn bar_frames<'a>(tty: &'a str, name: &str, cleared: bool) -> Vec<&'a str> {
    let all = frames(tty);
    let bar: Vec<&str> = all
        .iter()
        .copied()
        .filter(|f| f.starts_with(&format!("{name} [")))
        .collect();
    assert!(!bar.is_empty(), "no {name} bar drawn:\n{tty:?}");
    for f in &bar {
        assert!(
            f.chars().count() <= COLS,
            "a {}-character frame on a {COLS}-column terminal: {f:?}",
            f.chars().count()
        );
        assert!(!f.contains('\n'), "a frame spans lines: {f:?}");
    }
    assert!(
        !cleared || tty.trim_end_matches([' ', '\n']).ends_with("\r\x1b[2K"),
        "the bar was not cleared at the end:\n{tty:?}"
    );
    bar
}

#[test]
fn compare_draws_its_runs_as_k_of_n_and_clears_the_bar() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let args = [
        "compare",
        &url,
        "--strategies",
        "close,keepalive",
        "-n",
        "3000",
        "--rounds",
        "3",
        "--json",
    ];
    let (tty, stdout) = on_terminal(&args);
    let bar = bar_frames(&tty, "compare", true);
    // 2 strategies x 3 rounds: six runs, counted, the time to go estimated.
    let counted: Vec<&&str> = bar.iter().filter(|f| f.contains("/6, ~")).collect();
    assert!(!counted.is_empty(), "{bar:#?}");
    assert!(
        counted
            .iter()
            .any(|f| f.contains("round ") && f.contains(" of 3: ")),
        "{bar:#?}"
    );
    // No log lines on a terminal: the line per round is for logs.
    assert!(!tty.contains(" s] round 1 of 3"), "{tty:?}");
    let v: Value = serde_json::from_str(&stdout).expect("the JSON report, whole");
    assert_eq!(v["comparison"]["rounds"], 3);
    assert_eq!(v["comparison"]["rows"].as_array().unwrap().len(), 2);
}

#[test]
fn no_progress_draws_nothing_on_a_terminal() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let (tty, stdout) = on_terminal(&[
        "compare",
        &url,
        "--strategies",
        "close,keepalive",
        "-n",
        "200",
        "--rounds",
        "2",
        "--no-progress",
    ]);
    assert!(tty.trim().is_empty(), "{tty:?}");
    assert!(stdout.contains("keepalive"), "{stdout}");
}

#[test]
fn doctor_draws_its_probes_as_k_of_n() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let (tty, stdout) = on_terminal(&[
        "doctor",
        &url,
        "--max-requests",
        "20",
        "--max-idle",
        "1s",
        "--json",
    ]);
    let bar = bar_frames(&tty, "doctor", true);
    // Over HTTP with keep-alive: keep-alive, requests per connection, idle timeout.
    for (k, what) in [(0, "does HTTP/1.1 and HTTP/1.0 keep"), (2, "idle timeout")] {
        assert!(
            bar.iter()
                .any(|f| f.contains(&format!(" {k}/3: ")) && f.contains(what)),
            "no frame {k}/3 with {what:?}: {bar:#?}"
        );
    }
    let v: Value = serde_json::from_str(&stdout).expect("the JSON report");
    assert!(v["http11"]["reused"].as_bool().unwrap(), "{v}");
}

#[test]
fn the_labs_link_check_is_drawn_then_cleared_before_its_lines() {
    let _serial = serial();
    let (tty, _) = on_terminal(&["lab", "--rtt", "5ms", "--", "true"]);
    let bar = bar_frames(&tty, "lab", false);
    assert!(
        bar.iter()
            .any(|f| f.contains("lab: checking the link (5 ms RTT): TCP connect ")),
        "{bar:#?}"
    );
    // The lab's own lines come after the bar is cleared, each on its own line.
    let first_say = tty.find("handshake lab: ").expect("the lab's lines");
    let last_frame = tty.rfind("checking the link").unwrap();
    assert!(last_frame < first_say, "{tty:?}");
    assert!(tty[last_frame..first_say].contains("\r\x1b[2K"), "{tty:?}");
    // Off a terminal the lab says its own lines only.
    let out = run(&["lab", "--rtt", "5ms", "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("checking the link"), "{err}");
    assert!(
        err.lines()
            .all(|l| l.starts_with("handshake lab: ") || l.starts_with("  ")),
        "{err}"
    );
}

#[test]
fn merge_draws_the_files_it_reads_on_a_terminal_only() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let files: Vec<TempFile> = (0..3)
        .map(|i| {
            let out = run(&[
                "bench",
                &url,
                "-n",
                "50",
                "-c",
                "2",
                "--json",
                "--no-progress",
            ]);
            assert!(out.status.success());
            TempFile::new(&format!("progress-merge-{i}"), &out.stdout)
        })
        .collect();
    let mut args = vec!["merge", "--json", "--allow-mismatch"];
    args.extend(files.iter().map(TempFile::s));
    let (tty, stdout) = on_terminal(&args);
    let bar = bar_frames(&tty, "merge", true);
    assert!(
        bar.iter().any(|f| f.contains("/3: reading ")
            || f.contains("/3, ~") && (f.contains("reading ") || f.contains("merging 3 reports"))),
        "{bar:#?}"
    );
    let v: Value = serde_json::from_str(&stdout).expect("the merged report");
    assert_eq!(v["scenarios"][0]["requests"]["ok"], 150, "{v}");
    let out = run(&args);
    assert!(out.status.success());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `--no-progress` is taken by every command that draws progress or says where it is
/// (bench, compare, trace, doctor, lab, merge, audit), and keeps the terminal clear: the
/// lab's link check and trace's start draw nothing with it.
#[test]
fn no_progress_is_taken_by_every_command_that_has_progress() {
    let _serial = serial();
    for cmd in [
        "bench", "compare", "trace", "doctor", "lab", "merge", "audit",
    ] {
        let help = String::from_utf8_lossy(&run(&[cmd, "--help"]).stdout).into_owned();
        assert!(help.contains("--no-progress"), "{cmd}: {help}");
    }
    let (tty, _) = on_terminal(&["lab", "--rtt", "5ms", "--no-progress", "--", "true"]);
    assert!(!tty.contains("checking the link"), "{tty:?}");
    assert!(tty.contains("handshake lab: "), "{tty:?}");
    let (tty, stdout) = on_terminal(&["trace", "--no-progress", "--count", "2"]);
    assert!(!tty.contains("trace ["), "{tty:?}");
    let (drawn, _) = on_terminal(&["trace", "--count", "2"]);
    assert!(
        drawn.contains("trace ["),
        "without it the bar is drawn: {drawn:?}"
    );
    assert!(stdout.contains("Request 2 of 2"), "{stdout}");
    // audit's line saying where it listens goes too (its report names the URL).
    let out = run(&["audit", "--no-progress", "--json", "--", "true"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("listening on"), "{err}");
    let out = run(&["audit", "--json", "--", "true"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("handshake audit: listening on"));
}
