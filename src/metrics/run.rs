//! A run's metrics (`bench`, `compare`): each scenario's recorder as families, while it
//! runs (the client threads' latest copies, added up) and at its end (the recorder the
//! report is made from, so the last values equal the JSON report's).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::{buckets, defs, merged, with_labels, Family, Kind, Label, Series, Value};
use crate::engine::Live;
use crate::plan::Scenario;
use crate::record::{CloseReason, ErrorKind, Phase};
use crate::stats::recorder::{PhaseStat, RPC_BOUNDS};
use crate::stats::Recorder;

/// One scenario's part of the board.
#[derive(Default)]
struct Part {
    labels: Vec<Label>,
    /// The rounds that ended (compare runs a scenario several times).
    kept: Option<Recorder>,
    /// The round running: each client thread's latest copy.
    live: Vec<Option<Arc<Recorder>>>,
}

/// What a run has counted so far, by scenario, for the endpoint and remote write.
#[derive(Default)]
pub(crate) struct Board {
    parts: Mutex<BTreeMap<String, Part>>,
    /// Labels on every series (`instance` for remote write is added by the pusher).
    common: Vec<Label>,
}

impl Board {
    /// A board whose series all carry `common` (the agent's `segment`).
    pub(crate) fn new(common: Vec<Label>) -> Arc<Board> {
        Arc::new(Board {
            parts: Mutex::new(BTreeMap::new()),
            common,
        })
    }

