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
use crate::config::UsageError;
use crate::embedded::Embedded;
use crate::lab::LinkSpec;
use crate::report::{self, Report};

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
    if path.is_none() && link.cert_chain_bytes.is_some() {
        return Err(UsageError(
            "--cert-chain-bytes pads the embedded server's certificate chain: give no URL (or only a path, like /bytes/47000)".into(),
        ));
    }
    Ok(path)
}

/// Check `--fail-if` on the report's scenarios (each with its comparison row, if any),
/// print the report, then a line per failed threshold on stderr: the exit status (1
/// when one failed).
pub(crate) fn emit_checked(
    rep: &mut Report,
    output: &OutputArgs,
    thresholds: &[report::thresholds::Threshold],
    verbose: bool,
) -> anyhow::Result<i32> {
    let checked = report::thresholds::check_scenarios(thresholds, rep)?;
    rep.thresholds = checked.results;
    let urls = rep.urls();
    if let Some(run) = rep.run.as_mut() {
        run.urls = urls;
    }
    emit(rep, output, verbose)?;
    for l in checked.lines {
        eprintln!("{l}");
    }
    Ok(i32::from(checked.failed))
}

/// A run that measured nothing has failed, and so has one in which no response was a
/// success (2xx, 3xx, or a status `--ok-status` accepts): for each such scenario, one
/// line on stderr saying why; 1 when there was one, else 0.
pub(crate) fn no_success(rep: &Report, accepted: &[(u16, u16)]) -> i32 {
    let lines: Vec<String> = rep
        .scenarios
        .iter()
        .filter_map(|s| report::failure::no_success_line(s, accepted))
        .collect();
    for l in &lines {
        eprintln!("handshake: {l}");
    }
    i32::from(!lines.is_empty())
}

/// When Ctrl-C cut the work short: the mark saying what the report covers (`what`:
/// "the run", "the rounds completed").
pub(crate) fn interrupted(what: &str, rep: &Report) -> Option<report::finding::Finding> {
    crate::interrupt::requested().then(|| {
        let r = rep.scenarios.iter().map(|s| &s.requests);
        let completed = r.clone().map(|r| r.attempted).sum();
        let given_up = r.map(|r| r.aborted_at_deadline).sum();
        report::finding::interrupted(what, completed, given_up)
    })
}

/// Wait for a client command to end; after a Ctrl-C, once its [`ChildGrace`] is over,
/// it is killed, by its PID.
///
/// [`ChildGrace`]: crate::interrupt::ChildGrace
pub(crate) fn wait_interruptible(
    child: &mut std::process::Child,
) -> std::io::Result<std::process::ExitStatus> {
    let mut grace = crate::interrupt::ChildGrace::default();
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(st);
        }
        if grace.over(child.id()) {
            let _ = child.kill();
            return child.wait();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The exit status: `code`, or 130 when Ctrl-C cut the work short.
pub(crate) fn exit_status(code: i32) -> i32 {
    if crate::interrupt::requested() {
        crate::interrupt::EXIT_STATUS
    } else {
        code
    }
}

/// A forward proxy set in the environment (curl's variables, either case) is not used
/// here yet: one line on stderr says so, naming the variable and the proxy without its
/// credentials, so that a user behind a proxy knows the run went direct.
pub(crate) fn proxy_env_note() {
    let vars = [
        "https_proxy",
        "HTTPS_PROXY",
        "http_proxy",
        "HTTP_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ];
    let set: Vec<String> = vars
        .iter()
        .filter_map(|v| {
            let value = std::env::var(v).ok().filter(|x| !x.trim().is_empty())?;
            Some(format!("{v}={}", without_credentials(&value)))
        })
        .collect();
    if !set.is_empty() {
        eprintln!(
            "handshake: {} set, not used: handshake connects to the target directly (it does not go through forward proxies yet)",
            set.join(", ")
        );
    }
}

/// A proxy URL with any `user:password@` left out.
fn without_credentials(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    if scheme.is_empty() {
        host.to_string()
    } else {
        format!("{scheme}://{host}")
    }
}

/// `--ok-status`: the statuses counted as successes beside 2xx and 3xx (read before the
/// run, so a mistake in it costs no run).
pub(crate) fn ok_statuses(output: &OutputArgs) -> Result<Vec<(u16, u16)>, UsageError> {
    match &output.ok_status {
        Some(s) => crate::parse::parse_ok_status("--ok-status", s),
        None => Ok(Vec::new()),
    }
}

/// Print a command's report on stdout; a reader that stopped reading (`| head`) is not
/// an error (println! would panic on the broken pipe).
pub(crate) fn print_out(out: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{out}");
}

/// Print the report (JSON, or text fitted to the terminal, with the explanations when
/// `verbose`) and write the HTML file if asked.
pub(crate) fn emit(rep: &Report, output: &OutputArgs, verbose: bool) -> anyhow::Result<()> {
    if let Some(path) = &output.html {
        std::fs::write(path, report::html::render(rep))
            .with_context(|| format!("--html {}", path.display()))?;
    }
    let out = if output.json {
        report::to_json(rep)
    } else {
        report::text::render(rep, &report::text::Layout::of_terminal(verbose))
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{out}");
    Ok(())
}

/// The target of `trace` and `doctor`: the URL given, or the embedded server (on
/// loopback or across the lab's link, taking TLS early data when `early_data`) with the
/// path given. The lab's link check said on `steps`.
pub(crate) fn single_target(
    url: Option<&str>,
    link: &LinkArgs,
    request: &RequestArgs,
    tls: bool,
    early_data: bool,
    steps: &crate::progress::Steps,
) -> anyhow::Result<(
    String,
    Vec<rustls::pki_types::CertificateDer<'static>>,
    Option<Embedded>,
)> {
    let spec = one_link(link)?;
    let path = embedded_path(url, link, request.urls_from_file.is_some())?;
    match (path, url) {
        (Some(p), _) => {
            let e = Embedded::with_early_data(spec, early_data, link.chain_bytes(), steps)?;
            Ok((e.url(tls, &p), vec![e.srv.ca_der.clone()], Some(e)))
        }
        (None, Some(u)) => Ok((u.to_string(), Vec::new(), None)),
        (None, None) => {
            Err(UsageError("--urls-from-file: this command takes one URL".into()).into())
        }
    }
}
