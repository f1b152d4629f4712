//! Why connections were not reused: one model that bench's diagnosis, trace's findings,
//! audit's verdict and watch's summary count their evidence into. Each command adds what
//! it saw of a population of connections (how many ended which way, with the figures
//! that say so) to a [`Seen`]; [`Seen::judge`] chooses a cause only where it ended most of
//! the connections, in the order of what is known first (what the request said, then what
//! the answer said, then who closed and how), and otherwise names every cause seen with
//! its count. Each cause's code, clause and fix are written here once; the commands frame
//! them, and no command decides a cause of its own.

use crate::record::KeepAliveHeader;
use crate::report::cause::{ClientEnds, ServerEnds};
use crate::report::finding::Evidence;
use crate::report::fixes::{fix, Setting};

/// How connections that carried fewer requests than they could have ended, in the order
/// a cause is preferred when several ended most of them: the request's own words first
/// (a client that asked to close explains the server's close), then the answer's, then
/// who closed first and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ended {
    /// HTTP/1.0 requests with `Connection: close`: nginx's default towards an upstream.
    ClientHttp10Close,
    /// `Connection: close` on requests that carry a proxy's headers.
    ProxyCloseHeader,
    /// `Connection: close` on the client's requests.
    ClientCloseHeader,
    /// HTTP/1.0 requests without `Connection: keep-alive`.
    ClientHttp10,
    /// The server answered HTTP/1.0 without keep-alive.
    ServerHttp10,
    /// The server sent `Connection: close` on a connection's first response.
    ServerCloseHeader,
    /// Responses without a length, each ended by the server's close.
    ServerCloseDelimited,
    /// The server sent `Connection: close` after more than one request: its limit.
    ServerMaxRequests,
    /// The client reset its connections with response bytes unread.
    ClientResetUnread,
    /// Inside CONNECT tunnels (no headers seen): some closed by the origin, some by the
    /// client, each after one response.
    TunnelsBothSides,
    /// Inside CONNECT tunnels: the client closed each itself after one response.
    ClientClosedTunnels,
    /// Inside CONNECT tunnels: the origin closed each after its response.
    OriginClosedTunnels,
    /// The client closed each connection itself, without asking the server to.
    ClientClosedItself,
    /// handshake's own `--requests-per-connection`.
    ClientPolicy,
    /// The server closed connections while idle, between requests.
    ServerIdle,
    /// The server closed connections after a response without saying so, and the next
    /// request, sent at once, found them closed.
    ServerSilent,
    /// The server closed first, in a way that was not seen (watch sees FIN and RST, not
    /// the server's reasons).
    ServerClosed,
    /// The connections ended in errors.
    Errors,
}

/// The code of "not reused", where what was seen does not say why (and audit's count of
/// a client that made each request on a connection of its own).
pub(crate) const NOT_REUSED: &str = "not_reused";

/// What is known beside the counts, which the words of a cause use.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// The client asked for keep-alive in HTTP/1.0 (`Connection: keep-alive`).
    pub asked_http10_keep_alive: bool,
    /// Requests per connection, on average, over the connections the server closed at its
    /// limit.
    pub max_requests_mean: Option<f64>,
    /// `--requests-per-connection N`.
    pub requests_per_connection: Option<u64>,
    /// Requests sent again on a new connection after they found theirs closed.
    pub stale_retries: Option<u64>,
    /// Requests a second under `--rate` (at least 1/rate s apart on each connection); more
    /// than 0 where set.
    pub rate: Option<f64>,
    /// The server's `Keep-Alive` header, as it announced it.
    pub announced: Option<KeepAliveHeader>,
    /// The closes while idle were seen on the wire, each after 1 s or more without a
    /// request (watch).
    pub idle_on_the_wire: bool,
    /// The client program whose connections these are (audit, watch): its own fix.
    pub program: Option<String>,
    /// `-L` across several origins: each, with the connections opened to it (the causes
    /// are counted over all of them, so the sentence says so).
    pub origins: Vec<(String, u64)>,
}

