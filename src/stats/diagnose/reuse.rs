//! Why connections were not reused when reuse was asked for: the close reason most of
//! them had, said through `report::cause::ServerEnds` where it is the server's doing,
//! with what is known of the gaps between requests for a close while idle; and a request
//! to close that the server ignored.

use super::super::raw::ScenarioShape;
use super::super::recorder::Recorder;
use crate::fmt::plural;
use crate::plan::Strategy;
use crate::record::CloseReason;
use crate::report::cause::ServerEnds;
use crate::report::finding::{Cause, Evidence, Finding};

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
        let mut ranked: Vec<(CloseReason, u64)> = [
            CloseReason::ServerHttp10,
            CloseReason::ServerCloseHeader,
            CloseReason::ServerCloseDelimited,
            CloseReason::ServerMaxRequests,
            CloseReason::ServerIdleClose,
            CloseReason::ClientPolicy,
            CloseReason::Error,
        ]
        .iter()
        .map(|r| (*r, reasons(*r)))
        .filter(|(_, n)| *n > 0)
        .collect();
        ranked.sort_by_key(|r| std::cmp::Reverse(r.1));
        if let Some(first) = ranked.first().copied() {
            out.push(not_reused(sc, rec, first));
        }
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
        out.push(
            Finding::new(
                "server_ignored_close",
                Cause::Reuse,
                format!(
                    "The server did not confirm the close on {} the client asked to close (its answers carried no `Connection: close`): the client closed them itself, so whether the server would have is not known here (RFC 9112 asks a server to close after answering such a request).",
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

fn close_evidence(reason: CloseReason, n: u64, closed: u64) -> Evidence {
    Evidence::count(
        &format!("connections.close_reasons.{}", reason.name()),
        n,
        closed,
        "connections closed",
    )
}

/// Why connections were not reused, by the close reason most of them had (`n` of them).
fn not_reused(sc: &ScenarioShape, rec: &Recorder, (reason, n): (CloseReason, u64)) -> Finding {
    let closed = rec.counts.connections_closed;
    // "every connection", "3 of 5 connections".
    let (every, s) = if n == closed {
        ("every".to_string(), "")
    } else {
        (format!("{n} of {closed}"), crate::fmt::s(n))
    };
    // The server's own doing: one cause, with its words and fix (report::cause).
    let ends = |e: ServerEnds, extra: &str| {
        (
            e.code(),
            format!(
                "Connections were not reused: {}{extra} on {every} connection{s}. {}.",
                e.why(),
                e.fix(None)
            ),
        )
    };
    let (code, text) = match reason {
        CloseReason::ServerHttp10 => ends(
            ServerEnds::Http10,
            if sc.strategy == Strategy::Http10KeepAlive {
                ", ignoring the request's `Connection: keep-alive`,"
            } else {
                ""
            },
        ),
        CloseReason::ServerCloseHeader => ends(ServerEnds::CloseHeader, ""),
        CloseReason::ServerCloseDelimited => ends(ServerEnds::CloseDelimited, ""),
        CloseReason::ServerMaxRequests => {
            // The mean over the connections the server closed so: those still open at the
            // end of the run, or closed for another reason, say nothing of its limit.
            let mean = rec.counts.rpc_sum_server_max_requests as f64 / n as f64;
            let each = if mean.fract() == 0.0 {
                format!("{mean:.0} requests each")
            } else {
                format!("{mean:.1} requests each on average")
            };
            let f = Finding::new(
                "not_reused_server_max_requests",
                Cause::Reuse,
                format!(
                    "Connections were closed by the server after {each} (its max requests per connection), {} of {closed} connections.",
                    n
                ),
            )
            .with(close_evidence(reason, n, closed))
            .with(Evidence::mean(
                "requests per connection closed at the server's limit",
                mean,
                None,
                n,
                "connections closed by server_max_requests",
            ));
            return f;
        }
        CloseReason::ServerIdleClose => idle_close(sc, rec, n),
        CloseReason::ClientPolicy => (
            "not_reused_client_policy",
            format!(
                "The client ended {} by its own policy (--requests-per-connection {}).",
                plural(n, "connection", "connections"),
                sc.requests_per_connection.unwrap_or(0)
            ),
        ),
        _ => (
            "not_reused_errors",
            format!(
                "{} ended in errors, so they could not be reused.",
                plural(n, "connection", "connections")
            ),
        ),
    };
    // The server refused keep-alive on every connection and no request was reused: the
    // strategy's defining feature never happened, and the run measured a new connection
    // per request.
    let refused = matches!(
        reason,
        CloseReason::ServerHttp10
            | CloseReason::ServerCloseHeader
            | CloseReason::ServerCloseDelimited
    );
    Finding::new(code, Cause::Reuse, text)
        .explaining(refused && n == closed && rec.counts.reused_requests == 0)
        .with(close_evidence(reason, n, closed))
        .with(Evidence::count(
            "connections.reused_requests",
            rec.counts.reused_requests,
            rec.counts.answered,
            "answered requests",
        ))
}

/// Why the server closed connections the next request found closed, from what is known
/// of the gaps between requests. In a closed loop the next request followed its
/// connection's response at once, so no idle timeout explains it: the server ends
/// connections after a response (or as the next request arrives) without saying so.
/// Under `--rate` the requests on one connection were at least 1/rate s apart; where the
/// server announced its idle timeout (`Keep-Alive: timeout=`) and it is shorter, that is
/// the cause; else both causes are said, with how to tell them apart.
fn idle_close(sc: &ScenarioShape, rec: &Recorder, n: u64) -> (&'static str, String) {
    let conns = plural(n, "connection", "connections");
    let retries = plural(
        rec.counts.stale_retries,
        "stale-connection retry",
        "stale-connection retries",
    );
    let announced = rec.keep_alive_header.filter(|h| h.timeout_s.is_some());
    let Some(rate) = sc.rate.filter(|r| *r > 0.0) else {
        return (
            ServerEnds::Silently.code(),
            format!(
                "The server ended {conns} without saying so (no `Connection: close`): each was found closed by the next request, sent as soon as the response had arrived, so no idle timeout explains it ({retries}){}.",
                announced
                    .map(|h| format!(", although it announced {}", h.describe()))
                    .unwrap_or_default()
            ),
        );
    };
    let gap = 1.0 / rate;
    let gaps = format!(
        "requests came at {} a second, so at least {} s apart on each connection",
        crate::fmt::num(rate),
        crate::fmt::num(gap)
    );
    let text = match announced.and_then(|h| h.timeout_s.map(|t| (h, t))) {
        Some((h, t)) if f64::from(t) < gap => format!(
            "The server closed {conns} while idle before they could be reused ({retries}): it announced {}, and the {gaps}: its idle timeout, {t} s, is shorter than the gaps between requests.",
            h.describe()
        ),
        Some((h, t)) => format!(
            "The server closed {conns} while idle before they could be reused ({retries}); it announced {} and the {gaps} (longer on a connection that waited while others took the requests): its idle timeout, {t} s, is shorter than such a wait, or something ends connections sooner than it says (a proxy or load balancer in front).",
            h.describe()
        ),
        None => format!(
            "The server closed {conns} while idle before they could be reused ({retries}); the {gaps}: its idle timeout is shorter than that, or it ends connections after a response without saying so (it announced no `Keep-Alive: timeout`; handshake doctor measures its idle timeout)."
        ),
    };
    ("not_reused_server_idle_close", text)
}
