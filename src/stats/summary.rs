//! Pure summary: a merged `Recorder` and the scenario become a `ScenarioReport`,
//! including the one-sentence diagnosis of missing reuse.

use std::collections::BTreeMap;
use std::time::Duration;

use super::raw::{RawScenario, ScenarioShape};
use super::recorder::{PhaseStat, Recorder};
use crate::cpu::CpuTime;
use crate::fmt::plural;
use crate::net::local_ports::LocalPorts;
use crate::plan::Strategy;
use crate::proto::h2::wire::error_code_name;
use crate::record::{CloseReason, ErrorDetail, ErrorKind};
use crate::report::{
    ConnectionsReport, CpuReport, DnsReport, EarlyDataReport, H2Report, KernelReport,
    LatencyReport, LoadReport, LocalPortsReport, PeakReport, PhaseGroup, PhaseMeans, PhaseSummary,
    PhasesReport, QuicReport, RequestsReport, RetriesReport, RpcReport, ScenarioReport, Spread,
    ThroughputReport, TimelineBucket, TlsHandshakes,
};

const NS_PER_MS: f64 = 1e6;

fn ms(ns: u64) -> f64 {
    ns as f64 / NS_PER_MS
}

pub fn phase_summary(p: &PhaseStat) -> PhaseSummary {
    if p.count == 0 {
        return PhaseSummary::default();
    }
    let n = p.count as f64;
    let mean = p.sum_ns as f64 / n;
    let var = (p.sum_sq as f64 / n - mean * mean).max(0.0);
    PhaseSummary {
        count: p.count,
        min: ms(p.min_ns),
        mean: mean / NS_PER_MS,
        stdev: var.sqrt() / NS_PER_MS,
        p50: ms(p.hist.value_at_quantile(0.50)),
        p90: ms(p.hist.value_at_quantile(0.90)),
        p99: ms(p.hist.value_at_quantile(0.99)),
        max: ms(p.max_ns),
    }
}

fn group(set: &[PhaseStat], requests: u64) -> PhaseGroup {
    let s = |i: usize| phase_summary(&set[i]);
    PhaseGroup {
        requests,
        blocked: s(0),
        dns: s(1),
        connect: s(2),
        tls: s(3),
        h2_setup: s(4),
        quic_handshake: s(5),
        send: s(6),
        wait: s(7),
        receive: s(8),
        total: s(9),
    }
}

/// Each phase's sum over all ok requests divided by their number, in ms.
fn phase_means(rec: &Recorder) -> PhaseMeans {
    let mean = |i: usize| {
        if rec.counts.ok == 0 {
            return 0.0;
        }
        let sum = rec.phases_new[i].sum_ns + rec.phases_reused[i].sum_ns;
        sum as f64 / rec.counts.ok as f64 / NS_PER_MS
    };
    PhaseMeans {
        blocked: mean(0),
        dns: mean(1),
        connect: mean(2),
        tls: mean(3),
        h2_setup: mean(4),
        quic_handshake: mean(5),
        send: mean(6),
        wait: mean(7),
        receive: mean(8),
    }
}

/// Percentiles of a latency histogram, for distribution charts.
fn distribution(p: &PhaseStat) -> Vec<[f64; 2]> {
    if p.count == 0 {
        return Vec::new();
    }
    let mut qs: Vec<f64> = (0..=20).map(|i| f64::from(i) * 5.0).collect();
    qs.extend([99.0, 99.9]);
    qs.sort_by(f64::total_cmp);
    qs.into_iter()
        .map(|q| {
            let v = match q {
                0.0 => p.min_ns,
                100.0 => p.max_ns,
                _ => p.hist.value_at_quantile(q / 100.0),
            };
            [q, ms(v)]
        })
        .collect()
}

fn h2_report(sc: &ScenarioShape, rec: &Recorder) -> H2Report {
    let closed = rec.counts.connections_closed;
    H2Report {
        connections_per_origin: sc.connections_per_origin,
        peak_concurrent_streams: PeakReport {
            max: rec.peak_streams_max,
            mean: if closed > 0 {
                rec.counts.peak_streams_sum as f64 / closed as f64
            } else {
                0.0
            },
        },
        server_settings: rec.server_settings,
        goaway_codes: rec
            .goaway_codes
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (error_code_name(code as u32).to_string(), *n))
            .collect(),
    }
}

