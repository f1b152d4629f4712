//! `handshake audit`: its arguments to an audit server (`crate::audit`), a client
//! command run against it, and its report.

use std::os::fd::AsFd;

use anyhow::Context;

use crate::audit::start;
use crate::cli::AuditArgs;
use crate::report::text::audit::render;
use crate::report::thresholds;
use crate::runtime_thread::current_thread_runtime;

pub(crate) fn run(a: AuditArgs) -> anyhow::Result<i32> {
    let plan = crate::config::audit::audit_plan(&a)?;
    crate::interrupt::install();
    let proxy_mode = plan.config.proxy.is_some();
    let running = start(plan.config)?;
    if let Some(path) = &plan.cacert_out {
        std::fs::write(path, &running.ca_pem)
            .with_context(|| format!("--cacert-out {}", path.display()))?;
    }
    let proxy = proxy_mode.then(|| running.url.trim_end_matches('/').to_string());
    match &proxy {
        _ if !plan.progress => {}
        Some(p) => crate::progress::note(&format!(
            "handshake audit: a forward proxy on {p} (the command's HTTP_PROXY and HTTPS_PROXY)"
        )),
        None => crate::progress::note(&format!("handshake audit: listening on {}", running.url)),
    }
    let started_at = crate::host::now_rfc3339();
    let started = std::time::Instant::now();
    let (command, status) = run_client(&plan.command, plan.duration, &running.url, proxy)?;
    let mut report = running.finish(command, status);
    report.interrupted = super::output::ended_by_interrupt("the client's connections", started);
    report.run = Some(crate::report::RunInfo {
        urls: vec![report.url.clone()],
        ..crate::host::run_info("audit", started_at)
    });
    let thresholds::Checked {
        failed,
        lines,
        results,
    } = thresholds::check_report(&plan.output.thresholds, &report)?;
    report.thresholds = results;
    let out = if plan.output.json {
        serde_json::to_string_pretty(&report).expect("audit report serializes")
    } else {
        render(&report, crate::fmt::width())
    };
    let mut unwritten = super::print_out(&out);
    if let Some(path) = &plan.output.html {
        let page = crate::report::html::render_audit(&report);
        unwritten = unwritten.max(super::output::write_file("--html", path, &page));
    }
    for l in lines {
        crate::progress::note(&l);
    }
    // Ctrl-C first; then the command's failure; then the thresholds'.
    Ok(match status {
        _ if report.interrupted.is_some() => crate::interrupt::exit_status(),
        Some(code) if code != 0 => code,
        _ => i32::from(failed).max(unwritten),
    })
}

/// Run the client command against the audit server at `url` (its output to stderr: stdout
/// is the report's), or with no command wait for `duration` or Ctrl-C: the command as
/// run and its exit status.
fn run_client(
    command: &[String],
    duration: Option<std::time::Duration>,
    url: &str,
    proxy: Option<String>,
) -> anyhow::Result<(Option<Vec<String>>, Option<i32>)> {
    Ok(if command.is_empty() {
        let rt = current_thread_runtime()?;
        rt.block_on(async {
            match duration {
                Some(d) => {
                    tokio::select! { _ = tokio::time::sleep(d) => {}, () = crate::interrupt::stopped() => {} }
                }
                None => crate::interrupt::stopped().await,
            }
        });
        (None, None)
    } else {
        let args: Vec<String> = command.iter().map(|x| x.replace("{url}", url)).collect();
        // The command's standard output goes to stderr: stdout is the report's.
        let to_stderr = std::io::stderr().as_fd().try_clone_to_owned()?;
        let mut cmd = std::process::Command::new(&args[0]);
        cmd.args(&args[1..]).env("HANDSHAKE_URL", url);
        if let Some(p) = proxy {
            // Every spelling clients read (curl reads http_proxy in lower case only); no
            // exceptions, so that loopback origins go through the audit too; Node 22.21+
            // and 24 read the variables with NODE_USE_ENV_PROXY.
            for v in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY"] {
                cmd.env(v, &p);
            }
            for v in ["no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"] {
                cmd.env_remove(v);
            }
            cmd.env("NODE_USE_ENV_PROXY", "1");
        }
        let mut child = cmd
            .stdout(std::process::Stdio::from(to_stderr))
            .spawn()
            .with_context(|| format!("starting {}", args[0]))?;
        let st = super::wait_interruptible(&mut child)?;
        // Let the client's last closes and resets arrive.
        std::thread::sleep(std::time::Duration::from_millis(200));
        let code = super::code_of(st);
        (Some(args), Some(code))
    })
}
