//! Which strategies a comparison runs for a target: those its scheme allows, and for an
//! https:// server elsewhere, h2, h3 and 0-RTT where it offers them (asked with a short
//! probe each); then one [`Arm`] per strategy and target.

use std::sync::Arc;

use super::Arm;
use crate::parse::UsageError;
use crate::plan::build::{self, LoadConfig, RequestConfig};
use crate::plan::{Choice, LoadShape, Scenario, StopWhen, Strategy};
use crate::record::{ErrorDetail, ErrorKind};
use crate::report::cause::NoEarlyData;
use crate::report::finding::{Cause, Finding};
use crate::stats::recorder::Recorder;

/// What a probe found about one offer.
#[derive(Debug, Clone, Default, PartialEq)]
enum Probed {
    Yes,
    /// Not offered; why, where the probe could tell.
    No(Option<String>),
    /// The probe failed before it could tell (its leading failure): not known.
    Failed(String),
    /// Not asked (no UDP to the target, or QUIC not answered for 0-RTT over it).
    #[default]
    NotAsked,
}

impl Probed {
    fn yes(&self) -> bool {
        *self == Probed::Yes
    }
}

/// What an https:// target's server offers beyond HTTP/1.1 over TLS.
#[derive(Debug, Clone, Default)]
struct Offers {
    h2: Probed,
    h3: Probed,
    /// TLS 1.3 early data over TCP (0-RTT) on a resumed session.
    early_tcp: Probed,
    /// 0-RTT over QUIC.
    early_quic: Probed,
    /// With `--cert`: a request without the certificate is served (a `close@no-cert` row
    /// sets what the certificate costs against it).
    without_cert: Probed,
}

/// The strategies compare runs for a URL's scheme (and h2, h3 and 0-RTT where the
/// server offers them): close / close-resumed / close-0rtt / http10 /
/// http10-keepalive / keepalive / h2 / h3-close / h3-0rtt / h3.
fn default_strategies(tls: bool, o: &Offers) -> Vec<Strategy> {
    let mut v = vec![Strategy::Close];
    if tls {
        v.push(Strategy::CloseResumed);
    }
    if tls && o.early_tcp.yes() {
        v.push(Strategy::Close0Rtt);
    }
    v.extend([
        Strategy::Http10,
        Strategy::Http10KeepAlive,
        Strategy::KeepAlive,
    ]);
    if o.h2.yes() {
        v.push(Strategy::H2);
    }
    if o.h3.yes() {
        v.push(Strategy::H3Close);
        if o.early_quic.yes() {
            v.push(Strategy::H3ZeroRtt);
        }
        v.push(Strategy::H3);
    }
    v
}

/// Why no UDP reaches the target: a Unix socket, or a forward proxy (TCP's); a proxy
/// setting that cannot be read is a usage error naming it.
fn no_udp(req: &RequestConfig) -> Result<Option<String>, UsageError> {
    if req.unix_socket.is_some() {
        return Ok(Some("--unix-socket carries a byte stream".to_string()));
    }
    let Some((_, u)) = req.urls.first() else {
        return Ok(None);
    };
    let proxy = req.proxy.pick(u.tls, &u.host).map_err(UsageError)?;
    Ok(proxy.map(|n| format!("the proxy {} forwards TCP", n.proxy.display())))
}

