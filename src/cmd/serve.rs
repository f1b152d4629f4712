//! `handshake serve`: the embedded target server as a process.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;

use crate::cli::ServeArgs;
use crate::config::{parse_duration, parse_positive_duration, UsageError};
use crate::parse::{on_off, parse_addr};
use crate::server::{self, ServerConfig};

/// A listen address: `ADDR:PORT`, or `unix:PATH` (a Unix domain socket).
fn listener(flag: &str, v: &str) -> Result<Listen, UsageError> {
    match v.strip_prefix("unix:") {
        Some("") => Err(UsageError(format!("{flag} {v:?}: unix: needs a path"))),
        Some(path) => Ok((None, Some(PathBuf::from(path)))),
        None => Ok((Some(parse_addr(flag, v)?), None)),
    }
}

/// A TCP address or a Unix socket's path.
type Listen = (Option<std::net::SocketAddr>, Option<PathBuf>);

fn serve_config(a: &ServeArgs) -> Result<ServerConfig, UsageError> {
    let (listen, listen_unix) = listener("--listen", &a.listen)?;
    let (tls_listen, tls_listen_unix) = if a.no_tls {
        (None, None)
    } else {
        listener("--tls-listen", &a.tls_listen)?
    };
    let cfg = ServerConfig {
        listen,
        tls_listen,
        listen_unix,
        tls_listen_unix,
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
        h2: on_off("--h2", &a.h2)?,
        max_concurrent_streams: a.max_concurrent_streams,
        early_data: on_off("--early-data", &a.early_data)?,
        h3: on_off("--h3", &a.h3)?,
        cert_chain_bytes: a.cert_chain_bytes.map(|n| n as usize),
        client_certs: crate::config::client_certs(
            &a.client_ca,
            !a.no_tls,
            "the HTTPS listener (not --no-tls)",
        )?,
    };
    if cfg.max_requests_per_connection == Some(0) {
        return Err(UsageError(
            "--max-requests-per-connection must be at least 1".into(),
        ));
    }
    if cfg.max_concurrent_streams == 0 {
        return Err(UsageError(
            "--max-concurrent-streams must be at least 1 (0 would refuse every HTTP/2 request)"
                .into(),
        ));
    }
    if cfg.threads == 0 {
        return Err(UsageError("--threads must be at least 1".into()));
    }
    Ok(cfg)
}

pub(crate) fn run(a: ServeArgs) -> anyhow::Result<i32> {
    let cfg = serve_config(&a)?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| parse_duration("--duration", d))
        .transpose()?;
    let cfg_h3 = cfg.h3 && cfg.tls_listen.is_some();
    let unix = (cfg.listen_unix.clone(), cfg.tls_listen_unix.clone());
    // A descriptor per connection up to --max-connections, as far as this process may.
    let needed = crate::net::descriptors::needed(cfg.max_connections);
    crate::net::descriptors::raise_to_hard();
    if let Err(limit) = crate::net::descriptors::reserve(needed) {
        crate::progress::note(&format!(
            "handshake serve: --max-connections {} needs about {needed} open files, and this process may open {limit} (ulimit -n): connections past that wait in the listen queue until others close",
            cfg.max_connections
        ));
    }
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
            if cfg_h3 {
                let _ = writeln!(out, "listening {u} (HTTP/3, UDP)");
            }
        }
        for (path, scheme) in [(&unix.0, "http"), (&unix.1, "https")] {
            if let Some(p) = path {
                let _ = writeln!(out, "listening unix:{} ({scheme})", p.display());
            }
        }
        let _ = out.flush();
    }
    // Until -d passes, or SIGINT or SIGTERM: then the server's own counts, and the
    // signal's exit status (130, 143).
    crate::interrupt::install();
    let rt = crate::runtime_thread::current_thread_runtime()?;
    rt.block_on(async {
        match duration {
            Some(d) => {
                tokio::select! {
                    () = tokio::time::sleep(d) => {},
                    () = crate::interrupt::stopped() => {},
                }
            }
            None => crate::interrupt::stopped().await,
        }
    });
    let s = srv.snapshot();
    crate::progress::note(&format!(
        "handshake serve: {} connections accepted ({} HTTP/2, {} HTTP/3), {} requests ({} HTTP/2 streams, {} HTTP/3), TLS handshakes full {} resumed {}",
        s.connections_accepted,
        s.h2_connections,
        s.h3_connections,
        s.requests,
        s.h2_streams,
        s.h3_requests,
        s.tls_handshakes_full,
        s.tls_handshakes_resumed
    ));
    srv.stop();
    Ok(super::exit_status(0))
}
