//! The commands, one module each: glue from parsed arguments to config, engine, server,
//! lab and report. Helpers they share (the embedded server on loopback or across a lab's
//! link, printing a report, small parsers) live here.

pub mod audit;
pub mod bench;
pub mod compare;
pub mod doctor;
pub mod lab;
pub mod merge;
pub mod packaging;
pub mod serve;

pub mod trace;
pub mod watch;

use std::io::Write;

use anyhow::Context;

use crate::cli::{Cli, Command, LinkArgs, OutputArgs, RequestArgs};
use crate::config::{self, parse_positive_duration, UsageError};
use crate::lab::{Lab, LinkSpec};
use crate::plan::Strategy;
use crate::report::link::LinkReport;
use crate::report::{self, Report};
use crate::server::{self, ServerConfig};

pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Bench(a) => bench::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Trace(a) => trace::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Audit(a) => audit::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Lab(a) => lab::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Watch(a) => watch::run(a),
        Command::Completions(a) => packaging::completions(a),
        Command::Man(a) => packaging::man(a),
    }
}

/// The link a command without a URL runs across (`--rtt` and the rest), if any.
pub(crate) fn one_link(f: &LinkArgs) -> Result<Option<LinkSpec>, UsageError> {
    if !f.any() {
        return Ok(None);
    }
    Ok(crate::config::parse_link(f, false)?.into_iter().next())
}

/// The path to ask the embedded server for, when the command runs against it: no URL, or
/// a URL that is only a path (`/bytes/47000`). `None` for a URL of a server elsewhere;
/// the link flags need the embedded server.
pub(crate) fn embedded_path(
    url: Option<&str>,
    link: &LinkArgs,
    urls_from_file: bool,
) -> Result<Option<String>, UsageError> {
    let path = match url {
        _ if urls_from_file => None,
        None => Some("/".to_string()),
        Some(u) if u.starts_with('/') => Some(u.to_string()),
        Some(_) => None,
    };
    if path.is_none() && link.any() {
        return Err(UsageError(
            "--rtt, --jitter, --loss and --bandwidth emulate a link to the embedded server: give no URL (or only a path, like /bytes/47000); to put another server or client across the link, use `handshake lab`".into(),
        ));
    }
    Ok(path)
}

/// The embedded server on the lab's server side. That side is a namespace of the lab's
/// own: the standard ports are free.
pub(crate) fn lab_server(lab: &Lab, cfg: ServerConfig) -> anyhow::Result<server::RunningServer> {
    let cfg = ServerConfig {
        listen: Some((crate::lab::SERVER_ADDR, 80).into()),
        tls_listen: Some((crate::lab::SERVER_ADDR, 443).into()),
        ..cfg
    };
    lab.in_server(move || server::start(cfg))?
}

/// The embedded server, on loopback or on the server side of a lab.
pub(crate) struct Embedded {
    pub(crate) srv: server::RunningServer,
    pub(crate) lab: Option<Lab>,
}

impl Embedded {
    pub(crate) fn start(spec: Option<LinkSpec>, cfg: ServerConfig) -> anyhow::Result<Embedded> {
        let Some(spec) = spec else {
            return Ok(Embedded {
                srv: server::start(ServerConfig {
                    listen: Some(([127, 0, 0, 1], 0).into()),
                    tls_listen: Some(([127, 0, 0, 1], 0).into()),
                    ..cfg
                })?,
                lab: None,
            });
        };
        let mut lab = Lab::start(spec)?;
        let srv = lab_server(&lab, cfg)?;
        lab.measure()?;
        Ok(Embedded {
            srv,
            lab: Some(lab),
        })
    }

    /// The URL of `path` on the HTTP or HTTPS listener.
    pub(crate) fn url(&self, tls: bool, path: &str) -> String {
        let base = if tls {
            self.srv.https_url()
        } else {
            self.srv.http_url()
        }
        .expect("the embedded server has both listeners");
        format!("{}{}", base.trim_end_matches('/'), path)
    }

    /// Run `f` where the client is: in the lab's client namespace, or right here.
    pub(crate) fn client<T: Send>(&self, f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
        match &self.lab {
            Some(l) => l.in_client(f),
            None => Ok(f()),
        }
    }

    pub(crate) fn rtt_set_ms(&self) -> Option<f64> {
        self.lab.as_ref().map(|l| l.spec.rtt.as_secs_f64() * 1000.0)
    }

    /// Stop the server (and the lab): its counts and the link's report.
    pub(crate) fn finish(self) -> (server::StatsSnapshot, Option<LinkReport>) {
        let snapshot = self.srv.snapshot();
        self.srv.stop();
        (snapshot, self.lab.map(Lab::finish))
    }
}