/// The strategies of the default set left out for a target, each with why: those its
/// scheme cannot carry, and those its server's probes said it does not offer.
fn left_out(tls: bool, o: &Offers, h2c: bool, url: &str, no_udp: Option<&str>) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut say = |names: &str, why: String| {
        out.push(Finding::new(
            "strategy_left_out",
            Cause::Protocol,
            format!("{names}: {why}."),
        ));
    };
    if !tls {
        say(
            "close-resumed, close-0rtt",
            format!("TLS resumption and early data need an https:// URL ({url} is http://)"),
        );
        if !h2c {
            say(
                "h2",
                "HTTP/2 over cleartext (h2c prior knowledge) is compared only with --h2c".into(),
            );
        }
        say(
            "h3-close, h3-0rtt, h3",
            "HTTP/3 runs over QUIC with TLS: an https:// URL".into(),
        );
        return out;
    }
    // A probe that failed says nothing of the server: "not known", with its failure,
    // the rows that failed alike named together.
    let mut failed: Vec<(&str, &str)> = Vec::new();
    for (names, p) in [
        ("h2", &o.h2),
        ("close-0rtt", &o.early_tcp),
        ("h3-close, h3-0rtt, h3", &o.h3),
        ("h3-0rtt", &o.early_quic),
    ] {
        if let Probed::Failed(why) = p {
            failed.push((names, why));
        }
    }
    let mut by_why: Vec<(Vec<&str>, &str)> = Vec::new();
    for (names, why) in failed {
        match by_why.iter_mut().find(|(_, w)| *w == why) {
            Some((n, _)) => n.push(names),
            None => by_why.push((vec![names], why)),
        }
    }
    for (names, why) in by_why {
        say(
            &names.join(", "),
            format!("not known whether the server offers them: the probes failed ({why})"),
        );
    }
    if let Probed::No(_) = o.h2 {
        say(
            "h2",
            "the server did not choose h2 when offered h2 and http/1.1 (ALPN, one handshake)"
                .into(),
        );
    }
    if let Probed::No(why) = &o.early_tcp {
        say(
            "close-0rtt",
            format!(
                "the server accepted no early data on a resumed session (2 probe requests){}",
                why.as_deref().map(|w| format!(": {w}")).unwrap_or_default()
            ),
        );
    }
    match &o.without_cert {
        Probed::No(why) => say(
            "close@no-cert",
            format!(
                "the server did not serve a request without the client certificate ({}): what the certificate costs cannot be set against a handshake without it here; against the embedded server (compare without a URL, with --cert) it can",
                why.as_deref().unwrap_or("no answer")
            ),
        ),
        Probed::Failed(why) => say(
            "close@no-cert",
            format!("not known whether the server serves a request without the client certificate: the probe failed ({why})"),
        ),
        _ => {}
    }
    if let Some(why) = no_udp {
        say(
            "h3-close, h3-0rtt, h3",
            format!("HTTP/3 runs over QUIC, on UDP, and {why}"),
        );
    } else if let Probed::No(_) = o.h3 {
        say(
            "h3-close, h3-0rtt, h3",
            "no HTTP/3 answer on UDP at the URL's port within 2 s (one probe request)".into(),
        );
    } else if let Probed::No(why) = &o.early_quic {
        say(
            "h3-0rtt",
            format!(
                "the server accepted no 0-RTT over QUIC (2 probe requests){}",
                why.as_deref().map(|w| format!(": {w}")).unwrap_or_default()
            ),
        );
    }
    out
}

/// A short one-at-a-time run of `strategy` against the target, for a probe: `requests`
/// requests within 2 s each; its error where it could not run.
fn probe_run(
    strategy: Strategy,
    requests: u64,
    req: &RequestConfig,
    load: &LoadConfig,
) -> Result<crate::engine::RunResult, String> {
    let probe_load = LoadConfig {
        redirects: None,
        concurrency: 1,
        threads: 1,
        stop: StopWhen {
            requests: Some(requests),
            duration: None,
        },
        load: LoadShape::Closed,
        timeout: std::time::Duration::from_secs(2),
        limits: load.limits,
        task_per_worker: false,
    };
    let sc = build::scenario("probe", strategy, None, req, &probe_load).map_err(|e| e.0)?;
    crate::engine::run(Arc::new(sc), false).map_err(|e| format!("{e:#}"))
}

/// A probe run's leading failure (by the report's rule) and what it said ("cert_expired:
/// invalid peer certificate: Expired"); none where nothing failed.
fn leading_failure(rec: &Recorder) -> Option<String> {
    let l = crate::report::failure::leading_of(
        ErrorKind::ALL
            .iter()
            .map(|k| (k.name(), rec.errors[k.index()])),
        ErrorDetail::ALL
            .iter()
            .map(|d| (d.name(), rec.error_details[d.index()])),
        |key| rec.error_examples.get(key).map(String::as_str),
    )?;
    Some(match l.example {
        Some(said) => format!("{}: {said}", l.key),
        None => l.key.to_string(),
    })
}