fn spread(s: &crate::stats::recorder::Span) -> Spread {
    Spread {
        count: s.count,
        min: ms(s.min_ns),
        mean: s.mean_ns() / NS_PER_MS,
        max: ms(s.max_ns),
    }
}

/// The kernel's view of the TCP connections; none when none was read.
fn kernel_report(rec: &Recorder) -> Option<KernelReport> {
    let t = &rec.tcp;
    if t.connects == 0 && t.closed == 0 {
        return None;
    }
    let some = |s: &super::recorder::Span| (s.count > 0).then(|| spread(s));
    Some(KernelReport {
        connects: t.connects,
        min_rtt_ms: phase_summary(&t.rtt),
        syn_retransmitted: t.syn_retransmitted,
        syn_retransmits: t.syn_retransmits,
        syn_retransmitted_connect_ms: some(&t.syn_connect),
        closed: t.closed,
        rtt_at_close_ms: some(&t.rtt_at_close),
        retransmits: t.retransmits,
        connections_with_retransmits: t.with_retransmits,
    })
}

/// "3 of 40 connects took ~1.02 s (1.01-1.02 s): their SYN or its answer was lost and
/// the SYN sent again after the kernel's retransmission timeout (...; 3 SYNs sent again);
/// the round trip is 20.1 ms (the kernel's least RTT per connection, median)."
fn syn_sentence(k: &KernelReport) -> Option<String> {
    let slow = k.syn_retransmitted_connect_ms?;
    let secs = |ms: f64| format!("{:.2} s", ms / 1000.0);
    let others = if k.min_rtt_ms.count > 0 {
        format!(
            "; the round trip is {} ms (the kernel's least RTT per connection, median)",
            crate::fmt::ms(k.min_rtt_ms.p50)
        )
    } else {
        String::new()
    };
    Some(format!(
        "{} of {} connects took ~{} ({:.2}-{}): their SYN or its answer was lost and the SYN sent again after the kernel's retransmission timeout (1 s, then 2 s, 4 s...; {} sent again){others}.",
        k.syn_retransmitted,
        k.connects,
        secs(slow.mean),
        slow.min / 1000.0,
        secs(slow.max),
        crate::fmt::plural_s(k.syn_retransmits, "SYN")
    ))
}

fn quic_report(sc: &ScenarioShape, rec: &Recorder) -> QuicReport {
    let q = &rec.quic;
    let shared = sc.strategy == Strategy::H3;
    let closed = rec.counts.connections_closed;
    QuicReport {
        connections_per_origin: shared.then_some(sc.connections_per_origin),
        peak_concurrent_streams: shared.then(|| PeakReport {
            max: rec.peak_streams_max,
            mean: if closed > 0 {
                rec.counts.peak_streams_sum as f64 / closed as f64
            } else {
                0.0
            },
        }),
        handshake_ms: spread(&q.handshake),
        early_request_lead_ms: (q.early_lead.count > 0).then(|| spread(&q.early_lead)),
        rtt_ms: spread(&q.rtt),
        packets_sent: q.packets_sent,
        packets_lost: q.packets_lost,
        bytes_lost: q.bytes_lost,
        congestion_events: q.congestion_events,
        connections_ended: q.connections,
        handshake_extra_round_trips: rec.counts.quic_flight_waits,
    }
}

/// Index of `total` in the phase sets.
const TOTAL: usize = crate::record::PHASE_NAMES.len() - 1;

/// The report of a scenario with its lossless form (`raw`), for `--json` readers and
/// `merge`.
pub fn summarize_with_raw(
    sc: &ScenarioShape,
    rec: &Recorder,
    wall: Duration,
    cpu: CpuTime,
) -> ScenarioReport {
    let mut rep = summarize(sc, rec, wall, cpu);
    rep.raw = Some(RawScenario::new(sc.clone(), rec, wall, cpu));
    rep
}

pub fn summarize(
    sc: &ScenarioShape,
    rec: &Recorder,
    wall: Duration,
    cpu: CpuTime,
) -> ScenarioReport {
    let mut rep = summarize_counts(sc, rec, wall, cpu);
    if let Some(line) = rep.connections.kernel.as_ref().and_then(syn_sentence) {
        rep.diagnosis.push(line);
    }
    if let Some(line) = crate::report::failure::example_sentence(&rep) {
        // Right after the sentence counting the errors by category.
        let at = rep
            .diagnosis
            .iter()
            .position(|d| d.contains(" attempts failed: "))
            .map_or(rep.diagnosis.len(), |i| i + 1);
        rep.diagnosis.insert(at, line);
    }
    rep
}

