//! The audit's log: one record per client connection, and how it ended.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

pub(crate) use crate::report::audit::{Ending, GapStats};

#[derive(Debug, Clone, Default)]
pub(super) struct ConnLog {
    pub(super) client: Option<IpAddr>,
    /// The program on this machine that opened it (`/proc/PID/comm`), when found.
    pub(super) program: Option<std::sync::Arc<str>>,
    /// The `User-Agent` of its first request that had one.
    pub(super) user_agent: Option<String>,
    pub(super) requests: u64,
    pub(super) responses: u64,
    /// The responses' status codes (answered here or by the upstream).
    pub(super) statuses: BTreeMap<u16, u64>,
    pub(super) versions: BTreeMap<String, u64>,
    pub(super) connection_headers: BTreeMap<String, u64>,
    /// Requests with a header a proxy adds (Via, Forwarded, X-Forwarded-For, X-Real-IP).
    pub(super) forwarded: u64,
    pub(super) gaps: GapStats,
    pub(super) end: Option<Ending>,
    /// With `--tls`: whether the handshake resumed a session.
    pub(super) tls_resumed: Option<bool>,
    /// With `--client-ca`: the client's certificate in this connection's handshake.
    pub(super) client_cert: Option<CertSeen>,
    /// Body bytes of the last response.
    pub(super) last_body: u64,
    /// A response the client cut off: (body bytes written, body bytes in all).
    pub(super) cut: Option<(u64, u64)>,
    /// The connection spoke HTTP/2 (its requests are streams).
    pub(super) h2: bool,
    /// HTTP/2: the most streams in flight at once.
    pub(super) peak_streams: u64,
    /// `--proxy-mode`: the origin a `CONNECT` tunnel went to (its requests are read from
    /// the relayed bytes).
    pub(super) tunnel: Option<String>,
    /// The tunnel's requests are estimated from TLS records.
    pub(super) estimated: bool,
    /// The protocols the tunnel's client offered in its hello (ALPN; which one the
    /// origin chose is encrypted in TLS 1.3).
    pub(super) alpn: Option<String>,
    /// `--proxy-mode`: plain requests forwarded, by origin (`host:port`).
    pub(super) origins: BTreeMap<String, u64>,
    /// The answers the audit gave itself instead of a server's (an origin it could not
    /// reach, a request it could not forward, a limit), by status: how many, and the
    /// first one's reason.
    pub(super) own: BTreeMap<u16, (u64, String)>,
}

/// With `--client-ca`: what a connection's handshake showed of the client's certificate.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum CertSeen {
    /// A full handshake in which the client presented a certificate that verified (its
    /// subject and key type): it signed a CertificateVerify.
    Presented { subject: String, key_type: String },
    /// A resumed handshake: the session carries the first one's certificate (its
    /// subject, when it had one), and none was sent or signed for.
    Resumed { subject: Option<String> },
    /// A full handshake without a certificate, served (`--client-cert optional`).
    NotPresented,
    /// The handshake failed on the certificate: none where one is required, or one that
    /// did not verify (rustls's reason).
    Refused { why: String, none_sent: bool },
}

#[derive(Default)]
pub(super) struct Log {
    pub(super) conns: Vec<ConnLog>,
    pub(super) open: u64,
    pub(super) peak_open: u64,
    /// The audit is the client's forward proxy (`--proxy-mode`).
    pub(super) proxy_mode: bool,
    /// Connections, requests and handshakes second by second since the audit started.
    pub(super) timeline: crate::stats::timeline::Timeline,
}

pub(super) type SharedLog = Arc<Mutex<Log>>;

/// The audit answered connection `idx`'s request itself with `status`, for `why`.
pub(super) fn answered_itself(log: &SharedLog, idx: usize, status: u16, why: &str) {
    with_log(log, |g| {
        let e = g.conns[idx]
            .own
            .entry(status)
            .or_insert_with(|| (0, why.trim_end().to_string()));
        e.0 += 1;
    });
}

pub(super) fn with_log<R>(log: &SharedLog, f: impl FnOnce(&mut Log) -> R) -> R {
    let mut g = log.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g)
}