/// Run `f` on the client's side: that of the embedded server's lab when there is one,
/// else right here (a URL given, or the embedded server on loopback).
pub(crate) fn on_client<T: Send>(
    embedded: Option<&Embedded>,
    f: impl FnOnce() -> T + Send,
) -> anyhow::Result<T> {
    match embedded {
        Some(e) => e.client(f),
        None => Ok(f()),
    }
}

/// Check `--fail-if` on the report's scenarios (each with its comparison row, if any),
/// print the report, then a line per failed threshold on stderr: the exit status (1
/// when one failed).
pub(crate) fn emit_checked(
    rep: &mut Report,
    output: &OutputArgs,
    thresholds: &[report::thresholds::Threshold],
) -> anyhow::Result<i32> {
    if thresholds.is_empty() {
        emit(rep, output)?;
        return Ok(0);
    }
    let rows: Vec<&report::comparison::ComparisonRow> = rep
        .comparisons()
        .into_iter()
        .flat_map(|c| c.rows.iter())
        .collect();
    let subjects: Vec<(Option<String>, String, serde_json::Value)> = rep
        .scenarios
        .iter()
        .map(|s| {
            let mut v = serde_json::to_value(s).expect("a scenario serializes");
            if let Some(row) = rows.iter().find(|r| r.name == s.name) {
                v["comparison"] = serde_json::to_value(row).expect("a row serializes");
            }
            (Some(s.name.clone()), s.strategy.clone(), v)
        })
        .collect();
    let results = report::thresholds::check(thresholds, &subjects)?;
    let failed = results.iter().any(|r| r.failed);
    let lines = report::thresholds::describe(&results, thresholds);
    rep.thresholds = Some(results);
    emit(rep, output)?;
    for l in lines {
        eprintln!("{l}");
    }
    Ok(i32::from(failed))
}

/// A run that measured nothing has failed: for each scenario without a successful
/// request, one line on stderr saying why; 1 when there was one, else 0.
pub(crate) fn no_success(rep: &Report) -> i32 {
    let lines: Vec<String> = rep
        .scenarios
        .iter()
        .filter_map(report::failure::no_success_line)
        .collect();
    for l in &lines {
        eprintln!("handshake: {l}");
    }
    i32::from(!lines.is_empty())
}

/// Print the report (text or JSON) and write the HTML file if asked.
pub(crate) fn emit(rep: &Report, output: &OutputArgs) -> anyhow::Result<()> {
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

/// Now, RFC 3339 in UTC.
pub(crate) fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    // To the millisecond: agents' clocks agree to no better.
    now.replace_nanosecond(now.nanosecond() / 1_000_000 * 1_000_000)
        .unwrap_or(now)
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// This machine's host name (gethostname), or "unknown".
pub(crate) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it
    // (or truncates, which the search for NUL below handles).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

pub(crate) fn on_off(flag: &str, s: &str) -> Result<bool, UsageError> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(UsageError(format!("{flag}: expected on or off, not {s:?}"))),
    }
}

pub(crate) fn parse_addr(flag: &str, s: &str) -> Result<std::net::SocketAddr, UsageError> {
    s.parse().map_err(|_| {
        UsageError(format!(
            "{flag}: {s:?} is not an address like 127.0.0.1:8080"
        ))
    })
}

/// A one-URL scenario for `trace` and `doctor` (one worker, `count` requests).
pub(crate) fn single_url_scenario(
    request: &RequestArgs,
    url: &str,
    roots: Vec<rustls::pki_types::CertificateDer<'static>>,
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
    let req = config::request_config(request, Some(url), roots)?;
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

pub(crate) fn current_thread_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The target of `trace` and `doctor`: the URL given, or the embedded server (on
/// loopback or across the lab's link, taking TLS early data when `early_data`) with the
/// path given.
pub(crate) fn single_target(
    url: Option<&str>,
    link: &LinkArgs,
    request: &RequestArgs,
    tls: bool,
    early_data: bool,
) -> anyhow::Result<(
    String,
    Vec<rustls::pki_types::CertificateDer<'static>>,
    Option<Embedded>,
)> {
    let spec = one_link(link)?;
    let path = embedded_path(url, link, request.urls_from_file.is_some())?;
    match (path, url) {
        (Some(p), _) => {
            let cfg = ServerConfig {
                early_data,
                ..ServerConfig::default()
            };
            let e = Embedded::start(spec, cfg)?;
            Ok((e.url(tls, &p), vec![e.srv.ca_der.clone()], Some(e)))
        }
        (None, Some(u)) => Ok((u.to_string(), Vec::new(), None)),
        (None, None) => {
            Err(UsageError("--urls-from-file: this command takes one URL".into()).into())
        }
    }
}
