//! `watch`'s report: audit's figures from the outside, per server endpoint and in total,
//! with the same JSON keys where the meaning is the same (`total.connections`,
//! `total.requests`, `total.tls_handshakes.full/resumed`, `reuse_ratio`,
//! `requests_per_connection`, `idle_gaps`), and a verdict.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::track::{Conn, Ending, Kind};
use crate::fmt::plural_s as plural;
use crate::report::audit::{GapStats, RpcStats, TlsCounts};

#[derive(Debug, Clone, Serialize, Default)]
pub struct Spread {
    /// How many: the connections that ended (0: none did, and the figures are 0).
    pub count: u64,
    pub min: f64,
    pub mean: f64,
    pub max: f64,
}

/// The figures of a set of connections (one server endpoint's, or all).
#[derive(Debug, Clone, Serialize)]
pub struct EndpointSummary {
    /// The server's address and port, or "all".
    pub endpoint: String,
    pub connections: u64,
    /// Connections that were open when the watch started (their earlier requests were
    /// not seen).
    pub already_open: u64,
    /// Requests answered (an answer began). Cleartext HTTP/1: request heads seen; TLS:
    /// bursts of application data from the client, an estimate (`requests_estimated`).
    pub requests: u64,
    /// Requests sent that got no answer on their connection: sent on one the server was
    /// closing or had reset (clients then send them again on a new one), or cut off.
    pub unanswered_requests: u64,
    pub responses: u64,
    /// Some requests are estimates (TLS connections).
    pub requests_estimated: bool,
    pub requests_per_connection: RpcStats,
    /// Requests that did not open their connection / all requests.
    pub reuse_ratio: f64,
    /// Connections by what they carried: http, tls, other, unknown (no data).
    pub kinds: BTreeMap<String, u64>,
    pub tls_handshakes: TlsCounts,
    /// Server names (SNI), TLS versions and ALPN protocols the handshakes named.
    pub tls_sni: BTreeMap<String, u64>,
    pub tls_versions: BTreeMap<String, u64>,
    pub tls_alpn: BTreeMap<String, u64>,
    /// The ALPN protocols clients offered (TLS 1.3 hides the server's choice).
    pub tls_alpn_offered: BTreeMap<String, u64>,
    /// Who closed first, and how: client_fin, server_fin, client_reset, server_reset,
    /// open_at_end.
    pub endings: BTreeMap<String, u64>,
    /// Sockets of these connections in TIME_WAIT when the watch ended, by the side that
    /// holds them (the side that closed first).
    pub time_wait: BTreeMap<String, u64>,
    /// Connections that ended, from the first packet seen to the last: ms.
    pub lifetimes_ms: Spread,
    pub idle_gaps: GapStats,
    pub unused_connections: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CaptureReport {
    /// Packets the capture's filter passed (TCP), and of them those the kernel dropped
    /// for want of buffer room: connections or requests in them were not seen.
    pub packets: u64,
    pub kernel_drops: u64,
    /// TCP segments read.
    pub segments: u64,
    /// Watching a process: how its connections were told from others'. "cgroup": in the
    /// kernel, as each was opened (none missed); "sockets": by looking up each socket's
    /// owner in /proc after its SYN was seen (a connection shorter than the lookup can be
    /// missed), with why the cgroup way was not open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribution: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribution_note: Option<String>,
    /// Connections the kernel could not record for the watch (its record was full).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attribution_lost: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Watched {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    pub duration_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WatchReport {
    pub schema_version: u32,
    pub tool: &'static str,
    pub version: &'static str,
    pub watched: Watched,
    pub exit_status: Option<i32>,
    pub capture: CaptureReport,
    /// The most connections open at once: from the SYN (or first packet seen) to the
    /// first FIN or RST. Watching a program, its own: exact with the kernel's record,
    /// else sampled from its established sockets every 10 ms.
    pub peak_concurrent_connections: u64,
    pub total: EndpointSummary,
    pub endpoints: Vec<EndpointSummary>,
    /// Watching a process: connections seen on this machine that were not its (not in
    /// the figures above).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_connections: Option<u64>,
    pub verdict: Vec<String>,
}

fn ending_name(e: Ending) -> &'static str {
    match e {
        Ending::ClientFin => "client_fin",
        Ending::ServerFin => "server_fin",
        Ending::ClientReset => "client_reset",
        Ending::ServerReset => "server_reset",
        Ending::OpenAtEnd => "open_at_end",
    }
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Http => "http",
        Kind::Http2 => "http2",
        Kind::Tls => "tls",
        Kind::Other => "other",
        Kind::Unknown => "unknown",
    }
}

