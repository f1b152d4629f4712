//! `audit`'s arguments resolved once: the audit server's configuration (its listener,
//! its limits, the origin it forwards to), how long to wait without a command, and the
//! thresholds; each error naming its flag.

use crate::audit::{AuditConfig, ProxyMode, Upstream};
use crate::cli::AuditArgs;
use crate::parse::{parse_addr, parse_duration, parse_positive_duration, UsageError};
use crate::report::thresholds;
use crate::server::ServerConfig;

/// An audit, resolved.
pub(crate) struct AuditPlan {
    pub config: AuditConfig,
    /// `--duration`: how long to watch without a command (else until Ctrl-C).
    pub duration: Option<std::time::Duration>,
    /// Say where the audit listens on stderr (not with `--no-progress`).
    pub progress: bool,
    /// The client command run against it (none: wait).
    pub command: Vec<String>,
    /// `--cacert-out`: where the audit's CA is written for the client.
    pub cacert_out: Option<std::path::PathBuf>,
    /// How the report is written and judged (`--json`, `--html`, `--fail-if`).
    pub output: crate::report::Output,
}

/// The plan of `handshake audit` with these arguments.
pub(crate) fn audit_plan(a: &AuditArgs) -> anyhow::Result<AuditPlan> {
    let thresholds = thresholds::parse_all(&a.fail_if, thresholds::Subject::Audit)?;
    let listen = parse_addr("--listen", &a.listen)?;
    let idle_timeout = parse_positive_duration("--idle-timeout", &a.limits.idle_timeout)?;
    let header_timeout = parse_positive_duration("--header-timeout", &a.limits.header_timeout)?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| parse_duration("--duration", d))
        .transpose()?;
    let config = AuditConfig {
        listen,
        tls: a.tls,
        client_certs: super::client_certs(&a.client_ca, a.tls, "--tls")?,
        upstream: upstream(a)?,
        proxy: a.proxy_mode.then(|| proxy_mode(a)).transpose()?,
        server: ServerConfig {
            body_size: a.body_size,
            idle_timeout,
            header_timeout,
            max_header_bytes: a.limits.max_header_bytes,
            max_body_bytes: a.limits.max_body_bytes,
            max_connections: a.limits.max_connections,
            ..ServerConfig::default()
        },
    };
    Ok(AuditPlan {
        config,
        duration,
        progress: !a.no_progress,
        command: a.command.clone(),
        cacert_out: a.cacert_out.clone(),
        output: crate::report::Output {
            json: a.json,
            html: a.html.clone(),
            thresholds,
            ..Default::default()
        },
    })
}

/// `--upstream`: the origin the audit server forwards to, and how to reach it.
fn upstream(a: &AuditArgs) -> anyhow::Result<Option<Upstream>> {
    let Some(u) = &a.upstream else {
        return Ok(None);
    };
    let p = super::parse_url(u).map_err(|e| UsageError(format!("--upstream: {e}")))?;
    let origin = crate::net::Origin::new(p.tls, &p.host, p.port)
        .map_err(|e| UsageError(format!("--upstream: {e}")))?;
    let tls = if p.tls {
        let mut opts = crate::net::tls::TlsOptions {
            insecure: a.upstream_insecure,
            ..Default::default()
        };
        if let Some(path) = &a.upstream_cacert {
            opts.extra_roots = crate::net::tls::load_pem_certs("--upstream-cacert", path)
                .map_err(|e| UsageError(format!("{e:#}")))?;
            opts.only_extra_roots = true;
        }
        Some(crate::net::tls::client_config(&opts, true)?)
    } else {
        None
    };
    Ok(Some(Upstream::new(origin, p.authority, tls)))
}

/// `--proxy-mode` with its `--resolve` entries.
fn proxy_mode(a: &AuditArgs) -> anyhow::Result<ProxyMode> {
    let resolve = a
        .resolve
        .iter()
        .map(|r| super::request::parse_resolve(r))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ProxyMode::new(resolve))
}
