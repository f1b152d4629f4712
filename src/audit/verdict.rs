//! The audit's verdict: findings (a code, the sentence with the likely cause and the
//! fix, and the client's figures it was read from).

use std::collections::BTreeMap;

use crate::fmt::plural_s as plural;
use crate::report::audit::{ClientSummary, Ending};
use crate::report::cause::NoResumption;
use crate::report::finding::{Cause as Kind, Evidence, Finding};
use crate::report::reuse::{none_reused, Ended, Facts, Judged, Seen, NOT_REUSED};

/// The figures most findings stand on: requests over connections.
fn over(f: Finding, t: &ClientSummary) -> Finding {
    f.with(Evidence::figure(
        "total.requests",
        t.requests as f64,
        None,
        "requests",
    ))
    .with(Evidence::figure(
        "total.connections",
        t.connections as f64,
        None,
        "connections",
    ))
}

/// `n` of the client's requests that carried `what` (`total.connection_headers.close`).
fn of_requests(figure: &str, n: u64, t: &ClientSummary) -> Evidence {
    Evidence::count(figure, n, t.requests, "requests")
}

/// `n` of the client's connections that ended so (`total.endings.client_reset`).
fn of_connections(figure: &str, n: u64, t: &ClientSummary) -> Evidence {
    Evidence::count(figure, n, t.connections, "connections")
}

/// The findings: what the client does with connections, the likely cause, the fix.
/// `peak_open`: the most client connections open at once.
pub(crate) fn verdict(t: &ClientSummary, peak_open: u64) -> Vec<Finding> {
    let mut v: Vec<Finding> = error_statuses(t).into_iter().collect();
    v.extend(reuse(t));
    v.extend(h2(t, peak_open));
    if t.unused_connections > 0 && t.requests > 0 {
        v.push(
            Finding::new("unused_connections", Kind::Reuse, format!(
                "{} carried no request (opened, then closed or left unused): a client that dials ahead, or several at once before its first is up (Go's HTTP/2 transport does when many requests start together).",
                plural(t.unused_connections, "connection")
            ))
            .with(of_connections("total.unused_connections", t.unused_connections, t)),
        );
    }
    let tls = t.tls_handshakes;
    let handshakes = tls.full + tls.resumed;
    if handshakes > 1 {
        let f = if tls.resumed == 0 {
            let cause = NoResumption::ClientOfferedNone { full: tls.full };
            Finding::new(cause.code(), Kind::Tls, format!(
                "TLS: no session was resumed: {}, so each new connection pays the full handshake. {}",
                cause.why(),
                cause.fix(None)
            ))
        } else {
            Finding::new(
                "tls_resumed",
                Kind::Tls,
                format!(
                    "TLS: {} of {handshakes} handshakes resumed a session.",
                    tls.resumed
                ),
            )
        };
        v.push(f.with(Evidence::count(
            "total.tls_handshakes.resumed",
            tls.resumed,
            handshakes,
            "TLS handshakes",
        )));
    }
    v.extend(super::mtls::findings(t));
    v.extend(through_proxy(t));
    v.extend(endings(t));
    if t.responses < t.requests {
        v.push(
            Finding::new(
                "responses_incomplete",
                Kind::Transport,
                format!(
                    "{} of {} requests got no complete response.",
                    t.requests - t.responses,
                    t.requests
                ),
            )
            .with(of_requests("total.responses", t.responses, t)),
        );
    }
    v
}

/// When most answers were errors (4xx, 5xx): the leading status, how many, and what it
/// means for the audit. The client's connections are audit's own, kept whatever the
/// status, so the reuse figures stand; the requests may not be the ones the client
/// means to make.
fn error_statuses(t: &ClientSummary) -> Option<Finding> {
    if let Some(own) = answered_by_audit(t) {
        return Some(own);
    }
    let (said, evidence) =
        crate::stats::diagnose::mostly_errors(&t.status_codes, t.responses, "total")?;
    Some(
        Finding::new(
            "mostly_error_status",
            Kind::Status,
            format!(
                "Most answers were errors: {said}: the client's requests may not be the ones it means to make (check its URL, path and credentials). Its connections are audit's own, kept whatever the status, so the reuse figures stand."
            ),
        )
        .with_all(evidence),
    )
}

