//! The comparison block of the report (`compare`): rows of strategies set against the
//! best of their group, and the sweep over round-trip times. Types only: `compare` fills
//! them, the renderers read them.

use serde::Serialize;

/// The fewest rounds that give a 95 % interval over paired rounds (the signed-rank
/// test's smallest tail with 5 pairs is 1/32, over 2.5 %); with fewer a row is not
/// judged.
pub(crate) const MIN_ROUNDS_FOR_INTERVAL: usize = 6;

/// Median and range of one figure over the rounds.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub(crate) struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub(crate) fn of(values: &[f64]) -> Spread {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Spread {
                median: 0.0,
                min: 0.0,
                max: 0.0,
            };
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

/// One row of the comparison table.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ComparisonRow {
    pub name: String,
    pub group: String,
    pub strategy: String,
    pub url: String,
    /// Time per request seen by one worker: concurrency × wall time / answered requests (any status).
    pub time_per_request_ms: Spread,
    pub wall_s: Spread,
    pub requests_per_s: Spread,
    pub latency_mean_ms: Spread,
    pub latency_p99_ms: Spread,
    /// Per round.
    pub connections_opened: Spread,
    /// `-L`: responses per round that were redirects, followed (each hop a request of
    /// its own, counted in the time per request).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirects: Option<Spread>,
    pub tls_full: Spread,
    pub tls_resumed: Spread,
    /// Mean dns + connect + tls of a new connection.
    pub setup_ms_per_new_connection: Spread,
    pub client_cpu_us_per_request: Spread,
    /// With the embedded server: its CPU per request, on its own threads.
    pub server_cpu_us_per_request: Option<Spread>,
    /// With the embedded server: connections it accepted over all rounds of this row.
    pub server_connections_accepted: Option<u64>,
    /// The key-exchange groups this row's client offered, most preferred first, when
    /// chosen for the row (`close@x25519`); absent: the run's offer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_groups: Option<Vec<String>>,
    /// Time per request in each round, in the order the rounds ran (ms).
    pub rounds_ms: Vec<f64>,
    /// The client's CPU per request in each round (µs), in the same order.
    pub rounds_client_cpu_us: Vec<f64>,
    /// Rounds in which no request succeeded: a row with any is failed and not ranked
    /// (its time per request is undefined there).
    pub failed_rounds: usize,
    /// Every response was an error (none 2xx, 3xx or accepted by `--ok-status`): its
    /// times are those of the error answers, so it is not ranked (best false,
    /// significant false) and the headline says what the server said instead.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub no_success: bool,
    /// What the row's strategy is about and did not happen ("no connection was reused",
    /// "no TLS session was resumed", "no request went in 0-RTT"): its figures are not
    /// those of what it is named for, so it is not ranked (best false, significant
    /// false).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feature_missing: Option<&'static str>,
    /// Time per request relative to the best row of the group: the Hodges-Lehmann
    /// estimate of the per-round ratio (rounds paired), 1 for the best row.
    pub times_slower: f64,
    /// 95 % confidence interval of `times_slower` (Wilcoxon signed-rank over the paired
    /// rounds); null with fewer than 6 rounds.
    pub times_slower_ci: Option<[f64; 2]>,
    /// The same for the difference in time per request, in ms.
    pub extra_ms_per_request: f64,
    pub extra_ms_per_request_ci: Option<[f64; 2]>,
    /// The interval lies wholly beyond the noise threshold: a real difference. False
    /// for the best row and for rows tied with it.
    pub significant: bool,
    pub best: bool,
    /// Set when this strategy already ran in the group under another row (an A/A run).
    pub repeat_of: Option<String>,
    /// Where the group's round trip is real (`--rtt`, or a distant server): the round
    /// trips a request costs, counted from the run's handshakes and measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trips: Option<RoundTrips>,
}

/// Round trips per request, two ways.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct RoundTrips {
    /// From what the run did: the request 1, and before it on each new connection a
    /// TCP connect 1, a TLS 1.3 handshake 1 (TLS 1.2: full 2, resumed 1; 1 more when the
    /// server answered with a HelloRetryRequest), a QUIC
    /// handshake 1 (its TLS inside), less 1 for every connection whose request went
    /// in 0-RTT (it did not wait for the TLS or QUIC handshake); summed and divided by
    /// the requests answered.
    pub counted: f64,
    /// The median time per request over the rounds divided by the round trip.
    pub measured: f64,
}

