//! The audit's verdict: plain sentences with the likely cause and the fix.

use std::collections::BTreeMap;

use crate::fmt::plural_s as plural;
use crate::report::audit::{ClientSummary, Ending};

/// The fix for nginx as a reverse proxy that opens an upstream connection per request:
/// it speaks HTTP/1.0 upstream and sends `Connection: close` unless told otherwise.
const NGINX_UPSTREAM_FIX: &str = "If the client is nginx (its default is `proxy_http_version 1.0` with `Connection: close`), set `proxy_http_version 1.1;` and `proxy_set_header Connection \"\";` where it proxies, and `keepalive 16;` in its `upstream` block.";

/// Plain sentences: what the client does with connections, the likely cause, the fix.
/// `peak_open`: the most client connections open at once.
pub fn verdict(t: &ClientSummary, peak_open: u64) -> Vec<String> {
    let mut v = reuse(t);
    v.extend(h2(t, peak_open));
    if t.unused_connections > 0 && t.requests > 0 {
        v.push(format!(
            "{} carried no request (opened, then closed or left unused): a client that dials ahead, or several at once before its first is up (Go's HTTP/2 transport does when many requests start together).",
            plural(t.unused_connections, "connection")
        ));
    }
    let tls = t.tls_handshakes;
    if tls.full + tls.resumed > 1 {
        v.push(if tls.resumed == 0 {
            format!(
                "TLS: all {} handshakes were full: the client does not resume sessions, so each new connection pays the full handshake.",
                tls.full
            )
        } else {
            format!("TLS: {} of {} handshakes resumed a session.", tls.resumed, tls.full + tls.resumed)
        });
    }
    v.extend(endings(t));
    if t.responses < t.requests {
        v.push(format!(
            "{} of {} requests got no complete response.",
            t.requests - t.responses,
            t.requests
        ));
    }
    v
}

/// Whether the client reused its connections, and when not, the likely cause and fix.
fn reuse(t: &ClientSummary) -> Vec<String> {
    let mut v = Vec::new();
    if t.requests == 0 {
        v.push(format!(
            "No request was seen ({}).",
            plural(t.connections, "connection")
        ));
    } else if t.connections >= t.requests && t.requests > 1 {
        v.push(format!(
            "{} over {}: no reuse.",
            plural(t.requests, "request"),
            plural(t.connections, "connection")
        ));
        v.extend(no_reuse_cause(t).and_then(|c| c.sentence));
    } else if t.requests == 1 {
        v.push(format!(
            "1 request over {}: one request cannot show reuse. Run the client with two or more requests in one process (for example `curl URL URL`) to see whether it keeps its connection.",
            plural(t.connections, "connection")
        ));
        if count(&t.connection_headers, &"close".to_string()) == 1 {
            v.push(
                "The client sent `Connection: close`: it would not reuse the connection.".into(),
            );
        }
    } else if t.connections < t.requests {
        v.push(format!(
            "{} over {}: connections are reused ({:.1} requests per connection).",
            plural(t.requests, "request"),
            plural(t.connections, "connection"),
            t.requests_per_connection.mean
        ));
    }
    v
}

/// Why a client opened a connection per request: in a few words (the headline's
/// "because …") and, when the endings do not already say it, in full with its fix.
struct Cause {
    because: &'static str,
    sentence: Option<String>,
}

/// The cause of no reuse, read from the client's requests' headers and how its
/// connections ended; `None` when nothing says why.
fn no_reuse_cause(t: &ClientSummary) -> Option<Cause> {
    let close = count(&t.connection_headers, &"close".to_string());
    let v10 = count(&t.http_versions, &"HTTP/1.0".to_string());
    let ka = count(&t.connection_headers, &"keep-alive".to_string());
    let unread = count(&t.endings, &Ending::ClientClosedUnread);
    let cause = |because: &'static str, sentence: String| {
        Some(Cause {
            because,
            sentence: Some(sentence),
        })
    };
    if close == t.requests && v10 == t.requests {
        cause("the client sent HTTP/1.0 with `Connection: close` on every request", format!("The client sent HTTP/1.0 requests with `Connection: close` on every request: what nginx sends to an upstream by default. {NGINX_UPSTREAM_FIX}"))
    } else if close == t.requests && t.forwarded_requests > 0 {
        cause("a proxy sent `Connection: close` on every request", format!("The client sent `Connection: close` on every request, and its requests carry a proxy's headers (Via, Forwarded, X-Forwarded-For or X-Real-IP): a proxy that closes its upstream connections. {NGINX_UPSTREAM_FIX} In HAProxy, drop `option httpclose` and `option http-server-close`."))
    } else if close == t.requests {
        cause(
            "the client sent `Connection: close` on every request",
            "The client sent `Connection: close` on every request.".into(),
        )
    } else if v10 == t.requests && ka == 0 {
        cause(
            "the client sent HTTP/1.0 without `Connection: keep-alive`",
            "The client sent HTTP/1.0 requests without `Connection: keep-alive`.".into(),
        )
    } else if unread * 2 >= t.connections {
        // Said in full with the endings.
        Some(Cause {
            because: "the client reset its connections with response bytes unread",
            sentence: None,
        })
    } else if count(&t.endings, &Ending::ClientClosed) * 2 >= t.connections {
        cause("the client closed each connection itself after one response", "The client closed each connection itself after one response, without asking the server to (no `Connection: close`): it does not pool connections (for example Node's `agent: false`, or a new client per request). Reuse one client with keep-alive.".into())
    } else {
        None
    }
}