/// When the audit answered most requests itself (or refused each `CONNECT`): its
/// status, how many, its reason and what to do. Those answers are the audit's, not a
/// server's: they say nothing of the client's URL, path or credentials.
fn answered_by_audit(t: &ClientSummary) -> Option<Finding> {
    let (code, own) = t
        .answered_by_audit
        .iter()
        .max_by_key(|(c, o)| (o.count, std::cmp::Reverse(c.as_str())))?;
    let all: u64 = t.answered_by_audit.values().map(|o| o.count).sum();
    if all * 2 < t.responses {
        return None;
    }
    let reason = &own.reason;
    let what = if reason.starts_with("a forward proxy takes requests in absolute form") {
        "the client sent its requests in origin form, as to a server: it is not using the audit as its forward proxy (point its proxy setting, HTTP_PROXY or -x, at the audit)"
    } else if reason.contains("over the audit's") || reason.contains("past the audit's") {
        "the client met a limit of the audit's: raise it (the flag named) to let its requests through"
    } else if code.starts_with('5') {
        "the audit could not reach the server the client asked for: check that the origin (or --upstream) is up and reachable from this machine"
    } else {
        "the audit could not read what the client asked for"
    };
    // Answers to requests, or to connections that carried none (a refused CONNECT, a
    // head that was not HTTP).
    let counted = if t.responses > 0 {
        format!("{} of {}", own.count, plural(t.responses, "request"))
    } else {
        plural(own.count, "connection")
    };
    Some(
        Finding::new(
            "answered_by_audit",
            Kind::Status,
            format!(
                "The audit itself answered {counted} with {code} (\"{reason}\"): {what}. These answers are the audit's, not a server's."
            ),
        )
        .with(Evidence::count(
            &format!("total.answered_by_audit.{code}.count"),
            own.count,
            t.responses.max(all),
            "answers",
        )),
    )
}

/// "No request was seen (2 connections)", and why where every handshake was refused on
/// the client's certificate.
fn no_request(t: &ClientSummary) -> String {
    let refused = count(&t.endings, &Ending::CertificateRefused);
    let distrusted = count(&t.endings, &Ending::CertificateDistrusted);
    let why = if refused > 0 && refused == t.connections {
        ": the audit refused each handshake on the client's certificate (below)"
    } else if distrusted > 0 && distrusted == t.connections {
        ": the client refused the audit's certificate in each handshake (below)"
    } else {
        ""
    };
    format!(
        "No request was seen ({}){why}.",
        plural(t.connections, "connection")
    )
}

/// Whether the client reused its connections, and when not, the likely cause and fix.
fn reuse(t: &ClientSummary) -> Vec<Finding> {
    let mut v = Vec::new();
    if t.requests == 0 {
        v.push(over(
            Finding::new("no_request", Kind::Measured, no_request(t)),
            t,
        ));
    } else if none_reused(t.requests, t.connections) {
        v.push(over(
            Finding::new(
                NOT_REUSED,
                Kind::Reuse,
                format!(
                    "{} over {}: no reuse.",
                    plural(t.requests, "request"),
                    plural(t.connections, "connection")
                ),
            ),
            t,
        ));
        v.extend(no_reuse_finding(t));
    } else if t.requests == 1 {
        v.push(over(Finding::new("one_request", Kind::Measured, format!(
            "1 request over {}: one request cannot show reuse. Run the client with two or more requests in one process (for example `curl URL URL`) to see whether it keeps its connection.",
            plural(t.connections, "connection")
        )), t));
        let close = count(&t.connection_headers, &"close".to_string());
        if close == 1 {
            v.push(
                Finding::new(
                    "client_close_header",
                    Kind::Reuse,
                    "The client sent `Connection: close`: it would not reuse the connection."
                        .into(),
                )
                .with(of_requests("total.connection_headers.close", close, t)),
            );
        }
    } else if t.connections < t.requests {
        v.push(over(
            Finding::new(
                "reused",
                Kind::Measured,
                format!(
                    "{} over {}: connections are reused ({:.1} requests per connection).",
                    plural(t.requests, "request"),
                    plural(t.connections, "connection"),
                    t.requests_per_connection.mean
                ),
            ),
            t,
        ));
    }
    v
}

