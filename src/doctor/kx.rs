//! The doctor's key-exchange probes: which groups the server accepts (each offered
//! alone), which it prefers (offered post-quantum first as browsers do, and x25519
//! first), whether an offer costs a HelloRetryRequest, and what each handshake takes;
//! then the sentences said about them.

use rustls::crypto::SupportedKxGroup;

use crate::fmt::ms as fmt_ms;
use crate::net::tls;
use crate::plan::build::RequestConfig;
use crate::plan::Scenario;
use crate::probe;
use crate::record::kx_group_name;
pub(crate) use crate::report::doctor::{GroupProbe, KeyExchangeFindings, OfferProbe};
use crate::report::finding::{Cause, Evidence, Finding};

/// Full handshakes timed per group and per offer.
const SAMPLES: usize = 3;
/// The post-quantum hybrid browsers, Go and Cloudflare prefer.
const POST_QUANTUM: &str = "X25519MLKEM768";
const CLASSICAL: &str = "x25519";

/// What `SAMPLES` new connections offering `groups` saw, each with a request: the group
/// agreed on, whether a HelloRetryRequest came, the median handshake, the ClientHello's
/// and the server's first flight's bytes; or the first failure's message.
struct Seen {
    chosen: Option<String>,
    retry: bool,
    handshake_ms: Option<f64>,
    client_hello_bytes: Option<u32>,
    server_flight_bytes: Option<u64>,
    error: Option<String>,
}

async fn handshakes(
    sc: &Scenario,
    req: &RequestConfig,
    groups: Vec<&'static dyn SupportedKxGroup>,
) -> Seen {
    let mut seen = Seen {
        chosen: None,
        retry: false,
        handshake_ms: None,
        client_hello_bytes: None,
        server_flight_bytes: None,
        error: None,
    };
    let opts = tls::TlsOptions {
        alpn: vec![b"http/1.1".to_vec()],
        groups: Some(groups),
        ..req.tls.clone()
    };
    let cfg = match tls::client_config(&opts, false) {
        Ok(c) => c,
        Err(e) => {
            seen.error = Some(format!("{e:#}"));
            return seen;
        }
    };
    let mut times = Vec::new();
    for _ in 0..SAMPLES {
        match probe::open(&sc.origins[0], Some(&cfg), sc.timeout, &sc.dns).await {
            Ok(mut o) => {
                times.push(o.tls.unwrap_or_default().as_secs_f64() * 1000.0);
                // A request on it, so the group is seen to carry one (its failure is not
                // the key exchange's).
                let t = &sc.targets[0];
                let head = t.template.is_head();
                let _ = probe::exchange(&mut o.conn, &t.request, head, sc.timeout).await;
                if let Some(i) = o.tls_info {
                    seen.chosen = i.key_exchange.or(seen.chosen);
                    seen.retry |= i.hello_retry_request == Some(true);
                    seen.client_hello_bytes = i.client_hello_bytes.or(seen.client_hello_bytes);
                    seen.server_flight_bytes = i.server_flight_bytes.or(seen.server_flight_bytes);
                }
            }
            Err(e) => {
                seen.error = Some(e.message);
                seen.chosen = None;
                return seen;
            }
        }
    }
    seen.handshake_ms = Some(median(&times));
    seen
}

/// The groups in the order given, by name (`tls::groups`' first names).
fn named(names: &[&str]) -> Vec<&'static dyn SupportedKxGroup> {
    names
        .iter()
        .filter_map(|n| {
            tls::groups()
                .into_iter()
                .find(|(names, _)| names[0] == *n)
                .map(|(_, g)| g)
        })
        .collect()
}

fn report_name(g: &'static dyn SupportedKxGroup) -> String {
    kx_group_name(u16::from(g.name()))
}

