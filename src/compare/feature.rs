//! A row's defining feature, and whether it happened. A compare row is there to measure
//! what its strategy does: keep-alive reuses connections, a resuming strategy resumes TLS
//! sessions, a 0-RTT strategy sends its request in early data. Where that never happened
//! (the server closed every connection, kept no session, took no early data; or, under
//! `--rate`, each connection was found closed before its next request), the row measured
//! something else, so it is marked with what did not happen and not ranked: it is never
//! called best or cheapest, and its run's own finding says why.

use crate::report::finding::{Cause, Finding};
use crate::report::ScenarioReport;
use crate::strategy::Strategy;

/// What the row's strategy is about and did not happen, in words ("no connection was
/// reused"); `None` where it happened, or where the row could not show it (fewer than two
/// requests, or two new connections).
pub(super) fn missing(s: &ScenarioReport) -> Option<&'static str> {
    let strategy = Strategy::parse(&s.strategy)?;
    let c = &s.connections;
    if strategy.persistent() {
        return (s.requests.answered >= 2 && c.reused_requests == 0)
            .then_some("no connection was reused");
    }
    let handshakes = c.tls_handshakes.full + c.tls_handshakes.resumed;
    if strategy.tls_resumption() && handshakes >= 2 && c.tls_handshakes.resumed == 0 {
        return Some("no TLS session was resumed");
    }
    if strategy.early_data() && handshakes >= 2 && c.early_data.accepted == 0 {
        return Some("no request went in 0-RTT");
    }
    None
}

/// The headline's line for a row not ranked because `what` did not happen, where its run
/// had no finding that explains it: what did not happen, then the run's own finding of
/// why (its first about reuse or the protocol), or that the run does not say.
pub(super) fn said(name: &str, what: &str, s: &ScenarioReport) -> Finding {
    let why = s
        .diagnosis
        .iter()
        .find(|f| matches!(f.cause, Cause::Reuse | Cause::Protocol));
    Finding::new(
        "feature_missing",
        Cause::Reuse,
        format!(
            "{name}: not ranked: {what}, so its figures are not those of {name}.{}",
            why.map(|f| format!(" {}", f.text)).unwrap_or_default()
        ),
    )
    .with_all(why.map(|f| f.evidence.clone()).unwrap_or_default())
}
