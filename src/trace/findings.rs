//! What a trace found, as findings with their evidence: what the server said when every
//! response was an error, the strategy's defining feature that did not happen (0-RTT,
//! resumption), and the headline of what was measured. Built from the steps, so the
//! text and the JSON say the same thing.

use crate::fmt::{ms as fmt_ms, plural, plural_s};
use crate::record::Phase;
use crate::report::cause::{NoEarlyData, NoResumption, ServerEnds};
use crate::report::finding::{ordered, Cause, Evidence, Finding};
use crate::report::reuse::{none_reused, Ended, Facts, Seen};
use crate::report::trace::TraceStep;
use crate::strategy::Strategy;
use std::collections::BTreeMap;

/// The trace's findings in the order of their causes (a later cause left out while an
/// earlier one explains the trace), and its headline: the finding that explains the
/// trace followed by what was measured, or what was measured alone. No headline
/// without an answered request. `failed`: the trace ended in a failure before its
/// count (then a short trace is the failure's doing, not the count's).
pub(crate) fn judge(
    strategy: Strategy,
    steps: &[TraceStep],
    examples: &BTreeMap<String, String>,
    failed: bool,
) -> (Option<Finding>, Vec<Finding>) {
    let mut found = Vec::new();
    found.extend(no_success(steps, examples));
    found.extend(redirects(steps, examples));
    found.extend(protocol(strategy, steps, failed));
    found.extend(reuse(strategy, steps));
    found.extend(silent_close(steps));
    let found = ordered(found);
    let Some(measured) = measured(steps) else {
        return (None, found);
    };
    let headline = match found.iter().find(|f| f.explains_run) {
        Some(first) => {
            let mut h = first.clone();
            h.text = format!("{} {}", first.text, measured.text);
            h.evidence.extend(measured.evidence);
            h
        }
        None => measured,
    };
    (Some(headline), found)
}

/// The first response's status when every response's status is in `class`: "2 of 2
/// were 400", the server's words for it (from `examples`), and its count as evidence.
struct Leading<'a> {
    said: String,
    example: Option<&'a String>,
    evidence: Evidence,
}

fn leading<'a>(
    steps: &[TraceStep],
    examples: &'a BTreeMap<String, String>,
    class: std::ops::Range<u16>,
) -> Option<Leading<'a>> {
    let first = steps.first()?;
    if !steps.iter().all(|s| class.contains(&s.status)) {
        return None;
    }
    let status = first.status;
    let n = steps.iter().filter(|s| s.status == status).count() as u64;
    Some(Leading {
        said: format!(
            "{n} of {} {} {status}",
            steps.len(),
            if n == 1 { "was" } else { "were" }
        ),
        example: examples.get(&status.to_string()),
        evidence: Evidence::count(
            &format!("steps.status.{status}"),
            n,
            steps.len() as u64,
            "responses",
        ),
    })
}

/// Every response an error: which status, out of how many, and what the server said.
fn no_success(steps: &[TraceStep], examples: &BTreeMap<String, String>) -> Option<Finding> {
    let l = leading(steps, examples, 400..1000)?;
    let said = l.example.map(|m| format!(": {m}")).unwrap_or_default();
    // A 400 from a server that asked for a client certificate: whether one was sent.
    let certificate = (steps[0].status == 400)
        .then(|| client_certificate(steps).cause_of_a_400())
        .flatten()
        .map(|c| format!(": {c}"))
        .unwrap_or_default();
    let text = format!(
        "Every response was an error ({}{said}){certificate}; the times below are the error answers'.",
        l.said
    );
    Some(
        Finding::new("no_success_status", Cause::Status, text)
            .explaining(true)
            .with(l.evidence),
    )
}

/// What the servers asked of a client certificate over the steps' handshakes, and what
/// was presented.
fn client_certificate(steps: &[TraceStep]) -> crate::report::raw::ClientCertificate {
    let asked: Vec<_> = steps
        .iter()
        .filter_map(|s| s.tls.as_ref()?.client_certificate.as_ref())
        .collect();
    crate::report::raw::ClientCertificate {
        requested: asked.len() as u64,
        presented: asked.iter().filter(|c| c.presented).count() as u64,
        acceptable_cas: asked
            .first()
            .map(|c| c.acceptable_cas.clone())
            .unwrap_or_default(),
        subject: None,
        key_type: None,
    }
}

/// Every response a redirect: handshake does not follow them, so the times are the
/// redirect's; where it points, from the first one.
fn redirects(steps: &[TraceStep], examples: &BTreeMap<String, String>) -> Option<Finding> {
    let l = leading(steps, examples, 300..400)?;
    let to = l
        .example
        .and_then(|m| crate::record::notes::redirect_target(m))
        .map(|to| format!(" to {to}"))
        .unwrap_or_default();
    let text = format!(
        "Every response was a redirect ({}{to}): trace does not follow redirects, so the times below are the redirect's; trace the URL it points to (bench and compare follow them with -L).",
        l.said
    );
    Some(
        Finding::new("mostly_redirects", Cause::Status, text)
            .explaining(true)
            .with(l.evidence),
    )
}

