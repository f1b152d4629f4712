//! Why attempts failed, in words a user acts on: the leading error with one full
//! example message, a hint for the common mistakes (http:// to a TLS port, https:// to a
//! plain one, an untrusted or misnamed certificate, a name that does not resolve), and
//! the one line that says a run measured nothing. Pure: reads the report.

use super::ScenarioReport;
use crate::record::{Hop, Via};

/// The error that failed the most attempts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Leading<'a> {
    /// Its category (`connect`, `tls`, ...).
    pub kind: &'a str,
    /// Its detail (`refused`, `cert_unknown_issuer`, ...), or the category without one.
    pub key: &'a str,
    /// Attempts that failed so.
    pub count: u64,
    /// One full message of it, if one was kept.
    pub example: Option<&'a str>,
}

/// The leading error of a scenario: its most frequent category, and within it the most
/// frequent detail (a detail more frequent than the category belongs to another one).
pub(crate) fn leading(s: &ScenarioReport) -> Option<Leading<'_>> {
    let r = &s.requests;
    leading_of(
        r.errors.iter().map(|(k, n)| (k.as_str(), *n)),
        r.error_details.iter().map(|(d, n)| (d.as_str(), *n)),
        |key| r.error_examples.get(key).map(String::as_str),
    )
}

/// The leading error by [`leading`]'s rule, from counts by category and by detail (zero
/// counts allowed) and the example kept for a key: for a report, or for a run's recorder
/// before there is one (compare's probes).
pub(crate) fn leading_of<'a>(
    kinds: impl Iterator<Item = (&'a str, u64)>,
    details: impl Iterator<Item = (&'a str, u64)>,
    example: impl Fn(&str) -> Option<&'a str>,
) -> Option<Leading<'a>> {
    let (kind, kind_count) = kinds.filter(|(_, n)| *n > 0).max_by_key(|(_, n)| *n)?;
    let detail = details
        .filter(|(_, n)| *n > 0 && *n <= kind_count)
        .max_by_key(|(_, n)| *n);
    let key = detail.map_or(kind, |d| d.0);
    Some(Leading {
        kind,
        key,
        count: detail.map_or(kind_count, |d| d.1),
        example: example(key).or_else(|| example(kind)),
    })
}

/// `host:port` of a URL, for sentences.
fn authority(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split(['/', '?', '#']).next().unwrap_or(rest)
}

/// The host of an authority (`[::1]:8443` -> `[::1]`).
fn host(authority: &str) -> &str {
    match authority.rsplit_once(':') {
        Some((h, port)) if !h.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => authority,
    }
}

/// Close a sentence unless it ends in its own mark.
fn end(s: &mut String) {
    if !s.ends_with(['.', '?', '!']) {
        s.push('.');
    }
}

/// Through a forward proxy the client's own name lookup and connection are the proxy's
/// (the proxy looks up and connects to the origin): such a failure is about the proxy
/// `proxy`, and the origin was never reached. So is a certificate refused on TLS to an
/// https:// proxy (its message says "TLS to the proxy").
fn proxy_hint(url: &str, proxy: &str, key: &str, example: &str) -> Option<String> {
    let not_reached = format!("the origin {} was not reached", authority(url));
    Some(match key {
        "refused" => format!(
            "the proxy {proxy} refused the connection; {not_reached}: is the proxy running, and on this port (-x, or the proxy variables)?"
        ),
        "timeout_connect" => format!(
            "nothing answered the connection attempts to the proxy {proxy} in time; {not_reached}"
        ),
        "unreachable" => format!(
            "there is no route to the proxy {proxy}; {not_reached}"
        ),
        "timeout_wait" if !url.starts_with("https://") => format!(
            "the proxy {proxy} was sent the request, but no response came in time: the proxy, or the origin {} behind it, is stalled or slow (doctor the origin without the proxy to tell which; a longer --timeout or --wait-timeout tells slow from stalled)",
            authority(url)
        ),
        "name_not_found" | "no_address" => format!(
            "the proxy's name {} does not resolve; {not_reached}: check -x or the proxy variables",
            host(authority(proxy))
        ),
        k if k.starts_with("cert_") && example.starts_with("TLS to the proxy") => format!(
            "the certificate of the proxy {proxy} was refused ({k}); {not_reached}: give its CA with --proxy-cacert FILE, or skip verification with --proxy-insecure"
        ),
        _ => return None,
    })
}

