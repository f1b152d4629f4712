//! What the status codes say: the successes, the leading error status and whether
//! most responses were errors (said first, with the server's own words), redirects.

use crate::report::finding::{Cause, Evidence, Finding};
use crate::report::raw::ClientCertificate;
use crate::stats::recorder::Recorder;

/// Responses whose status is ok (2xx, 3xx, or one `--ok-status` accepts), the redirects
/// `-L` followed left out (a hop on the way, not an answer).
fn successes(rec: &Recorder) -> u64 {
    rec.ok() - rec.counts.redirects
}

/// Answered requests, the redirects `-L` followed left out.
fn answered(rec: &Recorder) -> u64 {
    rec.counts.answered - rec.counts.redirects
}

/// The status most error responses (4xx, 5xx) had, and how many had it.
fn leading_error_status(rec: &Recorder) -> Option<(u16, u64)> {
    (400..600)
        .map(|c| (c as u16, rec.status[c]))
        .filter(|(_, n)| *n > 0)
        .max_by_key(|(c, n)| (*n, std::cmp::Reverse(*c)))
}

/// When most responses were 4xx or 5xx: which status, what the server said, and its
/// likely cause (offered before any protocol or reuse finding: a run answered with errors
/// measured the server's error path).
pub(super) fn status_finding(
    rec: &Recorder,
    url: &str,
    client_cert: Option<&ClientCertificate>,
) -> Option<Finding> {
    let ok = answered(rec);
    // 4xx and 5xx are HTTP's errors whatever the user counts as ok; those it counts are
    // said to be.
    let failing: u64 = rec.status[400..600].iter().sum();
    let accepted = failing - failing.min(rec.error_status());
    if ok == 0 || failing * 2 <= ok {
        return None;
    }
    let (code, n) = leading_error_status(rec)?;
    let said = rec.status_examples.get(&code);
    let retry = match rec.retry_after_s {
        Some(s) if matches!(code, 429 | 503) => format!(" (it sent Retry-After: {s} s)"),
        _ => String::new(),
    };
    let plain_to_tls = said.is_some_and(|m| m.contains("HTTPS port"));
    let certificate = (code == 400)
        .then(|| client_cert.and_then(ClientCertificate::cause_of_a_400))
        .flatten();
    let cause = match code {
        _ if certificate.is_some() => certificate.clone().unwrap_or_default(),
        _ if plain_to_tls && url.starts_with("http://") => {
            "the port speaks TLS: use https:// (with --cacert FILE for a private CA)".to_string()
        }
        401 => "the server wants credentials: send them with -H 'Authorization: ...'".to_string(),
        407 => "a proxy wants credentials: give them in the proxy's URL (-x http://USER:PASSWORD@HOST:PORT, or in http_proxy / HTTPS_PROXY)".to_string(),
        403 => "the server refuses this client or these credentials: check -H 'Authorization: ...' and what the path allows".to_string(),
        404 | 410 => "the path does not exist on this server: check the URL's path".to_string(),
        405 => "the method is not allowed on this path: check -m/--method".to_string(),
        400 | 411 | 413 | 415 | 422 => "the server would not take the request as sent: check the method, -H headers and the body".to_string(),
        429 => format!("the server is shedding load (rate limiting){retry}: lower --rate or -c"),
        502 | 504 => "a proxy in front of the server got no good answer from its upstream: check the upstream and the proxy's log".to_string(),
        503 => format!("the server is shedding load or unavailable{retry}: lower --rate or -c, or check the server"),
        500..=599 => "the server failed: its own log says why".to_string(),
        _ => "the server refused the requests".to_string(),
    };
    let success = successes(rec);
    let none_ok = match (success, rec.ok_status.is_empty()) {
        (0, true) => ", none 2xx or 3xx",
        (0, false) => ", none 2xx, 3xx or of --ok-status",
        _ => "",
    };
    let words = said.map(|m| format!(" It said: {m}.")).unwrap_or_default();
    let text = format!(
        "Most responses were errors: {n} of {ok} were {code}{}, {failing} were 4xx or 5xx in all{none_ok}{}: {cause}.{words} The latencies are those of the error responses.",
        reason_phrase(code).map(|r| format!(" ({r})")).unwrap_or_default(),
        if accepted > 0 {
            format!(" ({accepted} counted as ok by --ok-status)")
        } else {
            String::new()
        },
    );
    Some(
        Finding::new(
            if success == 0 {
                "no_success_status"
            } else {
                "mostly_error_status"
            },
            Cause::Status,
            text,
        )
        .explaining(true)
        .with(Evidence::count(
            &format!("requests.status_codes.{code}"),
            n,
            ok,
            "responses",
        ))
        .with(Evidence::count(
            "requests.status_classes.4xx+5xx",
            failing,
            ok,
            "responses",
        ))
        .with(Evidence::count("requests.ok", success, ok, "responses"))
        .with_all(certificate.and(client_cert).into_iter().flat_map(|cc| {
            let asked = "connections.tls_handshakes.client_certificate";
            [
                Evidence::count(
                    &format!("{asked}.requested"),
                    cc.requested,
                    cc.requested,
                    "full TLS handshakes",
                ),
                Evidence::count(
                    &format!("{asked}.presented"),
                    cc.presented,
                    cc.requested,
                    "full TLS handshakes",
                ),
            ]
        })),
    )
}