/// What the audit saw of why a client opened a connection per request, counted into the
/// one model of causes (`report::reuse`): its requests' heads (HTTP/1.0, `Connection:
/// close`, a proxy's headers) and how its connections ended (who closed first, with
/// response bytes unread, inside CONNECT tunnels where no header is seen).
fn no_reuse_seen(t: &ClientSummary) -> Seen {
    let close = count(&t.connection_headers, &"close".to_string());
    let v10 = count(&t.http_versions, &"HTTP/1.0".to_string());
    let ka = count(&t.connection_headers, &"keep-alive".to_string());
    let unread = count(&t.endings, &Ending::ClientClosedUnread);
    let closed = count(&t.endings, &Ending::ClientClosed);
    let origin_closed = count(&t.endings, &Ending::OriginClosed);
    let in_tls_tunnels = t.proxy.as_ref().is_some_and(|p| p.requests_estimated);
    let facts = Facts {
        program: Some(software(t)),
        ..Facts::default()
    };
    let mut seen = Seen::new(t.connections, "connections", facts);
    let close_e = || of_requests("total.connection_headers.close", close, t);
    let v10_e = || of_requests("total.http_versions.HTTP/1.0", v10, t);
    // Both on one request: at least as many as the two counts overlap.
    let both = |a: u64, b: u64| (a + b).saturating_sub(t.requests);
    seen.add(
        Ended::ClientHttp10Close,
        both(close, v10),
        vec![v10_e(), close_e()],
    );
    seen.add(
        Ended::ProxyCloseHeader,
        both(close, t.forwarded_requests),
        vec![
            close_e(),
            of_requests("total.forwarded_requests", t.forwarded_requests, t),
        ],
    );
    seen.add(Ended::ClientCloseHeader, close, vec![close_e()]);
    seen.add(
        Ended::ClientHttp10,
        v10.saturating_sub(ka),
        vec![
            v10_e(),
            of_requests("total.connection_headers.keep-alive", ka, t),
        ],
    );
    seen.add(
        Ended::ClientResetUnread,
        unread,
        vec![of_connections(
            "total.endings.client_closed_unread",
            unread,
            t,
        )],
    );
    if in_tls_tunnels {
        // Inside a TLS tunnel a client that closes with bytes still coming (the origin's
        // close_notify, a ticket) resets: its end all the same.
        let reset = count(&t.endings, &Ending::ClientReset);
        let by_client = closed + reset;
        let mut client_e = vec![of_connections("total.endings.client_closed", closed, t)];
        if reset > 0 {
            client_e.push(of_connections("total.endings.client_reset", reset, t));
        }
        let origin_e = of_connections("total.endings.origin_closed", origin_closed, t);
        if by_client > 0 && origin_closed > 0 {
            let mut e = vec![origin_e.clone()];
            e.extend(client_e.clone());
            seen.add(Ended::TunnelsBothSides, by_client + origin_closed, e);
        }
        seen.add(Ended::ClientClosedTunnels, by_client, client_e);
        seen.add(Ended::OriginClosedTunnels, origin_closed, vec![origin_e]);
    } else {
        seen.add(
            Ended::ClientClosedItself,
            closed,
            vec![
                of_connections("total.endings.client_closed", closed, t),
                close_e(),
            ],
        );
        seen.add(
            Ended::ServerClosed,
            origin_closed,
            vec![of_connections(
                "total.endings.origin_closed",
                origin_closed,
                t,
            )],
        );
    }
    seen
}

/// The finding in full for a client that opened a connection per request, with its fix;
/// `None` where the endings already say it (unread responses) or nothing says why.
fn no_reuse_finding(t: &ClientSummary) -> Option<Finding> {
    let seen = no_reuse_seen(t);
    let judged = seen.judge();
    match &judged {
        Judged::Unknown => None,
        Judged::One(f) if f.ended == Ended::ClientResetUnread => None,
        _ => Some(
            Finding::new(judged.code(), Kind::Reuse, judged.sentence(&seen))
                .with_all(judged.evidence()),
        ),
    }
}

/// The verdict in one sentence: "N requests over M connections: reused (x per
/// connection)", or "not reused, because …" with the cause when one is read.
pub(crate) fn headline(t: &ClientSummary) -> Finding {
    let mut h = reuse_headline(t);
    // Most answers errors: said in the headline too, after the reuse it does not change.
    if let Some(e) = error_statuses(t) {
        // "Most answers were errors: 3 of 3 were 404 …", or "The audit answered 3 of 3
        // answers itself with 502".
        let cut = if e.code == "answered_by_audit" {
            " (\""
        } else {
            ": the client"
        };
        let said = e.text.split(cut).next().unwrap_or_default();
        h.text = format!("{} {said}.", h.text);
        h.evidence.extend(e.evidence);
    }
    h
}

