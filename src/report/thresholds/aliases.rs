//! The short names of `--fail-if` (`p99`, `reuse_ratio`, `tls_full`, ...) and the
//! figure each stands for in a bench or compare scenario and in audit's report.

/// How a figure's values are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A plain number (a count, requests per second).
    Number,
    /// A fraction: `0.9` or `90%`.
    Ratio,
    /// Milliseconds: `200`, `200ms`, `0.2s`, `200us`.
    Millis,
}

/// Where a short name's figure is, in each kind of report.
pub(super) struct Alias {
    pub(super) name: &'static str,
    pub(super) kind: Kind,
    /// In a bench or compare scenario (`=error_rate` and `=errors` are computed).
    pub(super) scenario: Option<&'static str>,
    /// In audit's report.
    pub(super) audit: Option<&'static str>,
}

const fn alias(
    name: &'static str,
    kind: Kind,
    scenario: Option<&'static str>,
    audit: Option<&'static str>,
) -> Alias {
    Alias {
        name,
        kind,
        scenario,
        audit,
    }
}

/// The short names and the figures they stand for.
pub(super) const ALIASES: &[Alias] = &[
    alias(
        "requests",
        Kind::Number,
        Some("requests.attempted"),
        Some("total.requests"),
    ),
    alias(
        "ok",
        Kind::Number,
        Some("requests.ok"),
        Some("total.responses"),
    ),
    alias("errors", Kind::Number, Some("=errors"), None),
    alias("non_2xx", Kind::Number, Some("requests.non_2xx"), None),
    alias(
        "status_4xx",
        Kind::Number,
        Some("requests.status_classes.4xx"),
        None,
    ),
    alias(
        "status_5xx",
        Kind::Number,
        Some("requests.status_classes.5xx"),
        None,
    ),
    alias("error_rate", Kind::Ratio, Some("=error_rate"), None),
    alias("rps", Kind::Number, Some("throughput.requests_per_s"), None),
    alias("mean", Kind::Millis, Some("latency_ms.mean"), None),
    alias("p50", Kind::Millis, Some("latency_ms.p50"), None),
    alias("p90", Kind::Millis, Some("latency_ms.p90"), None),
    alias("p99", Kind::Millis, Some("latency_ms.p99"), None),
    alias("p999", Kind::Millis, Some("latency_ms.p999"), None),
    alias("max", Kind::Millis, Some("latency_ms.max"), None),
    alias(
        "connections",
        Kind::Number,
        Some("connections.opened"),
        Some("total.connections"),
    ),
    alias(
        "reuse_ratio",
        Kind::Ratio,
        Some("connections.reuse_ratio"),
        Some("total.reuse_ratio"),
    ),
    alias(
        "requests_per_connection",
        Kind::Number,
        Some("connections.requests_per_connection.mean"),
        Some("total.requests_per_connection.mean"),
    ),
    alias(
        "tls_full",
        Kind::Number,
        Some("connections.tls_handshakes.full"),
        Some("total.tls_handshakes.full"),
    ),
    alias(
        "tls_resumed",
        Kind::Number,
        Some("connections.tls_handshakes.resumed"),
        Some("total.tls_handshakes.resumed"),
    ),
    alias("outages", Kind::Number, Some("outages.count"), None),
    alias(
        "longest_outage",
        Kind::Millis,
        Some("outages.longest_ms"),
        None,
    ),
    alias(
        "requests_lost",
        Kind::Number,
        Some("outages.requests_lost"),
        None,
    ),
    alias(
        "stale_retries",
        Kind::Number,
        Some("requests.retries.stale_connection"),
        None,
    ),
    alias(
        "early_data_accepted",
        Kind::Number,
        Some("connections.early_data.accepted"),
        None,
    ),
    alias(
        "early_data_rejected",
        Kind::Number,
        Some("connections.early_data.rejected"),
        None,
    ),
    alias(
        "client_cpu_us",
        Kind::Number,
        Some("cpu.client_us_per_request"),
        None,
    ),
    alias(
        "unused_connections",
        Kind::Number,
        None,
        Some("total.unused_connections"),
    ),
    alias(
        "cut_responses",
        Kind::Number,
        None,
        Some("total.cut_responses.count"),
    ),
    alias(
        "peak_connections",
        Kind::Number,
        None,
        Some("peak_concurrent_connections"),
    ),
    // compare: the row against the best of its group.
    alias(
        "times_slower",
        Kind::Number,
        Some("comparison.times_slower"),
        None,
    ),
    alias(
        "time_per_request",
        Kind::Millis,
        Some("comparison.time_per_request_ms.median"),
        None,
    ),
];