/// The strategy's defining feature that never happened over the trace's new
/// connections: 0-RTT never accepted, a TLS session never resumed. Only connections
/// after the first can have either (the first has no session to offer).
fn protocol(strategy: Strategy, steps: &[TraceStep], failed: bool) -> Option<Finding> {
    if !strategy.tls_resumption() || strategy.persistent() {
        return None;
    }
    let later: Vec<&TraceStep> = steps.iter().filter(|s| !s.reused).skip(1).collect();
    let name = strategy.name();
    if later.is_empty() && failed {
        // Cut short by a failure, which is said: a longer --count would not help.
        return None;
    }
    if later.is_empty() {
        // One connection: nothing to resume from. Said, so a single step's "no 0-RTT"
        // or full handshake is not taken for the server's answer.
        let what = if strategy.early_data() {
            "0-RTT"
        } else {
            "resumption"
        };
        return Some(Finding::new(
            "one_connection_only",
            Cause::Protocol,
            format!(
                "{name} shows {what} from the second connection on (the first has no session to offer): trace --count 2 or more."
            ),
        )
        .with(Evidence::count(
            "steps (new connections after the first)",
            0,
            steps.len() as u64,
            "requests traced",
        )));
    }
    let of = later.len() as u64;
    let resumed = later
        .iter()
        .filter(|s| s.tls.as_ref().is_some_and(|t| t.resumed))
        .count() as u64;
    let population = "new connections after the first";
    if resumed == 0 {
        let cause = NoResumption::ServerGrantedNone { tries: of };
        let text = format!(
            "No TLS session was resumed: {}{}; the trace measured full handshakes, as --strategy close does. {}",
            cause.why(),
            if strategy.early_data() {
                " (and 0-RTT needs a resumed session)"
            } else {
                ""
            },
            cause.fix(None)
        );
        return Some(
            Finding::new(cause.code(), Cause::Protocol, text)
                .explaining(true)
                .with(Evidence::count("steps.tls.resumed", 0, of, population)),
        );
    }
    if !strategy.early_data() {
        return None;
    }
    early_data_never_accepted(strategy, &later, resumed)
}

/// 0-RTT asked for, and none of the `later` connections (`resumed` of them resumed)
/// had its request accepted in early data.
fn early_data_never_accepted(
    strategy: Strategy,
    later: &[&TraceStep],
    resumed: u64,
) -> Option<Finding> {
    let of = later.len() as u64;
    let population = "new connections after the first";
    let accepted = later
        .iter()
        .filter(|s| s.early_data == Some("accepted"))
        .count() as u64;
    if accepted > 0 {
        return None;
    }
    let rejected = later
        .iter()
        .filter(|s| s.early_data == Some("rejected"))
        .count() as u64;
    let handshakes = later.iter().filter(|s| s.tls.is_some()).count() as u64;
    // Over QUIC every handshake is TLS 1.3.
    let tls13 = later
        .iter()
        .filter(|s| strategy.quic() || s.tls.as_ref().is_some_and(|t| t.version == "TLSv1.3"))
        .count() as u64;
    let cause = NoEarlyData::judge(handshakes, tls13, resumed, rejected);
    let text = format!(
        "The server never accepted 0-RTT: 0 of {} went in early data; {}. The trace measured {} instead{}.",
        plural(
            of,
            "request on a new connection after the first",
            "requests on new connections after the first"
        ),
        cause.why(),
        if strategy.quic() {
            "resumed QUIC handshakes (h3-resumed)"
        } else {
            "resumed handshakes (close-resumed)"
        },
        cause.fix_clause(None)
    );
    Some(
        Finding::new(cause.code(), Cause::Protocol, text)
            .explaining(true)
            .with(Evidence::count(
                "steps.tls.version TLSv1.3",
                tls13,
                of,
                population,
            ))
            .with(Evidence::count(
                "steps.early_data.accepted",
                0,
                of,
                population,
            ))
            .with(Evidence::count(
                "steps.early_data.rejected",
                rejected,
                of,
                population,
            ))
            .with(Evidence::count(
                "steps.tls.resumed",
                resumed,
                of,
                population,
            )),
    )
}

