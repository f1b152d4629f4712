//! The sentences of a comparison, each a finding with the figures it was built from:
//! why a row costs what it costs against its group's best (connections and handshakes,
//! ms, round trips on a real link, CPU), a failed row's cause, and the round trips each
//! row takes.

pub(super) mod cert;
pub(super) mod kx;

use super::{ComparisonRow, RoundTrips};
use crate::fmt::ms as fmt_ms;
use crate::record::Phase;
use crate::report::finding::{Cause, Evidence, Finding};
use crate::report::ScenarioReport;

/// `rows["NAME"].FIELD`: a row's figure, by the name the JSON gives it.
fn row_figure(r: &ComparisonRow, field: &str) -> String {
    format!("rows[\"{}\"].{field}", r.name)
}

/// What a row was judged by against the best: the paired estimates of its time ratio
/// and its extra ms per request over the rounds, each interval's ends beside it.
fn judged_by(r: &ComparisonRow) -> Vec<Evidence> {
    let rounds = r.rounds_ms.len() as u64;
    let mut out = vec![
        Evidence::mean(
            &row_figure(r, "times_slower"),
            r.times_slower,
            None,
            rounds,
            "paired rounds",
        ),
        Evidence::mean(
            &row_figure(r, "extra_ms_per_request"),
            r.extra_ms_per_request,
            Some("ms"),
            rounds,
            "paired rounds",
        ),
    ];
    let ends = [
        ("times_slower_ci", r.times_slower_ci, None),
        (
            "extra_ms_per_request_ci",
            r.extra_ms_per_request_ci,
            Some("ms"),
        ),
    ];
    for (field, ci, unit) in ends {
        if let Some([lo, hi]) = ci {
            for (end, v) in [("0", lo), ("1", hi)] {
                out.push(Evidence::mean(
                    &row_figure(r, &format!("{field}[{end}]")),
                    v,
                    unit,
                    rounds,
                    "paired rounds (95 % interval)",
                ));
            }
        }
    }
    out
}

/// A row's connections and TLS handshakes against the requests it got answered, over
/// all its rounds.
fn connections_of(r: &ComparisonRow, rs: &ScenarioReport) -> Vec<Evidence> {
    let c = &rs.connections;
    let mut out = vec![Evidence::count(
        &row_figure(r, "connections.opened"),
        c.opened,
        rs.requests.answered,
        "answered requests",
    )];
    let h = &c.tls_handshakes;
    if h.full + h.resumed > 0 {
        out.push(Evidence::count(
            &row_figure(r, "tls_handshakes.full"),
            h.full,
            c.opened,
            "connections",
        ));
        out.push(Evidence::count(
            &row_figure(r, "tls_handshakes.resumed"),
            h.resumed,
            c.opened,
            "connections",
        ));
    }
    if c.early_data.attempted > 0 {
        out.push(Evidence::count(
            &row_figure(r, "early_data.accepted"),
            c.early_data.accepted,
            rs.requests.answered,
            "answered requests",
        ));
    }
    out
}

/// The client's CPU per request of `r` and `best` (medians over the rounds).
fn cpu_of(r: &ComparisonRow, best: &ComparisonRow) -> Vec<Evidence> {
    [r, best]
        .iter()
        .map(|x| {
            Evidence::mean(
                &row_figure(x, "client_cpu_us_per_request.median"),
                x.client_cpu_us_per_request.median,
                Some("µs"),
                x.rounds_ms.len() as u64,
                "rounds",
            )
        })
        .collect()
}

/// A row that did not succeed in every round: in how many no request succeeded, and the
/// leading error with its message and hint.
pub(super) fn failed_explanation(r: &ComparisonRow, rs: &ScenarioReport, rounds: usize) -> Finding {
    let when = if r.failed_rounds == rounds {
        "no request succeeded in any round".to_string()
    } else {
        format!(
            "no request succeeded in {} of {rounds} rounds",
            r.failed_rounds
        )
    };
    let why = crate::report::failure::leading_sentence(rs)
        .map(|s| format!(" {s}"))
        .unwrap_or_default();
    Finding::new(
        "row_failed",
        Cause::Transport,
        format!("{}: failed, not ranked: {when}.{why}", r.name),
    )
    .with(Evidence::count(
        &row_figure(r, "failed_rounds"),
        r.failed_rounds as u64,
        rounds as u64,
        "rounds",
    ))
    .with(Evidence::count(
        &format!("scenarios[\"{}\"].requests.answered", r.name),
        rs.requests.answered,
        rs.requests.attempted,
        "attempts",
    ))
}

