//! `watch`'s figures, added up as each connection ends, and its verdict.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::fmt::plural_s as plural;
use crate::report::audit::{GapStats, RpcStats, TlsCounts};
use crate::report::cause::NoResumption;
use crate::report::finding::{Cause, Evidence, Finding};
use crate::report::reuse::{none_reused, Ended, Facts, Judged, Seen};
use crate::report::watch::{EndpointSummary, ProgramSummary, Spread, WatchReport};
use crate::track::{Conn, Ending, Kind};

/// The sentence for a watch that saw nothing: what it can see, said plainly.
const NO_CONNECTION: &str = "No TCP connection was seen (watch sees TCP only: a Unix socket's traffic, or HTTP/3 over UDP, is not counted).";

fn ending_name(e: Ending) -> &'static str {
    match e {
        Ending::ClientFin => "client_fin",
        Ending::ServerFin => "server_fin",
        Ending::ClientReset => "client_reset",
        Ending::ServerReset => "server_reset",
        Ending::ServerIdle => "server_idle",
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
pub(super) struct Acc {
    connections: u64,
    already_open: u64,
    requests: u64,
    unanswered: u64,
    responses: u64,
    statuses: BTreeMap<String, u64>,
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
    client_close: BTreeMap<String, u64>,
    user_agents: BTreeMap<String, u64>,
    lifetimes: GapStats,
    gaps: GapStats,
    unused: u64,
    sent: u64,
    received: u64,
}

impl Acc {
    pub(super) fn add(&mut self, c: &Conn) {
        self.connections += 1;
        self.already_open += u64::from(c.already_open);
        // A request counts when an answer to it began; the others were sent on a
        // connection the server was closing (or reset), or were still waiting.
        let answered = c.requests.min(c.responses);
        self.requests += answered;
        self.unanswered += c.requests - answered;
        self.responses += c.responses;
        for (code, n) in &c.statuses {
            *self.statuses.entry(code.to_string()).or_default() += n;
        }
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
        if let Some(how) = c.client_close {
            *self.client_close.entry(how.name().into()).or_default() += 1;
        }
        // Bounded: a client that sends a new agent on every connection keeps 64.
        if let Some(ua) = &c.user_agent {
            if self.user_agents.len() < 64 || self.user_agents.contains_key(&**ua) {
                *self.user_agents.entry(ua.to_string()).or_default() += 1;
            }
        }
        let ending = c.ending.unwrap_or(Ending::OpenAtEnd);
        *self.endings.entry(ending_name(ending).into()).or_default() += 1;
        if let Some(end) = c.ended {
            self.lifetimes
                .add(end.saturating_duration_since(c.opened).as_secs_f64() * 1e3);
        }
        self.gaps.merge(&c.gaps);
    }

    /// The summary, with the TIME_WAIT sockets counted at the end.
    pub(super) fn summary(
        &self,
        endpoint: String,
        time_wait: BTreeMap<String, u64>,
    ) -> EndpointSummary {
        EndpointSummary {
            endpoint,
            connections: self.connections,
            already_open: self.already_open,
            requests: self.requests,
            unanswered_requests: self.unanswered,
            responses: self.responses,
            status_codes: self.statuses.clone(),
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
            client_asked_close: self.client_close.clone(),
            user_agents: self.user_agents.clone(),
            time_wait,
            lifetimes_ms: Spread {
                count: self.lifetimes.count,
                min: self.lifetimes.min_ms,
                mean: self.lifetimes.mean_ms,
                max: self.lifetimes.max_ms,
            },
            idle_gaps: self.gaps,
            unused_connections: self.unused,
            bytes_sent: self.sent,
            bytes_received: self.received,
        }
    }
}

/// "5 requests", or "5 requests (estimated from TLS records)" when they were counted
/// from encrypted bursts.
fn requests(e: &EndpointSummary) -> String {
    let n = plural(e.requests, "request");
    if e.requests_estimated {
        format!("{n} (estimated from TLS records)")
    } else {
        n
    }
}

/// Requests over connections, of `t` (`at`: the figures' place in the report, `total`
/// or `endpoints[ADDR]`).
fn over(f: Finding, t: &EndpointSummary, at: &str) -> Finding {
    let requests = if t.requests_estimated {
        "requests (estimated from TLS records)"
    } else {
        "requests"
    };
    f.with(Evidence::figure(
        &format!("{at}.requests"),
        t.requests as f64,
        None,
        requests,
    ))
    .with(Evidence::figure(
        &format!("{at}.connections"),
        t.connections as f64,
        None,
        "connections",
    ))
}

/// What watch saw of why a population's connections carried one request each, counted
/// into the one model of causes (`report::reuse`): what the client's cleartext request
/// heads asked (HTTP/1.0 without keep-alive, `Connection: close`), and which side sent
/// its FIN or RST first (a server's close after 1 s or more without a request is its
/// idle timeout). `who`: the client program, where one is named.
fn seen(t: &EndpointSummary, at: &str, who: Option<&str>) -> Seen {
    let asked = |k: &str| t.client_asked_close.get(k).copied().unwrap_or(0);
    let by = |names: &[&str]| -> u64 {
        names
            .iter()
            .map(|n| t.endings.get(*n).copied().unwrap_or(0))
            .sum()
    };
    // The software its requests' most common User-Agent names (a Go program keeps the
    // name it was built with), else the program's name.
    let agent = t
        .user_agents
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(ua, _)| ua.as_str());
    let software = match (who, agent) {
        (Some(p), a) => Some(crate::report::cause::client_software(p, a)),
        (None, Some(a)) => {
            Some(crate::report::cause::client_software("", Some(a))).filter(|s| !s.is_empty())
        }
        (None, None) => None,
    };
    let facts = Facts {
        idle_on_the_wire: true,
        program: software,
        ..Facts::default()
    };
    let mut seen = Seen::new(t.connections, "connections", facts);
    let of = |figure: &str, n: u64, population: &str| {
        vec![Evidence::count(
            &format!("{at}.{figure}"),
            n,
            t.connections,
            population,
        )]
    };
    for (ended, key) in [
        (Ended::ClientHttp10, "http10_without_keep_alive"),
        (Ended::ClientCloseHeader, "connection_close"),
    ] {
        let n = asked(key);
        seen.add(
            ended,
            n,
            of(&format!("client_asked_close.{key}"), n, "connections"),
        );
    }
    for (ended, names, figure) in [
        (
            Ended::ClientClosedItself,
            &["client_fin", "client_reset"][..],
            "client_fin+client_reset",
        ),
        (Ended::ServerIdle, &["server_idle"][..], "server_idle"),
        (
            Ended::ServerClosed,
            &["server_fin", "server_reset", "server_idle"][..],
            "server_fin+server_reset+server_idle",
        ),
    ] {
        let n = by(names);
        seen.add(
            ended,
            n,
            of(
                &format!("endings.{figure}"),
                n,
                "connections (FIN or RST first)",
            ),
        );
    }
    seen
}

