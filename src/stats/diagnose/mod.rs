//! What a scenario's figures say, as findings (`report::finding`): why attempts failed,
//! what the status codes say, which asked-for protocol feature never happened, why reuse
//! did not happen; and the headline. Each finding carries the figures it was built from
//! with the population they cover, and the causes come in their order. Pure: reads the
//! recorder and the report filled from it.

mod reuse;
mod status;

use super::raw::ScenarioShape;
use super::recorder::Recorder;
use crate::fmt::{ms as fmt_ms, plural};
use crate::record::{ErrorDetail, ErrorKind, Phase};
use crate::report::cause::{NoEarlyData, NoResumption};
use crate::report::finding::{ordered, Cause, Evidence, Finding};
use crate::report::{KernelReport, ScenarioReport};
use reuse::reuse_findings;
pub(crate) use status::mostly_errors;
use status::{redirect_finding, status_finding};

/// Every finding of a scenario, in the order of causes.
pub(crate) fn diagnose(sc: &ScenarioShape, rec: &Recorder, rep: &ScenarioReport) -> Vec<Finding> {
    let mut out = error_findings(rec, rep);
    if let Some(f) = rep.connections.kernel.as_ref().and_then(syn_finding) {
        out.push(f);
    }
    let client_cert = rep.connections.tls_handshakes.client_certificate.as_ref();
    out.extend(status_finding(rec, &rep.url, client_cert));
    out.extend(redirect_finding(rec));
    out.extend(protocol_findings(sc, rec));
    out.extend(reuse_findings(sc, rec));
    if let Some(proxy) = &sc.proxy {
        proxied(&mut out, proxy, &sc.url, sc.url.starts_with("https://"));
    }
    ordered(out)
}

/// Through a forward proxy, the connections measured are to the proxy: for http:// URLs
/// what the reuse findings say of "the server" is the proxy's keep-alive towards this
/// client; through a `CONNECT` tunnel (https://) it is the origin's, inside the tunnel.
/// One finding says which, and the reuse sentences name the proxy where it is the peer.
fn proxied(out: &mut Vec<Finding>, proxy: &str, origin: &str, tunneled: bool) {
    let text = if tunneled {
        format!(
            "Through the proxy {proxy}: each connection is a CONNECT tunnel to the origin, so its reuse and its closes are the origin's (or the proxy's, where it ends a tunnel)."
        )
    } else {
        for f in out.iter_mut().filter(|f| f.cause == Cause::Reuse) {
            f.text = crate::report::cause::through_forward_proxy(&f.text, proxy, origin);
        }
        format!(
            "Through the proxy {proxy}: the connections measured are to the proxy, so their reuse and closes are its keep-alive towards this client; its own connections to the origin are not seen here."
        )
    };
    out.push(Finding::new("through_proxy", Cause::Reuse, text));
}

/// The cause an error category belongs to.
fn cause_of(kind: ErrorKind) -> Cause {
    match kind {
        ErrorKind::Tls => Cause::Tls,
        ErrorKind::Protocol => Cause::Protocol,
        _ => Cause::Transport,
    }
}