/// The hops between the client and a URL's origin that a failure may be about: the
/// forward proxy (its URL) and the hop a connection was opened to when it was not the
/// URL's host and port (`--connect-to`, `--resolve`, `--unix-socket`, a redirect's
/// origin).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Route<'a> {
    pub proxy: Option<&'a str>,
    pub hop: Option<&'a Hop>,
}

/// A connect or lookup failure on the way to `hop`, in words that name it and the
/// address tried, never the URL's host ("nothing accepts connections at 127.0.0.1:9,
/// where --connect-to sends example.test:80: ...").
fn hop_hint(hop: &Hop, key: &str) -> Option<String> {
    let a = &hop.address;
    let origin = authority(&hop.origin);
    let (what, check) = match hop.via {
        Via::ConnectTo => (
            format!("{a}, where --connect-to sends {origin}"),
            "is the server running there, and is the --connect-to rule right?",
        ),
        Via::Resolve => (
            format!("{a}, the address --resolve gives {origin}"),
            "is the server running there, and is the --resolve address right?",
        ),
        Via::UnixSocket => (
            format!("the Unix socket {a}"),
            "is the server running, and listening on this socket? A socket's file stays behind when its server stops.",
        ),
        Via::Redirect => (
            format!("{a}, the origin {} a redirect led to", hop.origin),
            "the first origin answered: is the redirect's Location right, and its server running?",
        ),
    };
    Some(match key {
        "refused" => format!("nothing accepts connections at {what}: {check}"),
        "connect" if hop.via == Via::UnixSocket => {
            format!("{what} cannot be connected to: {check}")
        }
        "timeout_connect" => format!(
            "nothing answered the connection attempts to {what} in time: {check}"
        ),
        "timeout_wait" => format!(
            "{what} accepted the connection and was sent the request, but no response came in time: the server there is stalled or slow (a longer --timeout or --wait-timeout tells which)"
        ),
        "unreachable" => format!("there is no route to {what}"),
        "name_not_found" | "no_address" => match hop.via {
            Via::ConnectTo => format!(
                "the name {} that --connect-to sends {origin} to does not resolve: check the rule, or give an address",
                host(a)
            ),
            Via::Redirect => format!(
                "the name {} of the origin {} a redirect led to does not resolve: the first origin answered; is the redirect's Location right?",
                host(origin),
                hop.origin
            ),
            _ => return None,
        },
        _ => return None,
    })
}

/// The hint where a server asked for a client certificate in the handshake, none was
/// sent, and the connection then failed (with an alert, or without a word).
pub(crate) const NO_CLIENT_CERTIFICATE: &str = "the server asked for a client certificate in the handshake and none was sent, and a server that requires one ends the connection: give one with --cert FILE --key FILE";

