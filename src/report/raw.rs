//! The lossless form of a scenario's figures, carried in `--json` beside the summaries:
//! every counter, and every distribution as an HDR histogram in HdrHistogram's V2
//! serialized form (base64), with the scenario's shape. From it `merge` rebuilds the
//! recorder exactly, adds several agents' recorders and summarizes them as one run.
//!
//! Maps are keyed by name (phases, error kinds and details, close reasons, status and
//! GOAWAY codes) and hold non-zero entries only, so that the form reads the same in any
//! version that knows the names. Sums of nanoseconds are exact integers written as
//! decimal strings (they can pass 2^64, where JSON readers lose digits).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::{KeepAliveHeader, ServerSettings};
use crate::strategy::Strategy;

/// What summarizing a scenario needs of its plan: serializable, and summable over agents.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct ScenarioShape {
    pub name: String,
    /// The first URL, and how many the scenario cycles through.
    pub url: String,
    pub urls: usize,
    pub origins: usize,
    pub strategy: Strategy,
    pub concurrency: usize,
    pub threads: usize,
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    /// Open loop: requests per second.
    pub rate: Option<f64>,
    pub timeout_s: f64,
    pub requests_per_connection: Option<u64>,
    /// HTTP/2 and HTTP/3 (`h3`): connections per origin the workers share.
    pub connections_per_origin: usize,
    pub dns_cache: bool,
    /// The forward proxy the connections went through (scheme, host and port only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// `-L`: redirects were followed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redirects: bool,
    /// With `-L`: the origins by index (`http://host:port`), those redirects found after
    /// the scenario's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub origin_names: Vec<String>,
    /// `--local-addr`: the source addresses, by index.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_addrs: Vec<String>,
    /// `--connect-rate`: new TCP connections per second at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_rate: Option<f64>,
    /// `--ok-status`: the statuses counted as ok beside 2xx and 3xx (inclusive ranges).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ok_status: Vec<(u16, u16)>,
    /// Mutual TLS: what the servers asked of a client certificate, and what was presented
    /// (absent when no server asked and no `--cert` was given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<ClientCertificate>,
}

/// Mutual TLS over a scenario's handshakes: the servers' CertificateRequests and the
/// client's answers. A resumed TLS 1.3 handshake carries the first one's authentication
/// and is asked nothing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub(crate) struct ClientCertificate {
    /// Handshakes in which the server asked for a client certificate.
    pub requested: u64,
    /// Of those, the handshakes in which the client presented one (and signed for it).
    pub presented: u64,
    /// The CAs the server named in its CertificateRequest, as subjects (none: any CA).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub acceptable_cas: Vec<String>,
    /// `--cert`: its subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// `--cert`: its key's type and size ("ECDSA P-256", "RSA 2048").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_type: Option<String>,
}

impl ClientCertificate {
    /// " (CN=client, ECDSA P-256)": the certificate `--cert` gave, as a sentence names it
    /// after "presented"; empty without one.
    pub(crate) fn named(&self) -> String {
        match (&self.subject, &self.key_type) {
            (Some(s), Some(k)) => format!(" ({s}, {k})"),
            _ => String::new(),
        }
    }

    /// A 400 from a server that asked for a client certificate: none was sent (give
    /// one), or the one sent was refused (nginx answers both after the handshake, with
    /// 400). None when the server asked nothing.
    pub(crate) fn cause_of_a_400(&self) -> Option<String> {
        if self.requested == 0 {
            return None;
        }
        let cas = match self.acceptable_cas.as_slice() {
            [] => String::new(),
            cas => format!(" (it names the CAs it accepts: {})", cas.join("; ")),
        };
        Some(if self.presented == 0 {
            format!(
                "the server asked for a client certificate in the TLS handshake and none was sent, and it answered after the handshake: give one with --cert FILE --key FILE{cas}"
            )
        } else {
            format!(
                "the server asked for a client certificate and refused the one sent (--cert): check that a CA it accepts signed it and that it is valid{cas}"
            )
        })
    }
}