/// The failed attempts by category, the leading error's message and hint, and what to
/// do about ports or descriptors run out.
fn error_findings(rec: &Recorder, rep: &ScenarioReport) -> Vec<Finding> {
    let mut out = Vec::new();
    let errors = rec.errors_total();
    if errors == 0 {
        return out;
    }
    let attempted = rec.counts.attempted;
    let mut by: Vec<(ErrorKind, u64)> = ErrorKind::ALL
        .iter()
        .map(|k| (*k, rec.errors[k.index()]))
        .filter(|(_, n)| *n > 0)
        .collect();
    by.sort_by_key(|e| std::cmp::Reverse(e.1));
    // Through a proxy, a lookup or a connect that failed was the proxy's: the origin
    // was never reached, and the count says so.
    let proxy = rep.connections.proxy.as_ref().map(|p| p.url.as_str());
    let list: Vec<String> = by
        .iter()
        .map(|(k, n)| match (proxy, k) {
            (
                Some(p),
                ErrorKind::Dns
                | ErrorKind::Connect
                | ErrorKind::TimeoutDns
                | ErrorKind::TimeoutConnect,
            ) => format!(
                "{n} {} (to the proxy {p}; the origin was not reached)",
                k.name()
            ),
            _ => format!("{} {}", n, k.name()),
        })
        .collect();
    let cause = cause_of(by[0].0);
    // Most attempts failed: the run measured its failures.
    let explains = errors * 2 > attempted;
    let mut f = Finding::new(
        "attempts_failed",
        cause,
        format!(
            "{errors} of {attempted} attempts failed: {}.",
            list.join(", ")
        ),
    )
    .explaining(explains);
    for (k, n) in &by {
        f = f.with(Evidence::count(
            &format!("requests.errors.{}", k.name()),
            *n,
            attempted,
            "attempts",
        ));
    }
    out.push(f);
    if let Some(l) = crate::report::failure::leading(rep) {
        // With the listen queue overflowing, a reset is that, not a protocol mix-up: the
        // message without the hint.
        let hinted = rec.counts.listen_overflows == 0;
        if let Some(text) = crate::report::failure::example_sentence(rep, hinted) {
            let figure = if l.key == l.kind {
                format!("requests.errors.{}", l.kind)
            } else {
                format!("requests.error_details.{}", l.key)
            };
            out.push(
                Finding::new("leading_error", cause, text)
                    .explaining(explains)
                    .with(Evidence::count(&figure, l.count, attempted, "attempts")),
            );
        }
    }
    out.extend(resource_findings(rec, explains));
    out
}

/// What the machine ran out of or turned away: the server's listen queue (the kernel's
/// count), the client's local ports, its file descriptors.
fn resource_findings(rec: &Recorder, explains: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    let attempted = rec.counts.attempted;
    // Connects the server's full accept queue turned away show up as resets, empty
    // replies and slow connects: the kernel's count says so, before any other hint.
    let overflows = rec.counts.listen_overflows;
    if overflows > 0 {
        out.push(
            Finding::new(
                "listen_backlog_overflow",
                Cause::Transport,
                format!(
                    "The server's listen queue overflowed {} during the run (the kernel's TcpExtListenOverflows; an upper bound: other programs here count too): more connects arrived at once than its accept queue holds, and those were dropped or reset. See its queue with `ss -lnt` (Recv-Q against Send-Q, the backlog), raise the backlog (nginx: `listen ... backlog=N`) and net.core.somaxconn, or open connections more slowly (fewer -c).",
                    plural(overflows, "time", "times")
                ),
            )
            .explaining(explains)
            .with(Evidence::figure(
                "raw.recorder.listen_overflows",
                overflows as f64,
                None,
                "listen-queue overflows in this network namespace during the run",
            )),
        );
    }
    let exhausted = rec.error_details[ErrorDetail::PortsExhausted.index()];
    if exhausted > 0 {
        out.push(
            Finding::new(
                "ports_exhausted",
                Cause::Transport,
                ports_exhausted_sentence(exhausted, rec.local_ports),
            )
            .with(Evidence::count(
                "requests.error_details.ports_exhausted",
                exhausted,
                attempted,
                "attempts",
            )),
        );
    }
    let files = rec.error_details[ErrorDetail::TooManyOpenFiles.index()];
    if files > 0 {
        out.push(
            Finding::new(
                "file_descriptors_exhausted",
                Cause::Transport,
                format!(
                    "{} for lack of file descriptors (EMFILE/ENFILE): raise the open-file limit (ulimit -n) or use fewer connections.",
                    plural(files, "connect failed", "connects failed")
                ),
            )
            .with(Evidence::count(
                "requests.error_details.too_many_open_files",
                files,
                attempted,
                "attempts",
            )),
        );
    }
    out
}

