//! `watch --metrics`: the watched connections counted live, per server endpoint and
//! client program, as they go (a connection when its owner is known, each answered
//! request as its response begins, its close when it ends), for the endpoint and remote
//! write (docs/metrics.md). The capture thread is the one writer; a scrape reads. The
//! label sets are bounded: past `max_series`, new ones add to `program="other"`.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crate::metrics::defs::{self, Def};
use crate::metrics::{Family, Fixed, Kind as MetricKind, Series, Source, LIFETIME_BOUNDS};
use crate::record::Phase;
use crate::track::{Conn, Ending, Kind};

/// One label set's figures.
#[derive(Default)]
struct Counts {
    opened: u64,
    closed: BTreeMap<&'static str, u64>,
    requests: u64,
    reused: u64,
    /// TLS handshakes by (kind, version).
    tls: BTreeMap<(&'static str, String), u64>,
    /// HTTP/2 connections by how they began (h2 by ALPN, h2c by prior knowledge).
    h2: BTreeMap<&'static str, u64>,
    open: u64,
    rpc: Fixed,
    lifetime: Fixed,
    gaps: Fixed,
    /// The TCP and TLS handshakes' durations.
    tcp: Fixed,
    tls_setup: Fixed,
}

#[derive(Default)]
struct State {
    series: HashMap<(SocketAddr, Arc<str>), Counts>,
    /// Connections counted under `program="other"` because the bound was reached.
    folded: u64,
}

/// The live figures of a watch.
pub(crate) struct Meter {
    state: Mutex<State>,
    max_series: usize,
    other: Arc<str>,
}

fn closed_by(e: Ending) -> Option<&'static str> {
    match e {
        Ending::ClientFin => Some("client_fin"),
        Ending::ClientReset => Some("client_rst"),
        Ending::ServerFin => Some("server_fin"),
        Ending::ServerReset => Some("server_rst"),
        Ending::ServerIdle => Some("idle"),
        Ending::OpenAtEnd => None,
    }
}

impl Meter {
    pub(crate) fn new(max_series: usize) -> Arc<Meter> {
        Arc::new(Meter {
            state: Mutex::new(State::default()),
            max_series: max_series.max(1),
            other: Arc::from("other"),
        })
    }

    /// Count what is new on `c` since the last time, under `label` (the client
    /// program's name) if it has none yet.
    pub(crate) fn update(&self, c: &mut Conn, label: Arc<str>) {
        let label = c.metered.label.get_or_insert(label).clone();
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let st = &mut *st;
        let key = (c.server, label);
        let key = if st.series.contains_key(&key) || st.series.len() < self.max_series {
            key
        } else {
            if !c.metered.opened {
                st.folded += 1;
            }
            (c.server, self.other.clone())
        };
        let n = st.series.entry(key).or_default();
        let m = &mut c.metered;
        if !m.opened {
            m.opened = true;
            n.opened += 1;
            n.open += 1;
        }
        let answered = c.requests.min(c.responses);
        while m.answered < answered {
            m.answered += 1;
            n.requests += 1;
            if m.answered >= 2 {
                n.reused += 1;
            }
        }
        for g in c.new_gaps.drain(..) {
            n.gaps
                .observe(&crate::metrics::SECONDS_BOUNDS, g.as_secs_f64());
        }
        let seconds = &crate::metrics::SECONDS_BOUNDS;
        if let (false, Some(d)) = (m.tcp, c.setup.tcp) {
            m.tcp = true;
            n.tcp.observe(seconds, d.as_secs_f64());
        }
        if let (false, Some(d)) = (m.tls_setup, c.setup.tls) {
            m.tls_setup = true;
            n.tls_setup.observe(seconds, d.as_secs_f64());
        }
        if let (false, Some(t)) = (m.tls, &c.tls) {
            if let Some(resumed) = t.resumed {
                m.tls = true;
                let kind = if resumed { "resumed" } else { "full" };
                let version = t.version.clone().unwrap_or_else(|| "unknown".into());
                *n.tls.entry((kind, version)).or_default() += 1;
            }
        }
        if !m.h2 {
            let h2 = match c.kind {
                Kind::Http2 => Some("h2c"),
                Kind::Tls if c.tls.as_ref().and_then(|t| t.alpn.as_deref()) == Some("h2") => {
                    Some("h2")
                }
                _ => None,
            };
            if let Some(k) = h2 {
                m.h2 = true;
                *n.h2.entry(k).or_default() += 1;
            }
        }
        if let (false, Some(end)) = (m.closed, c.ended) {
            m.closed = true;
            n.open = n.open.saturating_sub(1);
            if let Some(by) = c.ending.and_then(closed_by) {
                *n.closed.entry(by).or_default() += 1;
                n.rpc
                    .observe(&crate::metrics::requests_bounds(), answered as f64);
                n.lifetime.observe(
                    &LIFETIME_BOUNDS,
                    end.saturating_duration_since(c.opened).as_secs_f64(),
                );
            }
        }
    }
}