fn reuse_headline(t: &ClientSummary) -> Finding {
    let estimated = t.proxy.as_ref().is_some_and(|p| p.requests_estimated);
    let over_s = format!(
        "{}{} over {}",
        plural(t.requests, "request"),
        if estimated {
            " (estimated from TLS records)"
        } else {
            ""
        },
        plural(t.connections, "connection")
    );
    let f = |code, text| over(Finding::new(code, Kind::Measured, text), t);
    if t.requests == 0 {
        f("no_request", no_request(t))
    } else if t.requests == 1 {
        f(
            "one_request",
            format!("{over_s}: one request cannot show reuse."),
        )
    } else if none_reused(t.requests, t.connections) {
        let seen = no_reuse_seen(t);
        let judged = seen.judge();
        over(
            Finding::new(
                judged.code(),
                Kind::Reuse,
                format!("{over_s}: not reused{}.", judged.because(&seen)),
            ),
            t,
        )
        .with_all(judged.evidence())
    } else if t.one_request_connections > 0 {
        // Some connections were reused and others carried one request each: both said,
        // so a mean does not hide the one-shot ones.
        let one = t.one_request_connections;
        let rest = t.connections - one - t.unused_connections.min(t.connections - one);
        let on_rest = t.requests - one;
        over(Finding::new("partly_reused", Kind::Reuse, format!(
            "{over_s}: partly reused: {one} of {} carried one request each (not reused); {} carried the other {on_rest} ({:.1} per connection).",
            plural(t.connections, "connection"),
            if rest == 1 { "the other connection".to_string() } else { format!("the other {rest}") },
            on_rest as f64 / rest.max(1) as f64
        )), t)
        .with(of_connections("total.one_request_connections", one, t))
    } else {
        f(
            "reused",
            format!(
                "{over_s}: reused ({:.1} requests per connection).",
                t.requests_per_connection.mean
            ),
        )
        .with(Evidence::mean(
            "total.requests_per_connection.mean",
            t.requests_per_connection.mean,
            None,
            t.connections,
            "connections",
        ))
    }
}

/// HTTP/2: whether the client multiplexed its requests on one connection.
fn h2(t: &ClientSummary, peak_open: u64) -> Option<Finding> {
    let h = t.h2.as_ref()?;
    let conns = plural(h.connections, "HTTP/2 connection");
    let f = if h.streams > 1 && h.connections >= h.streams {
        Finding::new("h2_not_multiplexed", Kind::Reuse, format!(
            "{} over {conns}: a new HTTP/2 connection per request, so nothing is multiplexed. Reuse one client (and its connection) for all requests.",
            plural(h.streams, "stream")
        ))
    } else if h.connections > 1 && peak_open > 1 {
        Finding::new("h2_not_shared", Kind::Reuse, format!(
            "The client opened {conns} to one origin (up to {peak_open} connections at once) for {}: it does not share a connection. One HTTP/2 connection carries about 100 requests at once; share one client.",
            plural(h.streams, "stream")
        ))
        .with(Evidence::figure("peak_concurrent_connections", peak_open as f64, None, "connections open at once"))
    } else if h.streams > 0 {
        Finding::new(
            "h2_multiplexed",
            Kind::Measured,
            if h.peak_concurrent_streams > 1 {
                format!(
                    "HTTP/2: {} over {conns}, up to {} at once on one connection: multiplexed.",
                    plural(h.streams, "stream"),
                    h.peak_concurrent_streams
                )
            } else {
                format!(
                    "HTTP/2: {} over {conns}, one at a time: the connection is reused, and the client never had two requests to send at once.",
                    plural(h.streams, "stream")
                )
            },
        )
        .with(Evidence::figure(
            "total.h2.peak_concurrent_streams",
            h.peak_concurrent_streams as f64,
            None,
            "streams open at once on one connection",
        ))
    } else {
        return None;
    };
    Some(
        f.with(Evidence::figure(
            "total.h2.streams",
            h.streams as f64,
            None,
            "streams",
        ))
        .with(Evidence::figure(
            "total.h2.connections",
            h.connections as f64,
            None,
            "HTTP/2 connections",
        )),
    )
}