fn summarize_counts(
    sc: &ScenarioShape,
    rec: &Recorder,
    wall: Duration,
    cpu: CpuTime,
) -> ScenarioReport {
    let wall_s = wall.as_secs_f64();
    let url = sc.url.clone();
    let cpu_us = cpu.total().as_secs_f64() * 1e6;
    ScenarioReport {
        name: sc.name.clone(),
        url,
        urls: sc.urls,
        strategy: sc.strategy.name().to_string(),
        protocol: sc.strategy.protocol().to_string(),
        concurrency: sc.concurrency,
        threads: sc.threads.clamp(1, sc.concurrency.max(1)),
        duration_s: wall_s,
        load: LoadReport {
            requests: sc.requests,
            duration_s: sc.duration_s,
            rate: sc.rate,
            timeout_s: sc.timeout_s,
            requests_per_connection: sc.requests_per_connection,
        },
        requests: requests_report(rec),
        connections: connections_report(sc, rec),
        throughput: ThroughputReport {
            requests_per_s: if wall_s > 0.0 {
                rec.counts.ok as f64 / wall_s
            } else {
                0.0
            },
            bytes_received: rec.counts.bytes_received,
            body_bytes_received: rec.counts.body_bytes,
        },
        latency_ms: latency_report(rec),
        phases_ms: PhasesReport {
            new: group(&rec.phases_new, rec.counts.ok - rec.counts.reused_requests),
            reused: group(&rec.phases_reused, rec.counts.reused_requests),
            mean_per_request: phase_means(rec),
        },
        cpu: CpuReport {
            client_user_s: cpu.user.as_secs_f64(),
            client_sys_s: cpu.sys.as_secs_f64(),
            client_us_per_request: if rec.counts.attempted > 0 {
                cpu_us / rec.counts.attempted as f64
            } else {
                0.0
            },
        },
        dns: DnsReport {
            cache: if sc.dns_cache { "on" } else { "off" },
            lookups: rec.counts.dns_lookups,
            cache_hits: rec.counts.dns_cache_hits,
            joined: rec.counts.dns_joined,
        },
        local_ports: rec.local_ports.map(|p| LocalPortsReport {
            time_wait: p.time_wait,
            port_range: p.range.map(|(lo, hi)| [lo, hi]),
        }),
        diagnosis: diagnose(sc, rec),
        timeline: timeline(&rec.timeline, wall_s),
        raw: None,
    }
}

fn requests_report(rec: &Recorder) -> RequestsReport {
    let errors: BTreeMap<String, u64> = ErrorKind::ALL
        .iter()
        .map(|k| (k.name().to_string(), rec.errors[k.index()]))
        .collect();
    let error_details: BTreeMap<String, u64> = ErrorDetail::ALL
        .iter()
        .map(|d| (d.name().to_string(), rec.error_details[d.index()]))
        .filter(|(_, n)| *n > 0)
        .collect();
    let status_codes: BTreeMap<String, u64> = rec
        .status
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(code, n)| (code.to_string(), *n))
        .collect();
    let status_classes: BTreeMap<String, u64> = (1..=5)
        .map(|c| {
            let n: u64 = rec.status[c * 100..(c + 1) * 100].iter().sum();
            (format!("{c}xx"), n)
        })
        .collect();
    let non_2xx = rec.counts.ok - status_classes["2xx"];
    RequestsReport {
        attempted: rec.counts.attempted,
        ok: rec.counts.ok,
        errors,
        error_details,
        error_examples: rec
            .error_examples
            .iter()
            .map(|(k, m)| (k.to_string(), m.clone()))
            .collect(),
        retries: RetriesReport {
            stale_connection: rec.counts.stale_retries,
            refused_stream: rec.counts.refused_retries,
        },
        status_codes,
        status_classes,
        non_2xx,
        retry_after_s: rec.retry_after_s,
        aborted_at_deadline: rec.counts.aborted_at_deadline,
        late_sends: rec.counts.late_sends,
    }
}

