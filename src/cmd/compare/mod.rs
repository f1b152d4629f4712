//! `handshake compare`: one workload under several connection strategies, side by side
//! (the rounds and the statistics are in [`rounds`]).

pub mod rounds;

use std::sync::Arc;

use super::{embedded_path, emit_checked, on_client, Embedded};
use crate::cli::CompareArgs;
use crate::config::{self, parse_percent, UsageError};
use crate::lab::LinkSpec;
use crate::plan::Strategy;
use crate::report::{thresholds, Report};
use crate::server::ServerConfig;

/// What an https:// target's server offers beyond HTTP/1.1 over TLS.
#[derive(Debug, Clone, Copy, Default)]
struct Offers {
    h2: bool,
    h3: bool,
    /// TLS 1.3 early data over TCP (0-RTT) on a resumed session.
    early_tcp: bool,
    /// 0-RTT over QUIC.
    early_quic: bool,
}

/// The strategies compare runs for a URL's scheme (and h2, h3 and 0-RTT where the
/// server offers them): close / close-resumed / close-0rtt / http10 /
/// http10-keepalive / keepalive / h2 / h3-close / h3-0rtt / h3.
fn default_strategies(tls: bool, o: Offers) -> Vec<Strategy> {
    let mut v = vec![Strategy::Close];
    if tls {
        v.push(Strategy::CloseResumed);
    }
    if tls && o.early_tcp {
        v.push(Strategy::Close0Rtt);
    }
    v.extend([
        Strategy::Http10,
        Strategy::Http10KeepAlive,
        Strategy::KeepAlive,
    ]);
    if o.h2 {
        v.push(Strategy::H2);
    }
    if o.h3 {
        v.push(Strategy::H3Close);
        if o.early_quic {
            v.push(Strategy::H3ZeroRtt);
        }
        v.push(Strategy::H3);
    }
    v
}

/// A short one-at-a-time run of `strategy` against the target, for a probe: `requests`
/// requests within 2 s each.
fn probe_run(
    strategy: Strategy,
    requests: u64,
    req: &config::RequestConfig,
    load: &config::LoadConfig,
) -> Option<crate::engine::RunResult> {
    let probe_load = config::LoadConfig {
        concurrency: 1,
        threads: 1,
        stop: crate::plan::StopWhen {
            requests: Some(requests),
            duration: None,
        },
        load: crate::plan::LoadShape::Closed,
        timeout: std::time::Duration::from_secs(2),
        limits: load.limits,
    };
    let sc = config::scenario("probe", strategy, None, req, &probe_load).ok()?;
    crate::engine::run(Arc::new(sc), false).ok()
}

/// Whether the server takes 0-RTT (`close-0rtt` over TCP, `h3-0rtt` over QUIC): two
/// requests on new connections, the second on the first one's session, in early data
/// when its ticket allows. Accepted at least once: yes. Any failure counts as no.
fn accepts_early_data(
    strategy: Strategy,
    req: &config::RequestConfig,
    load: &config::LoadConfig,
) -> bool {
    probe_run(strategy, 2, req, load).is_some_and(|r| r.recorder.counts.early_accepted > 0)
}

/// Whether the server of an https:// target answers HTTP/3 on UDP at its port: one
/// request on a new QUIC connection within 2 s. Any failure counts as no.
fn offers_h3(req: &config::RequestConfig, load: &config::LoadConfig) -> bool {
    probe_run(Strategy::H3Close, 1, req, load).is_some_and(|r| r.recorder.counts.ok == 1)
}

/// Whether the server of an https:// target chooses h2 when offered h2 and http/1.1
/// (one TLS handshake). Any failure counts as no: the comparison then says why.
fn offers_h2(req: &config::RequestConfig, sc: &crate::plan::Scenario) -> bool {
    let opts = crate::net::tls::TlsOptions {
        alpn: vec![b"h2".to_vec(), b"http/1.1".to_vec()],
        ..req.tls.clone()
    };
    let Ok(cfg) = crate::net::tls::client_config(&opts, false) else {
        return false;
    };
    let Ok(rt) = super::current_thread_runtime() else {
        return false;
    };
    rt.block_on(crate::probe::open(
        &sc.origins[0],
        Some(&cfg),
        sc.timeout,
        &sc.dns,
    ))
    .ok()
    .and_then(|o| o.tls_info)
    .is_some_and(|t| t.alpn.as_deref() == Some("h2"))
}