/// How connections ended badly: unread responses (which prevent reuse), garbage,
/// stalls, disconnections, resets, limits.
fn endings(t: &ClientSummary) -> Vec<Finding> {
    let mut v = Vec::new();
    let unread = count(&t.endings, &Ending::ClientClosedUnread);
    if unread > 0 {
        // Go's own way where the client is Go (by its User-Agent or its name).
        let go = if software(t) == "go" {
            " (in Go: read the body to EOF and close it)"
        } else {
            ""
        };
        v.push(Finding::new("client_reset_unread", Kind::Reuse, format!(
            "The client reset {} with unread response bytes left: it does not read response bodies to the end, which prevents reuse{go}.",
            plural(unread, "connection")
        )).with(of_connections("total.endings.client_closed_unread", unread, t)));
    }
    for (e, code, what) in [
        (
            Ending::Garbage,
            "garbage",
            "sent something that is not HTTP",
        ),
        (
            Ending::CertificateDistrusted,
            "certificate_distrusted",
            "refused the audit's certificate in the TLS handshake (an alert naming it: the client does not trust the audit's CA; give it the CA file that --cacert-out writes)",
        ),
        (
            Ending::TlsFailed,
            "tls_failed",
            "failed the TLS handshake (no TLS version, cipher suite or key exchange in common with the audit)",
        ),
        (
            Ending::Stalled,
            "stalled",
            "stalled inside a request past the header timeout",
        ),
        (
            Ending::CertificateDistrusted,
            "certificate_distrusted",
            "refused the audit's certificate in the TLS handshake (an alert naming it: the client does not trust the audit's CA; give it the CA file that --cacert-out writes)",
        ),
        (
            Ending::TlsFailed,
            "tls_failed",
            "failed the TLS handshake (no TLS version, cipher suite or key exchange in common with the audit)",
        ),
        (
            Ending::ClientClosedMidRequest,
            "client_closed_mid_request",
            "disconnected in the middle of a request",
        ),
        (
            Ending::ClientClosedMidResponse,
            "client_closed_mid_response",
            "disconnected while a response was being written",
        ),
        (Ending::ClientReset, "client_reset", "reset the connection"),
        (
            Ending::TooLarge,
            "too_large",
            "sent a request over the size limits (answered 431 or 413)",
        ),
        (
            Ending::OverLimit,
            "over_limit",
            "came over the connection limit (answered 503)",
        ),
    ] {
        let n = count(&t.endings, &e);
        if n > 0 {
            let cut = e == Ending::ClientClosedMidResponse && t.cut_responses.body_bytes_total > 0;
            let detail = if cut {
                format!(
                    " ({} of {} body bytes had been written)",
                    t.cut_responses.body_bytes_written, t.cut_responses.body_bytes_total
                )
            } else {
                String::new()
            };
            let mut f = Finding::new(
                code,
                Kind::Transport,
                format!("On {} the client {what}{detail}.", plural(n, "connection")),
            )
            .with(of_connections(&format!("total.endings.{code}"), n, t));
            if cut {
                f = f.with(Evidence::count(
                    "total.cut_responses.body_bytes_written",
                    t.cut_responses.body_bytes_written,
                    t.cut_responses.body_bytes_total,
                    "body bytes of the responses cut off",
                ));
            }
            v.push(f);
        }
    }
    v
}

/// The client software of `t`: what its requests' most common `User-Agent` names, else
/// its program's name.
fn software(t: &ClientSummary) -> String {
    crate::report::cause::client_software(
        &t.client,
        t.user_agents
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(ua, _)| ua.as_str()),
    )
}

/// A map's count for `k`, 0 when absent.
fn count<K: Ord>(m: &BTreeMap<K, u64>, k: &K) -> u64 {
    m.get(k).copied().unwrap_or(0)
}

/// `--proxy-mode`: what went through the audit as the client's proxy, and how the
/// requests in its tunnels were counted.
fn through_proxy(t: &ClientSummary) -> Option<Finding> {
    let p = t.proxy.as_ref()?;
    let how = if p.requests_estimated {
        " Requests inside a TLS tunnel are estimated from its records: a turn of application data from the client that the origin answered is one request; the tunnels and handshakes are counted exactly."
    } else {
        ""
    };
    let h2_tunnels: u64 = p
        .alpn_offered
        .iter()
        .filter(|(a, _)| a.split(',').any(|x| x.trim() == "h2"))
        .map(|(_, n)| n)
        .sum();
    let h2 = if p.requests_estimated && h2_tunnels > 0 {
        format!(
            " The client offered HTTP/2 in {} (which protocol the origin chose is encrypted): over HTTP/2 the connection's own frames (its preface and SETTINGS) may take a turn of their own, one more than the requests, and streams sent together take one turn between them.",
            plural(h2_tunnels, "tunnel")
        )
    } else {
        String::new()
    };
    Some(
        Finding::new(
            "through_proxy",
            Kind::Measured,
            format!(
                "As the client's forward proxy: {} ({} requests in them) and {} forwarded.{how}{h2}",
                plural(p.tunnels, "CONNECT tunnel"),
                p.tunneled_requests,
                plural(p.plain_requests, "plain request"),
            ),
        )
        .with(Evidence::figure(
            "total.proxy.tunnels",
            p.tunnels as f64,
            None,
            "tunnels",
        ))
        .with(Evidence::figure(
            "total.proxy.plain_requests",
            p.plain_requests as f64,
            None,
            "requests",
        )),
    )
}
