//! The audit's report, as it is serialized and rendered: per client address and in all,
//! how each connection ended, its timeline. `cmd::audit` fills it; `watch` shares its
//! pieces (idle gaps, requests per connection, TLS handshakes).

use std::collections::BTreeMap;

use serde::Serialize;

/// How a connection ended, as far as the socket shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Ending {
    /// The client closed it (FIN) after complete responses; over TLS with or without a
    /// `close_notify` alert before the FIN.
    ClientClosed,
    /// The client reset it (RST) with no response outstanding.
    ClientReset,
    /// The client reset it right after a response with a body: it closed with response
    /// bytes unread (a kernel resets a socket closed with unread data).
    ClientClosedUnread,
    /// The client went away inside a request.
    ClientClosedMidRequest,
    /// The client went away while the response was being written.
    ClientClosedMidResponse,
    /// This side closed it (the client asked, or HTTP/1.0 without keep-alive).
    ServerClosed,
    /// The client sent something that is not HTTP.
    Garbage,
    /// The client ended the TLS handshake with an alert about the audit's certificate
    /// (unknown CA, bad or unknown certificate): it does not trust it.
    CertificateDistrusted,
    /// The TLS handshake failed for another reason (no version, cipher suite or key
    /// exchange in common; a ClientHello that cannot be read).
    TlsFailed,
    /// The client started a request and stalled past the header timeout.
    Stalled,
    /// Idle past the idle timeout; closed by this side.
    IdleTimeout,
    /// A request head or body over the size limits: answered 431 or 413, closed.
    TooLarge,
    /// Over the connection limit: answered 503, closed.
    OverLimit,
    /// `--proxy-mode`: the origin ended the client's `CONNECT` tunnel first (its FIN or
    /// reset, passed on to the client), or could not be reached.
    OriginClosed,
    /// With `--client-ca`: the handshake failed on the client's certificate (none sent
    /// where one is required, or one that did not verify); no request was read.
    CertificateRefused,
    /// Still open when the audit ended.
    OpenAtEnd,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct GapStats {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    #[serde(skip)]
    pub(crate) sum_ms: f64,
}

impl GapStats {
    pub(crate) fn add(&mut self, ms: f64) {
        self.min_ms = if self.count == 0 {
            ms
        } else {
            self.min_ms.min(ms)
        };
        self.max_ms = self.max_ms.max(ms);
        self.count += 1;
        self.sum_ms += ms;
        self.mean_ms = self.sum_ms / self.count as f64;
    }

    pub(crate) fn merge(&mut self, o: &GapStats) {
        if o.count == 0 {
            return;
        }
        self.min_ms = if self.count == 0 {
            o.min_ms
        } else {
            self.min_ms.min(o.min_ms)
        };
        self.max_ms = self.max_ms.max(o.max_ms);
        self.count += o.count;
        self.sum_ms += o.sum_ms;
        self.mean_ms = self.sum_ms / self.count as f64;
    }
}

/// One bucket of the audit's timeline: `width_s` seconds from `t_s` after its start.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AuditBucket {
    pub t_s: f64,
    pub width_s: f64,
    pub new_connections: u64,
    /// Requests whose head arrived in it.
    pub requests: u64,
    pub closed_connections: u64,
    pub tls_full: u64,
    pub tls_resumed: u64,
}

/// Figures for one client address, or for all.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ClientSummary {
    pub client: String,
    pub connections: u64,
    pub requests: u64,
    pub responses: u64,
    /// The responses by status code ("200", "404"), answered here or by the upstream.
    pub status_codes: BTreeMap<String, u64>,
    pub requests_per_connection: RpcStats,
    /// Requests that did not open their connection / all requests.
    pub reuse_ratio: f64,
    pub http_versions: BTreeMap<String, u64>,
    pub connection_headers: BTreeMap<String, u64>,
    /// Connections by the `User-Agent` of their first request (none: no header).
    pub user_agents: BTreeMap<String, u64>,
    /// Requests carrying a header a proxy adds (Via, Forwarded, X-Forwarded-For,
    /// X-Real-IP): the client is likely a proxy.
    pub forwarded_requests: u64,
    pub idle_gaps: GapStats,
    pub endings: BTreeMap<Ending, u64>,
    /// With `--tls`: handshakes that were full and resumed.
    pub tls_handshakes: TlsCounts,
    /// With `--client-ca`: the client's certificates, handshake by handshake.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_certificates: Option<ClientCertCounts>,
    /// Responses the client cut off: how many, and body bytes written of all of them.
    pub cut_responses: CutResponses,
    /// Connections that carried no request (opened, then closed or left unused).
    pub unused_connections: u64,
    /// Connections that carried exactly one request (not reused).
    pub one_request_connections: u64,
    /// The connections that spoke HTTP/2, if any: their streams and concurrency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h2: Option<H2Summary>,
    /// `--proxy-mode`: what went through the audit as the client's forward proxy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ProxySummary>,
    /// The answers the audit gave itself instead of a server's, by status ("502"): an
    /// origin or upstream it could not reach, a request it could not forward (not in
    /// proxy form, a `CONNECT` without host:port), one over its limits. A refused
    /// `CONNECT` is among them though it is no request. Absent when there were none.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub answered_by_audit: BTreeMap<String, OwnAnswers>,
}

