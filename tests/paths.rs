//! The paths real traffic takes between a client and the server it measures (issue 45):
//! `--connect-to` (a named virtual host measured on another address, with its own
//! name in Host and SNI), checked against nginx's own log.

mod common;

use std::collections::BTreeSet;

use common::*;

/// nginx with TLS for `a.test` (its CA in its directory), logging each request's
/// connection, TLS name (SNI) and Host header.
fn nginx_a_test() -> Nginx {
    Nginx::start_servers(
        "log_format names '$connection $ssl_server_name $host';",
        1,
        |ports, d| {
            write_certs(d, &["a.test"]);
            let d = d.display();
            format!(
                "server {{ listen 127.0.0.1:{} ssl; ssl_certificate {d}/cert.pem; \
                 ssl_certificate_key {d}/key.pem; access_log {d}/access.log names; \
                 location / {{ return 200 \"a\\n\"; }} }}",
                ports[0]
            )
        },
    )
    .expect("nginx")
}

/// nginx's log: (requests, connections), each line's SNI and Host checked to be `a.test`.
fn log_of_a_test(n: &Nginx) -> (u64, u64) {
    let text = std::fs::read_to_string(n.dir.join("access.log")).unwrap_or_default();
    let mut conns = BTreeSet::new();
    let mut requests = 0;
    for l in text.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f[1..], ["a.test", "a.test"], "SNI and Host: {l}");
        conns.insert(f[0].to_string());
        requests += 1;
    }
    (requests, conns.len() as u64)
}

/// `--connect-to a.test:8443:127.0.0.1:PORT` (and curl's empty parts: any host, the URL's
/// port kept or replaced): bench's requests go to nginx's port with `a.test` in SNI
/// (the certificate verified against it) and Host; nginx's count of requests and
/// connections equals the report's. trace and doctor go the same way.
#[test]
fn connect_to_measures_a_named_host_on_another_address() {
    let n = nginx_a_test();
    let ca = n.dir.join("ca.pem");
    let ca = ca.to_str().unwrap();
    let port = n.port;
    for (i, rule) in [
        format!("a.test:8443:127.0.0.1:{port}"),
        format!("::127.0.0.1:{port}"),
        format!("a.test::localhost:{port}"),
    ]
    .iter()
    .enumerate()
    {
        let before = log_of_a_test(&n);
        let r = bench_json(&[
            "https://a.test:8443/",
            "--connect-to",
            rule,
            "--cacert",
            ca,
            "-n",
            "12",
            "-c",
            "3",
        ]);
        let s = scenario(&r);
        assert_eq!(u(&s["requests"]["ok"]), 12, "{rule}: {s}");
        let after = log_of_a_test(&n);
        assert_eq!(after.0 - before.0, 12, "{rule}: nginx's requests");
        assert_eq!(
            after.1 - before.1,
            u(&s["connections"]["opened"]),
            "{rule}: nginx's connections (round {i})"
        );
    }
    // trace: one request, through the same rule.
    let before = log_of_a_test(&n);
    let out = run(&[
        "trace",
        "https://a.test:8443/",
        "--connect-to",
        &format!("a.test:8443:127.0.0.1:{port}"),
        "--cacert",
        ca,
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(log_of_a_test(&n).0 - before.0, 1, "trace's request");
    // doctor: every probe through the rule (each request's SNI and Host are a.test).
    let before = log_of_a_test(&n);
    let rule = format!("a.test:8443:127.0.0.1:{port}");
    let d = quick_doctor_json(&[
        "https://a.test:8443/",
        "--connect-to",
        &rule,
        "--cacert",
        ca,
    ]);
    let after = log_of_a_test(&n);
    assert!(after.0 > before.0 + 1, "doctor's requests: {d}");
    // A rule that does not match leaves the URL alone: a.test does not resolve.
    let out = run(&[
        "bench",
        "https://a.test:8443/",
        "--connect-to",
        &format!("b.test:8443:127.0.0.1:{port}"),
        "-n",
        "1",
        "--no-progress",
    ]);
    assert_eq!(out.status.code(), Some(1));
}

/// A malformed `--connect-to` is a usage error naming the flag and what is wrong.
#[test]
fn a_malformed_connect_to_is_a_usage_error() {
    for (rule, says) in [
        ("a.test:443:127.0.0.1", "expected HOST1:PORT1:HOST2:PORT2"),
        (
            "a.test:443:127.0.0.1:1:2",
            "expected HOST1:PORT1:HOST2:PORT2",
        ),
        ("a.test:x:127.0.0.1:1", "\"x\" is not a port"),
        ("a.test:443:[::1:1", "without its closing ]"),
    ] {
        let out = run(&["bench", "http://a.test/", "--connect-to", rule, "-n", "1"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{rule}: {err}");
        assert!(
            err.contains("--connect-to") && err.contains(says),
            "{rule}: {err}"
        );
    }
}
