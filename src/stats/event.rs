//! What happens to connections, as the engine's drivers tell it: the events a client
//! thread's collector alone writes into its recorder (`Recorder::apply`), in the order
//! they came, beside each attempt's `RequestRecord`. A driver never holds the recorder.

use crate::net::dns::Resolution;
use crate::net::kernel::TcpView;
use crate::record::{CloseReason, KeepAliveHeader, RequestRecord, ServerSettings, TlsHandshake};
use crate::stats::Recorder;

/// One thing that happened to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnEvent {
    /// How a new connection's host name was resolved.
    Dns(Resolution),
    /// A connection was established (TCP accepted, or a QUIC handshake completed) to the
    /// scenario's origin of this index (`Origin::index`).
    Opened { origin: u32 },
    /// The connection just opened went from the `--local-addr` address of this index.
    Source { index: u32 },
    /// A TCP connect of `connect_ns`, and the kernel's view after it where it was read
    /// (only after a connect slow enough to have sent its SYN again).
    TcpConnected {
        view: Option<TcpView>,
        connect_ns: u64,
    },
    /// A server's first TLS flight read over `spread_ns`, after a connect of
    /// `connect_ns`.
    TlsFlight { spread_ns: u64, connect_ns: u64 },
    /// A TLS handshake finished.
    Tls(TlsHandshake),
    /// A forward proxy opened a `CONNECT` tunnel.
    Tunnel,
    /// A request went in TLS early data; the server took it or not.
    EarlyData { accepted: bool },
    /// A QUIC handshake of `ns` at quinn's RTT estimate `rtt_ns`.
    QuicHandshake { ns: u64, rtt_ns: u64 },
    /// A 0-RTT request had left this long before its handshake completed.
    EarlyLead { ns: u64 },
    /// A QUIC connection ended: quinn's figures for its path.
    QuicEnded(QuicPath),
    /// The server's SETTINGS (HTTP/2), the first kept.
    ServerSettings(ServerSettings),
    /// What an HTTP/1 server's `Keep-Alive` header announced on a connection's first
    /// response, the first kept.
    KeepAlive(KeepAliveHeader),
    /// The client asked to close and the server (of origin `origin`, by index) kept the
    /// connection open.
    ServerIgnoredClose { origin: u32 },
    /// The kernel's view of a TCP connection as it closes.
    TcpClosed(TcpView),
    /// A connection ended after carrying `requests` responses.
    Closed { reason: CloseReason, requests: u64 },
    /// A multiplexed connection ended: the most streams it carried at once, and the
    /// code of the GOAWAY that ended it, if one did.
    StreamsEnded { peak: u64, goaway_code: Option<u32> },
}

/// quinn's figures for a QUIC connection's path at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct QuicPath {
    pub rtt_ns: u64,
    pub packets_sent: u64,
    pub packets_lost: u64,
    pub bytes_lost: u64,
    pub congestion_events: u64,
}

/// What a worker hands its thread's collector. An attempt's record is the common note
/// and the largest: boxing it would allocate once per request, so it travels by value.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Note {
    /// An attempt's record.
    Request(RequestRecord),
    /// A request in flight when the run's deadline came.
    Aborted,
    /// A connection's event.
    Conn(ConnEvent),
}

impl Recorder {
    /// Count one connection event.
    pub(crate) fn apply(&mut self, e: ConnEvent) {
        match e {
            ConnEvent::Dns(how) => self.dns(how),
            ConnEvent::Opened { origin } => self.connection_opened(origin),
            ConnEvent::Source { index } => self.connection_source(index),
            ConnEvent::TcpConnected { view, connect_ns } => self.tcp_connected(view, connect_ns),
            ConnEvent::TlsFlight {
                spread_ns,
                connect_ns,
            } => self.tls_flight(spread_ns, connect_ns),
            ConnEvent::Tls(h) => self.tls_handshake(h),
            ConnEvent::Tunnel => self.counts.tunnels += 1,
            ConnEvent::EarlyData { accepted } => self.early_data(accepted),
            ConnEvent::QuicHandshake { ns, rtt_ns } => {
                self.quic.handshake.add(ns);
                self.quic_timed(ns, rtt_ns);
            }
            ConnEvent::EarlyLead { ns } => self.quic.early_lead.add(ns),
            ConnEvent::QuicEnded(p) => {
                let q = &mut self.quic;
                q.connections += 1;
                q.rtt.add(p.rtt_ns);
                q.packets_sent += p.packets_sent;
                q.packets_lost += p.packets_lost;
                q.bytes_lost += p.bytes_lost;
                q.congestion_events += p.congestion_events;
            }
            ConnEvent::ServerSettings(s) => {
                self.server_settings.get_or_insert(s);
            }
            ConnEvent::KeepAlive(h) => {
                self.keep_alive_header.get_or_insert(h);
            }
            ConnEvent::ServerIgnoredClose { origin } => self.server_ignored_close(origin),
            ConnEvent::TcpClosed(v) => self.tcp_closed(v),
            ConnEvent::Closed { reason, requests } => self.connection_closed(reason, requests),
            ConnEvent::StreamsEnded { peak, goaway_code } => {
                self.h2_connection_ended(peak, goaway_code);
            }
        }
    }