impl Facts {
    /// " The run followed redirects across 2 origins (…), and …", or nothing.
    fn across(&self) -> String {
        if self.origins.len() < 2 {
            return String::new();
        }
        format!(
            " The run followed redirects across {} origins ({}), and the connections are counted over all of them.",
            self.origins.len(),
            self.origins
                .iter()
                .map(|(o, n)| format!("{o}: {}", crate::fmt::plural(*n, "connection", "connections")))
                .collect::<Vec<_>>()
                .join("; ")
        )
    }
}

/// The fix for nginx as a reverse proxy that opens an upstream connection per request:
/// it speaks HTTP/1.0 upstream and sends `Connection: close` unless told otherwise.
const NGINX_UPSTREAM_FIX: &str = "If the client is nginx (its default is `proxy_http_version 1.0` with `Connection: close`), set `proxy_http_version 1.1;` and `proxy_set_header Connection \"\";` where it proxies, and `keepalive 16;` in its `upstream` block";

impl Ended {
    /// Every cause, in the order of preference.
    #[cfg(test)]
    const ALL: [Ended; 18] = [
        Ended::ClientHttp10Close,
        Ended::ProxyCloseHeader,
        Ended::ClientCloseHeader,
        Ended::ClientHttp10,
        Ended::ServerHttp10,
        Ended::ServerCloseHeader,
        Ended::ServerCloseDelimited,
        Ended::ServerMaxRequests,
        Ended::ClientResetUnread,
        Ended::TunnelsBothSides,
        Ended::ClientClosedTunnels,
        Ended::OriginClosedTunnels,
        Ended::ClientClosedItself,
        Ended::ClientPolicy,
        Ended::ServerIdle,
        Ended::ServerSilent,
        Ended::ServerClosed,
        Ended::Errors,
    ];