/// The figures of a set of connections, added as each one ends (memory does not grow
/// with their number).
#[derive(Debug, Clone, Default)]
pub struct Acc {
    connections: u64,
    already_open: u64,
    requests: u64,
    unanswered: u64,
    responses: u64,
    estimated: bool,
    with_requests: u64,
    rpc_min: Option<u64>,
    rpc_max: u64,
    kinds: BTreeMap<String, u64>,
    tls: TlsCounts,
    sni: BTreeMap<String, u64>,
    versions: BTreeMap<String, u64>,
    alpn: BTreeMap<String, u64>,
    alpn_offered: BTreeMap<String, u64>,
    endings: BTreeMap<String, u64>,
    lifetimes: (u64, f64, f64, f64),
    gaps: (u64, f64, f64, f64),
    unused: u64,
    sent: u64,
    received: u64,
}

impl Acc {
    pub fn add(&mut self, c: &Conn) {
        self.connections += 1;
        self.already_open += u64::from(c.already_open);
        // A request counts when an answer to it began; the others were sent on a
        // connection the server was closing (or reset), or were still waiting.
        let answered = c.requests.min(c.responses);
        self.requests += answered;
        self.unanswered += c.requests - answered;
        self.responses += c.responses;
        self.estimated |= c.kind == Kind::Tls;
        if answered > 0 {
            self.with_requests += 1;
        } else {
            self.unused += 1;
        }
        self.rpc_min = Some(self.rpc_min.map_or(answered, |m| m.min(answered)));
        self.rpc_max = self.rpc_max.max(answered);
        let (sent, received) = c.bytes();
        self.sent += sent;
        self.received += received;
        *self.kinds.entry(kind_name(c.kind).into()).or_default() += 1;
        if let Some(t) = &c.tls {
            match t.resumed {
                Some(true) => self.tls.resumed += 1,
                Some(false) => self.tls.full += 1,
                None => {}
            }
            for (m, v) in [
                (&mut self.sni, &t.sni),
                (&mut self.versions, &t.version),
                (&mut self.alpn, &t.alpn),
                (&mut self.alpn_offered, &t.alpn_offered),
            ] {
                if let Some(v) = v {
                    *m.entry(v.clone()).or_default() += 1;
                }
            }
        }
        let ending = c.ending.unwrap_or(Ending::OpenAtEnd);
        *self.endings.entry(ending_name(ending).into()).or_default() += 1;
        let spread = |acc: &mut (u64, f64, f64, f64), ms: f64| {
            acc.1 = if acc.0 == 0 { ms } else { acc.1.min(ms) };
            acc.3 = acc.3.max(ms);
            acc.2 += ms;
            acc.0 += 1;
        };
        if let Some(end) = c.ended {
            spread(
                &mut self.lifetimes,
                end.saturating_duration_since(c.opened).as_secs_f64() * 1e3,
            );
        }
        for g in &c.gaps {
            spread(&mut self.gaps, g.as_secs_f64() * 1e3);
        }
    }

    /// The summary, with the TIME_WAIT sockets counted at the end.
    pub fn summary(&self, endpoint: String, time_wait: BTreeMap<String, u64>) -> EndpointSummary {
        let mean = |a: &(u64, f64, f64, f64)| if a.0 > 0 { a.2 / a.0 as f64 } else { 0.0 };
        EndpointSummary {
            endpoint,
            connections: self.connections,
            already_open: self.already_open,
            requests: self.requests,
            unanswered_requests: self.unanswered,
            responses: self.responses,
            requests_estimated: self.estimated,
            requests_per_connection: RpcStats {
                min: self.rpc_min.unwrap_or(0),
                mean: if self.connections > 0 {
                    self.requests as f64 / self.connections as f64
                } else {
                    0.0
                },
                max: self.rpc_max,
            },
            reuse_ratio: if self.requests > 0 {
                (self.requests - self.with_requests) as f64 / self.requests as f64
            } else {
                0.0
            },
            kinds: self.kinds.clone(),
            tls_handshakes: self.tls,
            tls_sni: self.sni.clone(),
            tls_versions: self.versions.clone(),
            tls_alpn: self.alpn.clone(),
            tls_alpn_offered: self.alpn_offered.clone(),
            endings: self.endings.clone(),
            time_wait,
            lifetimes_ms: Spread {
                count: self.lifetimes.0,
                min: self.lifetimes.1,
                mean: mean(&self.lifetimes),
                max: self.lifetimes.3,
            },
            idle_gaps: gap_stats(self.gaps.0, self.gaps.1, mean(&self.gaps), self.gaps.3),
            unused_connections: self.unused,
            bytes_sent: self.sent,
            bytes_received: self.received,
        }
    }
}