/// Whether the server takes 0-RTT (`close-0rtt` over TCP, `h3-0rtt` over QUIC): two
/// requests on new connections, the second on the first one's session, in early data
/// when its ticket allows. Accepted at least once: yes; no request answered: the probe
/// failed (not known); else no, with why (TLS 1.2, no resumption, tickets that allow
/// none, or rejected).
fn accepts_early_data(strategy: Strategy, req: &RequestConfig, load: &LoadConfig) -> Probed {
    let r = match probe_run(strategy, 2, req, load) {
        Ok(r) => r,
        Err(e) => return Probed::Failed(e),
    };
    let c = &r.recorder.counts;
    if c.early_accepted > 0 {
        return Probed::Yes;
    }
    if c.answered == 0 {
        return Probed::Failed(
            leading_failure(&r.recorder).unwrap_or_else(|| "no request was answered".into()),
        );
    }
    let handshakes = c.tls_full + c.tls_resumed;
    let tls13 = if strategy.quic() { handshakes } else { c.tls13 };
    let cause = NoEarlyData::judge(handshakes, tls13, c.tls_resumed, c.early_attempted);
    Probed::No(Some(format!("{}{}", cause.why(), cause.fix_clause(None))))
}

/// With `--cert`: whether the server serves a request without the certificate (one
/// request on a new connection). Served (an ok status): yes; else no, with how it
/// answered: an error status, or the handshake's failure.
fn serves_without_cert(req: &RequestConfig, load: &LoadConfig) -> Probed {
    let without = Choice {
        no_cert: true,
        ..Choice::of(Strategy::Close)
    };
    let without = row_request(&without, req);
    let r = match probe_run(Strategy::Close, 1, &without, load) {
        Ok(r) => r,
        Err(e) => return Probed::Failed(e),
    };
    let rec = &r.recorder;
    if rec.ok() > 0 {
        return Probed::Yes;
    }
    let status = (400..600u16).find(|c| rec.status[usize::from(*c)] > 0);
    Probed::No(Some(match (status, leading_failure(rec)) {
        (Some(st), _) => format!("it answered {st}"),
        (None, Some(why)) => format!("the connection failed: {why}"),
        (None, None) => "it did not answer".to_string(),
    }))
}

/// Whether the server of an https:// target answers HTTP/3 on UDP at its port: one
/// request on a new QUIC connection within 2 s. No QUIC answer in time: no; a QUIC
/// connection that failed otherwise (its certificate, say): the probe failed.
fn offers_h3(req: &RequestConfig, load: &LoadConfig) -> Probed {
    let r = match probe_run(Strategy::H3Close, 1, req, load) {
        Ok(r) => r,
        Err(e) => return Probed::Failed(e),
    };
    let rec = &r.recorder;
    if rec.counts.answered == 1 {
        return Probed::Yes;
    }
    let unanswered = rec.errors[ErrorKind::QuicTimeout.index()] > 0 || rec.errors_total() == 0;
    match leading_failure(rec) {
        Some(why) if !unanswered => Probed::Failed(why),
        _ => Probed::No(None),
    }
}

/// Whether the server of an https:// target chooses h2 when offered h2 and http/1.1
/// (one TLS handshake). A handshake that failed: the probe failed, with why.
fn offers_h2(req: &RequestConfig, sc: &Scenario) -> Probed {
    let opts = crate::net::tls::TlsOptions {
        alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        ..req.tls.clone()
    };
    let cfg = match crate::net::tls::client_config(&opts, false) {
        Ok(c) => c,
        Err(e) => return Probed::Failed(format!("{e:#}")),
    };
    let rt = match crate::runtime_thread::current_thread_runtime() {
        Ok(rt) => rt,
        Err(e) => return Probed::Failed(e.to_string()),
    };
    match rt.block_on(crate::probe::open(
        &sc.origins[0],
        Some(&cfg),
        sc.timeout,
        &sc.dns,
    )) {
        Ok(o) if o.tls_info.as_ref().and_then(|t| t.alpn.as_deref()) == Some("h2") => Probed::Yes,
        Ok(_) => Probed::No(None),
        // As the other probes say it ("cert_expired: invalid peer certificate: …"), so
        // that probes failed alike are named together.
        Err(e) => Probed::Failed(format!(
            "{}: {}",
            e.key,
            e.message.trim_end_matches(&format!(" ({})", e.key))
        )),
    }
}