/// One sentence per group on a real link: each row's round trips per request, counted
/// and measured, and how many each saves against the row that spends the most.
pub(super) fn round_trips_line(
    group: &str,
    rows: &[ComparisonRow],
    idx: &[usize],
    rtt: f64,
) -> Option<Finding> {
    let with: Vec<(&ComparisonRow, RoundTrips)> = idx
        .iter()
        .filter_map(|&i| rows[i].round_trips.map(|r| (&rows[i], r)))
        .collect();
    let (most, top) = with
        .iter()
        .max_by(|a, b| a.1.counted.total_cmp(&b.1.counted))
        .copied()?;
    let each: Vec<String> = with
        .iter()
        .map(|(r, t)| format!("{} {:.2} [{:.2}]", r.name, t.counted, t.measured))
        .collect();
    let saves: Vec<String> = with
        .iter()
        .filter(|(r, t)| r.name != most.name && top.counted - t.counted >= 0.05)
        .map(|(r, t)| {
            format!(
                "{} saves {:.2} [{:.2}]",
                r.name,
                top.counted - t.counted,
                top.measured - t.measured
            )
        })
        .collect();
    let mut line = format!(
        "Round trips per request over {group} at {} ms, counted from the handshakes [measured: time per request / RTT]: {} (a request takes 1; before it, on a new connection, a TCP connect 1, a TLS 1.3 handshake 1 (TLS 1.2: 2, resumed 1), a QUIC handshake 1 with its TLS inside, and none that a request sent in 0-RTT waits for).",
        fmt_ms(rtt),
        each.join(", ")
    );
    if !saves.is_empty() {
        line.push_str(&format!(" Against {}: {}.", most.name, saves.join(", ")));
    }
    let mut f = Finding::new("round_trips", Cause::Measured, line).with(Evidence::figure(
        &format!("rtt_ms[\"{group}\"]"),
        rtt,
        Some("ms"),
        "the group's round trip",
    ));
    for (r, t) in &with {
        f = f
            .with(Evidence::figure(
                &row_figure(r, "round_trips.counted"),
                t.counted,
                None,
                "answered requests (per request)",
            ))
            .with(Evidence::figure(
                &row_figure(r, "round_trips.measured"),
                t.measured,
                None,
                "rounds (median time per request / RTT)",
            ));
    }
    Some(f)
}

