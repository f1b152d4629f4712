//! Mutual TLS in doctor's policy: a server that asks for a client certificate is said to,
//! with how it answers a connection that sends none (refused in the handshake, an HTTP
//! error after it, or served: optional), checked against nginx's log
//! (`$ssl_client_verify`, the status) and OpenSSL's s_server; without `--cert`, the
//! problem names the flags.

use crate::common::mtls::{logged, nginx_mtls, target_args, with_target, SServer};
use crate::common::*;
use serde_json::Value;

/// doctor's exit code, its JSON report and its stderr.
fn doctor(args: &[&str]) -> (Option<i32>, Value, String) {
    let mut all = vec![
        "doctor",
        "--json",
        "--max-idle",
        "1s",
        "--max-requests",
        "5",
    ];
    all.extend_from_slice(args);
    let out = run(&all);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let v = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.code(), v, err)
}

/// The finding `code`'s text.
fn finding<'a>(v: &'a Value, code: &str) -> &'a str {
    v["findings"]
        .as_array()
        .and_then(|f| f.iter().find(|f| f["code"] == code))
        .and_then(|f| f["text"].as_str())
        .unwrap_or_default()
}

/// The policy's headline.
fn policy(v: &Value) -> &str {
    v["policy"]["text"].as_str().unwrap_or_default()
}

#[test]
fn doctor_says_nginx_requires_a_client_certificate_and_answers_400_without_one() {
    let _machine = shared();
    let Some((n, log)) = nginx_mtls("on") else {
        return;
    };
    let (with, without) = (target_args(&n, true), target_args(&n, false));
    let (code, v, err) = doctor(&with_target(&with, &[]));
    let got = logged(&log);
    let cc = &v["client_certificate"];
    assert!(code.is_some(), "{err}");
    // The probes presented it in every handshake the server asked in; one connection went
    // without it, and nginx logged it as unverified, answered 400.
    assert!(u(&cc["requested"]) >= 1, "{cc}");
    assert_eq!(u(&cc["presented"]), u(&cc["requested"]), "{cc}");
    assert_eq!(cc["acceptable_cas"][0], "CN=handshake client CA", "{cc}");
    assert_eq!(cc["without_certificate"]["answer"], "error_status", "{cc}");
    assert_eq!(cc["without_certificate"]["status"], 400, "{cc}");
    assert_eq!(got.statuses.get("400"), Some(&1), "{:?}", got.statuses);
    assert_eq!(got.requests - got.verified, 1, "one request went without");
    assert!(
        policy(&v).contains("; client certificate required (400 without one)"),
        "{}",
        policy(&v)
    );
    assert_eq!(v["http11"]["status"], 200, "{}", v["http11"]);
    let said = finding(&v, "client_certificate");
    assert!(
        said.contains(&format!("Client certificate: the server asked for one in the probes' full handshakes ({}) and named the CAs it accepts: CN=handshake client CA; --cert was presented in each (CN=bench client, ECDSA P-256). On a connection without one, the handshake completed and the request was answered 400: the server requires one and says so after the handshake.", u(&cc["requested"]))),
        "{said}"
    );

    // Without --cert: every probe is answered 400, and the problem names the flags.
    let (code, v, err) = doctor(&with_target(&without, &[]));
    let got = logged(&log);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(v["http11"]["status"], 400, "{}", v["http11"]);
    let cc = &v["client_certificate"];
    assert_eq!(u(&cc["presented"]), 0, "{cc}");
    assert!(u(&cc["requested"]) >= 1, "{cc}");
    assert_eq!(got.verified, 0, "nothing presented: {:?}", got.statuses);
    assert_eq!(got.statuses.get("400"), Some(&got.requests));
    let problem = v["problems"][0]["text"].as_str().unwrap();
    assert!(
        problem.contains("The server answered the probes' request with 400")
            && problem.contains("The server asked for a client certificate in the TLS handshake and none was sent, and it answered after the handshake: give one with --cert FILE --key FILE (it names the CAs it accepts: CN=handshake client CA), then run doctor again."),
        "{problem}"
    );
    assert!(!problem.contains("-H headers"), "{problem}");
}

#[test]
fn doctor_says_a_client_certificate_nginx_asks_for_optionally_is_optional() {
    let _machine = shared();
    let Some((n, log)) = nginx_mtls("optional") else {
        return;
    };
    let without = target_args(&n, false);
    let (code, v, err) = doctor(&with_target(&without, &[]));
    let got = logged(&log);
    assert!(code.is_some(), "{err}");
    let cc = &v["client_certificate"];
    assert_eq!(cc["without_certificate"]["answer"], "served", "{cc}");
    assert_eq!(cc["without_certificate"]["status"], 200, "{cc}");
    assert_eq!(u(&cc["presented"]), 0, "{cc}");
    // nginx served every request, none with a certificate.
    assert_eq!(
        got.statuses.get("200"),
        Some(&got.requests),
        "{:?}",
        got.statuses
    );
    assert_eq!(got.verified, 0);
    let said = finding(&v, "client_certificate");
    assert!(
        said.contains("; none was presented (no --cert). On a connection without one, the request was served (200): the certificate is optional."),
        "{said}"
    );
    assert!(
        policy(&v).contains("; client certificate asked for, optional (served without one)"),
        "{}",
        policy(&v)
    );
}

#[test]
fn doctor_says_s_server_refuses_in_the_handshake_and_without_a_certificate_names_the_flags() {
    let _machine = shared();
    let s = SServer::start();
    let url = format!("https://127.0.0.1:{}/", s.port);
    let ca = s.dir.path("ca.pem");
    let (cert, key) = (s.dir.path("cli.pem"), s.dir.path("cli.key"));
    let (code, v, err) = doctor(&[&url, "--cacert", &ca, "--cert", &cert, "--key", &key]);
    assert!(code.is_some(), "{err}");
    let cc = &v["client_certificate"];
    assert_eq!(cc["without_certificate"]["answer"], "refused", "{cc}");
    assert_eq!(u(&cc["presented"]), u(&cc["requested"]), "{cc}");
    assert_eq!(cc["acceptable_cas"][0], "CN=s_server CA", "{cc}");
    assert!(
        policy(&v).contains("client certificate required (refused in the handshake without one)"),
        "{}",
        policy(&v)
    );
    let said = finding(&v, "client_certificate");
    assert!(
        said.contains("--cert was presented in each (CN=rsa client, RSA 2048). On a connection without one, the connection failed (")
            && said.ends_with("): the server requires one and refuses in the handshake."),
        "{said}"
    );
    // Without --cert the first request fails: the failure names the flags.
    let (code, _, err) = doctor(&[&url, "--cacert", &ca]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("Hint: the server asked for a client certificate in the handshake and none was sent, and a server that requires one ends the connection: give one with --cert FILE --key FILE"),
        "{err}"
    );
}
