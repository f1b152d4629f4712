//! The audit's report: per client address and in total, and its text form.

use std::collections::BTreeMap;

use super::log::{with_log, ConnLog, Ending, GapStats, SharedLog};
use super::verdict::{headline, verdict};

pub(crate) use crate::report::audit::{
    AuditBucket, AuditProgram, AuditReport, ClientSummary, CutResponses, H2Summary, OwnAnswers,
    ProxySummary, RpcStats, TlsCounts,
};
use crate::report::finding::Finding;

/// Connections that carried no request and were left so: a handshake that failed (on a
/// certificate, either side's, or otherwise) is said as such, not as a connection unused.
fn unused(conns: &[&ConnLog]) -> u64 {
    let failed = |e: Option<Ending>| {
        matches!(
            e,
            Some(Ending::CertificateRefused | Ending::CertificateDistrusted | Ending::TlsFailed)
        )
    };
    conns
        .iter()
        .filter(|c| c.requests == 0 && !failed(c.end))
        .count() as u64
}

pub(super) fn summarize(name: String, conns: &[&ConnLog], proxy_mode: bool) -> ClientSummary {
    let mut s = ClientSummary {
        client: name,
        connections: conns.len() as u64,
        requests: 0,
        responses: 0,
        status_codes: BTreeMap::new(),
        requests_per_connection: RpcStats {
            min: 0,
            mean: 0.0,
            max: 0,
        },
        reuse_ratio: 0.0,
        http_versions: BTreeMap::new(),
        connection_headers: BTreeMap::new(),
        user_agents: BTreeMap::new(),
        forwarded_requests: 0,
        idle_gaps: GapStats::default(),
        endings: BTreeMap::new(),
        tls_handshakes: TlsCounts::default(),
        client_certificates: super::mtls::counts(conns),
        cut_responses: CutResponses::default(),
        unused_connections: unused(conns),
        one_request_connections: conns.iter().filter(|c| c.requests == 1).count() as u64,
        h2: None,
        proxy: proxy_mode.then(|| proxied(conns)),
        answered_by_audit: BTreeMap::new(),
    };
    let mut with_requests = 0u64;
    for c in conns {
        if let Some(ua) = &c.user_agent {
            *s.user_agents.entry(ua.clone()).or_default() += 1;
        }
        s.requests += c.requests;
        s.responses += c.responses;
        for (code, n) in &c.statuses {
            *s.status_codes.entry(code.to_string()).or_default() += n;
        }
        for (code, (n, reason)) in &c.own {
            s.answered_by_audit
                .entry(code.to_string())
                .or_insert_with(|| OwnAnswers {
                    count: 0,
                    reason: reason.clone(),
                })
                .count += n;
        }
        if c.requests > 0 {
            with_requests += 1;
        }
        for (k, v) in &c.versions {
            *s.http_versions.entry(k.clone()).or_default() += v;
        }
        for (k, v) in &c.connection_headers {
            *s.connection_headers.entry(k.clone()).or_default() += v;
        }
        s.forwarded_requests += c.forwarded;
        s.idle_gaps.merge(&c.gaps);
        if let Some((written, total)) = c.cut {
            s.cut_responses.count += 1;
            s.cut_responses.body_bytes_written += written;
            s.cut_responses.body_bytes_total += total;
        }
        match c.tls_resumed {
            Some(true) => s.tls_handshakes.resumed += 1,
            Some(false) => s.tls_handshakes.full += 1,
            None => {}
        }
        *s.endings
            .entry(c.end.unwrap_or(Ending::OpenAtEnd))
            .or_default() += 1;
    }
    let rpc: Vec<u64> = conns.iter().map(|c| c.requests).collect();
    s.requests_per_connection = RpcStats {
        min: rpc.iter().copied().min().unwrap_or(0),
        mean: if rpc.is_empty() {
            0.0
        } else {
            s.requests as f64 / rpc.len() as f64
        },
        max: rpc.iter().copied().max().unwrap_or(0),
    };
    s.h2 = h2_summary(conns);
    s.reuse_ratio = if s.requests > 0 {
        (s.requests - with_requests) as f64 / s.requests as f64
    } else {
        0.0
    };
    s
}

/// HTTP/2 figures over the connections that carried streams; none without any.
fn h2_summary(conns: &[&ConnLog]) -> Option<H2Summary> {
    let h2: Vec<&&ConnLog> = conns.iter().filter(|c| c.h2 && c.requests > 0).collect();
    if h2.is_empty() {
        return None;
    }
    let streams: u64 = h2.iter().map(|c| c.requests).sum();
    Some(H2Summary {
        connections: h2.len() as u64,
        streams,
        streams_per_connection: RpcStats {
            min: h2.iter().map(|c| c.requests).min().unwrap_or(0),
            mean: streams as f64 / h2.len() as f64,
            max: h2.iter().map(|c| c.requests).max().unwrap_or(0),
        },
        peak_concurrent_streams: h2.iter().map(|c| c.peak_streams).max().unwrap_or(0),
    })
}

/// What went through the audit as a forward proxy.
fn proxied(conns: &[&ConnLog]) -> ProxySummary {
    let mut p = ProxySummary::default();
    for c in conns {
        if let Some(origin) = &c.tunnel {
            p.tunnels += 1;
            *p.tunnels_by_origin.entry(origin.clone()).or_default() += 1;
            p.tunneled_requests += c.requests;
            p.requests_estimated |= c.estimated && c.requests > 0;
            if let Some(a) = &c.alpn {
                *p.alpn_offered.entry(a.clone()).or_default() += 1;
            }
        }
        for (origin, n) in &c.origins {
            p.plain_requests += n;
            *p.plain_by_origin.entry(origin.clone()).or_default() += n;
        }
    }
    p
}