    /// Count what a worker handed over.
    #[inline]
    pub(crate) fn take(&mut self, n: &Note) {
        match n {
            Note::Request(r) => self.record(r),
            Note::Aborted => self.aborted(),
            Note::Conn(e) => self.apply(*e),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{ConnEvent, Note, QuicPath};
    use crate::net::dns::Resolution;
    use crate::record::{
        CloseReason, ErrorDetail, ErrorKind, Failure, HandshakeKind, Outcome, Phase, Phases,
        RequestRecord, ServerSettings, TlsHandshake,
    };
    use crate::stats::Recorder;

    fn request(reused: bool, ok: bool, total_ms: u64, at: Instant) -> Note {
        Note::Request(RequestRecord {
            reused,
            phases: {
                let mut p = Phases::default();
                p[Phase::Connect] = (!reused).then_some(1_000_000);
                p[Phase::Wait] = Some(total_ms * 500_000);
                p[Phase::Total] = Some(total_ms * 1_000_000);
                p
            },
            outcome: if ok {
                Outcome::Ok {
                    status: 200,
                    retry_after_s: None,
                    said: None,
                }
            } else {
                Outcome::Error(Failure::new(ErrorKind::Reset, ErrorDetail::ResetInSend))
            },
            bytes_received: 100,
            body_bytes: 2,
            stale_retry: false,
            refused_retry: false,
            late: false,
            redirected: false,
            end: at,
        })
    }

    fn tls(kind: HandshakeKind) -> Note {
        Note::Conn(ConnEvent::Tls(TlsHandshake {
            kind,
            tls13: true,
            group: Some(0x001d),
            wire: None,
        }))
    }

    fn closed(reason: CloseReason, requests: u64) -> Note {
        Note::Conn(ConnEvent::Closed { reason, requests })
    }

    /// A run's worth of notes: three connections (full, resumed, and one that failed
    /// in its second request), a cache hit, an HTTP/2 SETTINGS and a QUIC path.
    fn a_run(at: Instant) -> Vec<Note> {
        let settings = |n| ServerSettings {
            max_concurrent_streams: Some(n),
            ..ServerSettings::default()
        };
        vec![
            Note::Conn(ConnEvent::Dns(Resolution::Lookup)),
            Note::Conn(ConnEvent::Opened { origin: 0 }),
            tls(HandshakeKind::Full),
            Note::Conn(ConnEvent::ServerSettings(settings(100))),
            request(false, true, 4, at),
            request(true, true, 2, at),
            request(true, true, 3, at),
            closed(CloseReason::ServerMaxRequests, 3),
            Note::Conn(ConnEvent::Dns(Resolution::CacheHit)),
            Note::Conn(ConnEvent::Opened { origin: 0 }),
            tls(HandshakeKind::Resumed),
            Note::Conn(ConnEvent::ServerSettings(settings(7))),
            request(false, true, 2, at),
            closed(CloseReason::ServerIdleClose, 1),
            Note::Conn(ConnEvent::Opened { origin: 0 }),
            tls(HandshakeKind::Resumed),
            request(false, true, 5, at),
            request(true, false, 1, at),
            closed(CloseReason::Error, 1),
            Note::Conn(ConnEvent::StreamsEnded {
                peak: 4,
                goaway_code: Some(0),
            }),
            Note::Conn(ConnEvent::QuicEnded(QuicPath {
                rtt_ns: 40_000_000,
                packets_sent: 12,
                packets_lost: 1,
                bytes_lost: 1200,
                congestion_events: 1,
            })),
            Note::Aborted,
        ]
    }

    fn taken(notes: &[Note], start: Instant) -> Recorder {
        let mut rec = Recorder::new();
        rec.timeline.begin(start);
        for n in notes {
            rec.take(n);
        }
        rec
    }

    #[test]
    fn a_runs_events_are_counted_once_each() {
        let start = Instant::now();
        let rec = taken(&a_run(start + Duration::from_millis(10)), start);
        let c = &rec.counts;
        assert_eq!((c.connections_opened, c.connections_closed), (3, 3));
        assert_eq!((c.dns_lookups, c.dns_cache_hits), (1, 1));
        assert_eq!((c.tls_full, c.tls_resumed, c.tls13), (1, 2, 3));
        assert_eq!((c.attempted, c.answered, c.reused_requests), (6, 5, 2));
        assert_eq!(rec.errors_total(), 1);
        assert_eq!(c.aborted_at_deadline, 1);
        // Requests per connection: the sum, the least and the most, and those the
        // server's limit ended.
        assert_eq!((c.rpc_sum, rec.rpc_min, rec.rpc_max), (5, 1, 3));
        assert_eq!(c.rpc_sum_server_max_requests, 3);
        for (reason, n) in [
            (CloseReason::ServerMaxRequests, 1),
            (CloseReason::ServerIdleClose, 1),
            (CloseReason::Error, 1),
            (CloseReason::EndOfRun, 0),
        ] {
            assert_eq!(rec.close_reasons[reason.index()], n, "{}", reason.name());
        }
        // The first SETTINGS seen is kept.
        assert_eq!(
            rec.server_settings.and_then(|s| s.max_concurrent_streams),
            Some(100)
        );
        assert_eq!((rec.peak_streams_max, rec.goaway_codes[0]), (4, 1));
        assert_eq!((rec.quic.connections, rec.quic.packets_lost), (1, 1));
        // Phases of successful requests only, split by new and reused connections.
        let total = Phase::Total;
        assert_eq!(rec.phases_new[total].count, 3);
        assert_eq!(rec.phases_reused[total].count, 2);
        assert_eq!(rec.phases_new[total].max_ns, 5_000_000);
    }

    #[test]
    fn recorders_merged_count_what_one_recorder_of_all_the_notes_counts() {
        let start = Instant::now();
        let notes = a_run(start + Duration::from_millis(10));
        let whole = taken(&notes, start);
        for split in [0, 5, 9, notes.len()] {
            let mut a = taken(&notes[..split], start);
            a += &taken(&notes[split..], start);
            assert_eq!(a.counts, whole.counts, "split at {split}");
            assert_eq!(a.close_reasons, whole.close_reasons);
            assert_eq!(a.errors, whole.errors);
            assert_eq!((a.rpc_min, a.rpc_max), (whole.rpc_min, whole.rpc_max));
            assert_eq!(a.goaway_codes, whole.goaway_codes);
            assert_eq!(a.peak_streams_max, whole.peak_streams_max);
            assert_eq!(a.quic.packets_sent, whole.quic.packets_sent);
            for (x, y) in [
                (&a.phases_new, &whole.phases_new),
                (&a.phases_reused, &whole.phases_reused),
            ] {
                for ((_, p), (_, q)) in x.iter().zip(y.iter()) {
                    assert_eq!(
                        (
                            p.count,
                            p.sum_ns,
                            p.sum_sq,
                            p.min_ns,
                            p.max_ns,
                            p.hist.len()
                        ),
                        (
                            q.count,
                            q.sum_ns,
                            q.sum_sq,
                            q.min_ns,
                            q.max_ns,
                            q.hist.len()
                        )
                    );
                }
            }
            let line = |r: &Recorder| -> Vec<(u64, u64, u64, u64, u64, Vec<u32>)> {
                r.timeline
                    .buckets()
                    .iter()
                    .map(|b| {
                        let lat = b.latency.as_ref().map_or(0, |h| h.len());
                        let tls = b.tls_full + b.tls_resumed;
                        (
                            b.requests,
                            b.ok,
                            b.new_connections,
                            tls,
                            lat,
                            b.closed.to_vec(),
                        )
                    })
                    .collect()
            };
            assert_eq!(line(&a), line(&whole), "split at {split}");
        }
    }
}