/// "3 of 40 connects took ~1.02 s (1.01-1.02 s): their SYN or its answer was lost and
/// the SYN sent again after the kernel's retransmission timeout (...; 3 SYNs sent again);
/// the round trip is 20.1 ms (the kernel's least RTT per connection, median)."
fn syn_finding(k: &KernelReport) -> Option<Finding> {
    let slow = k.syn_retransmitted_connect_ms?;
    let secs = |ms: f64| format!("{:.2} s", ms / 1000.0);
    let others = if k.min_rtt_ms.count > 0 {
        format!(
            "; the round trip is {} ms (the kernel's least RTT per connection, median)",
            fmt_ms(k.min_rtt_ms.p50)
        )
    } else {
        String::new()
    };
    let text = format!(
        "{} of {} connects took ~{} ({:.2}-{}): their SYN or its answer was lost and the SYN sent again after the kernel's retransmission timeout (1 s, then 2 s, 4 s...; {} sent again){others}.",
        k.syn_retransmitted,
        k.connects,
        secs(slow.mean),
        slow.min / 1000.0,
        secs(slow.max),
        crate::fmt::plural_s(k.syn_retransmits, "SYN")
    );
    Some(
        Finding::new("syn_retransmitted", Cause::Transport, text)
            .with(Evidence::count(
                "connections.kernel.syn_retransmitted",
                k.syn_retransmitted,
                k.connects,
                "connects",
            ))
            .with(Evidence::mean_ms(
                "connections.kernel.syn_retransmitted_connect_ms.mean",
                slow.mean,
                k.syn_retransmitted,
                "connects whose SYN was sent again",
            )),
    )
}

/// The strategy's defining feature that never happened: 0-RTT never accepted, a TLS
/// session never resumed.
fn protocol_findings(sc: &ScenarioShape, rec: &Recorder) -> Vec<Finding> {
    let c = &rec.counts;
    let mut out = Vec::new();
    let handshakes = c.tls_full + c.tls_resumed;
    // Resumption was offered on every new connection after the first: the server never
    // took it (the first connection of each worker has no session to offer).
    let resumable = c.connections_opened.saturating_sub(sc.concurrency as u64);
    if sc.strategy.tls_resumption()
        && !sc.strategy.persistent()
        && c.tls_resumed == 0
        && c.tls_full > 0
        && resumable > 0
    {
        let cause = NoResumption::ServerGrantedNone { tries: resumable };
        let text = format!(
            "No TLS session was resumed: {}{}; {} of {} handshakes were full, so the run measured full handshakes, as --strategy close does. {}",
            cause.why(),
            if sc.strategy.early_data() { " (and 0-RTT needs a resumed session)" } else { "" },
            c.tls_full,
            handshakes,
            cause.fix(None)
        );
        out.push(
            Finding::new(cause.code(), Cause::Protocol, text)
                .explaining(true)
                .with(Evidence::count(
                    "connections.tls_handshakes.resumed",
                    0,
                    handshakes,
                    "TLS handshakes",
                )),
        );
        return out;
    }
    if sc.strategy.early_data() && c.early_accepted == 0 && c.answered > 0 {
        // Over QUIC every handshake is TLS 1.3.
        let tls13 = if sc.strategy.quic() {
            handshakes
        } else {
            c.tls13
        };
        let cause = NoEarlyData::judge(handshakes, tls13, c.tls_resumed, c.early_attempted);
        let text = format!(
            "The server never accepted 0-RTT: 0 of {} requests went in early data; {}. The run measured {} instead{}.",
            c.answered,
            cause.why(),
            if sc.strategy.quic() { "resumed QUIC handshakes (h3-resumed)" } else { "resumed handshakes (close-resumed)" },
            cause.fix_clause(None)
        );
        out.push(
            Finding::new(cause.code(), Cause::Protocol, text)
                .explaining(true)
                .with(Evidence::count(
                    "connections.tls_handshakes.tls13",
                    tls13,
                    handshakes,
                    "TLS handshakes",
                ))
                .with(Evidence::count(
                    "connections.early_data.accepted",
                    0,
                    c.answered,
                    "answered requests",
                ))
                .with(Evidence::count(
                    "connections.early_data.attempted",
                    c.early_attempted,
                    c.answered,
                    "answered requests",
                )),
        );
    }
    out
}

