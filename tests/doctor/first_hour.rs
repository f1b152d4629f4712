//! A new user's first hour with `doctor`: the usual mistakes and situations, each set up in
//! a real nginx (its own access log the ground truth: one line per request with its
//! connection serial, the requests on that connection, its status, whether TLS resumed and
//! whether the request came in early data), run through the commands a user would try,
//! asserting the exit status, the headline's claim and each finding's evidence against
//! nginx's count. Every sentence printed must be true of what nginx saw.

use crate::common::first_hour::{access_log, nginx_http};
use crate::common::{bin, Nginx};
use serde_json::Value;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

/// Send SIGINT to `child` once nginx has logged `lines` requests (its probes got that
/// far, however loaded the machine), at most after 20 s; then wait for its output.
fn interrupt_once_logged(cmd: Command, n: &Nginx, lines: usize) -> (Option<i32>, String, String) {
    let before = access_log(n).len();
    let t = Instant::now();
    // interrupt_after's wait, measured from when nginx has seen enough.
    let mut cmd = cmd;
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    while access_log(n).len() < before + lines && t.elapsed() < Duration::from_secs(20) {}
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let asked = Instant::now();
    let out = child.wait_with_output().unwrap();
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "took {:?}",
        asked.elapsed()
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

// Row 8 for doctor: Ctrl-C during its idle probes (--max-idle 30s) prints the probes
// that ended, marked as interrupted, exit 130; the idle timeout it did not finish
// measuring is missing, not claimed.
#[test]
fn ctrl_c_keeps_the_probes_doctor_finished() {
    let _machine = crate::common::shared();
    let Some(n) = nginx_http("keepalive_timeout 60s;", "return 200 \"hi\\n\";") else {
        return;
    };
    let mut cmd = Command::new(bin());
    cmd.args([
        "doctor",
        &n.url(),
        "--max-idle",
        "30s",
        "--max-requests",
        "20",
        "--json",
        "--no-progress",
    ]);
    // Interrupted in its idle probes: after the persistence probes and the 20 requests
    // on one connection (25 requests in nginx's log).
    let (code, out, err) = interrupt_once_logged(cmd, &n, 25);
    assert_eq!(code, Some(130), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?} {err}"));
    assert_eq!(v["interrupted"]["code"], "interrupted");
    assert_eq!(v["http11"]["persistent"], true, "{v}");
    assert!(v["idle_timeout"].is_null(), "{v}");
    // What nginx answered: the probes' requests that ended are in its log.
    assert!(!access_log(&n).is_empty());
    // In text, the mark comes first and the verdict says it covers the probes that ended.
    let mut cmd = Command::new(bin());
    cmd.args([
        "doctor",
        &n.url(),
        "--max-idle",
        "30s",
        "--max-requests",
        "20",
        "--no-progress",
    ]);
    cmd.env("COLUMNS", "1000");
    let (code, out, err) = interrupt_once_logged(cmd, &n, 25);
    assert_eq!(code, Some(130), "{err}");
    assert!(out.starts_with("Interrupted by SIGINT (Ctrl-C)"), "{out}");
    assert!(
        !out.contains("No problem found: connections can be reused"),
        "{out}"
    );
}