/// The verdict in one sentence: "N requests over M connections: reused (x per
/// connection)", or "not reused, because …" with the cause when one is read.
pub fn headline(t: &ClientSummary) -> String {
    let over = format!(
        "{} over {}",
        plural(t.requests, "request"),
        plural(t.connections, "connection")
    );
    if t.requests == 0 {
        format!(
            "No request was seen ({}).",
            plural(t.connections, "connection")
        )
    } else if t.requests == 1 {
        format!("{over}: one request cannot show reuse.")
    } else if t.connections >= t.requests {
        match no_reuse_cause(t) {
            Some(c) => format!("{over}: not reused, because {}.", c.because),
            None => format!("{over}: not reused; what the client sent does not say why."),
        }
    } else if t.one_request_connections > 0 {
        // Some connections were reused and others carried one request each: both said,
        // so a mean does not hide the one-shot ones.
        let one = t.one_request_connections;
        let rest = t.connections - one - t.unused_connections.min(t.connections - one);
        let on_rest = t.requests - one;
        format!(
            "{over}: partly reused: {one} of {} carried one request each (not reused); {} carried the other {on_rest} ({:.1} per connection).",
            plural(t.connections, "connection"),
            if rest == 1 { "the other connection".to_string() } else { format!("the other {rest}") },
            on_rest as f64 / rest.max(1) as f64
        )
    } else {
        format!(
            "{over}: reused ({:.1} requests per connection).",
            t.requests_per_connection.mean
        )
    }
}

/// HTTP/2: whether the client multiplexed its requests on one connection.
fn h2(t: &ClientSummary, peak_open: u64) -> Option<String> {
    let h = t.h2.as_ref()?;
    let conns = plural(h.connections, "HTTP/2 connection");
    if h.streams > 1 && h.connections >= h.streams {
        Some(format!(
            "{} over {conns}: a new HTTP/2 connection per request, so nothing is multiplexed. Reuse one client (and its connection) for all requests.",
            plural(h.streams, "stream")
        ))
    } else if h.connections > 1 && peak_open > 1 {
        Some(format!(
            "The client opened {conns} to one origin (up to {peak_open} connections at once) for {}: it does not share a connection. One HTTP/2 connection carries about 100 requests at once; share one client.",
            plural(h.streams, "stream")
        ))
    } else if h.streams > 0 {
        Some(format!(
            "HTTP/2: {} over {conns}, up to {} at once on one connection: multiplexed.",
            plural(h.streams, "stream"),
            h.peak_concurrent_streams
        ))
    } else {
        None
    }
}

/// How connections ended badly: unread responses (which prevent reuse), garbage,
/// stalls, disconnections, resets, limits.
fn endings(t: &ClientSummary) -> Vec<String> {
    let mut v = Vec::new();
    let unread = count(&t.endings, &Ending::ClientClosedUnread);
    if unread > 0 {
        v.push(format!(
            "The client reset {} with unread response bytes left: it does not read response bodies to the end, which prevents reuse (in Go: read the body to EOF and close it).",
            plural(unread, "connection")
        ));
    }
    for (e, what) in [
        (Ending::Garbage, "sent something that is not HTTP"),
        (
            Ending::Stalled,
            "stalled inside a request past the header timeout",
        ),
        (
            Ending::ClientClosedMidRequest,
            "disconnected in the middle of a request",
        ),
        (
            Ending::ClientClosedMidResponse,
            "disconnected while a response was being written",
        ),
        (Ending::ClientReset, "reset the connection"),
        (
            Ending::TooLarge,
            "sent a request over the size limits (answered 431 or 413)",
        ),
        (
            Ending::OverLimit,
            "came over the connection limit (answered 503)",
        ),
    ] {
        let n = count(&t.endings, &e);
        if n > 0 {
            let detail =
                if e == Ending::ClientClosedMidResponse && t.cut_responses.body_bytes_total > 0 {
                    format!(
                        " ({} of {} body bytes had been written)",
                        t.cut_responses.body_bytes_written, t.cut_responses.body_bytes_total
                    )
                } else {
                    String::new()
                };
            v.push(format!(
                "On {} the client {what}{detail}.",
                plural(n, "connection")
            ));
        }
    }
    v
}

/// A map's count for `k`, 0 when absent.
fn count<K: Ord>(m: &BTreeMap<K, u64>, k: &K) -> u64 {
    m.get(k).copied().unwrap_or(0)
}