/// Why connects failed with `EADDRNOTAVAIL`, with the figures that show it, and the fixes.
fn ports_exhausted_sentence(n: u64, ports: Option<crate::net::local_ports::LocalPorts>) -> String {
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

/// The headline: what the run measured, in one sentence, with the population of each
/// mean named; or, when a finding explains the run, that finding first. `None` when no
/// request was answered, or (`-L`) none but the redirects followed, hops on the way (the
/// line that says the run measured nothing stands instead).
pub(crate) fn headline(rep: &ScenarioReport, findings: &[Finding]) -> Option<Finding> {
    if rep.requests.final_answers() == 0 {
        return None;
    }
    let measured = measured(rep);
    let Some(first) = findings.iter().find(|f| f.explains_run) else {
        return Some(measured);
    };
    // The finding that explains the run leads; the figures follow, said to be of it.
    let mut h = first.clone();
    h.text = format!(
        "{} Measured: {}",
        first.text.trim_end(),
        lower_first(&measured.text)
    );
    h.evidence.extend(measured.evidence);
    Some(h)
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) if !s.starts_with("HTTP") => f.to_lowercase().chain(c).collect(),
        Some(f) => std::iter::once(f).chain(c).collect(),
        None => String::new(),
    }
}

/// "12 requests ok", "50 requests answered (1 ok, 49 with an error status)", and with
/// -L how many of them were redirects followed (hops on the way).
fn answered_words(r: &crate::report::RequestsReport) -> String {
    let answered = if r.error_status == 0 {
        format!("{} ok", plural(r.ok, "request", "requests"))
    } else {
        format!(
            "{} answered ({} ok, {} with an error status)",
            plural(r.answered, "request", "requests"),
            r.ok,
            r.error_status
        )
    };
    // With -L a followed redirect is a hop on the way, counted among the answers.
    match r.redirects.filter(|n| *n > 0) {
        Some(1) => format!("{answered}, 1 of them a redirect followed"),
        Some(n) => format!("{answered}, {n} of them redirects followed"),
        None => answered,
    }
}

/// "2000 requests ok over 10 connections (200.0 per connection): p50 0.053 ms, p99
/// 0.534 ms, 29058 requests/s; setting up a new connection took 0.115 ms (mean over 10
/// new connections)." With answers whose status is not ok: "50 requests answered (1 ok,
/// 49 with an error status) over ...".
fn measured(rep: &ScenarioReport) -> Finding {
    let r = &rep.requests;
    let c = &rep.connections;
    let errors: u64 = r.errors.values().sum();
    let per = if c.opened > 0 && r.answered > c.opened {
        format!(
            " ({:.1} per connection)",
            r.answered as f64 / c.opened as f64
        )
    } else {
        String::new()
    };
    let answered = answered_words(r);
    let failed = if errors > 0 {
        format!(" ({errors} failed)")
    } else {
        String::new()
    };
    let mut f = Finding::new("measured", Cause::Measured, String::new())
        .with(Evidence::count(
            "requests.ok",
            r.ok,
            r.attempted,
            "attempts",
        ))
        .with(Evidence::count(
            "requests.error_status",
            r.error_status,
            r.attempted,
            "attempts",
        ))
        .with(Evidence::figure(
            "connections.opened",
            c.opened as f64,
            None,
            "connections",
        ));
    let new = &rep.phases_ms.new;
    let mut setup = String::new();
    if new.requests > 0 {
        let mean = new.setup_mean_ms();
        let dns = &new[Phase::Dns];
        let dns_part = if dns.count > 0 && dns.count < new.requests {
            format!(
                ", {} of which waited {} ms for DNS",
                dns.count,
                fmt_ms(dns.mean)
            )
        } else {
            String::new()
        };
        setup = format!(
            "; setting up a new connection took {} ms (mean over {}{dns_part})",
            fmt_ms(mean),
            plural(
                new.requests,
                "request on a new connection",
                "requests on new connections"
            ),
        );
        f = f.with(Evidence::mean_ms(
            "setup per new connection (dns + connect + proxy_connect + tunnel + tls + h2_setup + quic_handshake)",
            mean,
            new.requests,
            "answered requests on new connections",
        ));
        if dns.count > 0 {
            f = f.with(Evidence::mean_ms(
                "phases_ms.new.dns.mean",
                dns.mean,
                dns.count,
                "answered requests on new connections that waited for DNS",
            ));
        }
    }
    f.text = format!(
        "{answered}{failed} over {}{per}: p50 {} ms, p99 {} ms, {:.0} requests/s{setup}.",
        plural(c.opened, "connection", "connections"),
        fmt_ms(rep.latency_ms.p50),
        fmt_ms(rep.latency_ms.p99),
        rep.throughput.requests_per_s
    );
    f
}
