//! `handshake lab -- COMMAND`: a server on the lab's server side, a command on its
//! client side, the emulated link between.

use std::os::fd::AsFd;

use anyhow::Context;

use crate::cli::LabArgs;
use crate::config::UsageError;
use crate::embedded::lab_server;
use crate::fmt::plural_s;
use crate::lab::Lab;
use crate::server::ServerConfig;

/// The server (the embedded one, or `--server-cmd`) and the command: the command's
/// output passes through and its status is the lab's.
pub(crate) fn run(a: LabArgs) -> anyhow::Result<i32> {
    let spec = crate::config::parse_link(&a.link, false)?[0];
    if a.https && a.server_cmd.is_some() {
        return Err(UsageError("--https: with --server-cmd, write the https:// URL yourself (the server's address is {addr}, its port {port})".into()).into());
    }
    let mut l = Lab::start(spec)?;
    let dir = std::env::temp_dir().join(format!("handshake-lab-{}", std::process::id()));
    let _dir_guard = crate::lab::TempDir::create(&dir)?;
    let cacert = dir.join("ca.pem");
    let (srv, url, https_url) = server_side(&a, &mut l, &cacert)?;
    let steps = crate::progress::Steps::on_terminal("lab", !a.no_progress);
    l.measure(&steps)?;
    steps.finish();
    say(&l.report().describe());
    say(&format!("running the command against {url}"));
    let ca = cacert.display().to_string();
    let args: Vec<String> = a
        .command
        .iter()
        .map(|x| crate::lab::fill(x, &url, &https_url, &ca))
        .collect();
    let mut cmd = std::process::Command::new(&args[0]);
    cmd.args(&args[1..])
        .env("HANDSHAKE_URL", &url)
        .env("HANDSHAKE_HTTPS_URL", &https_url)
        .env("HANDSHAKE_CACERT", &ca);
    let started = std::time::Instant::now();
    let mut child = l
        .spawn_client(&mut cmd)
        .with_context(|| format!("starting {}", args[0]))?;
    let st = child.wait();
    l.forget(child.id());
    let code = super::code_of(st?);
    let server = srv.map(|s| {
        let snap = s.snapshot();
        s.stop();
        snap
    });
    let link = l.finish();
    Ok(report(&a, &link, server, &args, code, started))
}

/// The server side: the embedded server (its CA written to `cacert`) or `--server-cmd`
/// listening; its URL (HTTPS with `--https`) and its HTTPS URL.
fn server_side(
    a: &LabArgs,
    l: &mut Lab,
    cacert: &std::path::Path,
) -> anyhow::Result<(Option<crate::server::RunningServer>, String, String)> {
    let Some(cmd) = &a.server_cmd else {
        let cfg = ServerConfig {
            body_size: a.body_size,
            cert_chain_bytes: a.link.chain_bytes(),
            client_certs: crate::config::client_certs(&a.client_ca, true, "")?,
            ..ServerConfig::default()
        };
        let srv = lab_server(l, cfg)?;
        std::fs::write(cacert, &srv.ca_pem).context("writing the CA file")?;
        let http = srv.http_url().expect("http listener");
        let https = srv.https_url().expect("https listener");
        let url = if a.https { https.clone() } else { http };
        return Ok((Some(srv), url, https));
    };
    let addr = std::net::SocketAddr::from((crate::lab::SERVER_ADDR, a.port));
    let line = cmd
        .replace("{addr}", &crate::lab::SERVER_ADDR.to_string())
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
    std::fs::write(cacert, "").context("writing the CA file")?;
    Ok((None, format!("http://{addr}/"), format!("https://{addr}/")))
}

/// The lab's own report (on stderr; stdout is the command's) and its exit status: the
/// command's, or 130 after a Ctrl-C.
fn report(
    a: &LabArgs,
    link: &crate::report::link::LinkReport,
    server: Option<crate::server::StatsSnapshot>,
    args: &[String],
    code: i32,
    started: std::time::Instant,
) -> i32 {
    let interrupted = super::output::ended_by_interrupt("the link and the command's run", started);
    if a.json {
        let v = serde_json::json!({ "link": link, "server": server, "command": args, "exit_status": code, "interrupted": interrupted });
        crate::progress::note(&serde_json::to_string_pretty(&v).expect("serializes"));
    } else {
        say(&link.describe_line());
        say(&format!("the link: {}", link.describe_held()));
        if let Some(s) = server {
            say(&format!(
                "embedded server: {} accepted, {}, TLS handshakes full {} resumed {}",
                plural_s(s.connections_accepted, "connection"),
                plural_s(s.requests, "request"),
                s.tls_handshakes_full,
                s.tls_handshakes_resumed
            ));
        }
        say(&format!("the command exited with {code}"));
        if let Some(i) = &interrupted {
            say(&i.text);
        }
    }
    if interrupted.is_some() {
        crate::interrupt::exit_status()
    } else {
        code
    }
}

/// A line of the lab's own on stderr, fitted to the width.
fn say(line: &str) {
    crate::progress::note(&crate::fmt::fit(
        &format!("handshake lab: {line}"),
        crate::fmt::width(),
    ));
}