fn gap_stats(count: u64, min_ms: f64, mean_ms: f64, max_ms: f64) -> GapStats {
    GapStats {
        count,
        min_ms,
        mean_ms,
        max_ms,
        ..GapStats::default()
    }
}

/// Plain sentences per endpoint: reuse or none, TLS handshakes, who closes, drops.
pub fn verdict(r: &WatchReport) -> Vec<String> {
    let mut v = Vec::new();
    if r.capture.kernel_drops > 0 {
        v.push(format!(
            "The kernel dropped {} of {} captured packets (the capture's buffer was full): connections and requests in them were not seen, so the figures below may be short.",
            r.capture.kernel_drops, r.capture.packets
        ));
    }
    if let Some(n) = r.capture.attribution_lost.filter(|n| *n > 0) {
        v.push(format!(
            "The kernel could not record {} of the program's connections (its record was full): they are counted as other connections.",
            plural(n, "connection")
        ));
    }
    if r.capture.attribution == Some("sockets") {
        v.push(format!(
            "The program's connections were told from others' by looking up each socket's owner after its SYN was seen ({}): a connection shorter than that lookup may be counted as another program's.",
            r.capture.attribution_note.as_deref().unwrap_or("the cgroup way was not open")
        ));
    }
    if r.total.connections == 0 {
        v.push("No TCP connection was seen.".into());
        return v;
    }
    for e in &r.endpoints {
        let reqs = if e.requests_estimated {
            format!(
                "{} (estimated from TLS records)",
                plural(e.requests, "request")
            )
        } else {
            plural(e.requests, "request")
        };
        if e.requests == 0 {
            v.push(format!(
                "{}: {} and no request seen.",
                e.endpoint,
                plural(e.connections, "connection")
            ));
        } else if e.connections >= e.requests && e.requests > 1 {
            let mut s = format!(
                "{}: {reqs} over {}: no reuse",
                e.endpoint,
                plural(e.connections, "connection")
            );
            if e.tls_handshakes.full > 0 && e.tls_handshakes.resumed == 0 {
                s.push_str("; each one paid a full TLS handshake");
            } else if e.tls_handshakes.resumed > 0 {
                let _ = write!(
                    s,
                    "; TLS: {} full, {} resumed",
                    e.tls_handshakes.full, e.tls_handshakes.resumed
                );
            }
            s.push_str(
                ". Keep connections alive and reuse them (one client, a keep-alive agent or pool).",
            );
            v.push(s);
        } else if e.requests <= e.connections {
            v.push(format!(
                "{}: {reqs} over {}.",
                e.endpoint,
                plural(e.connections, "connection")
            ));
        } else {
            v.push(format!(
                "{}: {reqs} over {}: connections are reused ({:.1} requests per connection).",
                e.endpoint,
                plural(e.connections, "connection"),
                e.requests_per_connection.mean
            ));
        }
        if e.unanswered_requests > 0 {
            v.push(format!(
                "{}: {} sent on connections the server was closing or had reset got no answer there (a client sends such a request again on a new connection): the client reused connections the server had already given up.",
                e.endpoint,
                plural(e.unanswered_requests, "request")
            ));
        }
        let full = e.tls_handshakes.full;
        if full > 1 && e.tls_handshakes.resumed == 0 {
            v.push(format!(
                "{}: all {full} TLS handshakes were full: the client does not resume sessions.",
                e.endpoint
            ));
        }
    }
    v
}

