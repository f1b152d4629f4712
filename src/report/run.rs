//! Who ran a report's run, when, where, and which share of the workload: its identity,
//! its machine, its segment, and (merged) each agent's row.

use serde::{Deserialize, Serialize};

use super::finding;

/// A run's identity.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct RunInfo {
    /// `bench` or `compare`.
    pub command: String,
    /// When the load started, RFC 3339 in UTC.
    pub started_at: String,
    /// `--start-at` as given: the time the load was to start (a late agent's
    /// `started_at` is later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_at: Option<String>,
    pub host: String,
    /// `--segment I/N` (or `--segments N`): this run's share of a larger workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<Segment>,
    /// The command line as given, the program's name first.
    #[serde(default)]
    pub command_line: Vec<String>,
    /// The URLs measured, each once, in the report's order.
    #[serde(default)]
    pub urls: Vec<String>,
    /// The machine it ran on.
    #[serde(default)]
    pub machine: Machine,
}

/// The machine a run ran on: its CPUs (those the process may use) and its kernel.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct Machine {
    pub cpus: usize,
    /// `uname -sr`: "Linux 6.8.0-1021-gcp".
    pub kernel: String,
}

/// Share `index` (1-based) of `count` equal shares of a workload.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct Segment {
    pub index: u64,
    pub count: u64,
}

impl Segment {
    /// Whether the two cover a common part of the workload: [(i-1)/n, i/n) intervals.
    pub(crate) fn overlaps(self, o: Segment) -> bool {
        // a.lo < b.hi && b.lo < a.hi, cross-multiplied.
        (self.index - 1) * o.count < o.index * self.count
            && (o.index - 1) * self.count < self.index * o.count
    }
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// One agent of a merged report: its identity and its own figures over its scenarios.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct AgentReport {
    pub host: String,
    pub started_at: String,
    /// Absent: the agent ran the whole workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<Segment>,
    pub wall_s: f64,
    pub requests: u64,
    pub ok: u64,
    pub errors: u64,
    pub connections: u64,
    pub p99_ms: f64,
    pub client_cpu_us_per_request: f64,
    /// What sets this agent apart from the others (`agent_errors`, `agent_p99_outlier`,
    /// `agent_cpu_outlier`), each with its figure and the agents' median: judged again
    /// whenever agents are merged.
    #[serde(skip_deserializing, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<finding::Finding>,
}