/// The programs named (connections whose program was gone before it could be named,
/// `unknown`, are not a program of their own: with one named program, the run is
/// judged as that program's).
fn named(programs: &[ProgramSummary]) -> usize {
    programs.iter().filter(|p| p.program != "unknown").count()
}

/// The headline: over every connection watched; with several client programs, each
/// program's own verdict after the total.
pub(super) fn headline(t: &EndpointSummary, programs: &[ProgramSummary]) -> Finding {
    if named(programs) < 2 {
        return judge(t, "total");
    }
    let mut h = over(
        Finding::new(
            "by_program",
            Cause::Reuse,
            format!(
                "{} over {} from {} client programs, each judged on its own:",
                requests(t),
                plural(t.connections, "connection"),
                programs.len()
            ),
        ),
        t,
        "total",
    );
    for p in programs {
        let own = judge(&p.figures, &format!("programs[{}]", p.program));
        let _ = write!(h.text, " {}: {}", p.program, own.text);
        h.evidence.extend(own.evidence);
    }
    h
}

/// One population's verdict in one sentence (`at`: its figures' place in the report).
fn judge(t: &EndpointSummary, at: &str) -> Finding {
    if t.connections == 0 {
        return over(
            Finding::new("no_connection", Cause::Measured, NO_CONNECTION.into()),
            t,
            at,
        );
    }
    let over_s = format!(
        "{} over {}",
        requests(t),
        plural(t.connections, "connection")
    );
    let f = |code, cause, text| over(Finding::new(code, cause, text), t, at);
    if t.requests == 0 {
        f(
            "no_request",
            Cause::Measured,
            format!("{over_s}: no request seen."),
        )
    } else if t.requests == 1 {
        f(
            "one_request",
            Cause::Measured,
            format!("{over_s}: one request cannot show reuse."),
        )
    } else if none_reused(t.requests, t.connections) {
        // Most answers errors: the first cause (a server closes after many an error, and
        // the requests are not the ones meant), before who closed.
        if let Some((said, evidence)) =
            crate::stats::diagnose::mostly_errors(&t.status_codes, t.responses, at)
        {
            return f(
                "mostly_error_status",
                Cause::Status,
                format!("{over_s}: not reused, and most answers were errors: {said}. Fix the requests first: a server may close after an error."),
            )
            .explaining(true)
            .with_all(evidence);
        }
        let seen = seen(t, at, None);
        let judged = seen.judge();
        f(
            judged.code(),
            Cause::Reuse,
            format!("{over_s}: not reused{}.", judged.because(&seen)),
        )
        .with_all(judged.evidence())
    } else {
        reused(t, &over_s, at)
    }
}