fn connections_report(sc: &ScenarioShape, rec: &Recorder) -> ConnectionsReport {
    let close_reasons: BTreeMap<String, u64> = CloseReason::ALL
        .iter()
        .map(|r| (r.name().to_string(), rec.close_reasons[r.index()]))
        .collect();
    let closed = rec.counts.connections_closed;
    ConnectionsReport {
        opened: rec.counts.connections_opened,
        reused_requests: rec.counts.reused_requests,
        reuse_ratio: if rec.counts.ok > 0 {
            rec.counts.reused_requests as f64 / rec.counts.ok as f64
        } else {
            0.0
        },
        tls_handshakes: TlsHandshakes {
            full: rec.counts.tls_full,
            resumed: rec.counts.tls_resumed,
            tls13: rec.counts.tls13,
            key_exchange: rec.key_exchange(),
            hello_retry_requests: rec.counts.tls_hello_retries,
            client_hello_bytes: mean_of(
                rec.counts.tls_client_hello_bytes,
                rec.counts.tls_wire_full,
            ),
            server_flight_bytes: mean_of(
                rec.counts.tls_server_flight_bytes,
                rec.counts.tls_wire_full,
            ),
            first_flight_extra_round_trips: rec.counts.tls_flight_waits,
        },
        close_reasons,
        requests_per_connection: RpcReport {
            min: if closed > 0 { rec.rpc_min } else { 0 },
            mean: if closed > 0 {
                rec.counts.rpc_sum as f64 / closed as f64
            } else {
                0.0
            },
            max: rec.rpc_max,
        },
        server_ignored_close: rec.counts.server_ignored_close,
        early_data: EarlyDataReport {
            attempted: rec.counts.early_attempted,
            accepted: rec.counts.early_accepted,
            rejected: rec.counts.early_rejected,
        },
        h2: (sc.strategy == Strategy::H2).then(|| h2_report(sc, rec)),
        kernel: kernel_report(rec),
        quic: sc.strategy.quic().then(|| quic_report(sc, rec)),
    }
}

/// The latency of every ok request, new connection or reused.
fn latency_report(rec: &Recorder) -> LatencyReport {
    let mut latency = rec.phases_new[TOTAL].clone();
    latency += &rec.phases_reused[TOTAL];
    let lat = phase_summary(&latency);
    let percentiles = distribution(&latency);
    let p999 = if latency.count > 0 {
        ms(latency.hist.value_at_quantile(0.999))
    } else {
        0.0
    };
    LatencyReport {
        mean: lat.mean,
        p50: lat.p50,
        p90: lat.p90,
        p99: lat.p99,
        p999,
        max: lat.max,
        percentiles,
    }
}

/// The timeline's buckets as reported; the last one ends with the run.
pub fn timeline(t: &crate::stats::timeline::Timeline, wall_s: f64) -> Vec<TimelineBucket> {
    let width = t.width_s() as f64;
    t.trimmed()
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let t_s = i as f64 * width;
            let q = |p: f64| {
                b.latency
                    .as_ref()
                    .filter(|h| !h.is_empty())
                    .map(|h| h.value_at_quantile(p) as f64 / 1000.0)
            };
            TimelineBucket {
                t_s,
                width_s: if wall_s > t_s && wall_s < t_s + width {
                    wall_s - t_s
                } else {
                    width
                },
                requests: b.requests,
                ok: b.ok,
                errors: b.errors_total(),
                errors_by_kind: ErrorKind::ALL
                    .iter()
                    .filter(|k| b.errors[k.index()] > 0)
                    .map(|k| (k.name().to_string(), u64::from(b.errors[k.index()])))
                    .collect(),
                new_connections: b.new_connections,
                closed_connections: b.closed_total(),
                close_reasons: CloseReason::ALL
                    .iter()
                    .filter(|r| b.closed[r.index()] > 0)
                    .map(|r| (r.name().to_string(), u64::from(b.closed[r.index()])))
                    .collect(),
                tls_full: b.tls_full,
                tls_resumed: b.tls_resumed,
                p50_ms: q(0.5),
                p99_ms: q(0.99),
            }
        })
        .collect()
}

