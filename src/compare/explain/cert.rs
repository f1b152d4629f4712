//! The client certificate's sentences: what a row's full handshakes presented and signed
//! for (mutual TLS), and what the certificate costs per request, set against the same
//! strategy without it (`close` against `close@no-cert`), paired by round.

use super::kx::per_request;
use super::{cpu_of, row_figure};
use crate::compare::ComparisonRow;
use crate::report::finding::{Cause, Evidence, Finding};
use crate::report::ScenarioReport;

/// " Each of its 60 full handshakes presented the client certificate (CN=client, ECDSA
/// P-256) and signed for it; its 40 resumed ones sent none." Empty where the server
/// asked for none.
pub(super) fn note(rs: &ScenarioReport) -> String {
    let h = &rs.connections.tls_handshakes;
    let Some(c) = h.client_certificate.as_ref().filter(|c| c.requested > 0) else {
        return String::new();
    };
    let what = c.named();
    let presented = if c.presented == 0 {
        format!(
            " The server asked for a client certificate in {} full handshakes; none was presented.",
            c.requested
        )
    } else if c.presented == 1 && c.requested == 1 {
        format!(" Its 1 full handshake presented the client certificate{what} and signed for it")
    } else if c.presented == c.requested {
        format!(
            " Each of its {} full handshakes presented the client certificate{what} and signed for it",
            c.presented
        )
    } else {
        format!(
            " {} of its {} full handshakes the server asked in presented the client certificate{what} and signed for it",
            c.presented, c.requested
        )
    };
    let resumed = match (c.presented, h.resumed) {
        (0, _) => String::new(),
        (_, 0) => ".".to_string(),
        (_, n) => format!(
            "; its {n} resumed one{} sent none (the session carries the authentication).",
            if n == 1 { "" } else { "s" }
        ),
    };
    format!("{presented}{resumed}")
}

/// Two rows of one strategy, `r` presenting the client certificate and `other` not
/// (`close` and `close@no-cert`): what each presented, and what the certificate costs
/// per request in time and in client CPU, each a paired estimate over the rounds with
/// its interval; a difference whose interval holds no change, or under the noise
/// threshold, is said to be none.
pub(in crate::compare) fn client_certificate(
    r: &ComparisonRow,
    rs: &ScenarioReport,
    other: &ComparisonRow,
    os: &ScenarioReport,
    noise_threshold: f64,
) -> Finding {
    let presented = |s: &ScenarioReport| {
        s.connections
            .tls_handshakes
            .client_certificate
            .clone()
            .unwrap_or_default()
    };
    let (c, oc) = (presented(rs), presented(os));
    let what = c.named();
    let (time, cpu) = per_request(r, other, noise_threshold);
    let text = format!(
        "Client certificate, {} against {}: {} presented it{what} in {} of {} full handshakes and signed a CertificateVerify in each; {} presented none (asked in {}). What the certificate costs per request, time: {time}; client CPU: {cpu}.",
        r.name,
        other.name,
        r.name,
        c.presented,
        c.requested,
        other.name,
        oc.requested
    );
    let f = Finding::new("client_certificate_cost", Cause::Measured, text);
    let asked = "tls_handshakes.client_certificate";
    [(r, &c), (other, &oc)]
        .into_iter()
        .fold(f, |f, (row, cc)| {
            f.with(Evidence::count(
                &row_figure(row, &format!("{asked}.presented")),
                cc.presented,
                cc.requested,
                "full TLS handshakes the server asked in",
            ))
        })
        .with_all(cpu_of(r, other))
}