/// "N requests over M connections: reused (x per connection)", and when most answers
/// were errors, that after it (it does not change the reuse).
fn reused(t: &EndpointSummary, over_s: &str, at: &str) -> Finding {
    let mut h = over(
        Finding::new(
            "reused",
            Cause::Measured,
            format!(
                "{over_s}: reused ({:.1} requests per connection).",
                t.requests_per_connection.mean
            ),
        ),
        t,
        at,
    )
    .with(Evidence::mean(
        &format!("{at}.requests_per_connection.mean"),
        t.requests_per_connection.mean,
        None,
        t.connections,
        "connections",
    ));
    if let Some((said, evidence)) =
        crate::stats::diagnose::mostly_errors(&t.status_codes, t.responses, at)
    {
        h.text = format!("{} Most answers were errors: {said}.", h.text);
        h.evidence.extend(evidence);
    }
    h
}

/// The findings per endpoint: reuse or none, TLS handshakes, who closes, drops.
pub(super) fn verdict(r: &WatchReport) -> Vec<Finding> {
    let mut v = capture(r);
    if r.total.connections == 0 {
        v.push(over(
            Finding::new("no_connection", Cause::Measured, NO_CONNECTION.into()),
            &r.total,
            "total",
        ));
        return v;
    }
    // Several client programs: each is judged on its own (a blend of a program that
    // reuses and one that never does says nothing true of either).
    if named(&r.programs) > 1 {
        for p in &r.programs {
            let who = format!("{} (from {})", p.program, p.clients.join(", "));
            v.extend(member(
                &p.figures,
                &who,
                &format!("programs[{}]", p.program),
                Some(&p.program),
            ));
        }
        return v;
    }
    // One program named: its fix is its own.
    let program = r
        .programs
        .iter()
        .map(|p| p.program.as_str())
        .find(|p| *p != "unknown");
    for e in &r.endpoints {
        v.extend(member(
            e,
            &e.endpoint,
            &format!("endpoints[{}]", e.endpoint),
            program,
        ));
    }
    v
}

/// What the capture missed or could only estimate.
fn capture(r: &WatchReport) -> Vec<Finding> {
    let mut v = Vec::new();
    let c = &r.capture;
    if c.kernel_drops > 0 {
        v.push(Finding::new("capture_drops", Cause::Transport, format!(
            "The kernel dropped {} of {} captured packets (the capture's buffer was full): connections and requests in them were not seen, so the figures below may be short.",
            c.kernel_drops, c.packets
        )).with(Evidence::count("capture.kernel_drops", c.kernel_drops, c.packets, "packets captured")));
    }
    if let Some(n) = c.attribution_lost.filter(|n| *n > 0) {
        v.push(Finding::new("attribution_lost", Cause::Transport, format!(
            "The kernel could not record {} of the program's connections (its record was full): they are counted as other connections.",
            plural(n, "connection")
        )).with(Evidence::figure("capture.attribution_lost", n as f64, None, "connections")));
    }
    if c.attribution == Some("sockets") {
        v.push(Finding::new("attribution_by_sockets", Cause::Measured, format!(
            "The program's connections were told from others' by looking up each socket's owner after its SYN was seen ({}): a connection shorter than that lookup may be counted as another program's.",
            c.attribution_note.as_deref().unwrap_or("the cgroup way was not open")
        )));
    }
    v
}