/// What to do about the error `key` (with its `example`) against `url`, reached by
/// `route` (through a forward proxy, or to another hop than the URL's host and port),
/// for the common mistakes; `None` where there is nothing better to say than the
/// message. A failure on the way to the proxy names the proxy, and one on the way to
/// another hop names that hop and the address tried, never the URL's host.
pub(crate) fn hint(url: &str, route: Route<'_>, key: &str, example: &str) -> Option<String> {
    if let Some(h) = route.proxy.and_then(|p| proxy_hint(url, p, key, example)) {
        return Some(h);
    }
    if let Some(h) = route.hop.and_then(|h| hop_hint(h, key)) {
        return Some(h);
    }
    // TLS and HTTP are the origin's own: a redirect's origin, where one failed.
    let url = route.hop.map_or(url, |h| h.origin.as_str());
    let https = url.starts_with("https://");
    let at = authority(url);
    Some(match key {
        "refused" => format!(
            "nothing accepts connections at {at}: is the server running, and on this port?"
        ),
        "not_tls" => format!(
            "the server at {at} does not speak TLS: try http:// instead of https://"
        ),
        "bad_version" if example.contains("TLS record") => format!(
            "the server at {at} speaks TLS: try https:// instead of http://"
        ),
        "bad_version" if example.contains("an HTTP/2 frame") => format!(
            "the server at {at} speaks only HTTP/2 here ({}): run with --strategy h2",
            if https { "its ALPN did not agree on http/1.1" } else { "h2c, by prior knowledge" }
        ),
        "empty_reply" | "eof_in_head" if !https => format!(
            "the server at {at} closed without answering: if it speaks TLS, try https://"
        ),
        "cert_unknown_issuer" => format!(
            "give the CA that signed the server's certificate with --cacert FILE (for a self-signed certificate, the certificate itself; `openssl s_client -connect {at} -showcerts </dev/null` prints what the server sends); or, second best, skip verification with --insecure"
        ),
        // Alerts from a server that asks for a client certificate: one it requires and
        // was not sent (TLS 1.3 says so after the client's Finished), or one it refused.
        "tls" | "alert_received" if example.contains("CertificateRequired") => format!(
            "the server at {at} requires a client certificate and ended the connection without one (a certificate_required alert): give one with --cert FILE --key FILE"
        ),
        "tls" | "alert_received" if example.contains("UnknownCA") || example.contains("BadCertificate") => format!(
            "the server at {at} refused the client certificate sent (--cert): it does not trust the CA that signed it, or finds it invalid (its own log says which)"
        ),
        "cert_wrong_name" => format!(
            "the certificate does not name {}: use a name it covers (with --resolve NAME:PORT:ADDR to reach this address by it), or skip verification with --insecure",
            host(at)
        ),
        "cert_expired" | "cert_not_yet_valid" => "the certificate is outside its validity period (or this machine's clock is wrong); --insecure skips verification".into(),
        "cert_invalid" => "the certificate was refused; --insecure skips verification".into(),
        "h2c_refused" => "the server does not speak HTTP/2 over cleartext (h2c prior knowledge) here: use --strategy keepalive for HTTP/1.1, or https:// where it offers h2 by ALPN (nginx: `listen PORT http2` turns h2c on)".into(),
        "alpn_mismatch" => "the server takes none of the protocols offered by ALPN: try another --strategy (h2 needs a server that offers h2)".into(),
        "name_not_found" | "no_address" => format!(
            "the name {} does not resolve: check its spelling, or give its address with --resolve NAME:PORT:ADDR",
            host(at)
        ),
        "timeout_connect" => format!(
            "nothing answered the connection attempts to {at} in time: a filtered port or a wrong address (--timeout, --connect-timeout)"
        ),
        "timeout_tls" => format!(
            "{at} accepted the TCP connection but did not finish the TLS handshake in time: does it speak TLS on this port, or is it overloaded?"
        ),
        "timeout_wait" => format!(
            "{at} accepted the connection and was sent the request, but no response came in time: the server is stalled or slow (a longer --timeout or --wait-timeout tells which)"
        ),
        "timeout_receive" => format!(
            "{at} began its response but did not finish it in time: the server (or what it streams from) stalled mid-response"
        ),
        "quic_timeout" => format!(
            "nothing answered QUIC at {at} (UDP): does the server speak HTTP/3 on this port?"
        ),
        "ports_exhausted" => "the client ran out of local ports: keep connections alive, or spread them over --local-addr ADDR,ADDR...".into(),
        "too_many_open_files" => "the client ran out of file descriptors: raise ulimit -n, or use fewer connections".into(),
        _ => return None,
    })
}

/// `head` then the leading error's message and (when `hinted`) its hint, as sentences.
fn with_message_and_hint(
    s: &ScenarioReport,
    l: &Leading<'_>,
    head: String,
    hinted: bool,
) -> String {
    let mut line = head;
    if let Some(m) = l.example {
        line.push_str(&format!(": {m}"));
    }
    end(&mut line);
    let route = Route {
        proxy: s.connections.proxy.as_ref().map(|p| p.url.as_str()),
        hop: s.requests.error_hops.get(l.key),
    };
    if let Some(h) = hint(&s.url, route, l.key, l.example.unwrap_or("")).filter(|_| hinted) {
        line.push_str(&format!(" Hint: {h}"));
        end(&mut line);
    }
    line
}

/// `connect (refused)`, or the category alone where it has no detail.
fn name(l: &Leading<'_>) -> String {
    if l.key == l.kind {
        l.kind.to_string()
    } else {
        format!("{} ({})", l.kind, l.key)
    }
}

/// One sentence on the leading error: how many attempts it failed, its example
/// message and a hint. `None` without errors.
pub(crate) fn leading_sentence(s: &ScenarioReport) -> Option<String> {
    let l = leading(s)?;
    let head = format!(
        "{} of {} attempts failed with {}",
        l.count,
        s.requests.attempted,
        name(&l)
    );
    Some(with_message_and_hint(s, &l, head, true))
}

