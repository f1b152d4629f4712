//! A new user's first hour with `lab`: the usual mistakes and situations, each set up in a
//! real nginx (its own access log the ground truth: one line per request with its
//! connection serial, the requests on that connection, its status, whether TLS resumed and
//! whether the request came in early data), run through the commands a user would try,
//! asserting the exit status, the headline's claim and each finding's evidence against
//! nginx's count. Every sentence printed must be true of what nginx saw.

use crate::common;
use crate::common::bin;
use crate::common::first_hour::{ended, interrupt_after, interrupted_bench};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

// Row 8 in the lab: bench --rtt keeps what it measured over the emulated link (the lab
// leaves the first Ctrl-C to it), and `lab -- COMMAND` passes it to the command, marks
// its own report and exits 130.
#[test]
fn ctrl_c_in_the_lab_keeps_the_run() {
    let _serial = crate::common::serial();
    if !common::root("the lab") {
        return;
    }
    let v = interrupted_bench(&["--rtt", "20ms"], Duration::from_millis(3000));
    assert_eq!(v["interrupted"]["code"], "interrupted", "{v}");
    let s = &v["scenarios"][0];
    let ok = s["requests"]["ok"].as_u64().unwrap();
    let given_up = s["requests"]["aborted_at_deadline"].as_u64().unwrap();
    let served = v["server"]["requests"].as_u64().unwrap();
    assert!(ok > 0, "{s}");
    assert!(
        served >= ok && served <= ok + given_up,
        "server {served}, report {ok} (+{given_up})"
    );
    // The lab running a command.
    let dir = common::Dir::new("ctrl-c-lab");
    let pid_file = dir.path("cmd.pid");
    let mut cmd = Command::new(bin());
    cmd.args(["lab", "--rtt", "10ms", "--json", "--", "sh", "-c"])
        .arg(format!("echo $$ > {pid_file}; exec sleep 30"));
    let (code, _, err) = interrupt_after(cmd, Duration::from_millis(2500));
    assert_eq!(code, Some(130), "{err}");
    let json = &err[err.find("\n{").map_or(0, |i| i + 1)..];
    let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {err}"));
    assert_eq!(v["interrupted"]["code"], "interrupted", "{v}");
    assert!(
        ended(std::path::Path::new(&pid_file)),
        "the command was stopped"
    );
}