/// The comparison block of the JSON report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Comparison {
    pub rounds: usize,
    /// How rows are set against the best (for readers of the JSON).
    pub method: &'static str,
    pub confidence: f64,
    /// Ratios within 1 ± this are reported as no difference, whatever the interval.
    pub noise_threshold: f64,
    pub requests_per_round: Option<u64>,
    pub concurrency: usize,
    /// Round-trip time estimated per group: the median TCP connect time of the run.
    pub rtt_ms: Vec<GroupRtt>,
    pub rows: Vec<ComparisonRow>,
    /// One sentence or two per group: what its cheapest row saves per request against
    /// its costliest, and what the costliest pays for (`cheapest_saves`, or
    /// `no_measurable_difference`, `too_few_rounds`); a row whose every response was an
    /// error, its own headline. Each with the figures it was built from.
    pub headline: Vec<super::finding::Finding>,
    /// Each row against its group's best (`costs_more`, `no_measurable_difference`,
    /// `too_few_rounds`), a failed row (`row_failed`), the round trips per request on a
    /// real link (`round_trips`), and rows of one strategy with other key exchanges
    /// (`key_exchange`), each with its evidence.
    pub explanations: Vec<super::finding::Finding>,
    /// The strategies of the default set left out for this server, each with why (its
    /// scheme cannot carry it, or the server's probe said it does not offer it).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<super::finding::Finding>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct GroupRtt {
    pub group: String,
    /// With `--rtt`: the emulated link's round-trip time, which the explanations count in.
    pub rtt_set_ms: Option<f64>,
    /// The round trip estimated from TCP connects: the median over the group's rounds of
    /// each round's shortest connect (free of accept-queue waiting).
    pub rtt_ms: Option<f64>,
    /// Whether that is a real round trip (at least 0.5 ms) rather than local CPU and
    /// scheduling: only then are costs stated in round trips.
    pub round_trips: bool,
}

/// `compare --rtt A,B,...`: the comparison at each round-trip time of the link.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RttSweep {
    pub points: Vec<RttPoint>,
    /// Per strategy (group and strategy), its median time per request at each point.
    pub series: Vec<RttSeries>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct RttPoint {
    pub rtt_set_ms: f64,
    pub link: super::link::LinkReport,
    /// The embedded server's counts for this point's run.
    pub server: Option<super::server::StatsSnapshot>,
    /// Its rows are named "<rtt> <group> <strategy>", like the report's scenarios.
    pub comparison: Comparison,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct RttSeries {
    /// "https close": the row's name without the RTT.
    pub name: String,
    pub group: String,
    pub strategy: String,
    /// One per point, in the points' order.
    pub time_per_request_ms: Vec<f64>,
    /// The time per request in round trips of the set RTT (null at RTT 0).
    pub round_trips: Vec<Option<f64>>,
}

impl RttSweep {
    /// Build the series from the points (their rows in the same order at every point);
    /// `names` are the rows' names without the RTT.
    pub(crate) fn new(points: Vec<RttPoint>, names: &[String]) -> RttSweep {
        let series = names
            .iter()
            .enumerate()
            .filter_map(|(i, name)| {
                let first = points.first()?.comparison.rows.get(i)?;
                let per_point: Vec<(f64, f64)> = points
                    .iter()
                    .filter_map(|p| {
                        p.comparison
                            .rows
                            .get(i)
                            .map(|r| (r.time_per_request_ms.median, p.rtt_set_ms))
                    })
                    .collect();
                Some(RttSeries {
                    name: name.clone(),
                    group: first.group.clone(),
                    strategy: first.strategy.clone(),
                    time_per_request_ms: per_point.iter().map(|(t, _)| *t).collect(),
                    round_trips: per_point
                        .iter()
                        .map(|(t, rtt)| (*rtt > 0.0).then(|| t / rtt))
                        .collect(),
                })
            })
            .collect();
        RttSweep { points, series }
    }
}
