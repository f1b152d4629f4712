//! `audit --client-ca`: what each connection's handshake showed of the client's
//! certificate (presented, carried by a resumed session, absent, or refused), summed per
//! client, and the findings over it.

use super::log::{CertSeen, ConnLog};
use crate::fmt::plural_s as plural;
use crate::report::audit::{ClientCertCounts, ClientSummary, Ending};
use crate::report::finding::{Cause, Evidence, Finding};

/// What a completed handshake showed of the client's certificate.
pub(super) fn seen(conn: &rustls::ServerConnection, resumed: bool) -> CertSeen {
    let first = conn.peer_certificates().and_then(|c| c.first());
    let named = first.map(|c| {
        crate::net::client_auth::subject_and_key(c)
            .unwrap_or_else(|| ("(a subject that cannot be read)".into(), "unknown".into()))
    });
    match (resumed, named) {
        (true, n) => CertSeen::Resumed {
            subject: n.map(|n| n.0),
        },
        (false, Some((subject, key_type))) => CertSeen::Presented { subject, key_type },
        (false, None) => CertSeen::NotPresented,
    }
}

/// A handshake that failed on the client's certificate, with why; `None` where it failed
/// for another reason.
pub(super) fn refused(e: &std::io::Error) -> Option<CertSeen> {
    use rustls::CertificateError as C;
    let why = match e.get_ref()?.downcast_ref::<rustls::Error>()? {
        rustls::Error::NoCertificatesPresented => {
            return Some(CertSeen::Refused {
                why: "no certificate was sent".into(),
                none_sent: true,
            })
        }
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => "unknown issuer (no CA in --client-ca signed it)".to_string(),
            C::BadSignature | C::UnsupportedSignatureAlgorithmContext { .. } => {
                "bad signature (a CA in --client-ca has its issuer's name, but did not sign it)"
                    .to_string()
            }
            C::Expired | C::ExpiredContext { .. } => "expired".to_string(),
            C::NotValidYet | C::NotValidYetContext { .. } => "not valid yet".to_string(),
            C::BadEncoding => {
                "it cannot be read (WebPKI takes X.509 v3 certificates only)".to_string()
            }
            C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
                "not made for client authentication (extended key usage)".to_string()
            }
            C::Other(e) if format!("{e:?}").contains("UnsupportedCertVersion") => {
                "an X.509 v1 certificate (WebPKI takes v3 only; OpenSSL-based servers take v1)"
                    .to_string()
            }
            other => format!("{other:?}"),
        },
        _ => return None,
    };
    Some(CertSeen::Refused {
        why,
        none_sent: false,
    })
}

/// How a handshake that did not fail on the client's certificate ended: the client's
/// alert about the audit's certificate (it does not trust it), another TLS failure, or
/// bytes that were no TLS at all.
pub(super) fn handshake_failed(e: &std::io::Error) -> Ending {
    use rustls::AlertDescription as A;
    match e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
        Some(rustls::Error::AlertReceived(
            A::UnknownCA
            | A::BadCertificate
            | A::CertificateUnknown
            | A::UnsupportedCertificate
            | A::CertificateExpired
            | A::CertificateRevoked,
        )) => Ending::CertificateDistrusted,
        Some(rustls::Error::InvalidMessage(_)) | None => Ending::Garbage,
        Some(_) => Ending::TlsFailed,
    }
}

/// The client's certificates over `conns`: none where no connection was asked (no
/// `--client-ca`).
pub(super) fn counts(conns: &[&ConnLog]) -> Option<ClientCertCounts> {
    let mut n = ClientCertCounts::default();
    let mut any = false;
    for c in conns {
        let Some(seen) = &c.client_cert else { continue };
        any = true;
        match seen {
            CertSeen::Presented { subject, key_type } => {
                n.presented += 1;
                *n.subjects.entry(subject.clone()).or_default() += 1;
                *n.key_types.entry(key_type.clone()).or_default() += 1;
            }
            CertSeen::Resumed { subject } => {
                n.resumed += 1;
                if let Some(s) = subject {
                    *n.subjects.entry(s.clone()).or_default() += 1;
                }
            }
            CertSeen::NotPresented => n.not_presented += 1,
            CertSeen::Refused { why, none_sent } => {
                n.refused += 1;
                n.refused_none_sent += u64::from(*none_sent);
                *n.refusals.entry(why.clone()).or_default() += 1;
            }
        }
    }
    any.then_some(n)
}

