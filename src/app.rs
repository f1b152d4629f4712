//! The commands: glue from parsed arguments to config, engine, server and report.

use std::io::Write;
use std::os::fd::AsFd;
use std::sync::Arc;

use anyhow::Context;

use crate::cli::{
    AuditArgs, BenchArgs, Cli, Command, CompareArgs, DoctorArgs, OutputArgs, RequestArgs,
    ServeArgs, TraceArgs,
};
use crate::compare;
use crate::config::{self, parse_duration, parse_positive_duration, UsageError};
use crate::engine;
use crate::plan::Strategy;
use crate::report::{self, Report};
use crate::server::{self, ServerConfig};
use crate::stats::summary;

pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Bench(a) => bench(a),
        Command::Compare(a) => compare(a),
        Command::Trace(a) => trace(a),
        Command::Doctor(a) => doctor(a),
        Command::Audit(a) => audit(a),
        Command::Serve(a) => serve(a),
    }
}

pub fn bench(a: BenchArgs) -> anyhow::Result<i32> {
    let strategy = if a.disable_keepalive {
        Strategy::Close
    } else {
        config::parse_strategy("--strategy", &a.strategy)?
    };
    let load = config::load_config(&a.load, config::BENCH_DEFAULTS)?;
    // Without a URL, start the embedded server in-process and trust its CA.
    let (embedded, url, roots) = if a.url.is_none() && a.request.urls_from_file.is_none() {
        let srv = embedded_server()?;
        let url = if a.embedded_tls || strategy == Strategy::CloseResumed {
            srv.https_url()
        } else {
            srv.http_url()
        };
        let roots = vec![srv.ca_der.clone()];
        (Some(srv), url, roots)
    } else {
        (None, a.url.clone(), Vec::new())
    };
    let req = config::request_config(&a.request, url.as_deref(), roots)?;
    let sc = config::scenario(
        strategy.name(),
        strategy,
        a.requests_per_connection,
        &req,
        &load,
    )?;
    let sc = Arc::new(sc);
    let result = engine::run(sc.clone(), !a.output.no_progress)?;
    let mut rep = Report::new(vec![summary::summarize(
        &sc,
        &result.recorder,
        result.wall,
        result.cpu,
    )]);
    if let Some(srv) = embedded {
        rep.server = Some(srv.snapshot());
        srv.stop();
    }
    emit(&rep, &a.output)?;
    Ok(0)
}

/// Print the report (text or JSON) and write the HTML file if asked.
fn emit(rep: &Report, output: &OutputArgs) -> anyhow::Result<()> {
    if let Some(path) = &output.html {
        std::fs::write(path, report::html::render(rep))
            .with_context(|| format!("--html {}", path.display()))?;
    }
    let out = if output.json {
        report::to_json(rep)
    } else {
        report::text::render(rep)
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{out}");
    Ok(())
}

/// The embedded target for runs without a URL: HTTP and HTTPS on 127.0.0.1, port 0.
fn embedded_server() -> anyhow::Result<server::RunningServer> {
    server::start(ServerConfig {
        listen: Some(([127, 0, 0, 1], 0).into()),
        tls_listen: Some(([127, 0, 0, 1], 0).into()),
        ..ServerConfig::default()
    })
}

/// The strategies compare runs for a URL's scheme.
fn default_strategies(tls: bool) -> Vec<Strategy> {
    let mut v = vec![Strategy::Close];
    if tls {
        v.push(Strategy::CloseResumed);
    }
    v.extend([
        Strategy::Http10,
        Strategy::Http10KeepAlive,
        Strategy::KeepAlive,
    ]);
    v
}

pub fn compare(a: CompareArgs) -> anyhow::Result<i32> {
    if a.rounds == 0 || a.rounds > 1000 {
        return Err(UsageError("--rounds must be between 1 and 1000".into()).into());
    }
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
    let noise_threshold = parse_percent("--noise-threshold", &a.noise_threshold)?;
    let load = config::load_config(&a.load, config::COMPARE_DEFAULTS)?;
    let embedded = if a.url.is_none() && a.request.urls_from_file.is_none() {
        Some(embedded_server()?)
    } else {
        None
    };
    // (group, URL, extra trusted roots) for each scheme compared.
    let targets: Vec<(String, Option<String>)> = match &embedded {
        Some(srv) => vec![
            ("http".into(), srv.http_url()),
            ("https".into(), srv.https_url()),
        ],
        None => {
            let tls = a.url.as_deref().is_some_and(|u| u.starts_with("https://"));
            vec![(if tls { "https" } else { "http" }.into(), a.url.clone())]
        }
    };
    let roots = embedded
        .as_ref()
        .map(|s| vec![s.ca_der.clone()])
        .unwrap_or_default();
    let mut arms = Vec::new();
    for (group, url) in &targets {
        let req = config::request_config(&a.request, url.as_deref(), roots.clone())?;
        let tls = req.urls.iter().any(|(_, u)| u.tls);
        let strategies = match &chosen {
            // With the embedded server, a TLS-only strategy is left out of the HTTP group.
            Some(c) if embedded.is_some() => c
                .iter()
                .copied()
                .filter(|s| tls || *s != Strategy::CloseResumed)
                .collect(),
            Some(c) => c.clone(),
            None => default_strategies(tls),
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
                format!("{group} {base}")
            } else {
                base
            };
            let sc = config::scenario(&name, st, a.requests_per_connection, &req, &load)?;
            arms.push(compare::Arm {
                name,
                group: group.clone(),
                scenario: Arc::new(sc),
            });
        }
    }
    let result = compare::run(&arms, a.rounds, embedded.as_ref(), noise_threshold)?;
    let mut rep = Report::new(result.scenarios);
    rep.comparison = Some(result.comparison);
    if let Some(srv) = embedded {
        rep.server = Some(srv.snapshot());
        srv.stop();
    }
    emit(&rep, &a.output)?;
    Ok(0)
}

