//! The commands: glue from parsed arguments to config, engine, server and report.

use std::io::Write;
use std::os::fd::AsFd;
use std::sync::Arc;

use anyhow::Context;

use crate::cli::{
    AuditArgs, BenchArgs, Cli, Command, CompareArgs, DoctorArgs, LabArgs, LinkArgs, OutputArgs,
    RequestArgs, ServeArgs, TraceArgs,
};
use crate::compare;
use crate::config::{self, parse_duration, parse_positive_duration, UsageError};
use crate::engine;
use crate::lab::{self, Lab, LinkReport, LinkSpec};
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
        Command::Lab(a) => lab(a),
    }
}

pub fn bench(a: BenchArgs) -> anyhow::Result<i32> {
    let strategy = if a.disable_keepalive {
        Strategy::Close
    } else {
        config::parse_strategy("--strategy", &a.strategy)?
    };
    let load = config::load_config(&a.load, config::BENCH_DEFAULTS)?;
    let spec = one_link(&a.link)?;
    let path = embedded_path(
        a.url.as_deref(),
        &a.link,
        a.request.urls_from_file.is_some(),
    )?;
    // Without a URL, start the embedded server (in-process, or across the lab's link) and
    // trust its CA.
    let embedded = path
        .as_ref()
        .map(|_| Embedded::start(spec, ServerConfig::default()))
        .transpose()?;
    let (url, roots) = match (&embedded, &path) {
        (Some(e), Some(p)) => (
            Some(e.url(a.embedded_tls || strategy == Strategy::CloseResumed, p)),
            vec![e.srv.ca_der.clone()],
        ),
        _ => (a.url.clone(), Vec::new()),
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
    let progress = !a.output.no_progress;
    let run = || engine::run(sc.clone(), progress);
    let result = match &embedded {
        Some(e) => e.client(run)??,
        None => run()?,
    };
    let mut rep = Report::new(vec![summary::summarize(
        &sc,
        &result.recorder,
        result.wall,
        result.cpu,
    )]);
    if let Some(e) = embedded {
        let (server, link) = e.finish();
        rep.server = Some(server);
        rep.link = link;
    }
    emit(&rep, &a.output)?;
    Ok(0)
}

/// The link a command without a URL runs across (`--rtt` and the rest), if any.
fn one_link(f: &LinkArgs) -> Result<Option<LinkSpec>, UsageError> {
    if !f.any() {
        return Ok(None);
    }
    Ok(lab::parse_link(f, false)?.into_iter().next())
}

/// The path to ask the embedded server for, when the command runs against it: no URL, or
/// a URL that is only a path (`/bytes/47000`). `None` for a URL of a server elsewhere;
/// the link flags need the embedded server.
fn embedded_path(
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
fn lab_server(lab: &Lab, cfg: ServerConfig) -> anyhow::Result<server::RunningServer> {
    let cfg = ServerConfig {
        listen: Some((lab::SERVER_ADDR, 80).into()),
        tls_listen: Some((lab::SERVER_ADDR, 443).into()),
        ..cfg
    };
    lab.in_server(move || server::start(cfg))?
}

/// The embedded server, on loopback or on the server side of a lab.
struct Embedded {
    srv: server::RunningServer,
    lab: Option<Lab>,
}

impl Embedded {
    fn start(spec: Option<LinkSpec>, cfg: ServerConfig) -> anyhow::Result<Embedded> {
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
    fn url(&self, tls: bool, path: &str) -> String {
        let base = if tls {
            self.srv.https_url()
        } else {
            self.srv.http_url()
        }
        .expect("the embedded server has both listeners");
        format!("{}{}", base.trim_end_matches('/'), path)
    }

    /// Run `f` where the client is: in the lab's client namespace, or right here.
    fn client<T: Send>(&self, f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
        match &self.lab {
            Some(l) => l.in_client(f),
            None => Ok(f()),
        }
    }

    fn rtt_set_ms(&self) -> Option<f64> {
        self.lab.as_ref().map(|l| l.spec.rtt.as_secs_f64() * 1000.0)
    }

    /// Stop the server (and the lab): its counts and the link's report.
    fn finish(self) -> (server::StatsSnapshot, Option<LinkReport>) {
        let snapshot = self.srv.snapshot();
        self.srv.stop();
        (snapshot, self.lab.map(Lab::finish))
    }
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
    // Across a link every round costs round trips; 6 is the fewest that give an interval.
    let rounds = a.rounds.unwrap_or(if a.link.any() { 6 } else { 10 });
    if rounds == 0 || rounds > 1000 {
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
    let path = embedded_path(
        a.url.as_deref(),
        &a.link,
        a.request.urls_from_file.is_some(),
    )?;
    let specs: Vec<Option<LinkSpec>> = if a.link.any() {
        lab::parse_link(&a.link, true)?
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
    let mut scenarios = Vec::new();
    let mut points = Vec::new();
    let mut names = Vec::new();
    let mut single = None;
    for spec in specs {
        let embedded = path
            .as_ref()
            .map(|_| Embedded::start(spec, ServerConfig::default()))
            .transpose()?;
        let prefix = spec
            .filter(|_| sweep)
            .map(|s| format!("{}ms ", lab::fmt_num(s.rtt.as_secs_f64() * 1000.0)));
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
            compare::run(
                &arms,
                rounds,
                embedded.as_ref().map(|e| &e.srv),
                noise_threshold,
                embedded.as_ref().and_then(Embedded::rtt_set_ms),
            )
        };
        let result = match &embedded {
            Some(e) => e.client(run)??,
            None => run()?,
        };
        let (server, link) = match embedded {
            Some(e) => {
                let (s, l) = e.finish();
                (Some(s), l)
            }
            None => (None, None),
        };
        scenarios.extend(result.scenarios);
        match (sweep, link) {
            (true, Some(link)) => points.push(compare::RttPoint {
                rtt_set_ms: link.rtt_set_ms,
                link,
                server,
                comparison: result.comparison,
            }),
            (_, link) => single = Some((result.comparison, server, link)),
        }
    }
    let mut rep = Report::new(scenarios);
    if let Some((comparison, server, link)) = single {
        rep.comparison = Some(comparison);
        rep.server = server;
        rep.link = link;
    }
    if sweep {
        rep.rtt_sweep = Some(compare::RttSweep::new(points, &names));
    }
    emit(&rep, &a.output)?;
    Ok(0)
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
) -> anyhow::Result<Vec<compare::Arm>> {
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
    let mut arms = Vec::new();
    for (group, url) in &targets {
        let req = config::request_config(&a.request, url.as_deref(), roots.clone())?;
        let tls = req.urls.iter().any(|(_, u)| u.tls);
        let strategies = match chosen {
            // With the embedded server, a TLS-only strategy is left out of the HTTP group.
            Some(c) if embedded.is_some() => c
                .iter()
                .copied()
                .filter(|s| tls || *s != Strategy::CloseResumed)
                .collect(),
            Some(c) => c.to_vec(),
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
                format!("{prefix}{group} {base}")
            } else {
                base
            };
            let sc = config::scenario(&name, st, a.requests_per_connection, &req, load)?;
            arms.push(compare::Arm {
                name,
                group: group.clone(),
                scenario: Arc::new(sc),
            });
        }
    }
    Ok(arms)
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

fn current_thread_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// The target of `trace` and `doctor`: the URL given, or the embedded server (on
/// loopback or across the lab's link) with the path given.
fn single_target(
    url: Option<&str>,
    link: &LinkArgs,
    request: &RequestArgs,
    tls: bool,
) -> anyhow::Result<(
    String,
    Vec<rustls::pki_types::CertificateDer<'static>>,
    Option<Embedded>,
)> {
    let spec = one_link(link)?;
    let path = embedded_path(url, link, request.urls_from_file.is_some())?;
    match (path, url) {
        (Some(p), _) => {
            let e = Embedded::start(spec, ServerConfig::default())?;
            Ok((e.url(tls, &p), vec![e.srv.ca_der.clone()], Some(e)))
        }
        (None, Some(u)) => Ok((u.to_string(), Vec::new(), None)),
        (None, None) => {
            Err(UsageError("--urls-from-file: this command takes one URL".into()).into())
        }
    }
}

pub fn trace(a: TraceArgs) -> anyhow::Result<i32> {
    if a.count == 0 || a.count > 100_000 {
        return Err(UsageError("--count must be between 1 and 100000".into()).into());
    }
    let strategy = config::parse_strategy("--strategy", &a.strategy)?;
    let (url, roots, embedded) =
        single_target(a.url.as_deref(), &a.link, &a.request, a.embedded_tls)?;
    let sc = single_url_scenario(&a.request, &url, roots, strategy, a.count, &a.timeout)?;
    let run = || -> anyhow::Result<crate::trace::TraceReport> {
        Ok(current_thread_runtime()?.block_on(crate::trace::run(&sc, a.count)))
    };
    let mut t = match &embedded {
        Some(e) => e.client(run)??,
        None => run()?,
    };
    if let Some(e) = embedded {
        t.link = e.finish().1;
    }
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
    let (url, roots, embedded) =
        single_target(a.url.as_deref(), &a.link, &a.request, a.embedded_tls)?;
    let sc = single_url_scenario(
        &a.request,
        &url,
        roots.clone(),
        Strategy::KeepAlive,
        1,
        &a.timeout,
    )?;
    let run = || -> anyhow::Result<crate::doctor::DoctorReport> {
        current_thread_runtime()?.block_on(crate::doctor::run(
            &sc,
            &a.request,
            &roots,
            a.max_requests,
            max_idle,
        ))
    };
    let mut d = match &embedded {
        Some(e) => e.client(run)??,
        None => run()?,
    };
    if let Some(e) = embedded {
        d.link = e.finish().1;
    }
    let out = if a.json {
        serde_json::to_string_pretty(&d).expect("doctor report serializes")
    } else {
        crate::doctor::render(&d)
    };
    println!("{out}");
    Ok(if d.problems.is_empty() { 0 } else { 1 })
}

/// `handshake lab -- COMMAND`: a server (the embedded one, or `--server-cmd`) on the
/// server side, the command on the client side, the link between; the command's output
/// passes through and its status is the lab's.
pub fn lab(a: LabArgs) -> anyhow::Result<i32> {
    let spec = lab::parse_link(&a.link, false)?[0];
    let mut l = Lab::start(spec)?;
    let dir = std::env::temp_dir().join(format!("handshake-lab-{}", std::process::id()));
    let _dir_guard = lab::TempDir::create(&dir)?;
    let cacert = dir.join("ca.pem");
    let (srv, url, https_url) = match &a.server_cmd {
        None => {
            let cfg = ServerConfig {
                body_size: a.body_size,
                ..ServerConfig::default()
            };
            let srv = lab_server(&l, cfg)?;
            std::fs::write(&cacert, &srv.ca_pem).context("writing the CA file")?;
            let http = srv.http_url().expect("http listener");
            let https = srv.https_url().expect("https listener");
            (Some(srv), if a.https { https.clone() } else { http }, https)
        }
        Some(cmd) => {
            if a.https {
                return Err(UsageError("--https: with --server-cmd, write the https:// URL yourself (the server's address is {addr}, its port {port})".into()).into());
            }
            let addr = std::net::SocketAddr::from((lab::SERVER_ADDR, a.port));
            let line = cmd
                .replace("{addr}", &lab::SERVER_ADDR.to_string())
                .replace("{port}", &a.port.to_string());
            // The server's output goes to stderr: stdout is the command's.
            let to_stderr = std::io::stderr().as_fd().try_clone_to_owned()?;
            let mut child = l
                .spawn_server(
                    std::process::Command::new("sh")
                        .arg("-c")
                        .arg(&line)
                        .stdout(std::process::Stdio::from(to_stderr)),
                )
                .with_context(|| format!("starting --server-cmd {line:?}"))?;
            if let Err(e) = l.wait_listening(addr, &mut child, std::time::Duration::from_secs(15)) {
                l.forget(child.id());
                return Err(e);
            }
            std::fs::write(&cacert, "").context("writing the CA file")?;
            (None, format!("http://{addr}/"), format!("https://{addr}/"))
        }
    };
    l.measure()?;
    eprintln!("handshake lab: {}", l.report().describe());
    eprintln!("handshake lab: running the command against {url}");
    let ca = cacert.display().to_string();
    // `{{` and `}}` stand for literal braces: `{{url}}` is left as `{url}` for a command
    // that fills it itself (`handshake audit -- curl {{url}}`).
    let fill = |x: &String| {
        x.replace("{{", "\u{0}(")
            .replace("}}", "\u{0})")
            .replace("{https_url}", &https_url)
            .replace("{url}", &url)
            .replace("{cacert}", &ca)
            .replace("\u{0}(", "{")
            .replace("\u{0})", "}")
    };
    let args: Vec<String> = a.command.iter().map(fill).collect();
    let mut cmd = std::process::Command::new(&args[0]);
    cmd.args(&args[1..])
        .env("HANDSHAKE_URL", &url)
        .env("HANDSHAKE_HTTPS_URL", &https_url)
        .env("HANDSHAKE_CACERT", &ca);
    let mut child = l
        .spawn_client(&mut cmd)
        .with_context(|| format!("starting {}", args[0]))?;
    let st = child.wait();
    l.forget(child.id());
    let st = st?;
    let code = st.code().unwrap_or_else(|| {
        use std::os::unix::process::ExitStatusExt;
        128 + st.signal().unwrap_or(0)
    });
    let server = srv.map(|s| {
        let snap = s.snapshot();
        s.stop();
        snap
    });
    let link = l.finish();
    if a.json {
        let v = serde_json::json!({ "link": link, "server": server, "command": args, "exit_status": code });
        eprintln!("{}", serde_json::to_string_pretty(&v).expect("serializes"));
    } else {
        eprintln!("handshake lab: {}", link.describe_line());
        if let Some(s) = server {
            eprintln!(
                "handshake lab: embedded server: {} connections accepted, {} requests, TLS handshakes full {} resumed {}",
                s.connections_accepted, s.requests, s.tls_handshakes_full, s.tls_handshakes_resumed
            );
        }
        eprintln!("handshake lab: the command exited with {code}");
    }
    Ok(code)
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
