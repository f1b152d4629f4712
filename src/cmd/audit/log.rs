//! The audit's log: one record per client connection, and how it ended.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use serde::Serialize;

/// How a connection ended, as far as the socket shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
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
    /// The client started a request and stalled past the header timeout.
    Stalled,
    /// Idle past the idle timeout; closed by this side.
    IdleTimeout,
    /// A request head or body over the size limits: answered 431 or 413, closed.
    TooLarge,
    /// Over the connection limit: answered 503, closed.
    OverLimit,
    /// Still open when the audit ended.
    OpenAtEnd,
}

#[derive(Debug, Clone, Default)]
pub(super) struct ConnLog {
    pub(super) client: Option<IpAddr>,
    pub(super) requests: u64,
    pub(super) responses: u64,
    pub(super) versions: BTreeMap<String, u64>,
    pub(super) connection_headers: BTreeMap<String, u64>,
    /// Requests with a header a proxy adds (Via, Forwarded, X-Forwarded-For, X-Real-IP).
    pub(super) forwarded: u64,
    pub(super) gaps: GapStats,
    pub(super) end: Option<Ending>,
    /// With `--tls`: whether the handshake resumed a session.
    pub(super) tls_resumed: Option<bool>,
    /// Body bytes of the last response.
    pub(super) last_body: u64,
    /// A response the client cut off: (body bytes written, body bytes in all).
    pub(super) cut: Option<(u64, u64)>,
    /// The connection spoke HTTP/2 (its requests are streams).
    pub(super) h2: bool,
    /// HTTP/2: the most streams in flight at once.
    pub(super) peak_streams: u64,
}

#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct GapStats {
    pub count: u64,
    pub min_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    #[serde(skip)]
    pub(super) sum_ms: f64,
}

impl GapStats {
    pub(super) fn add(&mut self, ms: f64) {
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

    pub(super) fn merge(&mut self, o: &GapStats) {
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

#[derive(Default)]
pub(super) struct Log {
    pub(super) conns: Vec<ConnLog>,
    pub(super) open: u64,
    pub(super) peak_open: u64,
    /// Connections, requests and handshakes second by second since the audit started.
    pub(super) timeline: crate::stats::timeline::Timeline,
}

pub(super) type SharedLog = Arc<Mutex<Log>>;

pub(super) fn with_log<R>(log: &SharedLog, f: impl FnOnce(&mut Log) -> R) -> R {
    let mut g = log.lock().unwrap_or_else(|p| p.into_inner());
    f(&mut g)
}