    /// The finding's code, the same in every command that sees the cause.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Ended::ClientHttp10Close => "not_reused_client_http10_close",
            Ended::ProxyCloseHeader => "not_reused_proxy_close_header",
            Ended::ClientCloseHeader => "not_reused_client_close_header",
            Ended::ClientHttp10 => "not_reused_client_http10",
            Ended::ServerHttp10 => ServerEnds::Http10.code(),
            Ended::ServerCloseHeader => ServerEnds::CloseHeader.code(),
            Ended::ServerCloseDelimited => ServerEnds::CloseDelimited.code(),
            Ended::ServerMaxRequests => "not_reused_server_max_requests",
            Ended::ClientResetUnread => "not_reused_client_reset_unread",
            Ended::TunnelsBothSides => "not_reused_tunnels_closed_after_one",
            Ended::ClientClosedTunnels => "not_reused_client_closed_tunnels",
            Ended::OriginClosedTunnels => "not_reused_origin_closed_tunnels",
            Ended::ClientClosedItself => "not_reused_client_closed_itself",
            Ended::ClientPolicy => "not_reused_client_policy",
            Ended::ServerIdle => "not_reused_server_idle_close",
            Ended::ServerSilent => ServerEnds::Silently.code(),
            Ended::ServerClosed => "not_reused_server_closed",
            Ended::Errors => "not_reused_errors",
        }
    }

    /// The server refused keep-alive outright (HTTP/1.0, `Connection: close`, no length):
    /// a connection per request is all the server allows.
    pub(crate) fn refuses_keep_alive(self) -> bool {
        matches!(
            self,
            Ended::ServerHttp10 | Ended::ServerCloseHeader | Ended::ServerCloseDelimited
        )
    }

    /// What ended the connections, as a clause after "because".
    pub(crate) fn why(self, f: &Facts) -> String {
        match self {
            Ended::ClientHttp10Close => "the client sent HTTP/1.0 requests with `Connection: close` (what nginx sends to an upstream by default)".into(),
            Ended::ProxyCloseHeader => "a proxy in front sent `Connection: close`, closing its upstream connections (the requests carry a proxy's headers: Via, Forwarded, X-Forwarded-For or X-Real-IP)".into(),
            Ended::ClientCloseHeader => "the client sent `Connection: close`".into(),
            Ended::ClientHttp10 => "the client sent HTTP/1.0 requests without `Connection: keep-alive`".into(),
            Ended::ServerHttp10 if f.asked_http10_keep_alive => format!(
                "{}, ignoring the request's `Connection: keep-alive`,",
                ServerEnds::Http10.why()
            ),
            Ended::ServerHttp10 => ServerEnds::Http10.why().into(),
            Ended::ServerCloseHeader => ServerEnds::CloseHeader.why().into(),
            Ended::ServerCloseDelimited => ServerEnds::CloseDelimited.why().into(),
            Ended::ServerMaxRequests => match f.max_requests_mean {
                Some(mean) if mean.fract() == 0.0 => format!(
                    "the server closed them after {mean:.0} requests each (its max requests per connection)"
                ),
                Some(mean) => format!(
                    "the server closed them after {mean:.1} requests each on average (its max requests per connection)"
                ),
                None => "the server closed them at its max requests per connection".into(),
            },
            Ended::ClientResetUnread => "the client reset its connections with response bytes unread (it does not read response bodies to the end)".into(),
            Ended::TunnelsBothSides => "each CONNECT tunnel was closed after one response, by the origin or by the client".into(),
            Ended::ClientClosedTunnels => "the client closed each CONNECT tunnel itself after one response".into(),
            Ended::OriginClosedTunnels => "the origin closed each CONNECT tunnel after its response".into(),
            Ended::ClientClosedItself => "the client closed each connection itself after one response, without asking the server to (no `Connection: close`)".into(),
            Ended::ClientPolicy => format!(
                "the client ended them by its own policy (--requests-per-connection {})",
                f.requests_per_connection.unwrap_or(0)
            ),
            Ended::ServerIdle if f.idle_on_the_wire => "the server closed them when idle (each after 1 s or more without a request: its keep-alive timeout)".into(),
            Ended::ServerIdle => "the server closed them while idle, between requests".into(),
            Ended::ServerSilent => ServerEnds::Silently.why().into(),
            Ended::ServerClosed => "the server closed them first (how it decided is not seen on the wire)".into(),
            Ended::Errors => "they ended in errors".into(),
        }
    }

    /// What else is known that tells this cause from another, as sentences: the gaps
    /// between requests against the server's announced idle timeout, what a proxy cannot
    /// see inside a tunnel.
    pub(crate) fn detail(self, f: &Facts) -> Option<String> {
        match self {
            Ended::ServerIdle if !f.idle_on_the_wire => f.rate.map(|rate| idle_detail(f, rate)),
            Ended::ServerSilent => f.stale_retries.map(|retries| format!(
                "Each was found closed by the next request, sent as soon as the response had arrived, so no idle timeout explains it ({}){}.",
                crate::fmt::plural(retries, "stale-connection retry", "stale-connection retries"),
                announced(f)
                    .map(|h| format!(", although it announced {}", h.describe()))
                    .unwrap_or_default()
            )),
            Ended::TunnelsBothSides | Ended::OriginClosedTunnels => Some("Inside TLS a proxy sees no headers: a client that asks the origin to close (`Connection: close`) races it to the close, and an origin that does not keep connections closes first; `handshake doctor` against the origin says which.".into()),
            Ended::ClientClosedTunnels => Some("Inside TLS a proxy sees no headers: whether the client asked the origin to close is unseen.".into()),
            _ => None,
        }
    }

    /// What to change, on the side that ended the connections; `None` where nothing is
    /// to be changed (the tool's own policy, errors said elsewhere) or where who must act
    /// is not known.
    pub(crate) fn fix(self, f: &Facts) -> Option<String> {
        let client = |e: ClientEnds| match &f.program {
            Some(p) => e.fix_for(p),
            None => e.fix().to_string(),
        };
        Some(match self {
            Ended::ClientHttp10Close => NGINX_UPSTREAM_FIX.into(),
            Ended::ProxyCloseHeader => format!(
                "{NGINX_UPSTREAM_FIX}. In HAProxy, drop `option httpclose` and `option http-server-close`"
            ),
            Ended::ClientCloseHeader => client(ClientEnds::CloseHeader),
            Ended::ClientHttp10 => client(ClientEnds::Http10),
            Ended::ServerHttp10 => ServerEnds::Http10.fix(None),
            Ended::ServerCloseHeader => ServerEnds::CloseHeader.fix(None),
            Ended::ServerCloseDelimited => ServerEnds::CloseDelimited.fix(None),
            Ended::ServerMaxRequests => format!(
                "Raise the server's requests per connection {}",
                fix(Setting::MaxRequests, None)
            ),
            Ended::ClientResetUnread => match f.program.as_deref() {
                Some("go") => "Read each response body to the end before the next request (in Go: read the body to EOF and close it)".into(),
                _ => "Read each response body to the end before the next request".into(),
            },
            Ended::ClientClosedTunnels | Ended::ClientClosedItself => {
                client(ClientEnds::ClosedItself)
            }
            Ended::ServerIdle => format!(
                "Lengthen the server's idle timeout past the gaps between requests {}, or let the client close its idle connections before the server does",
                fix(Setting::IdleTimeout, None)
            ),
            Ended::ServerClosed => "`handshake doctor URL` shows the server's keep-alive policy".into(),
            Ended::TunnelsBothSides
            | Ended::OriginClosedTunnels
            | Ended::ServerSilent
            | Ended::ClientPolicy
            | Ended::Errors => return None,
        })
    }
}