/// A scenario's figures, losslessly (made and read back by `stats::raw`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct RawScenario {
    pub shape: ScenarioShape,
    pub wall_ns: u64,
    pub cpu_user_ns: u64,
    pub cpu_sys_ns: u64,
    pub recorder: RawRecorder,
}

mod u128_string {
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &u128, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(v)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u128, D::Error> {
        let s = String::deserialize(d)?;
        s.parse()
            .map_err(|_| D::Error::custom(format!("expected a decimal integer, not {s:?}")))
    }
}

/// One phase's distribution.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct RawPhase {
    pub count: u64,
    #[serde(with = "u128_string")]
    pub sum_ns: u128,
    /// Sum of the squares, ns².
    #[serde(with = "u128_string")]
    pub sum_sq: u128,
    pub min_ns: u64,
    pub max_ns: u64,
    /// HdrHistogram V2, base64.
    pub histogram: String,
}

/// Exact count, sum, min and max of durations.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct RawSpan {
    pub count: u64,
    #[serde(with = "u128_string")]
    pub sum_ns: u128,
    pub min_ns: u64,
    pub max_ns: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct RawQuic {
    pub handshake: RawSpan,
    pub early_lead: RawSpan,
    pub rtt: RawSpan,
    pub min_rtt: RawSpan,
    pub packets_sent: u64,
    pub packets_lost: u64,
    pub bytes_lost: u64,
    pub congestion_events: u64,
    pub connections: u64,
}

/// TCP connections as the kernel saw them (`TCP_INFO`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct RawTcp {
    pub connects: u64,
    /// The least RTT of each connection read at its close.
    pub min_rtt: Option<RawPhase>,
    pub syn_retransmitted: u64,
    pub syn_retransmits: u64,
    pub syn_connect: RawSpan,
    pub closed: u64,
    pub rtt_at_close: RawSpan,
    pub retransmits: u64,
    pub with_retransmits: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub(crate) struct RawLocalPorts {
    pub time_wait: Option<u64>,
    pub range: Option<[u32; 2]>,
}

/// The timeline's buckets (to the last non-empty one), `width_s` seconds each.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct RawTimeline {
    pub width_s: u64,
    pub buckets: Vec<RawBucket>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub(crate) struct RawBucket {
    pub requests: u64,
    pub ok: u64,
    /// Answered with a status that is not ok.
    #[serde(default)]
    pub error_status: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors: BTreeMap<String, u64>,
    pub new_connections: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub closed: BTreeMap<String, u64>,
    pub tls_full: u64,
    pub tls_resumed: u64,
    /// Latency of the bucket's answered requests in µs (HdrHistogram V2, base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<String>,
}

/// Declares a struct of plain counters (`u64`, summed when recorders merge) once: the
/// struct, its serde form and its `+=`. A counter added here is recorded by
/// `stats::Recorder`, carried in the lossless form and merged, with no other edit.
macro_rules! counters {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$doc:meta])* $field:ident,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default)]
        pub(crate) struct $name {
            $($(#[$doc])* pub(crate) $field: u64,)*
        }

        impl std::ops::AddAssign<&$name> for $name {
            #[inline]
            fn add_assign(&mut self, o: &$name) {
                $(self.$field += o.$field;)*
            }
        }
    };
}

