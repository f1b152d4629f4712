//! `lab --https --client-ca`: the lab's embedded server asks each client for a
//! certificate; curl across the link with `--cert` is served, and the server counts the
//! certificates presented; curl without one is refused (required). bench across the
//! link (`--rtt`) with `--cert` presents it to the embedded server, which counts it.

use crate::common::mtls::{agrees_with_the_embedded_server, write_client_certs};
use crate::common::*;
use crate::link::{lab_serial, lab_summary, run_lab};

#[test]
fn the_labs_server_asks_for_a_client_certificate_and_counts_those_presented() {
    let Some(_g) = lab_serial("lab client certificates") else {
        return;
    };
    let d = Dir::new("lab-mtls");
    write_client_certs(&d.0, "lab client");
    let (cert, key, ca) = (
        d.path("client.pem"),
        d.path("client.key"),
        d.path("client_ca.pem"),
    );
    // Three curl processes with the certificate, each its own full handshake; then one
    // without it, which the server refuses.
    let script = format!(
        "for i in 1 2 3; do curl -s -o /dev/null -w '%{{http_code}}\\n' --cacert {{cacert}} --cert {cert} --key {key} {{url}} || exit 9; done; \
         curl -s -o /dev/null --cacert {{cacert}} {{url}}; echo \"without $?\""
    );
    let (code, out, err) = run_lab(&[
        "lab",
        "--rtt",
        "2ms",
        "--https",
        "--client-ca",
        &ca,
        "--no-progress",
        "--json",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(&lines[..3], ["200", "200", "200"], "{out}");
    assert!(
        lines[3].starts_with("without ") && lines[3] != "without 0",
        "curl without a certificate was served: {out}"
    );
    let s = &lab_summary(&err)["server"];
    assert_eq!(u(&s["tls_client_certificates"]), 3, "{s}");
    assert_eq!(
        u(&s["tls_handshakes_full"]),
        3,
        "the refused handshake is not counted: {s}"
    );
    assert_eq!(u(&s["requests"]), 3, "{s}");
}

/// `bench --rtt` with `--cert`: the embedded server across the lab's link asks for a
/// certificate, and bench's counts of certificates presented, full and resumed
/// handshakes equal the server's own.
#[test]
fn bench_across_the_link_presents_its_certificate_to_the_embedded_server() {
    let Some(_g) = lab_serial("bench --rtt --cert") else {
        return;
    };
    let d = Dir::new("lab-mtls-bench");
    write_client_certs(&d.0, "linked client");
    let v = bench_json(&[
        "--rtt",
        "10ms",
        "--cert",
        &d.path("client.pem"),
        "--key",
        &d.path("client.key"),
        "--strategy",
        "close-resumed",
        "-n",
        "6",
        "-c",
        "1",
    ]);
    agrees_with_the_embedded_server(&v, 6, "bench --rtt 10ms --cert");
    let th = &scenario(&v)["connections"]["tls_handshakes"];
    assert!(u(&th["resumed"]) >= 4, "{th}");
}