/// The audit's own answers of one status: how many, and the first one's reason (what
/// its body said after "handshake audit: ").
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OwnAnswers {
    pub count: u64,
    pub reason: String,
}

/// One client program's connections: its name, the addresses it came from, its figures
/// (`client` is its name) and its verdict (evidence at `programs[NAME]`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AuditProgram {
    pub program: String,
    pub clients: Vec<String>,
    #[serde(flatten)]
    pub figures: ClientSummary,
    pub verdict: Vec<super::finding::Finding>,
}

/// The audit as a forward proxy: `CONNECT` tunnels (each a client connection; its
/// requests read from the relayed bytes) and plain requests in absolute form.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ProxySummary {
    pub tunnels: u64,
    /// Tunnels by the origin they went to (`host:port`).
    pub tunnels_by_origin: BTreeMap<String, u64>,
    /// Requests inside the tunnels (included in `requests`).
    pub tunneled_requests: u64,
    /// Some tunneled requests were estimated: over TLS, a turn of application data from
    /// the client that the origin answered is one request (an HTTP/2 client that sends
    /// several streams in one turn counts as one).
    pub requests_estimated: bool,
    /// The protocols each tunnel's client offered (ALPN, as its hello lists them: "h2,
    /// http/1.1"); which one the origin chose is encrypted in TLS 1.3.
    pub alpn_offered: BTreeMap<String, u64>,
    /// Plain requests forwarded (included in `requests`), and by origin.
    pub plain_requests: u64,
    pub plain_by_origin: BTreeMap<String, u64>,
}

/// What the client did over HTTP/2.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct H2Summary {
    pub connections: u64,
    pub streams: u64,
    pub streams_per_connection: RpcStats,
    /// The most streams in flight at once on one connection.
    pub peak_concurrent_streams: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct CutResponses {
    pub count: u64,
    pub body_bytes_written: u64,
    pub body_bytes_total: u64,
}

/// With `--client-ca`: what the client's handshakes showed of its certificate. A full
/// handshake asks for one; a resumed TLS 1.3 handshake carries the first one's
/// authentication and sends none (nor signs for it).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct ClientCertCounts {
    /// Full handshakes in which the client presented a certificate that verified (and
    /// signed a CertificateVerify with its key).
    pub presented: u64,
    /// Full handshakes without a certificate, served (`--client-cert optional`).
    pub not_presented: u64,
    /// Resumed handshakes: authenticated by the session, no certificate sent.
    pub resumed: u64,
    /// Handshakes that failed on the certificate: none sent where one is required, or
    /// one that did not verify.
    pub refused: u64,
    /// Of those refused, the ones in which none was sent.
    pub refused_none_sent: u64,
    /// The connections by the subject of the certificate they carried (presented or
    /// resumed), e.g. "CN=client".
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub subjects: BTreeMap<String, u64>,
    /// The key types of the certificates presented ("ECDSA P-256", "RSA 2048").
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub key_types: BTreeMap<String, u64>,
    /// Why certificates were refused, with how many times ("no certificate was sent",
    /// "unknown issuer").
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub refusals: BTreeMap<String, u64>,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub(crate) struct TlsCounts {
    pub full: u64,
    pub resumed: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct RpcStats {
    pub min: u64,
    pub mean: f64,
    pub max: u64,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct AuditReport {
    pub schema_version: u32,
    pub tool: &'static str,
    pub version: &'static str,
    pub url: String,
    pub command: Option<Vec<String>>,
    pub exit_status: Option<i32>,
    pub peak_concurrent_connections: u64,
    pub total: ClientSummary,
    pub clients: Vec<ClientSummary>,
    /// The client programs that opened the connections (`/proc/PID/comm`; `unknown`
    /// where none was found), each with its figures and its own verdict.
    pub programs: Vec<AuditProgram>,
    /// What the run was: the URL, when, the command line, the machine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<super::RunInfo>,
    /// Ctrl-C ended it (exit status 130): what the report covers (code `interrupted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<super::finding::Finding>,
    /// The verdict in one sentence: requests over connections, reused or not, and why.
    pub headline: super::finding::Finding,
    pub verdict: Vec<super::finding::Finding>,
    /// Second by second since the audit started: connections opened and ended, requests,
    /// TLS handshakes.
    pub timeline: Vec<AuditBucket>,
    /// `--fail-if`: each expression checked on the report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thresholds: Option<Vec<super::thresholds::ThresholdResult>>,
}