/// A counter family with one series per label set.
fn per_set(
    st: &State,
    name: &'static str,
    help: &'static str,
    kind: MetricKind,
    each: impl Fn(&Counts, &mut dyn FnMut(Vec<crate::metrics::Label>, crate::metrics::Value)),
) -> Family {
    let mut f = Family::new(name, help, kind);
    let mut keys: Vec<_> = st.series.keys().collect();
    keys.sort();
    for k in keys {
        let n = &st.series[k];
        let base = vec![("endpoint", k.0.to_string()), ("program", k.1.to_string())];
        each(n, &mut |extra, value| {
            let mut labels = base.clone();
            labels.extend(extra);
            f.series.push(Series { labels, value });
        });
    }
    f
}

/// `per_set` of a family bench exports too (`metrics::defs`).
fn per_def(
    st: &State,
    def: &Def,
    each: impl Fn(&Counts, &mut dyn FnMut(Vec<crate::metrics::Label>, crate::metrics::Value)),
) -> Family {
    per_set(st, def.name, def.help, def.kind, each)
}

fn num(v: u64) -> crate::metrics::Value {
    crate::metrics::Value::Number(v as f64)
}

impl Source for Meter {
    fn families(&self) -> Vec<Family> {
        let st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let st = &*st;
        let counter = MetricKind::Counter;
        let mut out = vec![
            per_def(st, &defs::CONNECTIONS_OPENED, |n, s| {
                s(Vec::new(), num(n.opened));
            }),
            per_def(
                st,
                &defs::CONNECTIONS_CLOSED,
                |n, s| {
                    for by in ["client_fin", "client_rst", "server_fin", "server_rst", "idle"] {
                        s(
                            vec![("closed_by", by.to_string())],
                            num(n.closed.get(by).copied().unwrap_or(0)),
                        );
                    }
                },
            ),
            per_def(
                st,
                &defs::REQUESTS,
                |n, s| s(Vec::new(), num(n.requests)),
            ),
            per_def(
                st,
                &defs::REQUESTS_REUSED,
                |n, s| s(Vec::new(), num(n.reused)),
            ),
            per_def(
                st,
                &defs::TLS_HANDSHAKES,
                |n, s| {
                    for kind in ["full", "resumed"] {
                        if !n.tls.keys().any(|(k, _)| *k == kind) {
                            s(
                                vec![("kind", kind.into()), ("version", "none".into())],
                                num(0),
                            );
                        }
                    }
                    for ((kind, version), v) in &n.tls {
                        s(
                            vec![("kind", (*kind).into()), ("version", version.clone())],
                            num(*v),
                        );
                    }
                },
            ),
            per_set(
                st,
                "handshake_h2_connections",
                "HTTP/2 connections: h2 (chosen by ALPN, seen in TLS 1.2) and h2c (prior knowledge).",
                counter,
                |n, s| {
                    for k in ["h2", "h2c"] {
                        s(
                            vec![("kind", k.into())],
                            num(n.h2.get(k).copied().unwrap_or(0)),
                        );
                    }
                },
            ),
            per_def(
                st,
                &defs::OPEN_CONNECTIONS,
                |n, s| s(Vec::new(), num(n.open)),
            ),
        ];
        let mut folded = Family::new(
            "handshake_metrics_series_folded",
            "Connections counted under program=\"other\" because the label sets reached --metrics-max-series.",
            counter,
        );
        folded.number(Vec::new(), st.folded as f64);
        out.push(folded);
        out.extend(histograms(st));
        out
    }
}

/// The histograms of each label set.
fn histograms(st: &State) -> Vec<Family> {
    let hist = MetricKind::Histogram;
    let rpc_bounds = crate::metrics::requests_bounds();
    vec![
        per_def(st, &defs::REQUESTS_PER_CONNECTION, |n, s| {
            s(Vec::new(), n.rpc.value(&rpc_bounds))
        }),
        per_set(
            st,
            "handshake_connection_lifetime_seconds",
            "How long each closed connection lived, from its SYN to its end.",
            hist,
            |n, s| s(Vec::new(), n.lifetime.value(&LIFETIME_BOUNDS)),
        ),
        per_set(
            st,
            "handshake_idle_gap_seconds",
            "Idle time before a connection's reuse: from a response's end to the next request.",
            hist,
            |n, s| s(Vec::new(), n.gaps.value(&crate::metrics::SECONDS_BOUNDS)),
        ),
        per_def(st, &defs::PHASE_SECONDS, |n, s| {
            let b = &crate::metrics::SECONDS_BOUNDS;
            s(
                vec![("phase", Phase::Connect.name().into())],
                n.tcp.value(b),
            );
            s(
                vec![("phase", Phase::Tls.name().into())],
                n.tls_setup.value(b),
            );
        }),
    ]
}

/// The client programs' names of connections, looked up from their SYNs (endpoint
/// mode), each taken once it is used.
pub(crate) type Names = Arc<Mutex<HashMap<(SocketAddr, SocketAddr), (Arc<str>, Instant)>>>;
