//! Mutual TLS in the oracle: nginx asking for a client certificate (`ssl_verify_client
//! on`, given `--cert`, or not; `optional`, given), and the predicates of what bench,
//! trace, doctor and compare say of it. nginx answers a request without a required certificate
//! 400 ("No required SSL certificate was sent") and ends the connection.

use super::{need, Situation, Tls};

/// The server asks for a client certificate in its full handshakes.
pub fn asks(s: &Situation) -> bool {
    matches!(
        s.tls,
        Tls::ClientCert | Tls::ClientCertMissing | Tls::ClientCertOptional
    )
}

/// nginx's lines that ask for a client certificate its client CA (written in `d`) signed,
/// required or optional; none where the situation asks for none.
pub fn nginx_lines(tls: Tls, d: &std::path::Path) -> String {
    let verify = match tls {
        Tls::ClientCert | Tls::ClientCertMissing => "on",
        Tls::ClientCertOptional => "optional",
        _ => return String::new(),
    };
    crate::common::mtls::write_client_certs(d, "oracle client");
    format!(
        "ssl_client_certificate {}/client_ca.pem; ssl_verify_client {verify};",
        d.display()
    )
}

/// `--cert` and `--key` where the situation gives them.
pub fn client_args(tls: Tls, d: &std::path::Path) -> Vec<String> {
    match tls {
        Tls::ClientCert | Tls::ClientCertOptional => vec![
            "--cert".into(),
            d.join("client.pem").display().to_string(),
            "--key".into(),
            d.join("client.key").display().to_string(),
        ],
        _ => Vec::new(),
    }
}

/// A sentence about an error status names `--cert`/`--key` exactly where the server
/// asked for a certificate and none was sent, and then names the CA it accepts.
pub fn status_cause(s: &Situation, t: &str) -> Result<(), String> {
    let names = t.contains("give one with --cert FILE --key FILE");
    if s.tls == Tls::ClientCertMissing {
        need(
            names && t.contains("CN=handshake client CA"),
            "the server asked for a client certificate and none was sent: the cause names --cert/--key and the CA",
        )
    } else {
        need(!names, "no certificate was missing")
    }
}

/// doctor's policy says what the server asks of a client certificate, and only where it
/// asks.
pub fn policy_part(s: &Situation, t: &str) -> Result<(), String> {
    let says = match s.tls {
        Tls::ClientCert | Tls::ClientCertMissing => "client certificate required (400 without one)",
        Tls::ClientCertOptional => "client certificate asked for, optional (served without one)",
        _ => {
            return need(
                !t.contains("client certificate"),
                "no certificate was asked for",
            )
        }
    };
    need(
        t.contains(says),
        "what the server asks of a client certificate",
    )
}

/// doctor's `client_certificate`: asked, what the probes presented, and how the server
/// answered a connection without one.
pub fn finding(s: &Situation, t: &str) -> Result<(), String> {
    need(asks(s), "the server asks for no client certificate")?;
    need(
        t.contains("named the CAs it accepts: CN=handshake client CA"),
        "the CA nginx names",
    )?;
    let presented = match s.tls {
        Tls::ClientCert | Tls::ClientCertOptional => {
            "--cert was presented in each (CN=oracle client, ECDSA P-256)"
        }
        _ => "none was presented (no --cert)",
    };
    need(t.contains(presented), "what the probes presented")?;
    let without = match s.tls {
        Tls::ClientCertOptional => "the request was served (200): the certificate is optional",
        _ => {
            "the request was answered 400: the server requires one and says so after the handshake"
        }
    };
    need(t.contains(without), "how the server answers without one")
}

/// compare's `close@no-cert` left out: only where the server requires a certificate
/// (nginx answers the probe without one 400).
pub fn no_cert_left_out(s: &Situation, t: &str) -> Result<(), String> {
    need(
        s.tls == Tls::ClientCert,
        "the server serves without a certificate, or none was given",
    )?;
    need(
        t.contains("did not serve a request without the client certificate (it answered 400)"),
        "nginx's answer without one",
    )
}

/// compare's `client_certificate`: `close` against `close@no-cert`, where the server
/// serves both (nginx `optional`, `--cert` given).
pub fn compare_sentence(s: &Situation, t: &str) -> Result<(), String> {
    need(
        s.tls == Tls::ClientCertOptional,
        "no row without the certificate could run",
    )?;
    need(
        t.starts_with("Client certificate, close against close@no-cert: close presented it (CN=oracle client, ECDSA P-256) in ")
            && t.contains("close@no-cert presented none (asked in "),
        "the rows and what each presented",
    )
}

/// What must be said where the server asks: doctor's finding, and without a certificate
/// the status finding (which names the flags, by [`status_cause`]).
pub fn required(s: &Situation, doctor: bool) -> &'static [&'static str] {
    match (s.tls, doctor) {
        (Tls::ClientCertMissing, true) => &["client_certificate", "error_status"],
        (Tls::ClientCertMissing, false) => &["no_success_status"],
        (Tls::ClientCert | Tls::ClientCertOptional, true) => &["client_certificate"],
        _ => &[],
    }
}
