//! compare with `--cert`: every TLS row presents the client certificate where the server
//! asks; a `close@no-cert` row (added where the server serves a request without one)
//! sets what the certificate costs per request against `close`; resumed handshakes send
//! none. Checked against nginx's log (`$ssl_client_verify` per request: SUCCESS with a
//! certificate or a session that carries one, NONE without) and the embedded server.

use crate::common::mtls::{logged, nginx_mtls, target_args, with_target};
use crate::common::*;
use serde_json::Value;

/// The row named `name` among the report's scenarios.
fn row<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no row {name}: {}", v["comparison"]))
}

/// The comparison's finding `code` (explanations and headline), its text.
fn said(v: &Value, code: &str) -> String {
    let c = &v["comparison"];
    ["explanations", "headline", "findings"]
        .iter()
        .flat_map(|k| c[k].as_array().cloned().unwrap_or_default())
        .find(|f| f["code"] == code)
        .and_then(|f| f["text"].as_str().map(str::to_string))
        .unwrap_or_default()
}

#[test]
fn against_nginx_asking_optionally_no_cert_is_a_row_and_the_counts_are_nginx_s() {
    let _machine = shared();
    let Some((n, log)) = nginx_mtls("optional") else {
        return;
    };
    let target = target_args(&n, true);
    let _ = logged(&log);
    let v = compare_json(&with_target(&target, &["-n", "10", "--rounds", "2"]));
    let got = logged(&log);
    // The default rows: close@no-cert beside close, since nginx served the probe without.
    let close = row(&v, "close");
    let no_cert = row(&v, "close@no-cert");
    let resumed = row(&v, "close-resumed");
    let cc = |s: &Value| s["connections"]["tls_handshakes"]["client_certificate"].clone();
    let full = |s: &Value| u(&s["connections"]["tls_handshakes"]["full"]);
    assert_eq!(u(&cc(close)["presented"]), full(close), "{}", cc(close));
    assert_eq!(u(&cc(close)["requested"]), full(close));
    assert_eq!(u(&cc(no_cert)["presented"]), 0, "{}", cc(no_cert));
    assert_eq!(u(&cc(no_cert)["requested"]), full(no_cert));
    assert_eq!(
        u(&cc(resumed)["presented"]),
        full(resumed),
        "a resumed handshake sends none: {}",
        cc(resumed)
    );
    assert!(u(&resumed["connections"]["tls_handshakes"]["resumed"]) >= 15);
    // nginx: every request of close@no-cert unverified (NONE), and the probe's one;
    // every other request verified (SUCCESS), resumed ones by their session.
    let none = got.requests - got.verified;
    assert_eq!(
        none,
        u(&no_cert["requests"]["ok"]) + 1,
        "{:?}",
        got.statuses
    );
    let rows_ok: u64 = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| u(&s["requests"]["ok"]))
        .sum();
    assert!(got.requests >= rows_ok, "{} < {rows_ok}", got.requests);
    // The sentence: what the certificate costs, row against row.
    let f = said(&v, "client_certificate_cost");
    assert!(
        f.starts_with(&format!(
            "Client certificate, close against close@no-cert: close presented it (CN=bench client, ECDSA P-256) in {} of {} full handshakes and signed a CertificateVerify in each; close@no-cert presented none (asked in {}). What the certificate costs per request, time: ",
            full(close), full(close), full(no_cert)
        )),
        "{f}"
    );
    assert!(f.contains("; client CPU: "), "{f}");
}

#[test]
fn against_nginx_requiring_one_the_no_cert_row_is_left_out_and_said_why() {
    let _machine = shared();
    let Some((n, log)) = nginx_mtls("on") else {
        return;
    };
    let target = target_args(&n, true);
    let v = compare_json(&with_target(
        &target,
        &[
            "-n",
            "5",
            "--rounds",
            "2",
            "--strategies",
            "close,close-resumed",
        ],
    ));
    assert!(v["scenarios"].as_array().unwrap().len() == 2);
    // Chosen rows only: no probe, no left-out sentence.
    let _ = logged(&log);
    let v = compare_json(&with_target(&target, &["-n", "5", "--rounds", "2"]));
    let got = logged(&log);
    assert!(v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["name"] != "close@no-cert"));
    // nginx answered the probe without a certificate 400.
    assert_eq!(got.statuses.get("400"), Some(&1), "{:?}", got.statuses);
    let left: Vec<String> = v["comparison"]["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(v["comparison"]["left_out"].as_array().into_iter().flatten())
        .filter_map(|f| f["text"].as_str().map(str::to_string))
        .filter(|t| t.starts_with("close@no-cert"))
        .collect();
    assert_eq!(
        left,
        ["close@no-cert: the server did not serve a request without the client certificate (it answered 400): what the certificate costs cannot be set against a handshake without it here; against the embedded server (compare without a URL, with --cert) it can."],
        "{}",
        v["comparison"]
    );
}

#[test]
fn against_the_embedded_server_the_certificate_s_cost_is_a_row() {
    let _machine = shared();
    let d = Dir::new("compare-mtls-embedded");
    crate::common::mtls::write_client_certs(&d.0, "embedded client");
    let v = compare_json(&[
        "--cert",
        &d.path("client.pem"),
        "--key",
        &d.path("client.key"),
        "--strategies",
        "close,close@no-cert,close-resumed",
        "-n",
        "10",
        "--rounds",
        "2",
    ]);
    // The http group has neither TLS row.
    let names: Vec<&str> = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "http close",
            "https close",
            "https close@no-cert",
            "https close-resumed"
        ],
        "{names:?}"
    );
    let cc = |n: &str| row(&v, n)["connections"]["tls_handshakes"].clone();
    assert_eq!(
        u(&cc("https close")["client_certificate"]["presented"]),
        u(&cc("https close")["full"])
    );
    assert_eq!(
        u(&cc("https close@no-cert")["client_certificate"]["presented"]),
        0
    );
    assert!(u(&cc("https close@no-cert")["client_certificate"]["requested"]) >= 20);
    let f = said(&v, "client_certificate_cost");
    assert!(
        f.starts_with("Client certificate, https close against https close@no-cert: https close presented it (CN=embedded client, ECDSA P-256) in 20 of 20 full handshakes"),
        "{f}"
    );
    // Without --cert, a no-cert row is refused.
    let out = run(&["compare", "--strategies", "close,close@no-cert", "-n", "2"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("close@no-cert") && err.contains("--cert"),
        "{err}"
    );
}