/// When most responses were redirects not followed (no `-L`, or a 3xx that `-L` does not
/// follow): the run measured the redirect, not the page it points to. Where it points,
/// from the first one.
pub(super) fn redirect_finding(rec: &Recorder) -> Option<Finding> {
    let ok = answered(rec);
    let redirects: u64 = rec.status[300..400].iter().sum::<u64>() - rec.counts.redirects;
    if ok == 0 || redirects * 2 <= ok {
        return None;
    }
    // With -L the statuses it follows were followed: the others are the answers.
    let following = rec.counts.redirects > 0;
    let (code, n) = (300..400)
        .map(|c| (c as u16, rec.status[c]))
        .filter(|(c, _)| !(following && crate::proto::is_redirect(*c)))
        .max_by_key(|(c, n)| (*n, std::cmp::Reverse(*c)))?;
    let to = rec
        .status_examples
        .get(&code)
        .and_then(|m| crate::record::notes::redirect_target(m));
    let text = format!(
        "Most responses were redirects, not followed: {n} of {ok} were {code}{}{}: the figures are those of the redirect. Measure the URL it points to, or follow redirects with -L (301, 302, 303, 307 and 308; each hop is then a request of its own).",
        reason_phrase(code).map(|r| format!(" ({r})")).unwrap_or_default(),
        to.map(|t| format!(" to {t}")).unwrap_or_default(),
    );
    Some(
        Finding::new("mostly_redirects", Cause::Status, text)
            .explaining(true)
            .with(Evidence::count(
                &format!("requests.status_codes.{code}"),
                n,
                ok,
                "responses",
            )),
    )
}

/// Answers seen from the server's side (audit, watch) when most were errors: "3 of 3
/// were 404 (Not Found), 3 were 4xx or 5xx in all", with the counts it stands on
/// (`at`: the figures' place in the report, `total` or `endpoints[ADDR]`). `None` when
/// at most half were errors.
pub(crate) fn mostly_errors(
    codes: &std::collections::BTreeMap<String, u64>,
    responses: u64,
    at: &str,
) -> Option<(String, Vec<Evidence>)> {
    let errors = || codes.iter().filter(|(c, _)| c.as_str() >= "400");
    let failing: u64 = errors().map(|(_, n)| n).sum();
    if responses == 0 || failing * 2 <= responses {
        return None;
    }
    let (code, n) = errors().max_by_key(|(c, n)| (**n, std::cmp::Reverse(c.as_str())))?;
    let reason = code
        .parse()
        .ok()
        .and_then(reason_phrase)
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    Some((
        format!("{n} of {responses} were {code}{reason}, {failing} were 4xx or 5xx in all"),
        vec![
            Evidence::count(
                &format!("{at}.status_codes.{code}"),
                *n,
                responses,
                "responses",
            ),
            Evidence::count(
                &format!("{at}.status_codes 4xx+5xx"),
                failing,
                responses,
                "responses",
            ),
        ],
    ))
}

fn reason_phrase(code: u16) -> Option<&'static str> {
    Some(match code {
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
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
