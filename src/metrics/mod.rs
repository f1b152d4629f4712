//! Live metrics for Prometheus: what a run or a watch has counted so far, as metric
//! families (`Family`), made at each scrape or push from the counters themselves.
//! `prometheus-client` writes them as OpenMetrics or as Prometheus text 0.0.4
//! (`encode`), `endpoint` serves them at `/metrics`, `remote` pushes them as
//! Prometheus remote write 1.0. The names and their meaning: docs/metrics.md.

pub(crate) mod defs;
pub(crate) mod endpoint;
pub(crate) mod publish;
pub(crate) mod remote;
pub(crate) mod run;

use std::sync::Arc;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::exemplar::Exemplar;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Registry, Unit};

/// A label: its name and value. Values come from what was measured (an endpoint, a
/// program's name, a scenario), never from a URL's query, user info or a header.
pub(crate) type Label = (&'static str, String);

/// One metric family: a name (without `_total` for counters), its HELP text, its type
/// and its series.
#[derive(Debug, Clone)]
pub(crate) struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    /// Seconds, for names ending in `_seconds`.
    pub seconds: bool,
    pub series: Vec<Series>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Counter,
    Gauge,
    Histogram,
}

#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub labels: Vec<Label>,
    pub value: Value,
}

#[derive(Debug, Clone)]
pub(crate) enum Value {
    Number(f64),
    /// Per-bucket counts (not cumulative) by upper bound; the last bound is +Inf.
    Histogram {
        sum: f64,
        count: u64,
        buckets: Vec<(f64, u64)>,
    },
}

impl Family {
    pub(crate) fn new(name: &'static str, help: &'static str, kind: Kind) -> Family {
        Family {
            name,
            help,
            kind,
            seconds: name.ends_with("_seconds"),
            series: Vec::new(),
        }
    }

    pub(crate) fn number(&mut self, labels: Vec<Label>, v: f64) {
        self.series.push(Series {
            labels,
            value: Value::Number(v),
        });
    }

    /// The name a sample of this family carries (`_total` for a counter).
    pub(crate) fn sample_name(&self) -> String {
        match self.kind {
            Kind::Counter => format!("{}_total", self.name),
            _ => self.name.to_string(),
        }
    }
}

/// Families with the same labels added to each series (a run's scenario, an agent's
/// instance).
pub(crate) fn with_labels(mut fams: Vec<Family>, extra: &[Label]) -> Vec<Family> {
    for f in &mut fams {
        for s in &mut f.series {
            s.labels.extend(extra.iter().cloned());
        }
    }
    fams
}

/// Families of the same name merged into one (their series side by side), in the order
/// each name first came.
pub(crate) fn merged(parts: Vec<Vec<Family>>) -> Vec<Family> {
    let mut out: Vec<Family> = Vec::new();
    for f in parts.into_iter().flatten() {
        match out.iter_mut().find(|o| o.name == f.name) {
            Some(o) => o.series.extend(f.series),
            None => out.push(f),
        }
    }
    out
}

/// Where the families come from at each scrape or push.
pub(crate) trait Source: Send + Sync + 'static {
    fn families(&self) -> Vec<Family>;
}

/// The wire format a scraper asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    OpenMetrics,
    /// Prometheus text 0.0.4.
    Text,
}

impl Format {
    /// OpenMetrics unless the scraper's Accept header asks for text only (Prometheus
    /// asks for both and prefers OpenMetrics).
    pub(crate) fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if !a.contains("application/openmetrics-text") && a.contains("text/plain") => {
                Format::Text
            }
            _ => Format::OpenMetrics,
        }
    }

    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        }
    }
}

/// The families written in `format` by `prometheus-client`.
pub(crate) fn encode(fams: Vec<Family>, format: Format) -> String {
    let mut reg = Registry::default();
    reg.register_collector(Box::new(Collected(Arc::new(fams))));
    let mut out = String::new();
    let written = match format {
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, &reg),
        Format::Text => prometheus_client::encoding::prometheus_text::encode(&mut out, &reg),
    };
    // Writing to a String fails only on a metric the encoder refuses (none here).
    written.expect("metrics encode");
    out
}

#[derive(Debug)]
struct Collected(Arc<Vec<Family>>);

impl prometheus_client::collector::Collector for Collected {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in self.0.iter() {
            let (kind, unit) = match f.kind {
                Kind::Counter => (MetricType::Counter, None),
                Kind::Gauge => (MetricType::Gauge, None),
                Kind::Histogram => (MetricType::Histogram, None),
            };
            let unit: Option<&Unit> = if f.seconds {
                Some(&Unit::Seconds)
            } else {
                unit
            };
            // The unit is in the name already: the encoder adds it only when absent.
            let name = match unit {
                Some(_) => f.name.trim_end_matches("_seconds"),
                None => f.name,
            };
            let mut family = encoder.encode_descriptor(name, f.help, unit, kind)?;
            for s in &f.series {
                let labels: Vec<(&str, &str)> =
                    s.labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let one = family.encode_family(&labels)?;
                OneSeries(f.kind, &s.value).encode(one)?;
            }
        }
        Ok(())
    }
}

struct OneSeries<'a>(Kind, &'a Value);

impl std::fmt::Debug for OneSeries<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("series")
    }
}