    fn parts(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Part>> {
        self.parts.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The hand-off for a round of `sc` about to run (its labels: scenario, strategy,
    /// endpoint).
    pub(crate) fn live(self: &Arc<Self>, sc: &Scenario) -> Live {
        let key = sc.name.clone();
        {
            let mut parts = self.parts();
            let part = parts.entry(key.clone()).or_default();
            part.labels = labels_of(sc);
            part.live.clear();
        }
        let board = self.clone();
        Arc::new(move |t: usize, r: &Recorder| {
            let copy = Arc::new(r.clone());
            let mut parts = board.parts();
            if let Some(p) = parts.get_mut(&key) {
                if p.live.len() <= t {
                    p.live.resize(t + 1, None);
                }
                p.live[t] = Some(copy);
            }
        })
    }

    /// The round of `sc` ended and counts: its recorder (as the report has it) replaces
    /// the threads' copies.
    pub(crate) fn keep(&self, sc: &Scenario, r: &Recorder) {
        let mut parts = self.parts();
        let part = parts.entry(sc.name.clone()).or_default();
        if part.labels.is_empty() {
            part.labels = labels_of(sc);
        }
        part.live.clear();
        match &mut part.kept {
            Some(k) => *k += r,
            None => part.kept = Some(r.clone()),
        }
    }

    /// The round of `sc` ended and does not count (cut short by Ctrl-C).
    pub(crate) fn discard(&self, sc: &Scenario) {
        if let Some(p) = self.parts().get_mut(&sc.name) {
            p.live.clear();
        }
    }
}

impl super::Source for Board {
    fn families(&self) -> Vec<Family> {
        let sums: Vec<(Vec<Label>, Recorder)> = self
            .parts()
            .values()
            .map(|p| {
                let mut sum = p.kept.clone().unwrap_or_default();
                for r in p.live.iter().flatten() {
                    sum += r.as_ref();
                }
                let mut labels = p.labels.clone();
                labels.extend(self.common.iter().cloned());
                (labels, sum)
            })
            .collect();
        merged(
            sums.iter()
                .map(|(labels, r)| with_labels(families(r), labels))
                .collect(),
        )
    }
}

/// A scenario's labels: its name, its strategy and the endpoint of its first target
/// (host and port only: no path, query or user info).
fn labels_of(sc: &Scenario) -> Vec<Label> {
    let endpoint = sc
        .targets
        .first()
        .and_then(|t| sc.origins.get(t.origin))
        .map(|o| {
            if o.host.contains(':') && !o.host.starts_with('[') {
                format!("[{}]:{}", o.host, o.port)
            } else {
                format!("{}:{}", o.host, o.port)
            }
        })
        .unwrap_or_default();
    vec![
        ("scenario", sc.name.clone()),
        ("strategy", sc.strategy.name().to_string()),
        ("endpoint", endpoint),
    ]
}

/// A family of one number without labels (its definition shared with watch's, or
/// bench's own).
fn shared(def: &defs::Def, v: u64) -> Family {
    let mut f = def.family();
    f.number(Vec::new(), v as f64);
    f
}

fn counter(name: &'static str, help: &'static str, v: u64) -> Family {
    shared(
        &defs::Def {
            name,
            kind: Kind::Counter,
            help,
        },
        v,
    )
}

/// The families of one recorder, without labels.
pub(crate) fn families(r: &Recorder) -> Vec<Family> {
    let c = &r.counts;
    let mut out = vec![
        shared(&defs::CONNECTIONS_OPENED, c.connections_opened),
        closed(r),
        shared(&defs::REQUESTS, c.answered),
        counter(
            "handshake_requests_ok",
            "Requests answered with a status counted as ok (2xx, 3xx, or one --ok-status accepts).",
            r.ok(),
        ),
        shared(&defs::REQUESTS_REUSED, c.reused_requests),
    ];
    let mut tls = defs::TLS_HANDSHAKES.family();
    tls.number(vec![("kind", "full".into())], c.tls_full as f64);
    tls.number(vec![("kind", "resumed".into())], c.tls_resumed as f64);
    out.push(tls);
    let mut open = defs::OPEN_CONNECTIONS.family();
    open.number(
        Vec::new(),
        c.connections_opened.saturating_sub(c.connections_closed) as f64,
    );
    out.push(open);
    out.push(Family {
        series: vec![Series {
            labels: Vec::new(),
            value: Value::Histogram {
                sum: c.rpc_sum as f64,
                count: r.rpc_buckets.iter().sum(),
                buckets: RPC_BOUNDS
                    .iter()
                    .map(|b| *b as f64)
                    .chain([f64::INFINITY])
                    .zip(r.rpc_buckets.iter().copied())
                    .collect(),
            },
        }],
        ..defs::REQUESTS_PER_CONNECTION.family()
    });
    out.extend([errors(r), responses(r), durations(r), phases(r)]);
    out.extend(outages(r));
    out
}

/// The windows in which a hop could not be reached: counted when the run ends (its last
/// scrape or push carries them).
fn outages(r: &Recorder) -> [Family; 3] {
    let lost = r.outages.iter().map(|o| o.requests_lost()).sum();
    let mut seconds = Family::new(
        "handshake_outage_seconds",
        "Time in which a hop could not be reached, over the windows.",
        Kind::Counter,
    );
    seconds.number(
        Vec::new(),
        r.outages
            .iter()
            .map(|o| o.duration_s)
            .fold(0.0, |a, b| a + b),
    );
    [
        counter(
            "handshake_outages",
            "Windows in which a hop could not be reached.",
            r.outages.len() as u64,
        ),
        seconds,
        counter(
            "handshake_outage_requests_lost",
            "Requests the windows cost: their failed connects and the requests in flight that failed.",
            lost,
        ),
    ]
}

fn closed(r: &Recorder) -> Family {
    let mut f = defs::CONNECTIONS_CLOSED.family();
    for reason in CloseReason::ALL {
        f.number(
            vec![("closed_by", reason.name().to_string())],
            r.close_reasons[reason.index()] as f64,
        );
    }
    f
}

fn errors(r: &Recorder) -> Family {
    let mut f = Family::new(
        "handshake_errors",
        "Requests that failed, by category.",
        Kind::Counter,
    );
    for k in ErrorKind::ALL {
        f.number(
            vec![("category", k.name().to_string())],
            r.errors[k.index()] as f64,
        );
    }
    f
}

fn responses(r: &Recorder) -> Family {
    let mut f = Family::new(
        "handshake_responses",
        "Responses, by status class.",
        Kind::Counter,
    );
    for class in 1..=5usize {
        let n: u64 = r.status[class * 100..(class + 1) * 100].iter().sum();
        f.number(vec![("status_class", format!("{class}xx"))], n as f64);
    }
    f
}

/// A phase's distribution as a histogram in seconds (its bucket edges as exact as the
/// HDR histogram's three significant figures).
fn seconds_of(stats: &[&PhaseStat]) -> Value {
    let count = stats.iter().map(|s| s.count).sum();
    let sum = stats.iter().map(|s| s.sum_ns as f64).sum::<f64>() / 1e9;
    let upto = |b: f64| {
        let ns = (b * 1e9) as u64;
        stats
            .iter()
            .map(|s| {
                if s.count == 0 {
                    0
                } else {
                    s.hist.count_between(0, ns)
                }
            })
            .sum()
    };
    Value::Histogram {
        sum,
        count,
        buckets: buckets(&super::SECONDS_BOUNDS, count, upto),
    }
}

fn durations(r: &Recorder) -> Family {
    Family {
        series: vec![Series {
            labels: Vec::new(),
            value: seconds_of(&[&r.phases_new[Phase::Total], &r.phases_reused[Phase::Total]]),
        }],
        ..Family::new(
            "handshake_request_duration_seconds",
            "Time from a request's start to its response's last byte (successful requests).",
            Kind::Histogram,
        )
    }
}

fn phases(r: &Recorder) -> Family {
    let mut f = defs::PHASE_SECONDS.family();
    for (connection, set) in [("new", &r.phases_new), ("reused", &r.phases_reused)] {
        for (phase, stat) in set.iter() {
            if stat.count == 0 {
                continue;
            }
            f.series.push(Series {
                labels: vec![
                    ("phase", phase.name().to_string()),
                    ("connection", connection.to_string()),
                ],
                value: seconds_of(&[stat]),
            });
        }
    }
    f
}