/// Plain sentences about reuse that was asked for and not obtained, and about errors.
pub fn diagnose(sc: &ScenarioShape, rec: &Recorder) -> Vec<String> {
    let mut out: Vec<String> = status_sentence(rec).into_iter().collect();
    let reasons = |r: CloseReason| rec.close_reasons[r.index()];
    let closed = rec.counts.connections_closed.max(1);
    let every = |n: u64| {
        if n == closed {
            "every".to_string()
        } else {
            format!("{n} of {closed}")
        }
    };
    let asked_reuse = sc.strategy.persistent();
    let reuse_ratio = if rec.counts.ok > 0 {
        rec.counts.reused_requests as f64 / rec.counts.ok as f64
    } else {
        1.0
    };
    // Reuse was asked for and each connection carried few requests.
    let expected_rpc = rec.counts.ok as f64 / (sc.concurrency as f64 * sc.origins.max(1) as f64);
    let mean_rpc = rec.counts.rpc_sum as f64 / closed as f64;
    if asked_reuse && rec.counts.ok > 0 && (reuse_ratio < 0.5 || mean_rpc < expected_rpc / 2.0) {
        let mut ranked: Vec<(CloseReason, u64)> = [
            CloseReason::ServerHttp10,
            CloseReason::ServerCloseHeader,
            CloseReason::ServerCloseDelimited,
            CloseReason::ServerMaxRequests,
            CloseReason::ServerIdleClose,
            CloseReason::ClientPolicy,
            CloseReason::Error,
        ]
        .iter()
        .map(|r| (*r, reasons(*r)))
        .filter(|(_, n)| *n > 0)
        .collect();
        ranked.sort_by_key(|r| std::cmp::Reverse(r.1));
        if let Some((reason, n)) = ranked.first().copied() {
            out.push(not_reused(sc, rec, (reason, n), &every(n), mean_rpc));
        }
    } else if asked_reuse && reasons(CloseReason::ServerIdleClose) > 0 {
        out.push(format!(
            "The server closed {} while idle; {} were retried on new connections.",
            plural(
                reasons(CloseReason::ServerIdleClose),
                "connection",
                "connections"
            ),
            plural(rec.counts.stale_retries, "request", "requests")
        ));
    }
    if !asked_reuse && rec.counts.server_ignored_close > 0 {
        out.push(format!(
            "The server ignored the request to close on {}: the client closed them itself.",
            plural(rec.counts.server_ignored_close, "connection", "connections")
        ));
    }
    out.extend(error_sentences(rec));
    out
}

/// Why connections were not reused, by the close reason most of them had: `n` of
/// them (`every`, in words).
fn not_reused(
    sc: &ScenarioShape,
    rec: &Recorder,
    (reason, n): (CloseReason, u64),
    every: &str,
    mean_rpc: f64,
) -> String {
    match reason {
        CloseReason::ServerHttp10 => format!(
            "Connections were not reused: the server answered HTTP/1.0 without keep-alive on {} connection{}{}.",
            every,
            crate::fmt::s(n),
            if sc.strategy == Strategy::Http10KeepAlive { ", ignoring the request's `Connection: keep-alive`" } else { "" }
        ),
        CloseReason::ServerCloseHeader => format!(
            "Connections were not reused: the server sent `Connection: close` on its first response on {} connection{} (its keep-alive is off).",
            every,
            crate::fmt::s(n)
        ),
        CloseReason::ServerCloseDelimited => format!(
            "Connections were not reused: the server sent its responses without a length (no Content-Length, not chunked) and ended each body by closing the connection, on {} connection{}; a response that states its length (Content-Length or chunked) lets the connection be reused.",
            every,
            crate::fmt::s(n)
        ),
        CloseReason::ServerMaxRequests => format!(
            "Connections were closed by the server after {:.0} requests each on average (its max requests per connection), {}.",
            mean_rpc,
            plural(n, "connection", "connections")
        ),
        CloseReason::ServerIdleClose => format!(
            "The server closed {} while idle before they could be reused ({}); its idle timeout is shorter than the gaps between requests, or it closes without saying so.",
            plural(n, "connection", "connections"),
            plural(rec.counts.stale_retries, "stale-connection retry", "stale-connection retries")
        ),
        CloseReason::ClientPolicy => format!(
            "The client ended {} by its own policy (--requests-per-connection {}).",
            plural(n, "connection", "connections"),
            sc.requests_per_connection.unwrap_or(0)
        ),
        _ => format!("{} ended in errors, so they could not be reused.", plural(n, "connection", "connections")),
    }
}