counters! {
    /// The counters of a run that add up when runs or threads merge.
    pub struct Counts {
        attempted,
        /// Requests answered (a response came, whatever its status) (`ok` in older raw reports).
        #[serde(alias = "ok")]
        answered,
        /// Requests sent again on a new connection after a reused one turned out closed.
        stale_retries,
        /// HTTP/2 requests sent again after the server refused their stream.
        refused_retries,
        late_sends,
        aborted_at_deadline,
        bytes_received,
        body_bytes,
        reused_requests,
        connections_opened,
        tls_full,
        tls_resumed,
        /// Handshakes that negotiated TLS 1.3 (the rest are 1.2).
        tls13,
        /// TLS 1.3 early data (0-RTT): requests sent in it, and whether the server took
        /// them (rejected ones were sent again after the handshake).
        early_attempted,
        early_accepted,
        early_rejected,
        connections_closed,
        /// Requests carried by the connections that ended (for the mean per connection).
        rpc_sum,
        /// Requests carried by the connections the server closed at its limit of
        /// requests per connection (`server_max_requests`), for that limit's mean.
        rpc_sum_server_max_requests,
        /// Connections where the client asked for close but the server kept the
        /// connection open, so the client closed it.
        server_ignored_close,
        /// `CONNECT` tunnels a forward proxy opened (one per connection through it to an
        /// https:// origin).
        tunnels,
        /// `-L`: responses that were redirects, followed (each hop is a request).
        redirects,
        /// New connections whose host name went to the resolver, found a valid answer in
        /// the run's cache, or waited for another connection's lookup under way.
        dns_lookups,
        dns_cache_hits,
        dns_joined,
        /// HTTP/2: the sum over connections of the most streams each carried at once.
        peak_streams_sum,
        /// TLS handshakes by key-exchange group (the counted `record::KX_GROUPS`, in order; then any
        /// other group).
        kx_x25519mlkem768,
        kx_x25519,
        kx_secp256r1,
        kx_secp384r1,
        kx_other,
        /// TLS handshakes over TCP in which the server asked again (HelloRetryRequest).
        tls_hello_retries,
        /// Full TLS handshakes over TCP whose wire was read, and the sums over them of
        /// the first ClientHello's bytes and of the server's first flight's.
        tls_wire_full,
        tls_client_hello_bytes,
        tls_server_flight_bytes,
        /// Round trips TLS handshakes over TCP took beyond those they need (the server's
        /// first flight waited: above the initial window), against the connect's time; and
        /// QUIC handshakes beyond their one (quinn's RTT: the anti-amplification limit).
        tls_flight_waits,
        quic_flight_waits,
        /// The kernel's listen-queue overflows in this network namespace while the run
        /// went (`TcpExtListenOverflows`, after minus before: an upper bound for this
        /// run's connects).
        listen_overflows,
    }
}

/// Every counter of a recorder; see `Recorder` for their meaning.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct RawRecorder {
    /// By phase name (`PHASE_NAMES`), phases with samples only.
    pub phases_new: BTreeMap<String, RawPhase>,
    pub phases_reused: BTreeMap<String, RawPhase>,
    #[serde(flatten)]
    pub counts: Counts,
    pub errors: BTreeMap<String, u64>,
    pub error_details: BTreeMap<String, u64>,
    /// One message per error detail (or category): the first seen.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_examples: BTreeMap<String, String>,
    /// Where each example was met, when not at the URL's host and port.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_hops: BTreeMap<String, crate::record::Hop>,
    pub status_codes: BTreeMap<String, u64>,
    /// Connections opened by origin index (with -L, where redirects led; absent when
    /// every connection went to the first origin).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub opened_by_origin: Vec<u64>,
    /// Connections the client asked to close whose server kept them open, by origin
    /// index (absent when every origin was the first).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ignored_close_by_origin: Vec<u64>,
    /// Connections opened by source address (`--local-addr`, by index), when given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub opened_by_source: Vec<u64>,
    /// The windows in which a hop could not be reached.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outages: Vec<crate::record::outage::Outage>,
    /// The restarts seen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restarts: Vec<crate::record::outage::Restart>,
    /// What the first 3xx/4xx/5xx response of each status said: its status line, and
    /// a redirect's Location or an error's first body bytes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub status_examples: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_s: Option<u32>,
    pub close_reasons: BTreeMap<String, u64>,
    /// Requests per connection over the connections that ended (none: null).
    pub rpc_min: Option<u64>,
    pub rpc_max: u64,
    /// By GOAWAY error code (`14`: any code above 13).
    pub goaway_codes: BTreeMap<String, u64>,
    pub peak_streams_max: u64,
    pub server_settings: Option<ServerSettings>,
    /// Absent in reports written before it was read.
    #[serde(default)]
    pub keep_alive_header: Option<KeepAliveHeader>,
    pub local_ports: Option<RawLocalPorts>,
    /// Absent in reports written before the kernel's view was read.
    #[serde(default)]
    pub tcp: RawTcp,
    pub quic: RawQuic,
    pub timeline: RawTimeline,
}