pub fn render(r: &WatchReport) -> String {
    let mut out = String::new();
    let w = &r.watched;
    let what = match (&w.command, w.pid, w.port, &w.host) {
        (Some(c), _, _, _) => format!("command: {}", c.join(" ")),
        (None, Some(p), _, _) => format!("process {p}"),
        (None, None, Some(port), host) => format!(
            "connections to {}:{port}",
            host.as_deref().unwrap_or("any host")
        ),
        (None, None, None, Some(h)) => format!("connections to {h}"),
        _ => "every TCP connection on this machine".into(),
    };
    let _ = writeln!(out, "watch {what} for {:.1} s", w.duration_s);
    if let Some(s) = r.exit_status {
        let _ = writeln!(out, "  exit status {s}");
    }
    let _ = writeln!(
        out,
        "  capture: {} TCP packets, {} dropped by the kernel; peak concurrent connections {}",
        r.capture.packets, r.capture.kernel_drops, r.peak_concurrent_connections
    );
    if let Some(a) = r.capture.attribution {
        let _ = writeln!(
            out,
            "  the program's connections told from others' by {}",
            if a == "cgroup" {
                "its cgroup, in the kernel"
            } else {
                "looking up socket owners"
            }
        );
    }
    if let Some(o) = r.other_connections {
        let _ = writeln!(
            out,
            "  connections of other processes seen and left out: {o}"
        );
    }
    let map = |m: &BTreeMap<String, u64>| {
        if m.is_empty() {
            "-".to_string()
        } else {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    for e in std::iter::once(&r.total).chain(r.endpoints.iter().filter(|_| r.endpoints.len() > 1)) {
        let _ = writeln!(
            out,
            "\n{}",
            if e.endpoint == "all" {
                "All endpoints".to_string()
            } else {
                format!("Server {}", e.endpoint)
            }
        );
        let _ = writeln!(
            out,
            "  connections           {}{}",
            e.connections,
            if e.already_open > 0 {
                format!(" ({} already open when the watch began)", e.already_open)
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            out,
            "  requests              {} answered, {} unanswered{}",
            e.requests,
            e.unanswered_requests,
            if e.requests_estimated {
                "  [TLS: estimated from bursts of application data]"
            } else {
                ""
            }
        );
        let _ = writeln!(
            out,
            "  requests/connection   min {}  mean {:.1}  max {}   (reuse ratio {:.1} %)",
            e.requests_per_connection.min,
            e.requests_per_connection.mean,
            e.requests_per_connection.max,
            e.reuse_ratio * 100.0
        );
        let _ = writeln!(out, "  carried               {}", map(&e.kinds));
        if e.tls_handshakes.full + e.tls_handshakes.resumed > 0 {
            let _ = writeln!(
                out,
                "  TLS handshakes        full {}, resumed {}; versions {}; SNI {}; ALPN offered {}, chosen {}",
                e.tls_handshakes.full,
                e.tls_handshakes.resumed,
                map(&e.tls_versions),
                map(&e.tls_sni),
                map(&e.tls_alpn_offered),
                if e.tls_alpn.is_empty() {
                    "(not visible in TLS 1.3)".to_string()
                } else {
                    map(&e.tls_alpn)
                }
            );
        }
        let _ = writeln!(out, "  who closed first      {}", map(&e.endings));
        if e.lifetimes_ms.count == 0 {
            let _ = writeln!(out, "  lifetimes             none ended");
        } else {
            let _ = writeln!(out, "  TIME_WAIT at the end  {}", map(&e.time_wait));
            let _ = writeln!(
                out,
                "  lifetimes (ms)        min {:.2}  mean {:.2}  max {:.2}  ({} ended)",
                e.lifetimes_ms.min, e.lifetimes_ms.mean, e.lifetimes_ms.max, e.lifetimes_ms.count
            );
        }
        if e.idle_gaps.count > 0 {
            let _ = writeln!(
                out,
                "  idle gaps (ms)        min {:.2}  mean {:.2}  max {:.2}  ({})",
                e.idle_gaps.min_ms, e.idle_gaps.mean_ms, e.idle_gaps.max_ms, e.idle_gaps.count
            );
        }
    }
    let _ = writeln!(out, "\nVerdict");
    for v in &r.verdict {
        let _ = writeln!(out, "  {v}");
    }
    out
}
