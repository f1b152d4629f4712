//! doctor's idle timeout, judged: the range its probes found, said as its bounds or as
//! a close that moved with when each connection went idle (a coarse timer), the bound a
//! client must stay under, and whether the server's `Keep-Alive: timeout=` matches.

use crate::fmt::ms as fmt_ms;
use crate::report::doctor::{IdleTimeout, ServerKind};
use crate::report::finding::{Cause, Evidence, Finding};
use crate::report::fixes::{fix, Setting};

/// Below this idle timeout, pools and load balancers in front commonly outlive it.
const SHORT_IDLE_S: f64 = 60.0;

/// The finding of an idle-timeout probe: "{label}: the server {ends} after A-B s (N
/// probes)." or "{label}: idle connections stay open for at least A s (--max-idle)."
/// Returns the range, as written, and the bound every probe supports (s), when the
/// server ends idle connections sooner than pools and load balancers commonly keep them
/// (a problem to name).
pub(super) fn idle_finding(
    i: &IdleTimeout,
    label: &str,
    (ends, figure): (&str, &str),
    findings: &mut Vec<Finding>,
) -> Option<(String, f64)> {
    let at_least = fmt_ms(i.at_least_s);
    let Some(hi) = i.at_most_s else {
        findings.push(
            Finding::new(
                "idle_timeout_not_met",
                Cause::Measured,
                format!(
                    "{label}: idle connections stay open for at least {at_least} s (--max-idle)."
                ),
            )
            .with(idle_evidence(i, figure)),
        );
        return None;
    };
    let said = if i.varies {
        // A coarse timer: the close moved with when each connection went idle.
        format!(
            "{label}: the server {ends} after different idle times: one after {} s, while another was still open after {at_least} s ({} probes going idle at moments spread over a second: a timer that ticks coarsely closes a connection anywhere within a tick past its timeout).",
            fmt_ms(hi),
            i.probes
        )
    } else {
        format!(
            "{label}: the server {ends} after {at_least}-{} s ({} probes).",
            fmt_ms(hi),
            i.probes
        )
    };
    findings
        .push(Finding::new("idle_timeout", Cause::Measured, said).with(idle_evidence(i, figure)));
    // Measured between probes, so said as its bounds: the range, and the bound every
    // probe supports, which a client must stay under.
    let [lo, top] = i.bounds().unwrap_or([i.at_least_s, hi]);
    // Short when surely under the limit: its upper bound, or where the close moves, the
    // earliest close seen.
    let short = if i.varies { lo } else { top } < SHORT_IDLE_S;
    short.then(|| (format!("{}-{}", fmt_ms(lo), fmt_ms(top)), i.safe_s()))
}

/// How long a client may keep a connection idle, by what the probes found: under the
/// bound every probe supports; for a server whose timer ticks coarsely, a tick under it,
/// for a connection may close up to a tick before any probe saw: by the identified
/// server's own tick (lighttpd's second), whether or not the probes saw the close move;
/// where they saw it move and the tick is not known, without a number doctor cannot
/// measure.
fn stay_under(i: &IdleTimeout, server: Option<ServerKind>, safe: f64) -> String {
    match (i.varies, server.and_then(ServerKind::idle_tick_s)) {
        (false, None) => format!(
            "a client pool whose idle timeout is {0} s or longer will meet stale connections (and a load balancer in front, 502s); keep it under {0} s",
            fmt_ms(safe)
        ),
        (_, Some(tick)) => format!(
            "its timer ticks every {} s, so a connection may close up to a tick before any probe saw one: a client pool whose idle timeout is {1} s or longer may meet stale connections (and a load balancer in front, 502s); keep it under {1} s",
            fmt_ms(tick),
            fmt_ms((safe - tick).max(0.0))
        ),
        (true, None) => format!(
            "a timer that ticks coarsely may close a connection up to a tick before any probe saw one, and its tick is not seen from here: keep a client pool's idle timeout well under {} s (by a second, for a timer that ticks once a second)",
            fmt_ms(safe)
        ),
    }
}

/// How an idle timeout's range was found: between two probes, or spread by when each
/// connection went idle (a coarse timer).
pub(super) fn how_bounded(i: &IdleTimeout) -> &'static str {
    if i.varies {
        "as the probes saw it, by when each connection went idle"
    } else {
        "between two probes"
    }
}

/// An idle timeout as the probes bound it: between the longest idle time a connection
/// survived and the shortest after which it was found closed (in seconds).
pub(super) fn idle_evidence(i: &IdleTimeout, figure: &str) -> Evidence {
    Evidence {
        // Open at the probe's limit: a lower bound only, the value.
        bounds: i.bounds(),
        ..Evidence::mean(figure, i.safe_s(), Some("s"), i.probes, "idle probes")
    }
}

/// The idle timeout found, and whether the server's `Keep-Alive: timeout=` matches it.
pub(super) fn judge_idle(
    i: &IdleTimeout,
    server: Option<ServerKind>,
    findings: &mut Vec<Finding>,
    problems: &mut Vec<Finding>,
) {
    let ends = ("closes idle connections", "idle_timeout");
    if let Some((range, safe)) = idle_finding(i, "Idle timeout", ends, findings) {
        problems.push(Finding::new("idle_timeout_short", Cause::Reuse, format!(
            "The server closes idle connections after {range} s ({}): {}, or raise the server's idle timeout above the pool's {}.",
            how_bounded(i),
            stay_under(i, server, safe),
            fix(Setting::IdleTimeout, server)
        )).with(idle_evidence(i, "idle_timeout")));
    }
    if let Some(c) = i.claimed_s {
        let hi = i.at_most_s.unwrap_or(f64::INFINITY);
        let claimed = Evidence::figure(
            "idle_timeout.claimed_s",
            c,
            Some("s"),
            "the server's Keep-Alive header",
        );
        let f = |code, cause, text| {
            Finding::new(code, cause, text)
                .with(claimed.clone())
                .with(idle_evidence(i, "idle_timeout"))
        };
        let [lo, hi] = i.bounds().unwrap_or([i.at_least_s, hi]);
        if c + 1.0 < lo || c > hi + 1.0 {
            problems.push(f("keep_alive_header_mismatch", Cause::Reuse, format!(
                "The server's `Keep-Alive: timeout={c}` header does not match what it does (idle connections closed after {}-{} s): clients that trust the header will misjudge reuse.",
                fmt_ms(lo),
                i.at_most_s.map_or("∞".into(), |_| fmt_ms(hi))
            )));
        } else if i.at_most_s.is_none() {
            // Open at the probe's limit: the claim is not contradicted, not confirmed.
            findings.push(f("keep_alive_header_not_contradicted", Cause::Measured, format!(
                "Its `Keep-Alive: timeout={c}` header is not contradicted: idle connections stayed open for at least {} s, the probe's limit (--max-idle {}s would check it).",
                fmt_ms(i.at_least_s),
                (c + 5.0).ceil()
            )));
        } else {
            findings.push(f(
                "keep_alive_header_matches",
                Cause::Measured,
                format!(
                    "Its `Keep-Alive: timeout={c}` header matches what it does (idle connections closed after {}-{} s; the header counts whole seconds).",
                    fmt_ms(i.at_least_s),
                    fmt_ms(hi)
                ),
            ));
        }
    }
}
