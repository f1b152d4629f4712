//! A new user's first hour with `compare`: the usual mistakes and situations, each set up
//! in a real nginx (its own access log the ground truth: one line per request with its
//! connection serial, the requests on that connection, its status, whether TLS resumed and
//! whether the request came in early data), run through the commands a user would try,
//! asserting the exit status, the headline's claim and each finding's evidence against
//! nginx's count. Every sentence printed must be true of what nginx saw.

use crate::common::first_hour::{access_log, interrupt_after, nginx_http, nginx_tls, LOG_FORMAT};
use crate::common::{bin, run, write_certs, write_certs_valid, Nginx};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

// Row 8 for compare: the rounds that ran whole are compared; the one cut short is left
// out; exit 130.
#[test]
fn ctrl_c_keeps_the_rounds_compare_completed() {
    let _machine = crate::common::shared();
    let Some(n) = nginx_http("", "return 200 \"hi\\n\";") else {
        return;
    };
    let mut cmd = Command::new(bin());
    cmd.args([
        "compare",
        &n.url(),
        "--strategies",
        "keepalive,close",
        "-n",
        "400",
        "-c",
        "2",
        "--rounds",
        "1000",
        "--json",
        "--no-progress",
    ]);
    let (code, out, err) = interrupt_after(cmd, Duration::from_millis(2500));
    assert_eq!(code, Some(130), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?} {err}"));
    let rounds = v["comparison"]["rounds"].as_u64().unwrap();
    assert!((1..1000).contains(&rounds), "{rounds}");
    for s in v["scenarios"].as_array().unwrap() {
        // Each strategy ran exactly the rounds compared.
        assert_eq!(
            s["requests"]["ok"].as_u64().unwrap(),
            400 * rounds,
            "{}",
            s["name"]
        );
    }
    assert_eq!(v["interrupted"]["code"], "interrupted");
    // nginx saw those rounds, and at most the one cut short besides.
    let logged = access_log(&n).len() as u64;
    assert!(
        logged >= 800 * rounds && logged <= 800 * (rounds + 1),
        "nginx {logged}, rounds {rounds}"
    );
}

// compare's default set against nginx with an expired certificate, `http2` and
// `ssl_early_data on` (issue 56): the probes failed at certificate verification, so
// compare says it does not know whether the server offers h2 and 0-RTT, with the
// failure, and never that it does not (nor recommends the directive that is on).
#[test]
fn compare_says_not_known_where_its_probes_failed() {
    let _machine = crate::common::shared();
    let Some(n) = Nginx::start_servers(LOG_FORMAT, 1, |ports, d| {
        write_certs_valid(d, &["127.0.0.1"], Some((2020, 2021)));
        format!(
            "server {{ listen 127.0.0.1:{} ssl http2; ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem; \
             ssl_protocols TLSv1.2 TLSv1.3; ssl_early_data on; access_log {d}/access.log gt; \
             location / {{ return 200 \"hello\\n\"; }} }}",
            ports[0],
            d = d.display()
        )
    }) else {
        return;
    };
    let url = format!("https://127.0.0.1:{}/", n.port);
    let ca = n.dir.join("ca.pem");
    let out = run(&[
        "compare",
        &url,
        "--cacert",
        ca.to_str().unwrap(),
        "-n",
        "2",
        "-c",
        "1",
        "--rounds",
        "2",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    let said = v["comparison"]["left_out"].to_string();
    for row in ["h2", "close-0rtt"] {
        assert!(
            said.contains(row)
                && said.contains(
                    "not known whether the server offers them: the probes failed (cert_expired"
                ),
            "{row}: {said}"
        );
    }
    assert!(!said.contains("did not choose h2"), "{said}");
    assert!(!said.contains("accepted no early data"), "{said}");
    assert!(!said.contains("ssl_early_data on"), "{said}");
    // No request reached nginx's log: every handshake failed.
    assert!(access_log(&n).is_empty());
}

// compare's default set against an nginx that offers HTTP/1.1 over TLS only (no h2, no
// early data, no HTTP/3): the rows it cannot run are named with why, and the probes
// that found out are said in the progress lines; the rows it ran are nginx's requests.
#[test]
fn compare_names_the_strategies_it_left_out_and_why() {
    let _machine = crate::common::shared();
    let Some(n) = nginx_tls(
        |d| write_certs(d, &["localhost"]),
        "ssl_session_cache shared:S:1m;",
    ) else {
        return;
    };
    let url = format!("https://localhost:{}/", n.port);
    let ca = n.dir.join("ca.pem");
    let out = run(&[
        "compare",
        &url,
        "--cacert",
        ca.to_str().unwrap(),
        "-n",
        "20",
        "-c",
        "2",
        "--rounds",
        "2",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Vec<&str> = v["comparison"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    for absent in ["h2", "close-0rtt", "h3", "h3-close", "h3-0rtt"] {
        assert!(!rows.contains(&absent), "{rows:?}");
    }
    let left: Vec<String> = v["comparison"]["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["text"].as_str().unwrap().to_string())
        .collect();
    let said = left.join("\n");
    assert!(said.contains("h2: the server did not choose h2"), "{said}");
    assert!(
        said.contains("close-0rtt: the server accepted no early data"),
        "{said}"
    );
    assert!(
        said.contains("h3-close, h3-0rtt, h3: no HTTP/3 answer"),
        "{said}"
    );
    for probe in [
        "does it answer HTTP/3",
        "does it choose h2 by ALPN",
        "does it accept TLS 0-RTT",
    ] {
        assert!(err.contains(probe), "{probe}: {err}");
    }
    // The rows ran: nginx answered each of their requests (and the probes' few).
    let ok: u64 = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["requests"]["ok"].as_u64().unwrap())
        .sum();
    let logged = access_log(&n).len() as u64;
    assert!(
        logged >= ok && logged <= ok + 10,
        "nginx {logged}, report {ok}"
    );
}