/// The server's announced `Keep-Alive`, where it gave a timeout.
fn announced(f: &Facts) -> Option<KeepAliveHeader> {
    f.announced.filter(|h| h.timeout_s.is_some())
}

/// A close while idle under `--rate` (`rate` requests a second): the gap between
/// requests against the server's announced idle timeout; where it announced none, both
/// causes, with how to tell them apart.
fn idle_detail(f: &Facts, rate: f64) -> String {
    let retries = f
        .stale_retries
        .map(|r| {
            format!(
                " ({})",
                crate::fmt::plural(r, "stale-connection retry", "stale-connection retries")
            )
        })
        .unwrap_or_default();
    let gap = 1.0 / rate;
    let gaps = format!(
        "requests came at {} a second, so at least {} s apart on each connection",
        crate::fmt::num(rate),
        crate::fmt::num(gap)
    );
    match announced(f).and_then(|h| h.timeout_s.map(|t| (h, t))) {
        Some((h, t)) if f64::from(t) < gap => format!(
            "It announced {}, and the {gaps}: its idle timeout, {t} s, is shorter than the gaps between requests{retries}.",
            h.describe()
        ),
        Some((h, t)) => format!(
            "It announced {} and the {gaps} (longer on a connection that waited while others took the requests): its idle timeout, {t} s, is shorter than such a wait, or something ends connections sooner than it says (a proxy or load balancer in front){retries}.",
            h.describe()
        ),
        None => format!(
            "The {gaps}: its idle timeout is shorter than that, or it ends connections after a response without saying so (it announced no `Keep-Alive: timeout`; handshake doctor measures its idle timeout){retries}."
        ),
    }
}

/// One cause seen: how many of the population it ended, and the figures that say so.
#[derive(Debug, Clone)]
pub(crate) struct Found {
    pub ended: Ended,
    pub n: u64,
    pub evidence: Vec<Evidence>,
}

/// What one command saw of a population of connections: `of` of them (in `unit`,
/// "connections", or "responses" where each response is its connection's), and how many
/// ended which way.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub of: u64,
    pub unit: &'static str,
    pub facts: Facts,
    found: Vec<Found>,
}

/// The cause chosen, or every cause seen where none ended most of them, or none.
#[derive(Debug, Clone)]
pub(crate) enum Judged {
    /// One cause ended most of the connections.
    One(Found),
    /// Several causes, none of them most: each said with its count, largest first.
    Several(Vec<Found>),
    /// Nothing seen says why.
    Unknown,
}

impl Seen {
    pub(crate) fn new(of: u64, unit: &'static str, facts: Facts) -> Seen {
        Seen {
            of,
            unit,
            facts,
            found: Vec::new(),
        }
    }

    /// `n` of the population ended as `ended`, which `evidence` shows; nothing when 0.
    pub(crate) fn add(&mut self, ended: Ended, n: u64, evidence: Vec<Evidence>) {
        if n > 0 {
            self.found.push(Found { ended, n, evidence });
        }
    }

