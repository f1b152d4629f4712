//! A new user's first hour with `watch`: the usual mistakes and situations, each set up in
//! a real nginx (its own access log the ground truth: one line per request with its
//! connection serial, the requests on that connection, its status, whether TLS resumed and
//! whether the request came in early data), run through the commands a user would try,
//! asserting the exit status, the headline's claim and each finding's evidence against
//! nginx's count. Every sentence printed must be true of what nginx saw.

use crate::common;
use crate::common::first_hour::{access_log, connections, evidence, nginx_tls, LOG_FORMAT};
use crate::common::{bin, write_certs, Nginx};
use serde_json::Value;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;

// Row 9: watch on a backend while a client goes through an nginx proxy without upstream
// keep-alive. nginx sends its upstream requests as HTTP/1.0 with `Connection: close`:
// watch's headline names the client's requests (the proxy's) as the cause, not "the
// server closed them"; the backend's own log counts the requests and connections.
#[test]
fn watch_names_the_client_s_request_as_the_cause_of_no_reuse() {
    let _machine = crate::common::shared();
    let Some(n) = Nginx::start_servers(LOG_FORMAT, 2, |ports, d| {
        format!(
            "server {{ listen 127.0.0.1:{}; access_log {d}/access.log gt; location / {{ return 200 \"hi\\n\"; }} }}\n\
             server {{ listen 127.0.0.1:{}; location / {{ proxy_pass http://127.0.0.1:{}; }} }}",
            ports[0],
            ports[1],
            ports[0],
            d = d.display()
        )
    }) else {
        return;
    };
    let backend = n.ports[0].to_string();
    let front = format!("http://127.0.0.1:{}/", n.ports[1]);
    let w = Command::new(bin())
        .args(["watch", "--json", "--port", &backend, "-d", "3s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    // Five requests on one client connection to the proxy (curl reuses it).
    let st = Command::new("curl")
        .args([
            "-sf",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
        ])
        .args([&front, &front, &front, &front, &front])
        .status()
        .unwrap();
    assert!(st.success());
    let out = w.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let log = access_log(&n);
    assert_eq!(log.len(), 5);
    let conns = connections(&log).len() as u64;
    assert_eq!(conns, 5, "nginx closes each upstream connection");
    let t = &v["total"];
    assert_eq!(t["requests"], 5, "{t}");
    assert_eq!(t["connections"], conns);
    assert_eq!(
        t["client_asked_close"]["http10_without_keep_alive"], 5,
        "{t}"
    );
    let headline = v["headline"]["text"].as_str().unwrap();
    assert_eq!(v["headline"]["code"], "not_reused_client_http10");
    // The evidence: the connections whose requests asked to close, of all, as nginx
    // logged them.
    let e = evidence(
        &v["headline"],
        "total.client_asked_close.http10_without_keep_alive",
    );
    assert_eq!(
        (e["value"].as_f64(), e["of"].as_u64()),
        (Some(5.0), Some(conns))
    );
    assert!(
        headline.contains("the client sent HTTP/1.0 requests without `Connection: keep-alive`"),
        "{headline}"
    );
    assert!(
        headline.contains("`Connection: keep-alive`, on 5 of 5 connections"),
        "{headline}"
    );
    assert!(!headline.contains("the server closed them"), "{headline}");
}

// Row 3 through watch: clients send plain HTTP to nginx's TLS port; nginx answers each
// with its 400 and closes. watch's headline says most answers were errors (nginx's own
// count of 400s), not "the server closed them".
#[test]
fn watch_says_when_most_answers_were_errors() {
    let _machine = crate::common::shared();
    let Some(n) = nginx_tls(|d| write_certs(d, &["localhost"]), "") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/", n.port);
    let w = Command::new(bin())
        .args(["watch", "--json", "--port", &n.port.to_string(), "-d", "3s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let st = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
        ])
        .args([&url, &url, &url])
        .status()
        .unwrap();
    assert!(st.success());
    let out = w.wait_with_output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(common::schema_violations("watch.schema.json", &v).is_empty());
    let log = access_log(&n);
    let bad = log.iter().filter(|l| l.status == 400).count() as u64;
    assert_eq!((bad, log.len() as u64), (3, 3), "{log:?}");
    let t = &v["total"];
    assert_eq!(t["status_codes"]["400"], bad, "{t}");
    assert_eq!(t["connections"], 3, "{t}");
    let h = &v["headline"];
    assert_eq!(h["code"], "mostly_error_status", "{h}");
    let e = evidence(h, "total.status_codes.400");
    assert_eq!(
        (e["value"].as_f64(), e["of"].as_u64()),
        (Some(3.0), Some(3))
    );
    let text = h["text"].as_str().unwrap();
    assert!(
        text.contains("most answers were errors: 3 of 3 were 400 (Bad Request)"),
        "{text}"
    );
    assert!(!text.contains("the server closed them"), "{text}");
    assert_eq!(v["verdict"][0]["code"], "mostly_error_status", "{v}");
}
