//! Why connections were not reused when reuse was asked for: their close reasons counted
//! into the one model of causes (`report::reuse`), with what is known of the gaps between
//! requests for a close while idle; and a request to close that the server ignored.

use super::super::raw::ScenarioShape;
use super::super::recorder::Recorder;
use crate::fmt::plural;
use crate::plan::Strategy;
use crate::record::CloseReason;
use crate::report::finding::{Cause, Evidence, Finding};
use crate::report::reuse::{Ended, Facts, Judged, Seen};

/// Reuse that was asked for and not obtained, and why; a request to close ignored.
pub(super) fn reuse_findings(sc: &ScenarioShape, rec: &Recorder) -> Vec<Finding> {
    let mut out = Vec::new();
    let reasons = |r: CloseReason| rec.close_reasons[r.index()];
    let closed = rec.counts.connections_closed;
    let asked_reuse = sc.strategy.persistent();
    let ok = rec.counts.answered;
    let reuse_ratio = if ok > 0 {
        rec.counts.reused_requests as f64 / ok as f64
    } else {
        1.0
    };
    // Reuse was asked for and each connection carried few requests.
    let expected_rpc = ok as f64 / (sc.concurrency as f64 * sc.origins.max(1) as f64);
    let mean_rpc = rec.counts.rpc_sum as f64 / closed.max(1) as f64;
    if asked_reuse && ok > 0 && (reuse_ratio < 0.5 || mean_rpc < expected_rpc / 2.0) {
        out.extend(not_reused(sc, rec));
    } else if asked_reuse && reasons(CloseReason::ServerIdleClose) > 0 {
        let n = reasons(CloseReason::ServerIdleClose);
        out.push(
            Finding::new(
                "server_idle_close",
                Cause::Reuse,
                format!(
                    "The server closed {} while idle; {} were retried on new connections.",
                    plural(n, "connection", "connections"),
                    plural(rec.counts.stale_retries, "request", "requests")
                ),
            )
            .with(close_evidence(CloseReason::ServerIdleClose, n, closed))
            .with(Evidence::count(
                "requests.retries.stale_connection",
                rec.counts.stale_retries,
                rec.counts.attempted,
                "attempts",
            )),
        );
    }
    if !asked_reuse && rec.counts.server_ignored_close > 0 {
        let n = rec.counts.server_ignored_close;
        let (who, it) = ignored_by(sc, rec);
        out.push(
            Finding::new(
                "server_ignored_close",
                Cause::Reuse,
                format!(
                    "{who} did not confirm the close on {} the client asked to close (its answers carried no `Connection: close`): the client closed them itself, so whether {it} would have is not known here (RFC 9112 asks a server to close after answering such a request).",
                    plural(n, "connection", "connections")
                ),
            )
            .with(Evidence::count(
                "connections.server_ignored_close",
                n,
                closed,
                "connections closed",
            )),
        );
    }
    out
}

/// Which server did not confirm the closes asked for, and the pronoun for it: "The
/// server" where the run had one origin; with `-L` across several, the origin(s) by
/// name, each with its count ("The server at http://127.0.0.1:8080").
fn ignored_by(sc: &ScenarioShape, rec: &Recorder) -> (String, &'static str) {
    if sc.origin_names.len() < 2 {
        return ("The server".to_string(), "the server");
    }
    let by: Vec<(&String, u64)> = sc
        .origin_names
        .iter()
        .zip(&rec.ignored_close_by_origin)
        .filter(|(_, n)| **n > 0)
        .map(|(o, n)| (o, *n))
        .collect();
    match by.as_slice() {
        [] => ("The server".to_string(), "the server"),
        [(o, _)] => (format!("The server at {o}"), "it"),
        _ => (
            format!(
                "The servers at {}",
                by.iter()
                    .map(|(o, n)| format!("{o} ({n})"))
                    .collect::<Vec<_>>()
                    .join(" and ")
            ),
            "they",
        ),
    }
}

fn close_evidence(reason: CloseReason, n: u64, closed: u64) -> Evidence {
    Evidence::count(
        &format!("connections.close_reasons.{}", reason.name()),
        n,
        closed,
        "connections closed",
    )
}

/// Why connections were not reused, from how they closed, judged by the one model
/// (`report::reuse`): the cause that ended most of them, or each cause with its count.
/// `None` where no close says anything.
fn not_reused(sc: &ScenarioShape, rec: &Recorder) -> Option<Finding> {
    let closed = rec.counts.connections_closed;
    let reasons = |r: CloseReason| rec.close_reasons[r.index()];
    let rate = sc.rate.filter(|r| *r > 0.0);
    let n_max = reasons(CloseReason::ServerMaxRequests);
    let facts = Facts {
        asked_http10_keep_alive: sc.strategy == Strategy::Http10KeepAlive,
        max_requests_mean: (n_max > 0)
            .then(|| rec.counts.rpc_sum_server_max_requests as f64 / n_max as f64),
        requests_per_connection: sc.requests_per_connection,
        stale_retries: Some(rec.counts.stale_retries),
        rate,
        announced: rec.keep_alive_header,
        origins: if sc.origin_names.len() > 1 {
            sc.origin_names
                .iter()
                .cloned()
                .zip(
                    rec.opened_by_origin
                        .iter()
                        .copied()
                        .chain(std::iter::repeat(0)),
                )
                .collect()
        } else {
            Vec::new()
        },
        ..Facts::default()
    };
    let mut seen = Seen::new(closed, "connections", facts);
    for (reason, ended) in [
        (CloseReason::ServerHttp10, Ended::ServerHttp10),
        (CloseReason::ServerCloseHeader, Ended::ServerCloseHeader),
        (
            CloseReason::ServerCloseDelimited,
            Ended::ServerCloseDelimited,
        ),
        (CloseReason::ServerMaxRequests, Ended::ServerMaxRequests),
        // Found closed by the next request: in a closed loop it followed the response at
        // once, so no idle timeout explains it; under --rate, the gaps may.
        (
            CloseReason::ServerIdleClose,
            if rate.is_some() {
                Ended::ServerIdle
            } else {
                Ended::ServerSilent
            },
        ),
        (CloseReason::ClientPolicy, Ended::ClientPolicy),
        (CloseReason::Error, Ended::Errors),
    ] {
        let n = reasons(reason);
        let mut evidence = vec![close_evidence(reason, n, closed)];
        if reason == CloseReason::ServerMaxRequests && n > 0 {
            evidence.push(Evidence::mean(
                "requests per connection closed at the server's limit",
                rec.counts.rpc_sum_server_max_requests as f64 / n as f64,
                None,
                n,
                "connections closed by server_max_requests",
            ));
        }
        seen.add(ended, n, evidence);
    }
    let judged = seen.judge();
    if matches!(judged, Judged::Unknown) {
        return None;
    }
    // The server refused keep-alive on every connection and no request was reused: the
    // strategy's defining feature never happened, and the run measured a new connection
    // per request.
    let refused =
        matches!(&judged, Judged::One(f) if f.ended.refuses_keep_alive() && f.n == closed);
    Some(
        Finding::new(judged.code(), Cause::Reuse, judged.sentence(&seen))
            .explaining(refused && rec.counts.reused_requests == 0)
            .with_all(judged.evidence())
            .with(Evidence::count(
                "connections.reused_requests",
                rec.counts.reused_requests,
                rec.counts.answered,
                "answered requests",
            )),
    )
}
