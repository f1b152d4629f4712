//! `handshake trace` and `handshake doctor` against servers with known policies: the
//! embedded server set up with each policy, and real nginx with its own config.

mod common;

use std::time::Duration;

use common::*;
use serde_json::Value;

fn doctor(args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["doctor", "--json"];
    all.extend_from_slice(args);
    let out = run(&all);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("doctor {args:?}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), v)
}

/// The measured idle range contains `secs` and is at most 10 % or 0.5 s wide.
fn assert_idle(v: &Value, secs: f64) {
    let i = &v["idle_timeout"];
    let lo = i["at_least_s"].as_f64().unwrap();
    let hi = i["at_most_s"].as_f64().expect("a close was seen");
    assert!(
        lo <= secs + 0.05 && secs <= hi + 0.05,
        "idle range [{lo}, {hi}] misses {secs}"
    );
    assert!(
        hi - lo <= 0.5f64.max(0.1 * hi) + 1e-9,
        "idle range [{lo}, {hi}] too wide"
    );
}

#[test]
fn doctor_finds_keepalive_off() {
    let srv = start(ServerConfig {
        keepalive: false,
        ..ServerConfig::default()
    });
    let (code, v) = doctor(&[&srv.http_url().unwrap()]);
    assert_eq!(code, Some(1), "a problem was found");
    assert_eq!(v["http11"]["persistent"], false);
    assert_eq!(v["http11"]["connection_header"], "close");
    assert!(
        problems(&v)[0].contains("keep-alive is off"),
        "{:?}",
        problems(&v)
    );
    assert!(v["idle_timeout"].is_null() && v["max_requests"].is_null());
    srv.stop();
}

#[test]
fn doctor_finds_idle_timeout_and_max_requests() {
    let srv = start(ServerConfig {
        idle_timeout: Duration::from_secs(2),
        max_requests_per_connection: Some(50),
        ..ServerConfig::default()
    });
    let (code, v) = doctor(&[&srv.http_url().unwrap(), "--max-idle", "10s"]);
    assert_eq!(code, Some(1));
    assert_eq!(v["max_requests"]["limit"], 50);
    assert_idle(&v, 2.0);
    assert_eq!(
        v["idle_timeout"]["claimed_s"], 2.0,
        "the Keep-Alive header of the HTTP/1.0 answer"
    );
    let p = problems(&v);
    assert!(p.iter().any(|x| x.contains("after 50 requests")), "{p:?}");
    assert!(
        p.iter()
            .any(|x| x.contains("closes idle connections after") && x.contains("keep it under")),
        "{p:?}"
    );
    srv.stop();
}

#[test]
fn doctor_on_an_http10_server() {
    // Honours Connection: keep-alive on HTTP/1.0 ...
    let srv = start(ServerConfig {
        http10: true,
        ..ServerConfig::default()
    });
    let (_, v) = doctor(&[&srv.http_url().unwrap(), "--max-idle", "1s"]);
    assert_eq!(v["http10_keep_alive"]["persistent"], true);
    assert_eq!(v["http10_keep_alive"]["reused"], true);
    assert_eq!(v["http10"]["persistent"], false);
    assert_eq!(v["http11"]["http_version"], "HTTP/1.0");
    srv.stop();
    // ... or ignores it.
    let srv = start(ServerConfig {
        http10: true,
        keepalive: false,
        ..ServerConfig::default()
    });
    let (code, v) = doctor(&[&srv.http_url().unwrap()]);
    assert_eq!(code, Some(1));
    assert_eq!(v["http10_keep_alive"]["persistent"], false);
    assert!(problems(&v)
        .iter()
        .any(|p| p.contains("ignores `Connection: keep-alive` on HTTP/1.0")));
    srv.stop();
}

#[test]
fn doctor_on_a_healthy_tls_server_finds_no_problem() {
    let srv = start(ServerConfig::default());
    let dir = std::env::temp_dir().join(format!("handshake-doctor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &srv.ca_pem).unwrap();
    let (code, v) = doctor(&[
        &srv.https_url().unwrap(),
        "--cacert",
        ca.to_str().unwrap(),
        "--max-idle",
        "2s",
    ]);
    assert!(problems(&v).is_empty(), "{:?}", problems(&v));
    assert_eq!(code, Some(0));
    assert_eq!(v["tls"]["version"], "TLSv1.3");
    assert_eq!(v["tls"]["resumption"], true);
    // The embedded server offers HTTP/2 by ALPN.
    assert_eq!(v["tls"]["alpn_selected"], "h2");
    assert_eq!(v["tls"]["offers_h2"], true);
    assert!(v["tls"]["resumed_handshake_ms"].as_f64().unwrap() > 0.0);
    assert!(
        v["idle_timeout"]["at_most_s"].is_null(),
        "open for the whole --max-idle"
    );
    assert!(v["idle_timeout"]["at_least_s"].as_f64().unwrap() >= 1.9);
    assert!(v["max_requests"]["limit"].is_null());
    assert_eq!(v["max_requests"]["probed"], 1000);
    let _ = std::fs::remove_dir_all(&dir);
    srv.stop();
}

#[test]
fn doctor_on_nginx_with_a_3s_timeout_and_100_requests() {
    let Some(ng) = Nginx::start(
        "keepalive_timeout 3s; keepalive_requests 100;",
        "return 200 \"ok\\n\";",
    ) else {
        return;
    };
    let (code, v) = doctor(&[&ng.url(), "--max-idle", "10s"]);
    assert_eq!(code, Some(1));
    assert_eq!(v["max_requests"]["limit"], 100);
    assert_idle(&v, 3.0);
    assert_eq!(v["http10_keep_alive"]["reused"], true);
}

#[test]
fn doctor_on_nginx_with_keepalive_off() {
    let Some(ng) = Nginx::start("keepalive_timeout 0;", "return 200 \"ok\\n\";") else {
        return;
    };
    let (code, v) = doctor(&[&ng.url()]);
    assert_eq!(code, Some(1));
    assert_eq!(v["http11"]["persistent"], false);
    assert!(problems(&v)[0].contains("keep-alive is off"));
}

fn trace(args: &[&str]) -> Value {
    let mut all = vec!["trace", "--json"];
    all.extend_from_slice(args);
    let out = run(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn trace_shows_setup_only_on_new_connections_and_phases_add_up() {
    let srv = start(ServerConfig::default());
    let dir = std::env::temp_dir().join(format!("handshake-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &srv.ca_pem).unwrap();
    let port = srv.https_addr.unwrap().port();
    let url = format!("https://localhost:{port}/");
    let v = trace(&[&url, "--count", "3", "--cacert", ca.to_str().unwrap()]);
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 3);
    assert_eq!(
        srv.snapshot().connections_accepted,
        1,
        "one connection for three requests"
    );
    let first = &steps[0];
    assert_eq!(first["reused"], false);
    assert!(first["dns_ms"].as_f64().is_some(), "localhost is resolved");
    assert!(first["connect_ms"].as_f64().unwrap() > 0.0);
    assert!(first["tls_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(first["tls"]["version"], "TLSv1.3");
    assert_eq!(first["tls"]["alpn"], "http/1.1");
    for s in &steps[1..] {
        assert_eq!(s["reused"], true);
        assert!(s["dns_ms"].is_null() && s["connect_ms"].is_null() && s["tls_ms"].is_null());
    }
    for s in steps {
        let sum: f64 = [
            "dns_ms",
            "connect_ms",
            "tls_ms",
            "send_ms",
            "wait_ms",
            "receive_ms",
        ]
        .iter()
        .filter_map(|k| s[*k].as_f64())
        .sum();
        let total = s["total_ms"].as_f64().unwrap();
        // Between phases only a few clock reads, unless the loaded machine preempts the
        // client there: 0.1 ms or 5 %, far below any phase left out (a TLS handshake
        // here is ~0.5 ms of a ~3 ms first step).
        assert!(
            sum <= total + 1e-6 && total - sum < (0.05 * total).max(0.1),
            "phases {sum} ms vs total {total} ms"
        );
    }
    assert!(steps[2]["after_response"]
        .as_str()
        .unwrap()
        .starts_with("open"));
    // Without keep-alive every request is new and the server's close is seen.
    let srv2 = start(ServerConfig {
        keepalive: false,
        ..ServerConfig::default()
    });
    let v = trace(&[&srv2.http_url().unwrap(), "--count", "2"]);
    for s in v["steps"].as_array().unwrap() {
        assert_eq!(s["reused"], false);
        assert_eq!(s["connection_header"], "close");
        assert!(
            s["after_response"]
                .as_str()
                .unwrap()
                .starts_with("closed by the server"),
            "{s}"
        );
    }
    assert_eq!(srv2.snapshot().connections_accepted, 2);
    let _ = std::fs::remove_dir_all(&dir);
    srv.stop();
    srv2.stop();
}

#[test]
fn trace_text_draws_a_waterfall() {
    let srv = start(ServerConfig::default());
    let out = run(&["trace", &srv.http_url().unwrap(), "--count", "2"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("Request 1 of 2, new connection")
            && text.contains("Request 2 of 2, reused connection"),
        "{text}"
    );
    assert!(text.contains("connect") && text.contains("|█"), "{text}");
    let out = run(&["trace", "http://127.0.0.1:1/"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a failed request is a failed check"
    );
    srv.stop();
}