/// The findings over a client's certificates: handshakes refused (none sent, or one that
/// did not verify), served without one, and what each full handshake cost the client
/// where it resumed none.
pub(super) fn findings(t: &ClientSummary) -> Vec<Finding> {
    let Some(c) = &t.client_certificates else {
        return Vec::new();
    };
    let mut v = Vec::new();
    let at = |f: &str| format!("total.client_certificates.{f}");
    let handshakes = c.presented + c.not_presented + c.resumed + c.refused;
    let of = |f: &str, n: u64| Evidence::count(&at(f), n, handshakes, "TLS handshakes");
    if c.refused_none_sent > 0 {
        v.push(
            Finding::new("client_cert_not_sent", Cause::Tls, format!(
                "{} refused: the client sent no certificate where the audit requires one (--client-ca); a refused connection carries no request. Give the client its certificate and key (curl --cert/--key, Python requests cert=(CERT, KEY), Go tls.Config.Certificates, Node https.Agent({{cert, key}})), or audit with --client-cert optional to serve it without one.",
                crate::fmt::plural(c.refused_none_sent, "handshake was", "handshakes were"),
            ))
            .with(of("refused_none_sent", c.refused_none_sent)),
        );
    }
    let bad = c.refused - c.refused_none_sent;
    if bad > 0 {
        let why: Vec<String> = c
            .refusals
            .iter()
            .filter(|(w, _)| w.as_str() != "no certificate was sent")
            .map(|(w, n)| format!("{w} ({n})"))
            .collect();
        v.push(
            Finding::new("client_cert_refused", Cause::Tls, format!(
                "The audit refused the certificate the client presented in {}: {}. Sign it with a CA in the --client-ca file, for client authentication, within its validity.",
                plural(bad, "handshake"),
                why.join("; ")
            ))
            .with(of("refused", bad)),
        );
    }
    if c.not_presented > 0 {
        v.push(
            Finding::new("client_cert_optional_none", Cause::Tls, format!(
                "{} of {} full handshakes carried no client certificate; the audit served them (--client-cert optional). A service that requires one would refuse them.",
                c.not_presented,
                c.presented + c.not_presented
            ))
            .with(of("not_presented", c.not_presented)),
        );
    }
    v.extend(signatures(c, handshakes));
    v
}

/// Where the client made more than one handshake with its certificate: each full one
/// cost it a signature. Said as a cost where it resumed none, else with what resumption
/// saved.
fn signatures(c: &ClientCertCounts, handshakes: u64) -> Option<Finding> {
    if c.presented == 0 || (c.presented == 1 && c.resumed == 0) {
        return None;
    }
    let keys: Vec<&str> = c.key_types.keys().map(String::as_str).collect();
    let subjects: Vec<&str> = c.subjects.keys().map(String::as_str).collect();
    let of = |f: &str, n: u64| {
        Evidence::count(
            &format!("total.client_certificates.{f}"),
            n,
            handshakes,
            "TLS handshakes",
        )
    };
    let f = if c.resumed == 0 {
        Finding::new("client_cert_never_resumed", Cause::Tls, format!(
            "The client presented its certificate ({}, {}) in each of its {} full handshakes and resumed none: on a service that requires one, every new connection costs it a certificate and a CertificateVerify signature with its key ({} signatures here). Reuse connections, or let it resume TLS sessions (TLS 1.3 tickets carry the authentication).",
            subjects.join(", "),
            keys.join(", "),
            c.presented,
            c.presented
        ))
    } else {
        Finding::new("client_cert_resumed", Cause::Tls, format!(
            "The client presented its certificate ({}, {}) in {} full handshakes and resumed {}, which sent no certificate and signed nothing.",
            subjects.join(", "),
            keys.join(", "),
            c.presented,
            c.resumed
        ))
    };
    Some(
        f.with(of("presented", c.presented))
            .with(of("resumed", c.resumed)),
    )
}