/// The failed attempts by category, and what to do about ports or descriptors run out.
fn error_sentences(rec: &Recorder) -> Vec<String> {
    let mut out = Vec::new();
    let errors = rec.errors_total();
    if errors > 0 {
        let mut by: Vec<(ErrorKind, u64)> = ErrorKind::ALL
            .iter()
            .map(|k| (*k, rec.errors[k.index()]))
            .filter(|(_, n)| *n > 0)
            .collect();
        by.sort_by_key(|e| std::cmp::Reverse(e.1));
        let list: Vec<String> = by
            .iter()
            .map(|(k, n)| format!("{} {}", n, k.name()))
            .collect();
        out.push(format!(
            "{} of {} attempts failed: {}.",
            errors,
            rec.counts.attempted,
            list.join(", ")
        ));
        let exhausted = rec.error_details[ErrorDetail::PortsExhausted.index()];
        if exhausted > 0 {
            out.push(ports_exhausted_sentence(exhausted, rec.local_ports));
        }
        let files = rec.error_details[ErrorDetail::TooManyOpenFiles.index()];
        if files > 0 {
            out.push(format!(
                "{} for lack of file descriptors (EMFILE/ENFILE): raise the open-file limit (ulimit -n) or use fewer connections.",
                plural(files, "connect failed", "connects failed")
            ));
        }
    }
    out
}

/// When most responses were 4xx or 5xx: which status, and its likely cause (said first:
/// a run answered with errors measured the server's error path).
fn status_sentence(rec: &Recorder) -> Option<String> {
    let sum = |lo: usize, hi: usize| rec.status[lo..hi].iter().sum::<u64>();
    let failing = sum(400, 600);
    if rec.counts.ok == 0 || failing * 2 <= rec.counts.ok {
        return None;
    }
    let (code, n) = (400..600)
        .map(|c| (c, rec.status[c]))
        .max_by_key(|(c, n)| (*n, std::cmp::Reverse(*c)))?;
    let retry = match rec.retry_after_s {
        Some(s) if matches!(code, 429 | 503) => format!(" (it sent Retry-After: {s} s)"),
        _ => String::new(),
    };
    let cause = match code {
        401 | 407 => "the server wants credentials: send them with -H 'Authorization: ...'".to_string(),
        403 => "the server refuses this client or these credentials: check -H 'Authorization: ...' and what the path allows".to_string(),
        404 | 410 => "the path does not exist on this server: check the URL's path".to_string(),
        405 => "the method is not allowed on this path: check -m/--method".to_string(),
        400 | 411 | 413 | 415 | 422 => "the server would not take the request as sent: check the method, -H headers and the body".to_string(),
        429 => format!("the server is shedding load (rate limiting){retry}: lower --rate or -c"),
        503 => format!("the server is shedding load or unavailable{retry}: lower --rate or -c, or check the server"),
        500..=599 => "the server failed: its own log says why".to_string(),
        _ => "the server refused the requests".to_string(),
    };
    Some(format!(
        "Most responses were errors: {} of {} were {code}{}, {} were 4xx or 5xx in all: {cause}. The latencies are those of the error responses.",
        n,
        rec.counts.ok,
        reason_phrase(code).map(|r| format!(" ({r})")).unwrap_or_default(),
        failing
    ))
}

fn reason_phrase(code: usize) -> Option<&'static str> {
    Some(match code {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        407 => "Proxy Authentication Required",
        410 => "Gone",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => return None,
    })
}

/// Why connects failed with `EADDRNOTAVAIL`, with the figures that show it, and the fixes.
fn ports_exhausted_sentence(n: u64, ports: Option<LocalPorts>) -> String {
    let mut s = format!(
        "{} with EADDRNOTAVAIL (\"Cannot assign requested address\"): the client ran out of local ports.",
        plural(n, "connect failed", "connects failed")
    );
    if let Some(p) = ports {
        if let Some(tw) = p.time_wait {
            s.push_str(&format!(" {tw} sockets sit in TIME_WAIT"));
            s.push_str(match p.range {
                Some(_) => ";",
                None => ".",
            });
        }
        if let (Some((lo, hi)), Some(size)) = (p.range, p.range_size()) {
            s.push_str(&format!(
                " the local port range is {lo}-{hi} ({size} ports per source address and destination)."
            ));
        }
    }
    s.push_str(" Fix: keep connections alive (reuse them), spread connections over more source addresses (--local-addr ADDR,ADDR...), or widen the range (sysctl net.ipv4.ip_local_port_range).");
    s
}

/// `sum / n`, none when `n` is 0.
fn mean_of(sum: u64, n: u64) -> Option<f64> {
    (n > 0).then(|| sum as f64 / n as f64)
}