/// `--strategies`, each parsed (none: the default set).
fn chosen_strategies(a: &CompareArgs) -> anyhow::Result<Option<Vec<Strategy>>> {
    let chosen: Option<Vec<Strategy>> = a
        .strategies
        .as_ref()
        .map(|list| {
            list.iter()
                .map(|s| config::parse_strategy("--strategies", s.trim()))
                .collect()
        })
        .transpose()?;
    if chosen.as_ref().is_some_and(|c| c.is_empty()) {
        return Err(UsageError("--strategies: name at least one strategy".into()).into());
    }
    Ok(chosen)
}

/// The embedded server for one link (or none): early data on when a strategy sends it
/// (as for bench), and for the default set, which has close-0rtt and h3-0rtt.
fn start_embedded(spec: Option<LinkSpec>, chosen: Option<&[Strategy]>) -> anyhow::Result<Embedded> {
    let early = chosen.map_or(true, |c| c.iter().any(|s| s.early_data()));
    let cfg = ServerConfig {
        early_data: early,
        ..ServerConfig::default()
    };
    Embedded::start(spec, cfg)
}

pub fn run(a: CompareArgs) -> anyhow::Result<i32> {
    let started_at = super::now_rfc3339();
    // Across a link every round costs round trips; 6 is the fewest that give an interval.
    let rounds = a.rounds.unwrap_or(if a.link.any() { 6 } else { 10 });
    if rounds == 0 || rounds > 1000 {
        return Err(UsageError("--rounds must be between 1 and 1000".into()).into());
    }
    let chosen = chosen_strategies(&a)?;
    let noise_threshold = parse_percent("--noise-threshold", &a.noise_threshold)?;
    let thresholds = thresholds::parse_all(&a.output.fail_if, thresholds::Subject::Compare)?;
    let path = embedded_path(
        a.url.as_deref(),
        &a.link,
        a.request.urls_from_file.is_some(),
    )?;
    let specs: Vec<Option<LinkSpec>> = if a.link.any() {
        crate::config::parse_link(&a.link, true)?
            .into_iter()
            .map(Some)
            .collect()
    } else {
        vec![None]
    };
    // Across a link every request costs round trips: fewer, concurrent requests per round.
    let defaults = if a.link.any() {
        config::COMPARE_LAB_DEFAULTS
    } else {
        config::COMPARE_DEFAULTS
    };
    let load = config::load_config(&a.load, defaults)?;
    let sweep = specs.len() > 1;
    let steps = crate::progress::Steps::new("compare", !a.output.no_progress);
    let mut scenarios = Vec::new();
    let mut points = Vec::new();
    let mut names = Vec::new();
    let mut single = None;
    for spec in specs {
        let embedded = path
            .as_ref()
            .map(|_| start_embedded(spec, chosen.as_deref()))
            .transpose()?;
        let prefix = spec
            .filter(|_| sweep)
            .map(|s| format!("{}ms ", crate::fmt::num(s.rtt.as_secs_f64() * 1000.0)));
        let arms = compare_arms(
            &a,
            chosen.as_deref(),
            embedded.as_ref(),
            path.as_deref(),
            &load,
            prefix.as_deref().unwrap_or(""),
        )?;
        let cut = prefix.as_ref().map_or(0, |p| p.len());
        names = arms.iter().map(|arm| arm.name[cut..].to_string()).collect();
        let run = || {
            rounds::run(
                &arms,
                rounds,
                embedded.as_ref().map(|e| &e.srv),
                noise_threshold,
                embedded.as_ref().and_then(Embedded::rtt_set_ms),
                &steps,
            )
        };
        let result = on_client(embedded.as_ref(), run)??;
        let (server, link) = match embedded {
            Some(e) => {
                let (s, l) = e.finish();
                (Some(s), l)
            }
            None => (None, None),
        };
        scenarios.extend(result.scenarios);
        match (sweep, link) {
            (true, Some(link)) => points.push(rounds::RttPoint {
                rtt_set_ms: link.rtt_set_ms,
                link,
                server,
                comparison: result.comparison,
            }),
            (_, link) => single = Some((result.comparison, server, link)),
        }
    }
    let mut rep = Report::new(scenarios);
    rep.run = Some(crate::report::RunInfo {
        command: "compare".into(),
        started_at,
        scheduled_at: None,
        host: super::host_name(),
        segment: None,
    });
    if let Some((comparison, server, link)) = single {
        rep.comparison = Some(comparison);
        rep.server = server;
        rep.link = link;
    }
    if sweep {
        rep.rtt_sweep = Some(rounds::RttSweep::new(points, &names));
    }
    let code = emit_checked(&mut rep, &a.output, &thresholds)?;
    // A row in which no request succeeded at all fails the run.
    Ok(code.max(super::no_success(&rep)))
}