/// A row's request: the run's, with the groups the row offers, or without the client
/// certificate.
fn row_request(choice: &Choice, req: &RequestConfig) -> RequestConfig {
    let mut req = req.clone();
    if let Some((_, groups)) = &choice.groups {
        req.tls.groups = Some(groups.clone());
    }
    if choice.no_cert {
        req.tls.client_auth.identity = None;
    }
    req
}

/// How the rows of a comparison are made from its targets.
pub(crate) struct Rows<'a> {
    /// `--strategies`, or none for the default set.
    pub chosen: Option<&'a [Choice]>,
    /// The targets are the embedded server's two listeners: every strategy is offered,
    /// and a row's name starts with its group.
    pub embedded: bool,
    /// HTTP/2 over cleartext (h2c) is compared on an http:// target.
    pub h2c: bool,
    pub requests_per_connection: Option<u64>,
    /// Connections of a multiplexed strategy (h2, h3).
    pub multiplexed_connections: usize,
    /// `--ok-status`: the statuses counted as ok beside 2xx and 3xx.
    pub ok_status: &'a [(u16, u16)],
    pub load: &'a LoadConfig,
    /// Before every name (the RTT of a sweep's step: "20ms ").
    pub prefix: &'a str,
    /// Where the probes of what a server offers are said (stderr).
    pub steps: &'a crate::progress::Steps,
}