impl EncodeMetric for OneSeries<'_> {
    fn encode(&self, mut e: MetricEncoder) -> Result<(), std::fmt::Error> {
        match (self.0, self.1) {
            (Kind::Counter, Value::Number(v)) => {
                e.encode_counter::<prometheus_client::encoding::NoLabelSet, f64, f64>(v, None)
            }
            (_, Value::Number(v)) => e.encode_gauge(v),
            (
                _,
                Value::Histogram {
                    sum,
                    count,
                    buckets,
                },
            ) => e.encode_histogram::<prometheus_client::encoding::NoLabelSet>(
                *sum,
                *count,
                buckets,
                None::<&std::collections::HashMap<usize, Exemplar<_, f64>>>,
            ),
        }
    }

    fn metric_type(&self) -> MetricType {
        match self.0 {
            Kind::Counter => MetricType::Counter,
            Kind::Gauge => MetricType::Gauge,
            Kind::Histogram => MetricType::Histogram,
        }
    }
}

/// Per-bucket counts for values (seconds) whose cumulative count up to a bound is
/// `upto(bound)`, over `bounds` (+Inf added); `count` in all.
pub(crate) fn buckets(bounds: &[f64], count: u64, upto: impl Fn(f64) -> u64) -> Vec<(f64, u64)> {
    let mut out = Vec::with_capacity(bounds.len() + 1);
    let mut below = 0;
    for &b in bounds {
        let c = upto(b).clamp(below, count);
        out.push((b, c - below));
        below = c;
    }
    out.push((f64::INFINITY, count - below));
    out
}

/// Bounds for durations in seconds: 100 µs to 60 s.
pub(crate) const SECONDS_BOUNDS: [f64; 16] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    10.0, 60.0,
];

/// Bounds for requests per connection (the run's recorder keeps the same).
pub(crate) fn requests_bounds() -> Vec<f64> {
    crate::stats::recorder::RPC_BOUNDS
        .iter()
        .map(|b| *b as f64)
        .collect()
}

/// Bounds for a connection's lifetime, seconds.
pub(crate) const LIFETIME_BOUNDS: [f64; 12] = [
    0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0, 3600.0,
];

/// A histogram with fixed bounds, kept as per-bucket counts (for the watch, whose
/// values come one by one).
#[derive(Debug, Clone, Default)]
pub(crate) struct Fixed {
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Fixed {
    pub(crate) fn observe(&mut self, bounds: &[f64], v: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0; bounds.len() + 1];
        }
        let i = bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len());
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    pub(crate) fn value(&self, bounds: &[f64]) -> Value {
        let buckets = bounds
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .enumerate()
            .map(|(i, b)| (b, self.counts.get(i).copied().unwrap_or(0)))
            .collect();
        Value::Histogram {
            sum: self.sum,
            count: self.count,
            buckets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Family> {
        let mut c = Family::new("handshake_requests", "Requests answered.", Kind::Counter);
        c.number(vec![("program", "cu\"rl\n\\x".into())], 3.0);
        let mut h = Family::new(
            "handshake_connection_lifetime_seconds",
            "How long connections lived.",
            Kind::Histogram,
        );
        let mut fixed = Fixed::default();
        for v in [0.0005, 0.2, 7.0] {
            fixed.observe(&LIFETIME_BOUNDS, v);
        }
        h.series.push(Series {
            labels: vec![("endpoint", "127.0.0.1:80".into())],
            value: fixed.value(&LIFETIME_BOUNDS),
        });
        vec![c, h]
    }

    #[test]
    fn openmetrics_has_its_types_units_and_escaped_labels() {
        let out = encode(sample(), Format::OpenMetrics);
        assert!(out.contains("# TYPE handshake_requests counter\n"), "{out}");
        assert!(
            out.contains(r#"handshake_requests_total{program="cu\"rl\n\\x"} 3"#),
            "{out}"
        );
        assert!(out.contains("# UNIT handshake_connection_lifetime_seconds seconds\n"));
        assert!(out.contains(
            "handshake_connection_lifetime_seconds_bucket{le=\"0.1\",endpoint=\"127.0.0.1:80\"} 1\n"
        ));
        assert!(
            out.contains("le=\"+Inf\",endpoint=\"127.0.0.1:80\"} 3\n"),
            "{out}"
        );
        assert!(out.contains(
            "handshake_connection_lifetime_seconds_count{endpoint=\"127.0.0.1:80\"} 3\n"
        ));
        assert!(out.ends_with("# EOF\n"));
    }

    #[test]
    fn prometheus_text_names_counters_with_total() {
        let out = encode(sample(), Format::Text);
        assert!(
            out.contains("# TYPE handshake_requests_total counter\n"),
            "{out}"
        );
        assert!(!out.contains("# EOF"));
    }

    #[test]
    fn accept_headers_choose_the_format() {
        let prom = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::from_accept(Some(prom)), Format::OpenMetrics);
        assert_eq!(
            Format::from_accept(Some("text/plain;version=0.0.4")),
            Format::Text
        );
        assert_eq!(Format::from_accept(None), Format::OpenMetrics);
    }

    #[test]
    fn buckets_split_cumulative_counts() {
        let b = buckets(&[1.0, 2.0], 10, |x| if x < 1.5 { 4 } else { 9 });
        assert_eq!(b, vec![(1.0, 4), (2.0, 5), (f64::INFINITY, 1)]);
    }
}
