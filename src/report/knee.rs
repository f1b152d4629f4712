//! `compare -c 1,10,50,200`: the comparison at each concurrency, and per strategy its
//! requests/s, latency and CPU against concurrency, the knee where requests/s stops
//! growing and who is at its limit there.

use serde::Serialize;

use super::comparison::{Comparison, Spread};

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ConcurrencySweep {
    /// The machine's cores (what "share of a core" is out of).
    pub machine_cores: usize,
    /// Where the server's CPU was read from: "embedded", "pids" or null (not known).
    pub server_cpu_from: Option<String>,
    pub steps: Vec<ConcurrencyStep>,
    /// One per strategy and scheme ("http keepalive"), its figures at each step.
    pub series: Vec<KneeSeries>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ConcurrencyStep {
    pub concurrency: usize,
    /// The rows of this step against each other; rows are named "c=<n> <group> <strategy>".
    pub comparison: Comparison,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct KneeSeries {
    /// "http keepalive": the row's name without the step.
    pub name: String,
    pub group: String,
    pub strategy: String,
    pub points: Vec<KneePoint>,
    /// The concurrency after which requests/s stopped growing by more than the noise;
    /// null when it grew at every step (the knee is beyond the last).
    pub knee: Option<usize>,
    /// Who is at its limit at the step after the knee (as many requests/s, more load), or
    /// at the last step when there is no knee: "server",
    /// "client", "machine" (client and server share its cores and use them all),
    /// "elsewhere" (neither side saturated) or "unknown" (the server's CPU unknown and
    /// the machine not busy).
    pub limit: String,
    /// The sentence that says it (code `knee`, or `no_knee` when requests/s still grew
    /// at the last step), with the figures it stands on.
    pub verdict: super::finding::Finding,
}

/// One step of one series: medians and spreads over the rounds.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct KneePoint {
    pub concurrency: usize,
    pub requests_per_s: Spread,
    pub latency_p50_ms: Spread,
    pub latency_p99_ms: Spread,
    /// The client's CPU over the wall time: 1.0 is one core busy all the time.
    pub client_cores: Spread,
    /// The client's worker threads (-t): the cores it can use.
    pub client_threads: usize,
    /// The server's CPU over the wall time, where it is known.
    pub server_cores: Option<Spread>,
    /// The server's CPU time over all this step's rounds, in seconds.
    pub server_cpu_s: Option<f64>,
    /// The server's threads that worked (ran 5 % of the time or more), median of the rounds.
    pub server_threads: Option<usize>,
    /// The whole machine's busy share of all its cores (0-1).
    pub machine_busy: Option<Spread>,
    /// Requests/s against the step before: paired over the rounds (null at the first).
    pub growth: Option<Growth>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct Growth {
    /// Hodges-Lehmann estimate of the per-round ratio of requests/s to the step before.
    pub ratio: f64,
    /// Its 95 % interval (null with too few rounds).
    pub ratio_ci: Option<[f64; 2]>,
    /// Grew by more than the noise threshold: the interval's low end above 1 + it.
    pub grew: bool,
    /// Fell by more than the noise threshold.
    pub fell: bool,
}