    /// The cause that ended more than half of the population, the first in the order of
    /// preference where several did; else every cause seen, largest first.
    pub(crate) fn judge(&self) -> Judged {
        let mut found = self.found.clone();
        found.sort_by_key(|f| f.ended);
        if let Some(most) = found.iter().find(|f| f.n * 2 > self.of) {
            return Judged::One(most.clone());
        }
        found.sort_by_key(|f| std::cmp::Reverse(f.n));
        match found.len() {
            0 => Judged::Unknown,
            1 => Judged::One(found.remove(0)),
            _ => Judged::Several(found),
        }
    }

    /// "every connection", "3 of 5 connections".
    fn count(&self, n: u64) -> String {
        if n == self.of {
            format!("every {}", self.unit.trim_end_matches('s'))
        } else {
            format!("{n} of {} {}", self.of, self.unit)
        }
    }
}

impl Judged {
    /// The code: the cause's, `not_reused_mixed` for several, `not_reused` for none.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            Judged::One(f) => f.ended.code(),
            Judged::Several(_) => "not_reused_mixed",
            Judged::Unknown => NOT_REUSED,
        }
    }

    /// The evidence of the causes said.
    pub(crate) fn evidence(&self) -> Vec<Evidence> {
        match self {
            Judged::One(f) => f.evidence.clone(),
            Judged::Several(all) => all.iter().flat_map(|f| f.evidence.clone()).collect(),
            Judged::Unknown => Vec::new(),
        }
    }

    /// The headline's clause after "not reused": ", because the client sent
    /// `Connection: close`, on 3 of 3 connections", or each cause with its
    /// count where none ended most, or what is not known.
    pub(crate) fn because(&self, seen: &Seen) -> String {
        let n_of = |f: &Found| format!("{} of {} {}", f.n, seen.of, seen.unit);
        match self {
            Judged::One(f) => format!(", because {}, on {}", f.ended.why(&seen.facts), n_of(f)),
            Judged::Several(all) => format!(
                ", and no one cause ended most of them: {}",
                all.iter()
                    .map(|f| format!("{}, on {}", f.ended.why(&seen.facts), n_of(f)))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
            Judged::Unknown => "; what was seen does not say why".into(),
        }
    }

    /// The finding in full: "Connections were not reused: <why> on every connection.
    /// <detail> <fix>."
    pub(crate) fn sentence(&self, seen: &Seen) -> String {
        let f = &seen.facts;
        match self {
            Judged::One(one) => {
                let lead = if one.ended == Ended::ServerMaxRequests {
                    "Connections were reused only up to the server's limit"
                } else {
                    "Connections were not reused"
                };
                let mut s = format!(
                    "{lead}: {} on {}.{}",
                    one.ended.why(f),
                    seen.count(one.n),
                    f.across()
                );
                for more in [
                    one.ended.detail(f),
                    one.ended.fix(f).map(|x| format!("{x}.")),
                ]
                .into_iter()
                .flatten()
                {
                    s.push(' ');
                    s.push_str(&more);
                }
                s
            }
            Judged::Several(all) => format!(
                "Connections were not reused, and no one cause ended most of them: {}.{}",
                all.iter()
                    .map(|x| format!("{} on {}", x.ended.why(f), seen.count(x.n)))
                    .collect::<Vec<_>>()
                    .join("; "),
                f.across()
            ),
            Judged::Unknown => format!(
                "Connections were not reused; what was seen does not say why.{}",
                f.across()
            ),
        }
    }
}