/// The sentence a comparison is run for, one per group: what the best row (the cheapest)
/// saves per request against the costliest ranked row, in ms, round trips on a real link,
/// and CPU, then what the costliest pays for and how often. Said as no difference when
/// the costliest is within the noise, and as too few rounds when it cannot be judged.
/// `None` for a group of one ranked row.
pub(super) fn headline(
    rows: &[ComparisonRow],
    scenarios: &[ScenarioReport],
    ranked: &[usize],
    best: usize,
    rtt: Option<f64>,
) -> Option<Finding> {
    let worst = ranked
        .iter()
        .copied()
        .filter(|&i| i != best)
        .max_by(|a, b| {
            rows[*a]
                .time_per_request_ms
                .median
                .total_cmp(&rows[*b].time_per_request_ms.median)
        })?;
    let (b, w) = (&rows[best], &rows[worst]);
    let (bs, ws) = (&scenarios[best], &scenarios[worst]);
    if w.times_slower_ci.is_none() {
        let text = format!(
            "{} is the cheapest and {} the costliest ({}), but {} rounds are too few to tell them apart (a 95 % interval needs {}).",
            b.name,
            w.name,
            ratio_with_ci(w),
            w.rounds_ms.len(),
            crate::report::comparison::MIN_ROUNDS_FOR_INTERVAL
        );
        return Some(Finding::new("too_few_rounds", Cause::Measured, text).with_all(judged_by(w)));
    }
    if !w.significant {
        let text = format!(
            "No strategy costs measurably more than {} here: the costliest, {}, is within the noise ({}).",
            b.name,
            w.name,
            ratio_with_ci(w)
        );
        return Some(
            Finding::new("no_measurable_difference", Cause::Measured, text).with_all(judged_by(w)),
        );
    }
    let round_trips = match (w.round_trips, b.round_trips) {
        (Some(a), Some(c)) if a.counted - c.counted >= 0.05 => {
            format!(", {:.1} round trips", a.counted - c.counted)
        }
        _ => String::new(),
    };
    let cpu = w.client_cpu_us_per_request.median - b.client_cpu_us_per_request.median;
    let cpu = if cpu >= 0.5 {
        format!(" and {cpu:.0} µs of client CPU")
    } else {
        String::new()
    };
    let mut line = format!(
        "{} saves {} ms{round_trips}{cpu} per request against {} ({:.2}x the time).",
        b.name,
        fmt_ms(w.extra_ms_per_request),
        w.name,
        w.times_slower
    );
    let through = hop(ws, &b.name, bs, "");
    if !through.is_empty() {
        line.push_str(&format!(" {}{through}.", w.name));
    }
    let paid = paid(ws, bs, rtt);
    if let (Some(often), false) = (&paid.often, paid.parts.is_empty()) {
        line.push_str(&format!(
            " {} pays {often}: {}.",
            w.name,
            paid.parts.join(", ")
        ));
    }
    Some(
        Finding::new("cheapest_saves", Cause::Measured, line)
            .with_all(judged_by(w))
            .with_all(connections_of(w, ws))
            .with_all(connections_of(b, bs))
            .with_all(cpu_of(w, b)),
    )
}

/// How often something happens per request: "for every request", "2 per request",
/// "for 1 in 10 requests".
fn how_often(per_request: f64) -> Option<String> {
    if per_request < 0.005 {
        return None;
    }
    let rounded = per_request.round();
    if rounded >= 1.0 && (per_request - rounded).abs() < 0.05 {
        return Some(if rounded == 1.0 {
            "for every request".to_string()
        } else {
            format!("{rounded:.0} per request")
        });
    }
    if per_request < 1.0 {
        let every = (1.0 / per_request).round();
        return Some(if every <= 1.0 {
            "for every request".to_string()
        } else {
            format!("for 1 in {every:.0} requests")
        });
    }
    Some(format!("{per_request:.2} per request"))
}

/// Where one of two rows goes through a forward proxy and the other (`other`) goes
/// direct, the hop that differs, after `and` or `but`: " but goes through the proxy
/// http://…, which close direct does not" (its forwarding and its own connections to the
/// origin are in each of the row's requests); empty where both take the same path.
fn hop(rs: &ScenarioReport, other: &str, os: &ScenarioReport, conj: &str) -> String {
    let conj = if conj.is_empty() {
        String::new()
    } else {
        format!(" {conj}")
    };
    match (&rs.connections.proxy, &os.connections.proxy) {
        (Some(p), None) => format!(
            "{conj} goes through the proxy {}, which {other} does not",
            p.url
        ),
        (None, Some(p)) => format!(
            "{conj} goes direct, where {other} goes through the proxy {}",
            p.url
        ),
        _ => String::new(),
    }
}

/// "7.9x [7.1-8.8]" and "+0.460 ms [0.410-0.520]".
fn ratio_with_ci(r: &ComparisonRow) -> String {
    match r.times_slower_ci {
        Some([lo, hi]) => format!("{:.2}x [{lo:.2}-{hi:.2}]", r.times_slower),
        None => format!("{:.2}x", r.times_slower),
    }
}

fn extra_with_ci(r: &ComparisonRow) -> String {
    let signed = |ms: f64| {
        if ms >= 0.0 {
            format!("+{}", fmt_ms(ms))
        } else {
            fmt_ms(ms)
        }
    };
    match r.extra_ms_per_request_ci {
        Some([lo, hi]) => format!(
            "{} ms per request [{}, {}]",
            signed(r.extra_ms_per_request),
            fmt_ms(lo),
            fmt_ms(hi)
        ),
        None => format!("{} ms per request", signed(r.extra_ms_per_request)),
    }
}