/// HTTP/1 keep-alive asked for, and the server let no connection carry a second
/// request: why, from its responses (HTTP/1.0 without keep-alive, `Connection: close`),
/// judged by the one model of causes (`report::reuse`) over the responses, each its own
/// connection's.
fn reuse(strategy: Strategy, steps: &[TraceStep]) -> Option<Finding> {
    let n = steps.len() as u64;
    let h1 = steps.iter().all(|s| s.stream_id.is_none());
    if !strategy.persistent()
        || !h1
        || !none_reused(n, n)
        || steps.iter().any(|s| s.reused || s.persistent)
    {
        return None;
    }
    let says_close = |s: &TraceStep| {
        s.connection_header
            .as_deref()
            .is_some_and(|h| h.to_ascii_lowercase().contains("close"))
    };
    // An HTTP/1.0 answer that says `Connection: close` says the server's keep-alive
    // is off, as bench counts it.
    let http10 = steps
        .iter()
        .filter(|s| s.http_version == "HTTP/1.0" && !says_close(s))
        .count() as u64;
    let close = steps.iter().filter(|s| says_close(s)).count() as u64;
    let mut seen = Seen::new(n, "responses", Facts::default());
    seen.add(
        Ended::ServerHttp10,
        http10,
        vec![Evidence::count(
            "steps.http_version HTTP/1.0",
            http10,
            n,
            "responses",
        )],
    );
    seen.add(
        Ended::ServerCloseHeader,
        close,
        vec![Evidence::count(
            "steps.connection_header close",
            close,
            n,
            "responses",
        )],
    );
    let judged = seen.judge();
    let mut evidence = judged.evidence();
    if evidence.is_empty() {
        evidence.push(Evidence::count("steps.persistent", 0, n, "responses"));
    }
    Some(
        Finding::new(
            judged.code(),
            Cause::Reuse,
            format!(
                "{} Each request opened a new connection.",
                judged.sentence(&seen)
            ),
        )
        .explaining(true)
        .with_all(evidence)
        .with(Evidence::count(
            "steps (new connection)",
            n,
            n,
            "requests traced",
        )),
    )
}

/// HTTP/1: the server closed connections after a response without a word, and the next
/// request found them closed (it went again on a new connection): said with how many.
fn silent_close(steps: &[TraceStep]) -> Option<Finding> {
    let n = steps.iter().filter(|s| s.closed_silently).count() as u64;
    if n == 0 {
        return None;
    }
    let of = steps.len() as u64;
    let e = ServerEnds::Silently;
    Some(
        Finding::new(
            e.code(),
            Cause::Reuse,
            format!(
                "After {n} of {of} responses {}: the next request found it closed and went again on a new connection, as clients do; a client that does not retry fails there. It ends connections after a response or after a short idle time (`handshake doctor URL` measures which).",
                e.why()
            ),
        )
        .explaining(true)
        .with(Evidence::count("steps.closed_silently", n, of, "responses")),
    )
}

/// The setup phases as a sum: "dns + connect + ...".
fn setup_sum() -> String {
    let names: Vec<&str> = Phase::SETUP.iter().map(|p| p.name()).collect();
    names.join(" + ")
}

/// "2 requests over 1 connection: the first took 1.28 ms, 0.879 ms of it (69 %) setting
/// up its connection; on a reused connection a request took 0.210 ms." `None` when no
/// request was answered.
fn measured(steps: &[TraceStep]) -> Option<Finding> {
    let first = steps.first()?;
    let n = steps.len() as u64;
    let new = steps.iter().filter(|s| !s.reused).count() as u64;
    let setup = first.setup_ms();
    let share = if first.total_ms > 0.0 {
        setup / first.total_ms * 100.0
    } else {
        0.0
    };
    let mut f = Finding::new("measured", Cause::Measured, String::new())
        .with(Evidence::count(
            "steps (new connection)",
            new,
            n,
            "requests traced",
        ))
        .with(Evidence::figure(
            "steps[0].total_ms",
            first.total_ms,
            Some("ms"),
            "the first request",
        ))
        .with(Evidence::figure(
            &format!("steps[0] setup ({})", setup_sum()),
            setup,
            Some("ms"),
            "the first request",
        ));
    let mut text = format!(
        "{} over {}: the first took {} ms, {} ms of it ({share:.0} %) setting up its connection",
        plural_s(n, "request"),
        plural_s(new, "connection"),
        fmt_ms(first.total_ms),
        fmt_ms(setup),
    );
    if let Some(left) = first.request_left_ms {
        text.push_str(&format!(
            " (its request left in 0-RTT, {} ms in, without waiting for it)",
            fmt_ms(left)
        ));
        f = f.with(Evidence::figure(
            "steps[0].request_left_ms",
            left,
            Some("ms"),
            "the first request",
        ));
    }
    let mut reused: Vec<f64> = steps
        .iter()
        .filter(|s| s.reused)
        .map(|s| s.total_ms)
        .collect();
    reused.sort_by(f64::total_cmp);
    if let Some(m) = reused.get(reused.len() / 2) {
        text.push_str(&format!(
            "; on a reused connection a request took {} ms{}",
            fmt_ms(*m),
            if reused.len() > 1 { " (median)" } else { "" }
        ));
        f = f.with(Evidence::mean_ms(
            "steps.total_ms (median, reused connection)",
            *m,
            reused.len() as u64,
            "requests on a reused connection",
        ));
    }
    text.push('.');
    f.text = text;
    Some(f)
}