/// Whether a population that the client meant to reuse was not: two requests or more,
/// and no connection carried a second (a client observed from outside, whose intent is
/// not known, as audit and watch see it; trace's steps).
pub(crate) fn none_reused(requests: u64, connections: u64) -> bool {
    requests > 1 && connections >= requests
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(of: u64, found: &[(Ended, u64)]) -> Seen {
        let mut s = Seen::new(of, "connections", Facts::default());
        for (e, n) in found {
            s.add(*e, *n, Vec::new());
        }
        s
    }

    #[test]
    fn a_cause_is_chosen_only_where_it_ended_most_and_the_request_comes_first() {
        // The client asked to close, and the server closed: the request's words explain
        // the close.
        let s = seen(
            4,
            &[(Ended::ServerClosed, 4), (Ended::ClientCloseHeader, 3)],
        );
        assert_eq!(s.judge().code(), "not_reused_client_close_header");
        // Half is not most: both said, largest first.
        let s = seen(
            4,
            &[(Ended::ServerClosed, 2), (Ended::ClientClosedItself, 2)],
        );
        let j = s.judge();
        assert_eq!(j.code(), "not_reused_mixed");
        let said = j.sentence(&s);
        assert!(said.contains("on 2 of 4 connections; "), "{said}");
        assert!(matches!(seen(4, &[]).judge(), Judged::Unknown));
        // A cause seen alone is that cause, with its count.
        let s = seen(5, &[(Ended::Errors, 2)]);
        assert!(s.judge().sentence(&s).contains("on 2 of 5 connections"));
    }

    #[test]
    fn every_cause_has_its_own_code_and_a_clause() {
        let f = Facts::default();
        let mut codes: Vec<&str> = Ended::ALL.iter().map(|e| e.code()).collect();
        for e in Ended::ALL {
            assert!(!e.why(&f).is_empty());
            assert!(e.code().starts_with("not_reused_"));
        }
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Ended::ALL.len());
    }

    #[test]
    fn a_client_fix_names_the_program_and_a_server_fix_every_servers_setting() {
        let f = Facts {
            program: Some("python3".into()),
            ..Facts::default()
        };
        assert!(Ended::ClientClosedItself
            .fix(&f)
            .unwrap()
            .contains("requests.Session()"));
        // The server's kind is not known from the client's side: every server's setting.
        let fix = Ended::ServerCloseHeader.fix(&f).unwrap();
        assert!(fix.contains("nginx:") && fix.contains("Apache:"), "{fix}");
    }

    /// A Go program keeps the name it was built with: its `User-Agent` names it, and the
    /// fix is Go's own setting; a client nothing identifies is given the concept, and no
    /// product's directive.
    #[test]
    fn a_client_is_named_by_its_user_agent_and_an_unknown_one_by_no_product() {
        let go = crate::report::cause::client_software("client", Some("Go-http-client/1.1"));
        let fix = Ended::ClientCloseHeader
            .fix(&Facts {
                program: Some(go),
                ..Facts::default()
            })
            .unwrap();
        assert!(
            fix.contains("DisableKeepAlives") && !fix.contains("Node") && !fix.contains("HAProxy"),
            "{fix}"
        );
        let java = crate::report::cause::client_software("java", Some("Java/17.0.15"));
        let fix = Ended::ClientCloseHeader
            .fix(&Facts {
                program: Some(java),
                ..Facts::default()
            })
            .unwrap();
        assert!(fix.contains("-Dhttp.keepAlive=false"), "{fix}");
        for cause in [
            Ended::ClientCloseHeader,
            Ended::ClientHttp10,
            Ended::ClientClosedItself,
        ] {
            let fix = cause
                .fix(&Facts {
                    program: Some("client".into()),
                    ..Facts::default()
                })
                .unwrap();
            for product in ["Node", "HAProxy", "Go ", "Python", "nginx", "`http."] {
                assert!(!fix.contains(product), "{product} in {fix}");
            }
        }
    }
}

#[cfg(test)]
mod page {
    use super::Ended;

    /// docs/findings.md lists the causes in the order the model prefers them, each by its
    /// code: the page cannot drift from the model.
    #[test]
    fn the_page_lists_every_cause_in_the_models_order() {
        let page =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/findings.md"))
                .unwrap();
        let (_, model) = page
            .split_once("## Why connections were not reused: one model")
            .expect("the model's section");
        let model = model.split("\n## ").next().unwrap_or(model);
        let listed: Vec<&str> = model
            .lines()
            .filter_map(|l| l.split('`').nth(1).filter(|_| l.starts_with("| ")))
            .collect();
        let codes: Vec<&str> = Ended::ALL.iter().map(|e| e.code()).collect();
        assert_eq!(listed, codes);
        let mut sorted = Ended::ALL;
        sorted.sort();
        assert_eq!(sorted, Ended::ALL, "ALL is in the order of preference");
    }
}