/// An endpoint whose answers were mostly errors: which status, how many.
fn error_statuses(e: &EndpointSummary, who: &str, at: &str) -> Option<Finding> {
    let (said, evidence) = crate::stats::diagnose::mostly_errors(&e.status_codes, e.responses, at)?;
    Some(
        Finding::new(
            "mostly_error_status",
            Cause::Status,
            format!(
                "{who}: most answers were errors: {said}. Its requests may not be the ones meant (check the URLs, paths and credentials), and a server may close a connection after an error.",
            ),
        )
        .with_all(evidence),
    )
}

/// One member's findings (a server endpoint's, or a client program's: `who` in the
/// sentences, `at` its figures' place in the report): reuse or none, unanswered
/// requests, TLS resumption.
fn member(e: &EndpointSummary, who: &str, at: &str, program: Option<&str>) -> Vec<Finding> {
    let mut v = Vec::new();
    let reqs = requests(e);
    let conns = plural(e.connections, "connection");
    let f = |code, cause, text| over(Finding::new(code, cause, text), e, at);
    v.extend(error_statuses(e, who, at));
    if e.requests == 0 {
        v.push(f(
            "no_request",
            Cause::Measured,
            format!("{}: {conns} and no request seen.", who),
        ));
    } else if none_reused(e.requests, e.connections) {
        v.push(not_reused(e, who, at, program));
    } else if e.requests <= e.connections {
        v.push(f(
            "one_request",
            Cause::Measured,
            format!("{}: {reqs} over {conns}.", who),
        ));
    } else {
        v.push(
                f(
                    "reused",
                    Cause::Measured,
                    format!(
                        "{}: {reqs} over {conns}: connections are reused ({:.1} requests per connection).",
                        who, e.requests_per_connection.mean
                    ),
                )
                .with(Evidence::mean(
                    &format!("{at}.requests_per_connection.mean"),
                    e.requests_per_connection.mean,
                    None,
                    e.connections,
                    "connections",
                )),
            );
    }
    if e.unanswered_requests > 0 {
        v.push(Finding::new("unanswered_requests", Cause::Reuse, format!(
                "{}: {} sent on connections the server was closing or had reset got no answer there (a client sends such a request again on a new connection): the client reused connections the server had already given up.",
                who,
                plural(e.unanswered_requests, "request")
            )).with(Evidence::count(&format!("{at}.unanswered_requests"), e.unanswered_requests, e.requests, "requests")));
    }
    let full = e.tls_handshakes.full;
    if full > 1 && e.tls_handshakes.resumed == 0 {
        let cause = NoResumption::Unseen { full };
        v.push(
            Finding::new(cause.code(), Cause::Tls, {
                format!(
                    "{who}: no TLS session was resumed: {}. {}",
                    cause.why(),
                    cause.fix(None)
                )
            })
            .with(Evidence::count(
                &format!("{at}.tls_handshakes.full"),
                full,
                full,
                "TLS handshakes",
            )),
        );
    }
    v
}

/// A member whose connections carried one request each: why, as the headline finds it
/// (the one model of causes), with the fix of the side that ended them.
fn not_reused(e: &EndpointSummary, who: &str, at: &str, program: Option<&str>) -> Finding {
    let mut s = format!(
        "{who}: {} over {}: no reuse",
        requests(e),
        plural(e.connections, "connection")
    );
    let hs = e.tls_handshakes;
    if hs.full > 0 && hs.resumed == 0 {
        s.push_str("; each one paid a full TLS handshake");
    } else if hs.resumed > 0 {
        let _ = write!(s, "; TLS: {} full, {} resumed", hs.full, hs.resumed);
    }
    let seen = seen(e, at, program);
    let judged = seen.judge();
    let _ = write!(s, "{}.", judged.because(&seen));
    if let Judged::One(found) = &judged {
        if let Some(fix) = found.ended.fix(&seen.facts) {
            let _ = write!(s, " {fix}.");
        }
    }
    let mut finding =
        over(Finding::new(judged.code(), Cause::Reuse, s), e, at).with_all(judged.evidence());
    if hs.full + hs.resumed > 0 {
        finding = finding.with(Evidence::count(
            &format!("{at}.tls_handshakes.resumed"),
            hs.resumed,
            hs.full + hs.resumed,
            "TLS handshakes",
        ));
    }
    finding
}