async fn offer(sc: &Scenario, req: &RequestConfig, names: &[&str]) -> OfferProbe {
    let groups = named(names);
    let offered = groups.iter().map(|g| report_name(*g)).collect();
    let seen = handshakes(sc, req, groups).await;
    OfferProbe {
        offered,
        chosen: seen.chosen,
        hello_retry_request: seen.retry,
        handshake_ms: seen.handshake_ms,
        client_hello_bytes: seen.client_hello_bytes,
        error: seen.error,
    }
}

/// Probe the key exchange: every group alone, then the two offers of several.
pub(super) async fn probe(sc: &Scenario, req: &RequestConfig) -> KeyExchangeFindings {
    let mut groups = Vec::new();
    for (_, g) in tls::groups() {
        let seen = handshakes(sc, req, vec![g]).await;
        groups.push(GroupProbe {
            group: report_name(g),
            accepted: seen.error.is_none(),
            handshake_ms: seen.handshake_ms,
            client_hello_bytes: seen.client_hello_bytes,
            server_flight_bytes: seen.server_flight_bytes,
            error: seen.error,
        });
    }
    let browsers = ["x25519mlkem768", "x25519", "secp256r1", "secp384r1"];
    let classical = ["x25519", "x25519mlkem768", "secp256r1", "secp384r1"];
    KeyExchangeFindings {
        groups,
        post_quantum_first: offer(sc, req, &browsers).await,
        classical_first: offer(sc, req, &classical).await,
    }
}

/// Groups the server accepted offered alone, of those offered.
fn accepted(n: usize, of: usize) -> Evidence {
    Evidence::count(
        "tls.key_exchange.groups.accepted",
        n as u64,
        of as u64,
        "groups offered one at a time",
    )
}

fn group<'a>(k: &'a KeyExchangeFindings, name: &str) -> Option<&'a GroupProbe> {
    k.groups.iter().find(|g| g.group == name)
}