/// A percentage: `5%` or `5`.
fn parse_percent(flag: &str, s: &str) -> Result<f64, UsageError> {
    let t = s.trim().trim_end_matches('%').trim();
    match t.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..100.0).contains(&v) => Ok(v / 100.0),
        _ => Err(UsageError(format!(
            "{flag}: expected a percentage from 0 to 100, like 5%, not {s:?}"
        ))),
    }
}

fn on_off(flag: &str, s: &str) -> Result<bool, UsageError> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(UsageError(format!("{flag}: expected on or off, not {s:?}"))),
    }
}

fn parse_addr(flag: &str, s: &str) -> Result<std::net::SocketAddr, UsageError> {
    s.parse().map_err(|_| {
        UsageError(format!(
            "{flag}: {s:?} is not an address like 127.0.0.1:8080"
        ))
    })
}

pub fn serve_config(a: &ServeArgs) -> Result<ServerConfig, UsageError> {
    let cfg = ServerConfig {
        listen: Some(parse_addr("--listen", &a.listen)?),
        tls_listen: if a.no_tls {
            None
        } else {
            Some(parse_addr("--tls-listen", &a.tls_listen)?)
        },
        keepalive: on_off("--keepalive", &a.keepalive)?,
        idle_timeout: parse_positive_duration("--idle-timeout", &a.limits.idle_timeout)?,
        max_requests_per_connection: a.max_requests_per_connection,
        http10: a.http10,
        body_size: a.body_size,
        delay: parse_duration("--delay", &a.delay)?,
        header_timeout: parse_positive_duration("--header-timeout", &a.limits.header_timeout)?,
        max_header_bytes: a.limits.max_header_bytes,
        max_body_bytes: a.limits.max_body_bytes,
        max_connections: a.limits.max_connections,
        threads: a.threads,
    };
    if cfg.max_requests_per_connection == Some(0) {
        return Err(UsageError(
            "--max-requests-per-connection must be at least 1".into(),
        ));
    }
    if cfg.threads == 0 {
        return Err(UsageError("--threads must be at least 1".into()));
    }
    Ok(cfg)
}

pub fn serve(a: ServeArgs) -> anyhow::Result<i32> {
    let cfg = serve_config(&a)?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| parse_duration("--duration", d))
        .transpose()?;
    let srv = server::start(cfg)?;
    if let Some(path) = &a.cacert_out {
        std::fs::write(path, &srv.ca_pem)
            .with_context(|| format!("--cacert-out {}", path.display()))?;
    }
    {
        let mut out = std::io::stdout().lock();
        if let Some(u) = srv.http_url() {
            let _ = writeln!(out, "listening {u}");
        }
        if let Some(u) = srv.https_url() {
            let _ = writeln!(out, "listening {u}");
        }
        let _ = out.flush();
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        match duration {
            Some(d) => {
                tokio::select! {
                    _ = tokio::time::sleep(d) => {},
                    _ = tokio::signal::ctrl_c() => {},
                }
            }
            None => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    });
    let s = srv.snapshot();
    eprintln!(
        "handshake serve: {} connections accepted, {} requests, TLS handshakes full {} resumed {}",
        s.connections_accepted, s.requests, s.tls_handshakes_full, s.tls_handshakes_resumed
    );
    srv.stop();
    Ok(0)
}

/// A one-URL scenario for `trace` and `doctor` (one worker, `count` requests).
fn single_url_scenario(
    request: &RequestArgs,
    url: &str,
    strategy: Strategy,
    count: u64,
    timeout: &str,
) -> Result<crate::plan::Scenario, UsageError> {
    if request.urls_from_file.is_some() {
        return Err(UsageError(
            "--urls-from-file: this command takes one URL".into(),
        ));
    }
    let timeout = parse_positive_duration("--timeout", timeout)?;
    let req = config::request_config(request, Some(url), Vec::new())?;
    let load = config::LoadConfig {
        concurrency: 1,
        threads: 1,
        load: crate::plan::LoadShape::Closed,
        stop: crate::plan::StopWhen {
            requests: Some(count.max(1)),
            duration: None,
        },
        timeout,
        limits: Default::default(),
    };
    config::scenario(strategy.name(), strategy, None, &req, &load)
}