/// For the diagnosis, beside the count of errors by category: the leading error's
/// message and (when `hinted`) its hint ("Leading error: connect (refused): Connection
/// refused (os error 111). Hint: ...").
pub(crate) fn example_sentence(s: &ScenarioReport, hinted: bool) -> Option<String> {
    let l = leading(s)?;
    let head = format!("Leading error: {}", name(&l));
    Some(with_message_and_hint(s, &l, head, hinted))
}

/// A run that measured nothing has failed: the line to print when no request
/// succeeded, naming the leading error, or when no response was a success (2xx, 3xx, or
/// a status in `accepted`), naming the status most had. `None` when some request did.
pub(crate) fn no_success_line(s: &ScenarioReport, accepted: &[(u16, u16)]) -> Option<String> {
    if s.requests.final_answers() > 0 {
        return no_success_status(s, accepted);
    }
    Some(match leading_sentence(s) {
        Some(why) => format!("{}: no request succeeded: {why}", s.name),
        None if s.requests.attempted == 0 => format!(
            "{}: no request succeeded: none was attempted (the run ended before the first)",
            s.name
        ),
        None => format!("{}: no request succeeded", s.name),
    })
}

/// "close: no response was a success: 10 of 10 were 400 (add --ok-status 4xx if these
/// are what you meant to measure)", when none was ok (2xx, 3xx or accepted), the
/// redirects `-L` followed left out (a hop on the way, not an answer).
fn no_success_status(s: &ScenarioReport, accepted: &[(u16, u16)]) -> Option<String> {
    let r = &s.requests;
    if r.final_ok() > 0 {
        return None;
    }
    let (code, n) = r
        .status_codes
        .iter()
        .filter(|(c, _)| {
            c.parse::<u16>()
                .is_ok_and(|c| !crate::record::status::is_ok(c, accepted))
        })
        .max_by_key(|(c, n)| (**n, std::cmp::Reverse((*c).clone())))?;
    let said = r
        .status_examples
        .get(code)
        .map(|m| format!(" ({m})"))
        .unwrap_or_default();
    let class = code.chars().next().unwrap_or('4');
    Some(format!(
        "{}: no response was a success: {n} of {} were {code}{said}; a run with no 2xx or 3xx response fails (--ok-status {class}xx counts them as successes)",
        s.name,
        r.final_answers()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_the_common_mistakes() {
        let h = |url, key, ex| hint(url, Route::default(), key, ex).unwrap_or_default();
        assert!(h("http://127.0.0.1:1/", "refused", "").contains("127.0.0.1:1"));
        assert!(h("https://127.0.0.1:8080/", "not_tls", "").contains("http://"));
        assert!(h(
            "http://127.0.0.1:8443/",
            "bad_version",
            "the server answered with a TLS record"
        )
        .contains("https://"));
        assert_eq!(
            hint(
                "http://x/",
                Route::default(),
                "bad_version",
                "invalid response head"
            ),
            None
        );
        assert!(h("https://a:1/", "cert_unknown_issuer", "").contains("--cacert"));
        assert!(h("https://localhost:8443/x", "cert_wrong_name", "").contains("name localhost"));
        assert!(h("http://nosuch.invalid/", "name_not_found", "").contains("--resolve"));
    }

    #[test]
    fn through_a_proxy_a_connect_or_lookup_failure_names_the_proxy_not_the_origin() {
        let p = Route {
            proxy: Some("http://127.0.0.1:13999"),
            hop: None,
        };
        let h = |key, ex| hint("https://localhost:8443/", p, key, ex).unwrap_or_default();
        assert_eq!(
            h("refused", ""),
            "the proxy http://127.0.0.1:13999 refused the connection; the origin localhost:8443 was not reached: is the proxy running, and on this port (-x, or the proxy variables)?"
        );
        let named = hint(
            "http://o/",
            Route {
                proxy: Some("http://proxy.invalid:3128"),
                hop: None,
            },
            "no_address",
            "",
        );
        assert!(named.unwrap().starts_with(
            "the proxy's name proxy.invalid does not resolve; the origin o was not reached"
        ));
        let cert = h(
            "cert_unknown_issuer",
            "TLS to the proxy https://p:3129: invalid peer certificate",
        );
        assert!(
            cert.contains("--proxy-cacert") && !cert.contains(" --cacert"),
            "{cert}"
        );
        // The origin's own certificate, through the tunnel: the origin's hint.
        assert!(h(
            "cert_unknown_issuer",
            "invalid peer certificate: UnknownIssuer"
        )
        .contains("--cacert FILE"));
    }
}