/// TLS early data: how many requests went in it, and what that saved (a fact of the
/// run, said whether or not the row differs from the best).
fn early_note(rs: &ScenarioReport, rtt: Option<f64>) -> Option<String> {
    let ed = rs.connections.early_data;
    if ed.attempted == 0 {
        return None;
    }
    let rejected = if ed.rejected > 0 {
        format!(
            " ({} more were rejected and sent again after the handshake)",
            ed.rejected
        )
    } else {
        String::new()
    };
    let effect = if rtt.is_some() {
        "each of those was on its way during the handshake, its response a round trip sooner; the others (full handshakes, or no ticket allowing it: tickets are used once) waited for the handshake"
    } else {
        "each of those was on its way during the handshake; the others (full handshakes, or no ticket allowing it: tickets are used once) waited for it"
    };
    Some(format!(
        " {} of {} requests went in TLS 1.3 early data (0-RTT){rejected}: {effect}.",
        ed.accepted, rs.requests.answered
    ))
}

/// One short sentence (two at most): what `r` pays per request that `best` does not,
/// in connections and handshakes (ms each; round trips only on a real link), what that
/// costs per request with its interval, and the extra CPU. A difference within the noise
/// is said to be none and not explained.
/// A row set against an earlier row of its strategy: one without the client certificate
/// against the one with it (whichever came first), or another key exchange.
pub(super) fn against_its_strategy(
    (a, ar, as_): (&crate::plan::Choice, &ComparisonRow, &ScenarioReport),
    (b, br, bs): (&crate::plan::Choice, &ComparisonRow, &ScenarioReport),
    noise_threshold: f64,
) -> Finding {
    match (a.no_cert, b.no_cert) {
        (true, false) => cert::client_certificate(br, bs, ar, as_, noise_threshold),
        (false, true) => cert::client_certificate(ar, as_, br, bs, noise_threshold),
        _ => kx::key_exchange(ar, as_, br, bs, noise_threshold),
    }
}

pub(super) fn explain(
    r: &ComparisonRow,
    rs: &ScenarioReport,
    best: &ComparisonRow,
    bs: &ScenarioReport,
    rtt: Option<f64>,
    noise_threshold: f64,
) -> Finding {
    if let Some(f) = unjudged(r, rs, best, rtt, noise_threshold) {
        return f.with_all(connections_of(r, rs));
    }
    let paid = paid(rs, bs, rtt);
    let costs = format!(
        "{}, {} the time of {}",
        extra_with_ci(r),
        ratio_with_ci(r),
        best.name
    );
    let cpu = cpu_sentence(r, best);
    let note = format!("{}{}", paid.note, cert::note(rs));
    let text = match paid.often {
        Some(often) => format!(
            "{} opens a new connection {often} ({}; {}){}: {costs}.{note}{cpu}",
            r.name,
            connection_counts(rs, best, bs),
            paid.parts.join(", "),
            hop(rs, &best.name, bs, "and")
        ),
        None => format!(
            "{} opens no more connections than {}{}: {costs}.{note}{cpu}",
            r.name,
            best.name,
            hop(rs, &best.name, bs, "but")
        ),
    };
    Finding::new("costs_more", Cause::Measured, text)
        .with_all(judged_by(r))
        .with_all(connections_of(r, rs))
        .with_all(connections_of(best, bs))
        .with_all(cpu_of(r, best))
}

