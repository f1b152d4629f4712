//! `watch`'s figures, added up as each connection ends, and its verdict.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::fmt::plural_s as plural;
use crate::report::audit::{GapStats, RpcStats, TlsCounts};
use crate::report::cause::ClientEnds;
use crate::report::finding::{Cause, Evidence, Finding};
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
pub struct Acc {
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
    lifetimes: GapStats,
    gaps: GapStats,
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
        let ending = c.ending.unwrap_or(Ending::OpenAtEnd);
        *self.endings.entry(ending_name(ending).into()).or_default() += 1;
        if let Some(end) = c.ended {
            self.lifetimes
                .add(end.saturating_duration_since(c.opened).as_secs_f64() * 1e3);
        }
        self.gaps.merge(&c.gaps);
    }

    /// The summary, with the TIME_WAIT sockets counted at the end.
    pub fn summary(&self, endpoint: String, time_wait: BTreeMap<String, u64>) -> EndpointSummary {
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

/// The verdict in one sentence, over every connection watched: "N requests over M
/// connections: reused (x per connection)", or "not reused, because the client (or the
/// server) closed them (n of M)" when most ended that way.
/// Who closed most of the connections, when one side did: the reason in words, the
/// finding's code, how many, and the endings counted.
fn closer(t: &EndpointSummary) -> Option<(String, &'static str, u64, &'static str)> {
    let by = |names: &[&str]| -> u64 {
        names
            .iter()
            .map(|n| t.endings.get(*n).copied().unwrap_or(0))
            .sum()
    };
    let (client, server, idle) = (
        by(&["client_fin", "client_reset"]),
        by(&["server_fin", "server_reset", "server_idle"]),
        by(&["server_idle"]),
    );
    let of = t.connections;
    if client * 2 > of {
        Some((
            format!("the client closed them ({client} of {of})"),
            "client_closed",
            client,
            "client_fin+client_reset",
        ))
    } else if idle * 2 > of {
        Some((
            format!("the server closed them when idle ({idle} of {of}, each after 1 s or more without a request: its keep-alive timeout)"),
            "server_idle_closed",
            idle,
            "server_idle",
        ))
    } else if server * 2 > of {
        Some((
            format!("the server closed them ({server} of {of})"),
            "server_closed",
            server,
            "server_fin+server_reset+server_idle",
        ))
    } else {
        None
    }
}

/// The headline: over every connection watched; with several client programs, each
/// program's own verdict after the total.
pub fn headline(t: &EndpointSummary, programs: &[ProgramSummary]) -> Finding {
    if programs.len() < 2 {
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
    } else if t.connections >= t.requests {
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
        // The client's own request heads asked to close: its cause, whoever closed first.
        if let Some((why, e)) = client_asked(t, at) {
            return f(
                "client_asked_close",
                Cause::Reuse,
                format!("{over_s}: not reused, because {why}."),
            )
            .with(e);
        }
        match closer(t) {
            Some((why, code, n, endings)) => f(
                code,
                Cause::Reuse,
                format!("{over_s}: not reused, because {why}."),
            )
            .with(Evidence::count(
                &format!("{at}.endings.{endings}"),
                n,
                t.connections,
                "connections (FIN or RST first)",
            )),
            None => f("not_reused", Cause::Reuse, format!("{over_s}: not reused.")),
        }
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

/// "the client asked to close them: its requests were HTTP/1.0 without `Connection:
/// keep-alive` on 5 of 5 connections", when the client's cleartext request heads asked to
/// close most connections; with the count it stands on.
fn client_asked(t: &EndpointSummary, at: &str) -> Option<(String, Evidence)> {
    let n = |k: &str| t.client_asked_close.get(k).copied().unwrap_or(0);
    let (http10, header) = (n("http10_without_keep_alive"), n("connection_close"));
    if (http10 + header) * 2 <= t.connections {
        return None;
    }
    let (what, key, count) = if http10 >= header {
        (format!(
            "its requests were HTTP/1.0 without `Connection: keep-alive` on {http10} of {} connections (a proxy's default towards its upstream: nginx needs `proxy_http_version 1.1` and an empty `Connection` header)",
            t.connections
        ), "http10_without_keep_alive", http10)
    } else {
        (
            format!(
                "its requests carried `Connection: close` on {header} of {} connections",
                t.connections
            ),
            "connection_close",
            header,
        )
    };
    Some((
        format!("the client asked to close them: {what}"),
        Evidence::count(
            &format!("{at}.client_asked_close.{key}"),
            count,
            t.connections,
            "connections",
        ),
    ))
}

/// The findings per endpoint: reuse or none, TLS handshakes, who closes, drops.
pub fn verdict(r: &WatchReport) -> Vec<Finding> {
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
    if r.programs.len() > 1 {
        for p in &r.programs {
            let who = format!("{} (from {})", p.program, p.clients.join(", "));
            v.extend(member(
                &p.figures,
                &who,
                &format!("programs[{}]", p.program),
            ));
        }
        return v;
    }
    for e in &r.endpoints {
        v.extend(member(
            e,
            &e.endpoint,
            &format!("endpoints[{}]", e.endpoint),
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
fn member(e: &EndpointSummary, who: &str, at: &str) -> Vec<Finding> {
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
    } else if e.connections >= e.requests && e.requests > 1 {
        v.push(not_reused(e, who, at));
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
        v.push(
            Finding::new(
                "tls_never_resumed",
                Cause::Tls,
                format!(
                    "{}: all {full} TLS handshakes were full: the client does not resume sessions.",
                    who
                ),
            )
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
/// (the client's own heads first, then who closed most of them), with a fix only for
/// the side that ended them.
fn not_reused(e: &EndpointSummary, who: &str, at: &str) -> Finding {
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
    let asked = client_asked(e, at);
    let closed = closer(e);
    match (&asked, &closed) {
            (Some((why, ev)), _) => {
            let how = if ev.figure.ends_with("http10_without_keep_alive") {
                ClientEnds::Http10
            } else {
                ClientEnds::CloseHeader
            };
            let _ = write!(s, ": {why}. {}.", how.fix_for(who));
        }
        (None, Some((why, "client_closed", _, _))) => {
            let _ = write!(s, ", because {why}. {}.", ClientEnds::ClosedItself.fix_for(who));
        }
            (None, Some((why, _, _, _))) => {
                let _ = write!(s, ", because {why}: the server's keep-alive policy ended them (`handshake doctor URL` shows it).");
            }
            (None, None) => s.push_str(
                ": neither side closed most of them first, so what was seen does not say which ended them.",
            ),
        }
    let mut finding = over(Finding::new("not_reused", Cause::Reuse, s), e, at);
    if let (None, Some((_, _, n, endings))) = (&asked, &closed) {
        finding = finding.with(Evidence::count(
            &format!("{at}.endings.{endings}"),
            *n,
            e.connections,
            "connections (FIN or RST first)",
        ));
    }
    if hs.full + hs.resumed > 0 {
        finding = finding.with(Evidence::count(
            &format!("{at}.tls_handshakes.resumed"),
            hs.resumed,
            hs.full + hs.resumed,
            "TLS handshakes",
        ));
    }
    match asked {
        Some((_, ev)) => finding.with(ev),
        None => finding,
    }
}