fn current_thread_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

pub fn trace(a: TraceArgs) -> anyhow::Result<i32> {
    if a.count == 0 || a.count > 100_000 {
        return Err(UsageError("--count must be between 1 and 100000".into()).into());
    }
    let strategy = config::parse_strategy("--strategy", &a.strategy)?;
    let sc = single_url_scenario(&a.request, &a.url, strategy, a.count, &a.timeout)?;
    let t = current_thread_runtime()?.block_on(crate::trace::run(&sc, a.count));
    let out = if a.json {
        serde_json::to_string_pretty(&t).expect("trace serializes")
    } else {
        crate::trace::render(&t)
    };
    println!("{out}");
    Ok(if t.error.is_some() { 1 } else { 0 })
}

pub fn doctor(a: DoctorArgs) -> anyhow::Result<i32> {
    if a.max_requests == 0 {
        return Err(UsageError("--max-requests must be at least 1".into()).into());
    }
    let max_idle = parse_positive_duration("--max-idle", &a.max_idle)?;
    let sc = single_url_scenario(&a.request, &a.url, Strategy::KeepAlive, 1, &a.timeout)?;
    let d = current_thread_runtime()?.block_on(crate::doctor::run(
        &sc,
        &a.request,
        a.max_requests,
        max_idle,
    ))?;
    let out = if a.json {
        serde_json::to_string_pretty(&d).expect("doctor report serializes")
    } else {
        crate::doctor::render(&d)
    };
    println!("{out}");
    Ok(if d.problems.is_empty() { 0 } else { 1 })
}

pub fn audit(a: AuditArgs) -> anyhow::Result<i32> {
    let listen = parse_addr("--listen", &a.listen)?;
    let idle_timeout = parse_positive_duration("--idle-timeout", &a.limits.idle_timeout)?;
    let header_timeout = parse_positive_duration("--header-timeout", &a.limits.header_timeout)?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| parse_duration("--duration", d))
        .transpose()?;
    let upstream = match &a.upstream {
        None => None,
        Some(u) => {
            let p = config::parse_url(u).map_err(|e| UsageError(format!("--upstream: {e}")))?;
            let origin = crate::net::Origin::new(p.tls, &p.host, p.port)
                .map_err(|e| UsageError(format!("--upstream: {e}")))?;
            let tls = if p.tls {
                let mut opts = crate::net::tls::TlsOptions {
                    insecure: a.upstream_insecure,
                    ..Default::default()
                };
                if let Some(path) = &a.upstream_cacert {
                    opts.extra_roots = crate::net::tls::load_pem_certs(path)
                        .map_err(|e| UsageError(format!("--upstream-cacert: {e:#}")))?;
                    opts.only_extra_roots = true;
                }
                Some(crate::net::tls::client_config(&opts, true)?)
            } else {
                None
            };
            Some(crate::audit::Upstream::new(origin, p.authority, tls))
        }
    };
    let running = crate::audit::start(crate::audit::AuditConfig {
        listen,
        tls: a.tls,
        upstream,
        server: ServerConfig {
            body_size: a.body_size,
            idle_timeout,
            header_timeout,
            max_header_bytes: a.limits.max_header_bytes,
            max_body_bytes: a.limits.max_body_bytes,
            max_connections: a.limits.max_connections,
            ..ServerConfig::default()
        },
    })?;
    if let Some(path) = &a.cacert_out {
        std::fs::write(path, &running.ca_pem)
            .with_context(|| format!("--cacert-out {}", path.display()))?;
    }
    eprintln!("handshake audit: listening on {}", running.url);
    let (command, status) = if a.command.is_empty() {
        let rt = current_thread_runtime()?;
        rt.block_on(async {
            match duration {
                Some(d) => {
                    tokio::select! { _ = tokio::time::sleep(d) => {}, _ = tokio::signal::ctrl_c() => {} }
                }
                None => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        });
        (None, None)
    } else {
        let args: Vec<String> = a
            .command
            .iter()
            .map(|x| x.replace("{url}", &running.url))
            .collect();
        // The command's standard output goes to stderr: stdout is the report's.
        let to_stderr = std::io::stderr().as_fd().try_clone_to_owned()?;
        let st = std::process::Command::new(&args[0])
            .args(&args[1..])
            .env("HANDSHAKE_URL", &running.url)
            .stdout(std::process::Stdio::from(to_stderr))
            .status()
            .with_context(|| format!("starting {}", args[0]))?;
        // Let the client's last closes and resets arrive.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let code = st.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            128 + st.signal().unwrap_or(0)
        });
        (Some(args), Some(code))
    };
    let report = running.finish(command, status);
    let out = if a.json {
        serde_json::to_string_pretty(&report).expect("audit report serializes")
    } else {
        crate::audit::render(&report)
    };
    println!("{out}");
    Ok(status.unwrap_or(0))
}
