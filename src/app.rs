//! The commands: glue from parsed arguments to config, engine, server and report.

use std::io::Write;
use std::sync::Arc;

use anyhow::Context;

use crate::cli::{BenchArgs, Cli, Command, ServeArgs};
use crate::config::{self, parse_duration, UsageError};
use crate::engine;
use crate::plan::Strategy;
use crate::report::{self, Report};
use crate::server::{self, ServerConfig};
use crate::stats::summary;

pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Bench(a) => bench(a),
        Command::Serve(a) => serve(a),
    }
}

pub fn bench(a: BenchArgs) -> anyhow::Result<i32> {
    let strategy = if a.disable_keepalive {
        Strategy::Close
    } else {
        config::parse_strategy("--strategy", &a.strategy)?
    };
    let load = config::load_config(&a.load, config::DEFAULT_REQUESTS)?;
    // Without a URL, start the embedded server in-process and trust its CA.
    let (embedded, url, roots) = if a.url.is_none() && a.request.urls_from_file.is_none() {
        let srv = server::start(ServerConfig {
            listen: Some(([127, 0, 0, 1], 0).into()),
            tls_listen: Some(([127, 0, 0, 1], 0).into()),
            ..ServerConfig::default()
        })?;
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
    let out = if a.output.json {
        report::to_json(&rep)
    } else {
        report::text::render(&rep)
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{out}");
    Ok(0)
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
        idle_timeout: parse_duration("--idle-timeout", &a.idle_timeout)?,
        max_requests_per_connection: a.max_requests_per_connection,
        http10: a.http10,
        body_size: a.body_size,
        delay: parse_duration("--delay", &a.delay)?,
        header_timeout: parse_duration("--header-timeout", &a.header_timeout)?,
        max_header_bytes: a.max_header_bytes,
        max_body_bytes: a.max_body_bytes,
        max_connections: a.max_connections,
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
    if cfg.idle_timeout.is_zero() || cfg.header_timeout.is_zero() {
        return Err(UsageError(
            "--idle-timeout and --header-timeout must be more than zero".into(),
        ));
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