impl Rows<'_> {
    /// The rows for one target: the chosen ones its scheme allows, or the default set
    /// with what its server offers.
    fn strategies(&self, req: &RequestConfig) -> Result<(Vec<Choice>, Vec<Finding>), UsageError> {
        let tls = req.urls.iter().any(|(_, u)| u.tls);
        let chosen = match self.chosen {
            // With the embedded server, a TLS-only row (a strategy that needs TLS, or a
            // key exchange chosen) is left out of the HTTP group (and h2 without --h2c).
            Some(c) if self.embedded => c
                .iter()
                .filter(|c| tls || (!c.strategy.needs_tls() && c.groups.is_none() && !c.no_cert))
                .filter(|c| tls || self.h2c || c.strategy != Strategy::H2)
                .cloned()
                .collect(),
            Some(c) => {
                let url = req.urls.first().map_or("", |(raw, _)| raw.as_str());
                if let Some(kx) = c.iter().find(|c| c.groups.is_some()).filter(|_| !tls) {
                    return Err(UsageError(format!(
                        "--strategies {}: a key exchange is chosen only over TLS, and {url} is not an https:// URL",
                        kx.name(),
                    )));
                }
                if let Some(nc) = c.iter().find(|c| c.no_cert).filter(|_| !tls) {
                    return Err(UsageError(format!(
                        "--strategies {}: a client certificate is presented only over TLS, and {url} is not an https:// URL",
                        nc.name(),
                    )));
                }
                c.to_vec()
            }
            None => {
                let offers = self.offers(tls, req)?;
                let url = req.urls.first().map_or("", |(raw, _)| raw.as_str());
                let left = if self.embedded {
                    Vec::new()
                } else {
                    left_out(tls, &offers, self.h2c, url, no_udp(req)?.as_deref())
                };
                let mut all: Vec<Choice> = default_strategies(tls, &offers)
                    .into_iter()
                    .map(Choice::of)
                    .collect();
                if offers.without_cert.yes() {
                    let no_cert = Choice {
                        no_cert: true,
                        ..Choice::of(Strategy::Close)
                    };
                    all.insert(1, no_cert);
                }
                return Ok((all, left));
            }
        };
        Ok((chosen, Vec::new()))
    }

    fn offers(&self, tls: bool, req: &RequestConfig) -> Result<Offers, UsageError> {
        if !tls {
            return Ok(Offers {
                h2: if self.h2c {
                    Probed::Yes
                } else {
                    Probed::NotAsked
                },
                ..Offers::default()
            });
        }
        if self.embedded {
            // The embedded server offers all of them (early data on for compare).
            // With --cert it asks for one, and serves a client without.
            let cert = req.tls.client_auth.identity.is_some();
            return Ok(Offers {
                h2: Probed::Yes,
                h3: Probed::Yes,
                early_tcp: Probed::Yes,
                early_quic: Probed::Yes,
                without_cert: if cert { Probed::Yes } else { Probed::NotAsked },
            });
        }
        let load = self.load;
        let probe = build::scenario("probe", Strategy::KeepAlive, None, req, load)?;
        let url = req.urls.first().map_or("", |(raw, _)| raw.as_str());
        let say = |what: &str| self.steps.say(&format!("probing {url}: {what}"));
        // Not over a Unix socket or through a proxy: QUIC is UDP's.
        let h3 = if no_udp(req)?.is_none() {
            say("does it answer HTTP/3 (QUIC, UDP)? up to 2 s");
            offers_h3(req, load)
        } else {
            Probed::NotAsked
        };
        say("does it choose h2 by ALPN?");
        let h2 = offers_h2(req, &probe);
        say("does it accept TLS 0-RTT? 2 requests");
        let early_tcp = accepts_early_data(Strategy::Close0Rtt, req, load);
        let early_quic = if h3.yes() {
            say("does it accept 0-RTT over QUIC? 2 requests");
            accepts_early_data(Strategy::H3ZeroRtt, req, load)
        } else {
            Probed::NotAsked
        };
        let without_cert = if req.tls.client_auth.identity.is_some() {
            say("does it serve a request without --cert's certificate? 1 request");
            serves_without_cert(req, load)
        } else {
            Probed::NotAsked
        };
        Ok(Offers {
            h2,
            h3,
            early_tcp,
            early_quic,
            without_cert,
        })
    }

    /// The rows: each strategy against each target, given as (group, request).
    /// The rows, and the strategies of the default set left out with why.
    pub(crate) fn arms(
        &self,
        targets: &[(String, RequestConfig)],
    ) -> Result<(Vec<Arm>, Vec<Finding>), UsageError> {
        let mut arms = Vec::new();
        let mut left = Vec::new();
        for (group, req) in targets {
            let (choices, left_here) = self.strategies(req)?;
            left.extend(left_here);
            for (k, choice) in choices.iter().enumerate() {
                let st = choice.strategy;
                // A row listed again (an A/A run) gets "#2", "#3" after its name.
                let nth = choices[..k].iter().filter(|c| c.same(choice)).count();
                let base = if nth == 0 {
                    choice.name()
                } else {
                    format!("{}#{}", choice.name(), nth + 1)
                };
                let name = if self.embedded {
                    format!("{}{group} {base}", self.prefix)
                } else {
                    base
                };
                let req = row_request(choice, req);
                let mut sc =
                    build::scenario(&name, st, self.requests_per_connection, &req, self.load)?;
                if st.multiplexed() {
                    sc.connections = self.multiplexed_connections;
                }
                sc.ok_status = self.ok_status.to_vec();
                arms.push(Arm {
                    name,
                    group: group.clone(),
                    choice: choice.clone(),
                    scenario: Arc::new(sc),
                });
            }
            if let Some(arm) = self.direct(group, req, choices.first())? {
                arms.push(arm);
            }
        }
        Ok((arms, left))
    }

    /// Through a forward proxy: the first row again, direct (no proxy), in the same group,
    /// so that its ratio is what the proxy costs per request.
    fn direct(
        &self,
        group: &str,
        req: &RequestConfig,
        first: Option<&Choice>,
    ) -> Result<Option<Arm>, UsageError> {
        let (Some(choice), Some((_, u))) = (first, req.urls.first()) else {
            return Ok(None);
        };
        // Only a row through a proxy has a direct twin.
        if req.unix_socket.is_some()
            || req
                .proxy
                .pick(u.tls, &u.host)
                .map_err(UsageError)?
                .is_none()
        {
            return Ok(None);
        }
        let mut req = row_request(choice, req);
        req.proxy = crate::net::proxy::ProxySettings::none();
        let name = format!("{}{} direct", self.prefix, choice.name());
        let mut sc = build::scenario(
            &name,
            choice.strategy,
            self.requests_per_connection,
            &req,
            self.load,
        )?;
        if choice.strategy.multiplexed() {
            sc.connections = self.multiplexed_connections;
        }
        sc.ok_status = self.ok_status.to_vec();
        Ok(Some(Arm {
            name,
            group: group.to_string(),
            choice: choice.clone(),
            scenario: Arc::new(sc),
        }))
    }
}