/// The sentence for a row that cannot be set against the best (too few rounds) or is
/// within the noise of it; `None` when the difference is real.
fn unjudged(
    r: &ComparisonRow,
    rs: &ScenarioReport,
    best: &ComparisonRow,
    rtt: Option<f64>,
    noise_threshold: f64,
) -> Option<Finding> {
    if r.times_slower_ci.is_none() {
        let text = format!(
            "{}: not enough rounds to judge against {} ({} of the {} a 95 % interval needs; {}).{}",
            r.name,
            best.name,
            r.rounds_ms.len(),
            crate::report::comparison::MIN_ROUNDS_FOR_INTERVAL,
            ratio_with_ci(r),
            early_note(rs, rtt).unwrap_or_default()
        );
        return Some(Finding::new("too_few_rounds", Cause::Measured, text).with_all(judged_by(r)));
    }
    if r.significant {
        return None;
    }
    let [lo, hi] = r.times_slower_ci.unwrap_or([1.0, 1.0]);
    let why = match &r.repeat_of {
        Some(first) => {
            format!("an A/A run of {first}: the spread between the two is the machine's noise")
        }
        None if lo <= 1.0 && hi >= 1.0 => "the interval contains 1".to_string(),
        None if r
            .extra_ms_per_request_ci
            .is_some_and(|[lo, hi]| lo <= 0.0 && hi >= 0.0) =>
        {
            "the interval of the difference in ms contains 0".to_string()
        }
        // The interval lies on one side of 1 and reaches within the threshold there.
        None => format!(
            "the interval's {} end, {:.2}x, is within the {:.0} % noise threshold",
            if lo > 1.0 { "low" } else { "high" },
            if lo > 1.0 { lo } else { hi },
            noise_threshold * 100.0
        ),
    };
    let text = format!(
        "{}: no measurable difference from {} ({}; {why}).{}",
        r.name,
        best.name,
        ratio_with_ci(r),
        early_note(rs, rtt).unwrap_or_default()
    );
    Some(Finding::new("no_measurable_difference", Cause::Measured, text).with_all(judged_by(r)))
}

/// What a row pays that the best does not: each handshake with its cost, how often the
/// row opens a connection, and a note (what resumption or early data did).
struct Paid {
    parts: Vec<String>,
    often: Option<String>,
    note: String,
}

/// A handshake's cost: its time, and on a real link the round trips it needs (TCP 1,
/// TLS 1.3 full or resumed 1, TLS 1.2 full 2, resumed 1) with the rest as CPU.
fn cost(rtt: Option<f64>, what: &str, ms: f64, round_trips: f64) -> String {
    match rtt {
        Some(rtt) => {
            let rest = (ms - round_trips * rtt).max(0.0);
            format!(
                "{what} {} ms: {round_trips:.0} round trip{} + {} ms",
                fmt_ms(ms),
                if round_trips == 1.0 { "" } else { "s" },
                fmt_ms(rest)
            )
        }
        None => format!("{what} {} ms", fmt_ms(ms)),
    }
}

/// Per request, how many more of each than the best: connections opened, full and
/// resumed TLS handshakes.
fn per_request_excess(rs: &ScenarioReport, bs: &ScenarioReport) -> (f64, f64, f64) {
    let per = |s: &ScenarioReport, n: u64| n as f64 / s.requests.answered.max(1) as f64;
    let (c, b) = (&rs.connections, &bs.connections);
    (
        per(rs, c.opened) - per(bs, b.opened),
        per(rs, c.tls_handshakes.full) - per(bs, b.tls_handshakes.full),
        per(rs, c.tls_handshakes.resumed) - per(bs, b.tls_handshakes.resumed),
    )
}