/// The name of the connections whose program was not found.
const UNKNOWN: &str = "unknown";

/// The connections grouped by the program that opened them, each summed and judged on
/// its own (its evidence at `programs[NAME]`).
fn programs(conns: &[ConnLog], proxy_mode: bool, peak: u64) -> Vec<AuditProgram> {
    let mut by: BTreeMap<String, Vec<&ConnLog>> = BTreeMap::new();
    for c in conns {
        let name = c.program.as_deref().unwrap_or(UNKNOWN).to_string();
        by.entry(name).or_default().push(c);
    }
    by.into_iter()
        .map(|(program, v)| {
            let figures = summarize(program.clone(), &v, proxy_mode);
            let mut clients: Vec<String> = v
                .iter()
                .filter_map(|c| c.client.map(|a| a.to_string()))
                .collect();
            clients.sort();
            clients.dedup();
            let at = format!("programs[{program}]");
            let verdict = verdict(&figures, peak)
                .into_iter()
                .map(|f| moved(f, &at))
                .collect();
            AuditProgram {
                program,
                clients,
                figures,
                verdict,
            }
        })
        .collect()
}

/// A finding over one member's figures: its evidence's place moved from `total` to `at`.
fn moved(mut f: Finding, at: &str) -> Finding {
    for e in &mut f.evidence {
        if let Some(rest) = e.figure.strip_prefix("total") {
            e.figure = format!("{at}{rest}");
        }
    }
    f
}

/// With two programs or more: the headline gives the total, then each program's own
/// sentence; the verdict is each program's, named ("curl: …"), never one blended over
/// all.
fn by_program(total: &ClientSummary, programs: &[AuditProgram]) -> (Finding, Vec<Finding>) {
    let mut h = Finding::new(
        "by_program",
        crate::report::finding::Cause::Reuse,
        format!(
            "{} over {} from {} client programs, each judged on its own{}:",
            crate::fmt::plural_s(total.requests, "request"),
            crate::fmt::plural_s(total.connections, "connection"),
            programs.iter().filter(|p| p.program != UNKNOWN).count(),
            if programs.iter().any(|p| p.program == UNKNOWN) {
                " (\"unknown\": connections whose program was gone before it was looked up)"
            } else {
                ""
            }
        ),
    );
    let mut verdict = Vec::new();
    for p in programs {
        let own = moved(headline(&p.figures), &format!("programs[{}]", p.program));
        h.text.push_str(&format!(" {}: {}", p.program, own.text));
        h.evidence.extend(own.evidence);
        for mut f in p.verdict.iter().cloned() {
            f.text = format!("{}: {}", p.program, f.text);
            verdict.push(f);
        }
    }
    (h, verdict)
}

pub(super) fn report(
    url: &str,
    log: &SharedLog,
    command: Option<Vec<String>>,
    exit_status: Option<i32>,
) -> AuditReport {
    let (conns, peak, timeline) =
        with_log(log, |g| (g.conns.clone(), g.peak_open, g.timeline.clone()));
    let width = timeline.width_s() as f64;
    let timeline = timeline
        .trimmed()
        .iter()
        .enumerate()
        .map(|(i, b)| AuditBucket {
            t_s: i as f64 * width,
            width_s: width,
            new_connections: b.new_connections,
            requests: b.requests,
            closed_connections: b.ended,
            tls_full: b.tls_full,
            tls_resumed: b.tls_resumed,
        })
        .collect();
    let all: Vec<&ConnLog> = conns.iter().collect();
    let proxy_mode = with_log(log, |g| g.proxy_mode);
    let total = summarize("all".into(), &all, proxy_mode);
    let mut by: BTreeMap<String, Vec<&ConnLog>> = BTreeMap::new();
    for c in &conns {
        by.entry(c.client.map(|a| a.to_string()).unwrap_or_default())
            .or_default()
            .push(c);
    }
    let clients = by
        .into_iter()
        .map(|(k, v)| summarize(k, &v, proxy_mode))
        .collect();
    let programs = programs(&conns, proxy_mode, peak);
    // Connections whose program was not found (gone before its lookup) are no program
    // of their own: with one named program, the run is that program's.
    let named: Vec<&AuditProgram> = programs.iter().filter(|p| p.program != UNKNOWN).collect();
    let (headline, verdict) = match named.as_slice() {
        [_, _, ..] => by_program(&total, &programs),
        // One program: judged with its name, so that a fix is its own.
        [one] => {
            let judged = ClientSummary {
                client: one.program.clone(),
                ..total.clone()
            };
            (headline(&judged), verdict(&judged, peak))
        }
        [] => (headline(&total), verdict(&total, peak)),
    };
    AuditReport {
        schema_version: crate::report::SCHEMA_VERSION,
        tool: "handshake",
        version: env!("CARGO_PKG_VERSION"),
        url: url.to_string(),
        command,
        exit_status,
        peak_concurrent_connections: peak,
        total,
        clients,
        programs,
        run: None,
        interrupted: None,
        headline,
        verdict,
        timeline,
        thresholds: None,
    }
}