/// What the probes say: which groups are accepted and what each took, which the server
/// prefers, and a problem when the browsers' offer costs a HelloRetryRequest. Under TLS
/// 1.2 (`tls12`) there are no key shares, post-quantum groups are not possible, and a
/// group offered alone is also the only curve an ECDSA certificate may use: said so.
pub(super) fn judge(
    k: &KeyExchangeFindings,
    tls12: bool,
    findings: &mut Vec<Finding>,
    problems: &mut Vec<Finding>,
) {
    let (yes, no): (Vec<&GroupProbe>, Vec<&GroupProbe>) = k.groups.iter().partition(|g| g.accepted);
    let names = |v: &[&GroupProbe]| {
        v.iter()
            .map(|g| g.group.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if yes.is_empty() {
        findings.push(
            Finding::new(
                "kx_none_accepted",
                Cause::Tls,
                format!(
                    "Key exchange: the server accepted none of {} offered alone (the first said: {}).",
                    names(&no),
                    no.first()
                        .and_then(|g| g.error.as_deref())
                        .unwrap_or("no reason")
                ),
            )
            .with(accepted(0, no.len())),
        );
    } else {
        let refused = if no.is_empty() {
            String::new()
        } else {
            format!(", not {}", names(&no))
        };
        let times: Vec<String> = yes
            .iter()
            .map(|g| format!("{} {} ms", g.group, fmt_ms(g.handshake_ms.unwrap_or(0.0))))
            .collect();
        let tls12_note = if tls12 && !no.is_empty() {
            " (TLS 1.2: post-quantum groups are TLS 1.3's, and a group offered alone is also the only curve an ECDSA certificate may use, so a refusal can be the certificate's)"
        } else {
            ""
        };
        let mut f = Finding::new("kx_groups", Cause::Measured, format!(
            "Key exchange: offered one group at a time, the server accepts {}{refused}{tls12_note}; a full handshake took {} (medians of {SAMPLES}).",
            names(&yes),
            times.join(", ")
        ))
        .with(accepted(yes.len(), yes.len() + no.len()));
        for g in &yes {
            if let Some(ms) = g.handshake_ms {
                f = f.with(Evidence::mean_ms(
                    &format!("tls.key_exchange.groups[{}].handshake_ms", g.group),
                    ms,
                    SAMPLES as u64,
                    "full handshakes (median)",
                ));
            }
        }
        findings.push(f);
    }
    preference(k, tls12, findings);
    let pq = &k.post_quantum_first;
    if let (true, Some(chosen)) = (pq.hello_retry_request, &pq.chosen) {
        let alone = group(k, chosen)
            .and_then(|g| g.handshake_ms)
            .map(|ms| format!(", {} ms offered {chosen} alone", fmt_ms(ms)))
            .unwrap_or_default();
        problems.push(Finding::new("kx_hello_retry", Cause::Tls, format!(
            "Offering {POST_QUANTUM} and {CLASSICAL} first, as browsers and Go do, costs a HelloRetryRequest here: the server takes neither share and asks for {chosen}, one more round trip on every full handshake (a handshake took {} ms offered that way{alone}). Accept {CLASSICAL} (and {POST_QUANTUM}) on the server.",
            fmt_ms(pq.handshake_ms.unwrap_or(0.0))
        )).with(Evidence::figure(
            "tls.key_exchange.post_quantum_first.handshake_ms",
            pq.handshake_ms.unwrap_or(0.0),
            Some("ms"),
            "a full handshake offering the browsers' groups",
        )));
    }
}

/// Which group the server prefers, from the two offers of several.
fn preference(k: &KeyExchangeFindings, tls12: bool, findings: &mut Vec<Finding>) {
    let (pq, cl) = (&k.post_quantum_first, &k.classical_first);
    let (Some(p), Some(c)) = (&pq.chosen, &cl.chosen) else {
        if let Some(e) = pq.error.as_ref().or(cl.error.as_ref()) {
            findings.push(Finding::new(
                "kx_offer_failed",
                Cause::Tls,
                format!("Key exchange: a handshake offering several groups failed: {e}."),
            ));
        }
        return;
    };
    let retry = |o: &OfferProbe| {
        if o.hello_retry_request {
            " after a HelloRetryRequest (one more round trip)"
        } else {
            " from the client's share"
        }
    };
    let said = if tls12 {
        // No shares to take or retry, and no post-quantum group to choose.
        format!(
            "under TLS 1.2 (no key shares; post-quantum groups are TLS 1.3's) the server chose {p} from the groups offered with {POST_QUANTUM} first, as browsers offer them, and {c} with {CLASSICAL} first"
        )
    } else if p == POST_QUANTUM && c == POST_QUANTUM {
        format!(
            "the server prefers {POST_QUANTUM}: offered first it took it{}, offered after {CLASSICAL} it still chose it{}",
            retry(pq),
            retry(cl)
        )
    } else if p == POST_QUANTUM {
        format!(
            "the server takes the client's first choice: {POST_QUANTUM} offered first{}, {c} offered first{}",
            retry(pq),
            retry(cl)
        )
    } else {
        let hello = |g: &str| group(k, g).and_then(|g| g.client_hello_bytes);
        let extra = match (pq.client_hello_bytes, hello(CLASSICAL)) {
            (Some(a), Some(b)) if a > b => format!(
                "; the ClientHello is {} B larger for nothing ({a} B against {b} B offering {CLASSICAL} alone)",
                a - b
            ),
            _ => String::new(),
        };
        format!(
            "offered {POST_QUANTUM} first, as browsers do, the server chose {p}{}: no post-quantum protection{extra}; offered {CLASSICAL} first, {c}{}",
            retry(pq),
            retry(cl)
        )
    };
    findings.push(Finding::new(
        "kx_preference",
        Cause::Measured,
        format!("Key exchange preference: {said}."),
    ));
}

/// The median of samples: one handshake delayed by the scheduler says nothing about the
/// server.
pub(super) fn median(v: &[f64]) -> f64 {
    crate::report::comparison::Spread::of(v).median
}
