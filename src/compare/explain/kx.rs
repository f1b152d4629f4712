//! The key exchange's sentence: the TLS groups a row's handshakes agreed on against
//! another's (`close@x25519`), the ClientHello and the server's first flight, and the
//! change in time per request, paired by round, when it is beyond the noise.

use super::{cpu_of, row_figure};
use crate::compare::ComparisonRow;
use crate::fmt::ms as fmt_ms;
use crate::report::finding::{Cause, Evidence, Finding};
use crate::report::ScenarioReport;

/// Two rows of one strategy with different key exchanges (`close@x25519mlkem768` and
/// `close@x25519`): the groups agreed on, the ClientHello and the server's first flight,
/// the HelloRetryRequests (a round trip each), and what it costs per request in time and
/// in client CPU, each a paired estimate over the rounds with its interval; a difference
/// whose interval holds no change, or under the noise threshold, is said to be none.
pub(in crate::compare) fn key_exchange(
    r: &ComparisonRow,
    rs: &ScenarioReport,
    other: &ComparisonRow,
    os: &ScenarioReport,
    noise_threshold: f64,
) -> Finding {
    let (h, oh) = (
        &rs.connections.tls_handshakes,
        &os.connections.tls_handshakes,
    );
    let mut line = format!(
        "Key exchange, {} against {}: {} against {}",
        r.name,
        other.name,
        agreed(h),
        agreed(oh)
    );
    if let Some((first, chosen)) = fell_back(r, h) {
        line.push_str(&format!(
            " ({} offered {first} first, the server chose {chosen})",
            r.name
        ));
    }
    let bytes = |what: &str, a: Option<f64>, b: Option<f64>| {
        a.zip(b)
            .map(|(a, b)| format!("; {what} {a:.0} B against {b:.0} B ({:+.0} B)", a - b))
            .unwrap_or_default()
    };
    line.push_str(&bytes(
        "ClientHello",
        h.client_hello_bytes,
        oh.client_hello_bytes,
    ));
    line.push_str(&bytes(
        "the server's first flight",
        h.server_flight_bytes,
        oh.server_flight_bytes,
    ));
    for (row, hs) in [(r, h), (other, oh)] {
        if hs.hello_retry_requests > 0 {
            let rt = row
                .round_trips
                .map(|t| format!(" ({:.2} round trips per request)", t.counted))
                .unwrap_or_default();
            line.push_str(&format!(
                "; {} met {} HelloRetryRequest{} in {} full handshakes, a round trip more each{rt}",
                row.name,
                hs.hello_retry_requests,
                if hs.hello_retry_requests == 1 {
                    ""
                } else {
                    "s"
                },
                hs.full
            ));
        }
    }
    let (time, cpu) = per_request(r, other, noise_threshold);
    let mut f = Finding::new(
        "key_exchange",
        Cause::Measured,
        format!("{line}. Per request, time: {time}; client CPU: {cpu}."),
    );
    for (row, hs) in [(r, h), (other, oh)] {
        f = f.with(Evidence::count(
            &row_figure(row, "tls_handshakes.hello_retry_requests"),
            hs.hello_retry_requests,
            hs.full,
            "full TLS handshakes",
        ));
        if let Some(b) = hs.client_hello_bytes {
            f = f.with(Evidence::figure(
                &row_figure(row, "tls_handshakes.client_hello_bytes"),
                b,
                Some("B"),
                "full TLS handshakes (mean)",
            ));
        }
    }
    f.with_all(cpu_of(r, other))
}

/// "X25519MLKEM768 on all 60 handshakes", "x25519 40, secp256r1 20", "no group known".
fn agreed(h: &crate::report::TlsHandshakes) -> String {
    let total: u64 = h.key_exchange.values().sum();
    match h.key_exchange.len() {
        0 => "no group known".to_string(),
        1 => {
            let (g, _) = h.key_exchange.iter().next().expect("one group");
            format!("{g} on all {total} handshakes")
        }
        _ => h
            .key_exchange
            .iter()
            .map(|(g, n)| format!("{g} {n}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The group a row offered first and the one the server chose instead on most
/// handshakes, when they differ.
fn fell_back(r: &ComparisonRow, h: &crate::report::TlsHandshakes) -> Option<(String, String)> {
    let first = r.tls_groups.as_ref()?.first()?.clone();
    let (chosen, _) = h.key_exchange.iter().max_by_key(|(_, n)| **n)?;
    (*chosen != first).then(|| (first, chosen.clone()))
}

/// `r` against `other` per request, in time and in client CPU, each a paired change
/// over the rounds said with its interval ("+16.0 µs [12.1, 20.3]").
pub(super) fn per_request(
    r: &ComparisonRow,
    other: &ComparisonRow,
    noise_threshold: f64,
) -> (String, String) {
    let time = paired_change(&r.rounds_ms, &other.rounds_ms, noise_threshold)
        .map_or_else(String::new, |c| c.said(fmt_ms, "ms"));
    let cpu = paired_change(
        &r.rounds_client_cpu_us,
        &other.rounds_client_cpu_us,
        noise_threshold,
    )
    .map_or_else(String::new, |c| c.said(|v| format!("{v:.1}"), "µs"));
    (time, cpu)
}

/// A paired change of one figure between two rows over the same rounds.
pub(super) struct Change {
    center: f64,
    interval: Option<(f64, f64)>,
    /// Beyond the noise: the interval of the difference clear of 0 and the ratio's beyond
    /// the noise threshold, on the same side.
    real: bool,
}

impl Change {
    /// "+16.0 µs [12.1, 20.3]", or "no measurable difference (+0.4 µs [-1.2, 2.0])", or
    /// with too few rounds, "+0.4 µs (too few rounds for an interval)".
    pub(super) fn said(&self, num: impl Fn(f64) -> String, unit: &str) -> String {
        let center = if self.center >= 0.0 {
            format!("+{}", num(self.center))
        } else {
            num(self.center)
        };
        match self.interval {
            None => format!("{center} {unit} (too few rounds for an interval)"),
            Some((lo, hi)) => {
                let figure = format!("{center} {unit} [{}, {}]", num(lo), num(hi));
                if self.real {
                    figure
                } else {
                    format!("no measurable difference ({figure})")
                }
            }
        }
    }
}

/// `a` against `b`, round by round (they ran in the same rounds).
pub(super) fn paired_change(a: &[f64], b: &[f64], noise_threshold: f64) -> Option<Change> {
    let pairs: Vec<(f64, f64)> = a.iter().copied().zip(b.iter().copied()).collect();
    let diffs: Vec<f64> = pairs.iter().map(|(x, y)| x - y).collect();
    let logs: Vec<f64> = pairs
        .iter()
        .filter(|(x, y)| *x > 0.0 && *y > 0.0)
        .map(|(x, y)| (x / y).ln())
        .collect();
    let d = crate::stats::paired::hodges_lehmann(&diffs, crate::compare::CONFIDENCE)?;
    let ratio = crate::stats::paired::hodges_lehmann(&logs, crate::compare::CONFIDENCE)
        .and_then(|e| e.interval);
    let edge = (1.0 + noise_threshold).ln();
    let real = match (d.interval, ratio) {
        (Some((lo, hi)), Some((rlo, rhi))) => (lo > 0.0 && rlo > edge) || (hi < 0.0 && rhi < -edge),
        _ => false,
    };
    Some(Change {
        center: d.center,
        interval: d.interval,
        real,
    })
}
