//! Mutual TLS: bench presents `--cert`/`--key` to nginx with `ssl_verify_client on`, over
//! HTTP/1.1 and HTTP/2, and its counts (requests, connections, full and resumed
//! handshakes, certificates asked for and presented) equal nginx's log; without a
//! certificate the report says the server asked for one and none was sent. The same
//! counts against Go's crypto/tls requiring one (its own log), OpenSSL's s_server, the
//! embedded server over TCP and QUIC, and through squid's CONNECT tunnel.

use crate::common::mtls::{
    agrees_with_the_embedded_server, logged, nginx_mtls, write_client_certs, SServer,
};
use crate::common::*;

/// The text's lines as one (it wraps them at the width).
fn one_line(text: &[u8]) -> String {
    String::from_utf8_lossy(text)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn bench_presents_its_certificate_and_counts_what_nginx_counts() {
    let _machine = shared();
    let Some((n, log)) = nginx_mtls("on") else {
        return;
    };
    let d = n.dir.clone();
    let url = format!("https://localhost:{}/", n.port);
    let resolve = format!("localhost:{}:127.0.0.1", n.port);
    let (ca, cert, key) = (
        d.join("ca.pem").display().to_string(),
        d.join("client.pem").display().to_string(),
        d.join("client.key").display().to_string(),
    );
    for strategy in ["keepalive", "close-resumed", "h2"] {
        let v = bench_json(&[
            &url,
            "--resolve",
            &resolve,
            "--cacert",
            &ca,
            "--cert",
            &cert,
            "--key",
            &key,
            "-n",
            "12",
            "-c",
            "2",
            "--strategy",
            strategy,
        ]);
        assert_eq!(
            schema_violations("report.schema.json", &v),
            Vec::<String>::new()
        );
        let s = &v["scenarios"][0];
        let got = logged(&log);
        let c = &s["connections"];
        let th = &c["tls_handshakes"];
        let cc = &th["client_certificate"];
        let full = got.connections.values().filter(|r| !**r).count() as u64;
        let resumed = got.connections.values().filter(|r| **r).count() as u64;
        let says = format!(
            "{strategy}: {cc} {th}; nginx {} connections",
            got.connections.len()
        );
        assert_eq!(u(&s["requests"]["ok"]), 12, "{says}");
        assert_eq!(got.requests, 12, "{says}");
        assert_eq!(got.statuses.get("200"), Some(&12), "{says}");
        assert_eq!(got.verified, 12, "every request verified: {says}");
        assert_eq!(got.subjects, ["CN=bench client"], "{says}");
        assert_eq!(u(&c["opened"]), got.connections.len() as u64, "{says}");
        assert_eq!(u(&th["full"]), full, "{says}");
        assert_eq!(u(&th["resumed"]), resumed, "{says}");
        // Asked in each full handshake, answered in each; a resumed one is asked nothing.
        assert_eq!(u(&cc["requested"]), full, "{says}");
        assert_eq!(u(&cc["presented"]), full, "{says}");
        assert_eq!(cc["subject"], "CN=bench client", "{says}");
        assert_eq!(cc["key_type"], "ECDSA P-256", "{says}");
        assert_eq!(cc["acceptable_cas"][0], "CN=handshake client CA", "{says}");
        if strategy == "close-resumed" {
            assert!(resumed >= 10, "the sessions resumed: {says}");
        }
    }
    // The text says it in a line.
    let out = run(&[
        "bench",
        &url,
        "--resolve",
        &resolve,
        "--cacert",
        &ca,
        "--cert",
        &cert,
        "--key",
        &key,
        "-n",
        "4",
        "-c",
        "1",
        "--no-progress",
    ]);
    let text = one_line(&out.stdout);
    assert!(
        text.contains("Client certificate asked in 1 full handshake, presented in 1 (CN=bench client, ECDSA P-256); CAs it accepts: CN=handshake client CA"),
        "{text}"
    );
    let _ = logged(&log);
}

#[test]
fn without_a_certificate_the_report_says_the_server_asked_for_one() {
    let _machine = shared();
    let Some((n, log)) = nginx_mtls("on") else {
        return;
    };
    let url = format!("https://localhost:{}/", n.port);
    let resolve = format!("localhost:{}:127.0.0.1", n.port);
    let ca = n.dir.join("ca.pem").display().to_string();
    let (code, v, _) = crate::common::first_hour::bench(&[
        &url,
        "--resolve",
        &resolve,
        "--cacert",
        &ca,
        "-n",
        "5",
        "-c",
        "1",
    ]);
    let got = logged(&log);
    // nginx answers each request 400 ("No required SSL certificate was sent").
    assert_eq!(
        got.statuses.get("400"),
        Some(&5),
        "{}",
        v["scenarios"][0]["requests"]
    );
    assert_eq!(code, 1, "no request succeeded");
    let s = &v["scenarios"][0];
    let th = &s["connections"]["tls_handshakes"];
    let cc = &th["client_certificate"];
    assert_eq!(u(&cc["requested"]), u(&th["full"]), "{th}");
    assert!(u(&cc["requested"]) >= 1, "{th}");
    assert_eq!(u(&cc["presented"]), 0, "{th}");
    assert!(cc.get("subject").is_none(), "{cc}");
    // Said first, naming the flags, not the method or the headers.
    let headline = s["headline"]["text"].as_str().unwrap();
    assert!(
        headline.contains("the server asked for a client certificate in the TLS handshake and none was sent, and it answered after the handshake: give one with --cert FILE --key FILE (it names the CAs it accepts: CN=handshake client CA)"),
        "{headline}"
    );
    assert!(!headline.contains("-H headers"), "{headline}");
    let out = run(&[
        "bench",
        &url,
        "--resolve",
        &resolve,
        "--cacert",
        &ca,
        "-n",
        "2",
        "-c",
        "1",
        "--no-progress",
    ]);
    let text = one_line(&out.stdout);
    assert!(
        text.contains("the server asked in 1 handshake, and none was sent (give one with --cert FILE --key FILE)"),
        "{text}"
    );
    assert!(
        text.starts_with("Most responses were errors: 2 of 2 were 400 (Bad Request), 2 were 4xx or 5xx in all, none 2xx or 3xx: the server asked for a client certificate"),
        "{text}"
    );
    let _ = logged(&log);
}

#[test]
fn a_certificate_that_cannot_be_used_is_a_usage_error_naming_its_file() {
    let _machine = shared();
    let dir = std::env::temp_dir().join(format!("handshake-mtls-usage-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write_client_certs(&dir, "c");
    let cert = dir.join("client.pem").display().to_string();
    let other = dir.join("client_ca.pem").display().to_string();
    let missing = dir.join("missing.pem").display().to_string();
    for (args, says) in [
        (vec!["--cert", missing.as_str()], "cannot read it"),
        (
            vec!["--cert", cert.as_str()],
            "no private key in it: give the key with --key",
        ),
        (
            vec!["--cert", cert.as_str(), "--key", other.as_str()],
            "no private key in it",
        ),
    ] {
        let mut all = vec!["bench", "https://127.0.0.1:9/", "-n", "1"];
        all.extend(args.iter());
        let out = run(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // --key without --cert is refused by the parser.
    let out = run(&["bench", "https://127.0.0.1:9/", "--key", &cert]);
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn openssl_s_server_takes_an_rsa_certificate_and_its_alert_names_the_flags() {
    let _machine = shared();
    let s = SServer::start();
    let url = format!("https://127.0.0.1:{}/", s.port);
    let ca = s.dir.path("ca.pem");
    let (cert, key) = (s.dir.path("cli.pem"), s.dir.path("cli.key"));
    // -www answers each request and closes: every request a connection, the later ones
    // resumed (TLS 1.3 tickets carry the authentication: not asked again).
    let v = bench_json(&[
        &url, "--cacert", &ca, "--cert", &cert, "--key", &key, "-n", "4", "-c", "1",
    ]);
    let s0 = &v["scenarios"][0];
    let c = &s0["connections"];
    let th = &c["tls_handshakes"];
    let cc = &th["client_certificate"];
    assert_eq!(u(&s0["requests"]["ok"]), 4, "{s0}");
    assert_eq!(u(&th["full"]) + u(&th["resumed"]), u(&c["opened"]), "{th}");
    assert!(u(&th["resumed"]) >= 1, "{th}");
    assert_eq!(u(&cc["requested"]), u(&th["full"]), "{th}");
    assert_eq!(u(&cc["presented"]), u(&th["full"]), "{th}");
    assert_eq!(cc["key_type"], "RSA 2048", "{cc}");
    assert_eq!(cc["subject"], "CN=rsa client", "{cc}");
    assert_eq!(cc["acceptable_cas"][0], "CN=s_server CA", "{cc}");
    // Without one: the handshake's end is an alert, and the run's failure names the flags.
    let out = run(&[
        "bench",
        &url,
        "--cacert",
        &ca,
        "-n",
        "2",
        "-c",
        "1",
        "--json",
        "--no-progress",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("received fatal alert: CertificateRequired. Hint: the server at 127.0.0.1:")
            && err.contains("requires a client certificate and ended the connection without one (a certificate_required alert): give one with --cert FILE --key FILE"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let th = &v["scenarios"][0]["connections"]["tls_handshakes"];
    assert_eq!(u(&th["client_certificate"]["presented"]), 0, "{th}");
    assert_eq!(
        u(&th["client_certificate"]["requested"]),
        u(&th["full"]),
        "{th}"
    );
}

/// Go's crypto/tls requiring a client certificate (tests/tls_groups_server.go
/// `-client-ca`, `RequireAndVerifyClientCert`): its own counts of connections, resumed
/// handshakes, certificates presented (by subject) and requests equal bench's; without a
/// certificate each attempt is one of Go's handshake errors, and bench's failure names
/// the flags.
#[test]
fn go_crypto_tls_requiring_a_certificate_counts_what_bench_counts() {
    let _machine = shared();
    let d = crate::common::Dir::new("mtls-go");
    write_client_certs(&d.0, "go client");
    let srv = crate::tls_groups::GoServer::start("mtls", &["-client-ca", &d.path("client_ca.pem")]);
    let url = srv.url();
    let (cert, key) = (d.path("client.pem"), d.path("client.key"));
    let diff = |a: &serde_json::Value, b: &serde_json::Value, k: &str| u(&b[k]) - u(&a[k]);
    for strategy in ["keepalive", "close", "close-resumed"] {
        let before = srv.counts();
        let v = bench_json(&[
            &url,
            "--cacert",
            &srv.ca,
            "--cert",
            &cert,
            "--key",
            &key,
            "-n",
            "12",
            "-c",
            "2",
            "--strategy",
            strategy,
        ]);
        let after = srv.counts();
        let s = scenario(&v);
        let th = &s["connections"]["tls_handshakes"];
        let cc = &th["client_certificate"];
        let says = format!("{strategy}: {th}; Go {after}");
        assert_eq!(u(&s["requests"]["ok"]), 12, "{says}");
        assert_eq!(diff(&before, &after, "requests"), 12, "{says}");
        assert_eq!(
            u(&s["connections"]["opened"]),
            diff(&before, &after, "connections"),
            "{says}"
        );
        assert_eq!(
            u(&th["resumed"]),
            diff(&before, &after, "resumed"),
            "{says}"
        );
        let presented = diff(&before, &after, "client_certificates");
        assert_eq!(u(&th["full"]), presented, "{says}");
        assert_eq!(u(&cc["requested"]), presented, "{says}");
        assert_eq!(u(&cc["presented"]), presented, "{says}");
        let subjects = u(&after["client_subjects"]["CN=go client"])
            - before["client_subjects"]["CN=go client"]
                .as_u64()
                .unwrap_or(0);
        assert_eq!(subjects, presented, "{says}");
        assert_eq!(diff(&before, &after, "handshake_errors"), 0, "{says}");
        if strategy == "close-resumed" {
            assert!(u(&th["resumed"]) >= 10, "{says}");
        }
    }
    // Without one: Go refuses each handshake (certificate_required), and says so in its
    // log once per attempt.
    let before = srv.counts();
    let out = run(&[
        "bench",
        &url,
        "--cacert",
        &srv.ca,
        "-n",
        "3",
        "-c",
        "1",
        "--no-progress",
    ]);
    let after = srv.counts();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(diff(&before, &after, "handshake_errors"), 3, "{after}");
    assert_eq!(diff(&before, &after, "requests"), 0, "{after}");
    assert!(
        err.contains("3 of 3 attempts failed with tls: received fatal alert: CertificateRequired")
            && err.contains("give one with --cert FILE --key FILE"),
        "{err}"
    );
}

/// Against the embedded server (no URL) with `--cert`: it asks for a certificate (any,
/// optional), over TCP and QUIC; the certificates bench presented equal the full
/// handshakes on both sides and the server's own count of certificates presented.
#[test]
fn the_embedded_server_asks_over_tcp_and_quic_and_counts_what_bench_presented() {
    let _machine = shared();
    let d = crate::common::Dir::new("mtls-embedded");
    write_client_certs(&d.0, "embedded client");
    let (cert, key) = (d.path("client.pem"), d.path("client.key"));
    for strategy in ["close-resumed", "h2", "h3-close", "h3-resumed"] {
        let v = bench_json(&[
            "--cert",
            &cert,
            "--key",
            &key,
            "--strategy",
            strategy,
            "-n",
            "12",
            "-c",
            "2",
        ]);
        agrees_with_the_embedded_server(&v, 12, strategy);
        let cc = &scenario(&v)["connections"]["tls_handshakes"]["client_certificate"];
        assert_eq!(cc["subject"], "CN=embedded client", "{strategy}: {cc}");
    }
}

/// Through squid's `CONNECT` tunnel: the certificate goes to the origin inside the
/// tunnel, and bench's counts are nginx's (requests verified, connections, resumed) and
/// squid's (a tunnel per connection).
#[test]
fn through_a_proxy_s_tunnel_the_certificate_reaches_the_origin() {
    let _machine = shared();
    let Some((n, log)) = nginx_mtls("on") else {
        return;
    };
    let sq = crate::common::squid();
    let d = n.dir.clone();
    let url = format!("https://localhost:{}/", n.port);
    let proxy = format!("http://127.0.0.1:{}", sq.port);
    let v = bench_json(&[
        &url,
        "-x",
        &proxy,
        "--cacert",
        &d.join("ca.pem").display().to_string(),
        "--cert",
        &d.join("client.pem").display().to_string(),
        "--key",
        &d.join("client.key").display().to_string(),
        "--strategy",
        "close-resumed",
        "-n",
        "6",
        "-c",
        "1",
    ]);
    let got = logged(&log);
    let s = scenario(&v);
    let th = &s["connections"]["tls_handshakes"];
    let cc = &th["client_certificate"];
    assert_eq!(u(&s["requests"]["ok"]), 6, "{th}");
    assert_eq!(got.requests, 6);
    assert_eq!(got.verified, 6, "every request verified by nginx");
    assert_eq!(u(&s["connections"]["opened"]), got.connections.len() as u64);
    let resumed = got.connections.values().filter(|r| **r).count() as u64;
    assert_eq!(u(&th["resumed"]), resumed, "{th}");
    assert_eq!(u(&cc["presented"]), u(&th["full"]), "{cc}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let tunnels = std::fs::read_to_string(&sq.log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" CONNECT "))
        .count() as u64;
    assert_eq!(tunnels, got.connections.len() as u64, "squid's tunnels");
}
