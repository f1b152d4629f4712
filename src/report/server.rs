//! The embedded server's own counts (the ground truth a run is checked against). Filled
//! by `server`.

use serde::Serialize;

/// A copy of the embedded server's counters at one moment.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    pub connections_accepted: u64,
    pub requests: u64,
    pub open_connections: u64,
    pub tls_handshakes_full: u64,
    pub tls_handshakes_resumed: u64,
    /// Full TLS handshakes in which the client presented a certificate.
    pub tls_client_certificates: u64,
    pub rejected_connections: u64,
    pub h2_connections: u64,
    pub h2_streams: u64,
    pub early_data_requests: u64,
    pub h3_connections: u64,
    pub h3_requests: u64,
    pub h3_early_data_connections: u64,
    pub h3_early_data_requests: u64,
}