fn paid(rs: &ScenarioReport, bs: &ScenarioReport, rtt: Option<f64>) -> Paid {
    let (d_tcp, d_full, d_res) = per_request_excess(rs, bs);
    let own_rate = rs.connections.opened as f64 / rs.requests.answered.max(1) as f64;
    let new = &rs.phases_ms.new;
    let tls13 = rs.connections.tls_handshakes.tls13 > 0;
    let version = if tls13 { "TLS 1.3" } else { "TLS 1.2" };
    let mut paid = Paid {
        parts: Vec::new(),
        often: None,
        note: String::new(),
    };
    // QUIC: transport and TLS 1.3 in one handshake of 1 round trip (with 0-RTT, the
    // request does not wait for it).
    let quic = rs.protocol == "h3";
    // Connections whose request went in 0-RTT: it did not wait for their handshake.
    let early = rs.connections.early_data.accepted;
    let in_0rtt = format!(
        "the request sent in 0-RTT without waiting for it on {early} of {} connections",
        rs.connections.opened
    );
    if let Some(o) = how_often(d_tcp) {
        paid.parts.push(if !quic {
            cost(rtt, "TCP connect", new[Phase::Connect].mean, 1.0)
        } else {
            let kind = if d_full >= d_res { "full" } else { "resumed" };
            let what = format!("QUIC handshake with a {kind} TLS 1.3 inside");
            if early > 0 {
                format!("{what}, {in_0rtt}")
            } else {
                cost(rtt, &what, new[Phase::QuicHandshake].mean, 1.0)
            }
        });
        // The row's own rate, not its excess over the best's (close opens one for every
        // request even where keep-alive's 10 workers open one for every other).
        paid.often = how_often(own_rate).or(Some(o));
    }
    if quic {
        // Counted with the QUIC handshake above.
    } else if d_full >= 0.005 && d_full >= d_res {
        let what = format!("full {version} handshake");
        let round_trips = if tls13 { 1.0 } else { 2.0 };
        paid.parts
            .push(cost(rtt, &what, new[Phase::Tls].mean, round_trips));
    } else if d_res >= 0.005 && early > 0 {
        paid.parts
            .push(format!("resumed {version} handshake, {in_0rtt}"));
    } else if d_res >= 0.005 {
        let what = format!("resumed {version} handshake");
        paid.parts.push(cost(rtt, &what, new[Phase::Tls].mean, 1.0));
        if rtt.is_some() {
            paid.note = if tls13 {
                " A resumed TLS 1.3 handshake still takes its round trip: resumption saves CPU, not round trips (only 0-RTT does)."
            } else {
                " A resumed TLS 1.2 handshake takes 1 round trip where a full one takes 2."
            }
            .to_string();
        }
    }
    if let Some(early) = early_note(rs, rtt) {
        paid.note = early;
    }
    if paid.often.is_none() && how_often(d_full.max(d_res)).is_some() {
        // Its connections cost more than the best's, not more of them.
        paid.often = how_often(own_rate);
    }
    paid
}

/// " The client spends 40 µs and the server 12 µs more CPU per request." (or nothing,
/// under half a µs).
fn cpu_sentence(r: &ComparisonRow, best: &ComparisonRow) -> String {
    let server = match (
        &r.server_cpu_us_per_request,
        &best.server_cpu_us_per_request,
    ) {
        (Some(a), Some(b)) if a.median - b.median >= 0.5 => {
            format!(" and the server {:.0} µs", a.median - b.median)
        }
        _ => String::new(),
    };
    let d_client = r.client_cpu_us_per_request.median - best.client_cpu_us_per_request.median;
    if d_client >= 0.5 || !server.is_empty() {
        format!(
            " The client spends {:.0} µs{server} more CPU per request.",
            d_client.max(0.0)
        )
    } else {
        String::new()
    }
}

/// "120 connections for 120 requests; keepalive 60, one per worker per round": the row's
/// own connections and the best's, both over all rounds, from which the sentence's rate
/// comes.
fn connection_counts(rs: &ScenarioReport, best: &ComparisonRow, bs: &ScenarioReport) -> String {
    let opened = bs.connections.opened;
    let per_round = bs.concurrency as u64 * best.rounds_ms.len().max(1) as u64;
    let per_worker = if opened == per_round && bs.concurrency > 1 {
        ", one per worker per round"
    } else {
        ""
    };
    let own = rs.connections.opened;
    format!(
        "{own} connection{} for {} requests; {} {opened}{per_worker}",
        if own == 1 { "" } else { "s" },
        rs.requests.answered,
        best.name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::comparison::Spread;

    #[test]
    fn spread_is_median_and_range() {
        assert_eq!(
            Spread::of(&[3.0, 1.0, 2.0]),
            Spread {
                median: 2.0,
                min: 1.0,
                max: 3.0
            }
        );
        assert_eq!(Spread::of(&[4.0, 1.0]).median, 2.5);
    }

    #[test]
    fn how_often_reads_as_english() {
        assert_eq!(how_often(1.0).unwrap(), "for every request");
        assert_eq!(how_often(0.97).unwrap(), "for every request");
        assert_eq!(how_often(0.1).unwrap(), "for 1 in 10 requests");
        assert_eq!(how_often(2.0).unwrap(), "2 per request");
        assert_eq!(how_often(0.001), None);
    }
}