/// The rows of a comparison: each strategy against each target (with the embedded server,
/// its HTTP and its HTTPS listener).
fn compare_arms(
    a: &CompareArgs,
    chosen: Option<&[Strategy]>,
    embedded: Option<&Embedded>,
    path: Option<&str>,
    load: &config::LoadConfig,
    prefix: &str,
) -> anyhow::Result<Vec<rounds::Arm>> {
    // (group, URL) for each scheme compared.
    let targets: Vec<(String, Option<String>)> = match (embedded, path) {
        (Some(e), Some(p)) => vec![
            ("http".into(), Some(e.url(false, p))),
            ("https".into(), Some(e.url(true, p))),
        ],
        _ => {
            let tls = a.url.as_deref().is_some_and(|u| u.starts_with("https://"));
            vec![(if tls { "https" } else { "http" }.into(), a.url.clone())]
        }
    };
    let roots = embedded
        .map(|e| vec![e.srv.ca_der.clone()])
        .unwrap_or_default();
    let h2_connections = config::connections(a.connections, Strategy::H2)?;
    let mut arms = Vec::new();
    for (group, url) in &targets {
        let req = config::request_config(&a.request, url.as_deref(), roots.clone())?;
        let tls = req.urls.iter().any(|(_, u)| u.tls);
        let strategies = match chosen {
            // With the embedded server, a TLS-only strategy is left out of the HTTP group
            // (and h2 without --h2c).
            Some(c) if embedded.is_some() => c
                .iter()
                .copied()
                .filter(|s| tls || !s.needs_tls())
                .filter(|s| tls || a.h2c || *s != Strategy::H2)
                .collect(),
            Some(c) => c.to_vec(),
            None => {
                let offers = if !tls {
                    Offers {
                        h2: a.h2c,
                        ..Offers::default()
                    }
                } else if embedded.is_some() {
                    // The embedded server offers all of them (early data on for compare).
                    Offers {
                        h2: true,
                        h3: true,
                        early_tcp: true,
                        early_quic: true,
                    }
                } else {
                    let probe = config::scenario("probe", Strategy::KeepAlive, None, &req, load)?;
                    let h3 = offers_h3(&req, load);
                    Offers {
                        h2: offers_h2(&req, &probe),
                        h3,
                        early_tcp: accepts_early_data(Strategy::Close0Rtt, &req, load),
                        early_quic: h3 && accepts_early_data(Strategy::H3ZeroRtt, &req, load),
                    }
                };
                default_strategies(tls, offers)
            }
        };
        for (k, st) in strategies.iter().copied().enumerate() {
            // A strategy listed again (an A/A run) gets "#2", "#3" after its name.
            let nth = strategies[..k].iter().filter(|s| **s == st).count();
            let base = if nth == 0 {
                st.name().to_string()
            } else {
                format!("{}#{}", st.name(), nth + 1)
            };
            let name = if embedded.is_some() {
                format!("{prefix}{group} {base}")
            } else {
                base
            };
            let mut sc = config::scenario(&name, st, a.requests_per_connection, &req, load)?;
            if st.multiplexed() {
                sc.connections = h2_connections;
            }
            arms.push(rounds::Arm {
                name,
                group: group.clone(),
                scenario: Arc::new(sc),
            });
        }
    }
    Ok(arms)
}
