//! `handshake lab`: a distant server emulated on this machine. Two network namespaces
//! (client side, server side) joined by a link with a set round-trip time, jitter, loss
//! and bandwidth, so the kernel's real TCP and TLS pay real round trips.
//!
//! The link is the kernel's netem on a veth pair ([`netem`]) where the kernel has it, else
//! handshake's own delay line ([`delay`]) between a TUN device on each side (the kernel
//! here has no netem). The namespaces are anonymous and go with the process (see
//! [`netns`]); commands and servers started inside are stopped by PID.

pub mod delay;
pub mod netem;
pub mod netns;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::cli::LinkArgs;
use crate::parse::{parse_duration, parse_percent, UsageError};
pub use delay::{LineStats, Shape};

/// The client side's address.
pub const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 1);
/// The server side's address (the embedded server's certificate names it).
pub const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 2);
/// The TUN devices' MTU: Ethernet's.
pub const MTU: u32 = 1500;
/// TCP connects timed across the link before the run.
const PROBE_CONNECTS: usize = 5;

/// What the link should do (the command line's `--rtt/--jitter/--loss/--bandwidth`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkSpec {
    pub rtt: Duration,
    pub jitter: Duration,
    /// Per direction, independent, 0..1.
    pub loss: f64,
    pub bandwidth_bps: Option<u64>,
    pub emulator: Emulator,
}

/// Which emulator makes the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emulator {
    /// netem where the kernel has it, else the delay line.
    Auto,
    Netem,
    DelayLine,
}

impl LinkSpec {
    pub fn shape(&self) -> Shape {
        Shape {
            one_way: self.rtt / 2,
            jitter: self.jitter,
            loss: self.loss,
            bandwidth_bps: self.bandwidth_bps,
        }
    }
}

impl LinkArgs {
    /// Whether any link flag was given (then the run crosses a lab's link).
    pub fn any(&self) -> bool {
        self.rtt.is_some()
            || self.jitter.is_some()
            || self.loss.is_some()
            || self.bandwidth.is_some()
            || self.emulator.is_some()
    }
}

/// Parse the link flags: one spec per RTT listed (`--rtt 0,10ms,40ms`); `many` says
/// whether a list is allowed.
pub fn parse_link(f: &LinkArgs, many: bool) -> Result<Vec<LinkSpec>, UsageError> {
    let rtts: Vec<Duration> = match &f.rtt {
        None => vec![Duration::ZERO],
        Some(s) => s
            .split(',')
            .map(|x| parse_duration("--rtt", x))
            .collect::<Result<_, _>>()?,
    };
    if rtts.is_empty() || (!many && rtts.len() > 1) {
        return Err(UsageError(format!(
            "--rtt: expected one round-trip time like 40ms, not {:?}",
            f.rtt.as_deref().unwrap_or("")
        )));
    }
    if let Some(r) = rtts.iter().find(|r| **r > Duration::from_secs(10)) {
        return Err(UsageError(format!(
            "--rtt: {r:?} is over the 10 s the link can hold"
        )));
    }
    let jitter = f
        .jitter
        .as_deref()
        .map(|j| parse_duration("--jitter", j))
        .transpose()?
        .unwrap_or_default();
    if jitter > Duration::from_secs(10) {
        return Err(UsageError("--jitter: at most 10 s".into()));
    }
    let loss = f
        .loss
        .as_deref()
        .map(|l| parse_percent("--loss", l))
        .transpose()?
        .unwrap_or(0.0);
    let bandwidth_bps = f.bandwidth.as_deref().map(parse_bandwidth).transpose()?;
    let emulator = match f.emulator.as_deref().map(str::trim) {
        None | Some("auto") => Emulator::Auto,
        Some("netem") => Emulator::Netem,
        Some("delay-line") => Emulator::DelayLine,
        Some(other) => {
            return Err(UsageError(format!(
                "--emulator: expected auto, netem or delay-line, not {other:?}"
            )))
        }
    };
    Ok(rtts
        .into_iter()
        .map(|rtt| LinkSpec {
            rtt,
            jitter,
            loss,
            bandwidth_bps,
            emulator,
        })
        .collect())
}

/// `10mbit`, `500kbit`, `1gbit`, `64000bit` (tc's units: SI, bits per second).
pub fn parse_bandwidth(s: &str) -> Result<u64, UsageError> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("gbit") {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix("mbit") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("kbit") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("bit") {
        (n, 1.0)
    } else {
        (t.as_str(), f64::NAN)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if mult.is_finite() && v.is_finite() && v * mult >= 8000.0 && v * mult <= 1e11 => {
            Ok((v * mult) as u64)
        }
        _ => Err(UsageError(format!(
            "--bandwidth: expected a rate from 8kbit to 100gbit like 10mbit, 500kbit or 1gbit, not {s:?}"
        ))),
    }
}

/// What the run reports about its link.
#[derive(Debug, Clone, Serialize)]
pub struct LinkReport {
    /// `netem` (the kernel's, on a veth pair) or `delay-line` (handshake's own, between
    /// TUN devices, where the kernel has no netem).
    pub emulator: &'static str,
    /// Why netem was not used, when `auto` fell back to the delay line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netem_unavailable: Option<String>,
    pub rtt_set_ms: f64,
    pub jitter_ms: f64,
    /// Per direction, 0..1.
    pub loss: f64,
    pub bandwidth_bps: Option<u64>,
    /// Median of the TCP connects timed across the link before the run.
    pub rtt_measured_ms: Option<f64>,
    pub probe_connects_ms: Vec<f64>,
    pub client_addr: String,
    pub server_addr: String,
    /// What the delay line moved and dropped, and its CPU (at the end of the run); null
    /// with netem.
    pub delay_line: Option<LineStats>,
}

impl LinkReport {
    /// "handshake's delay line: RTT set 40 ms, measured 40.4 ms (median of 5 TCP
    /// connects); loss 1 %; 10 Mbit/s".
    pub fn describe(&self) -> String {
        let how = match (self.emulator, &self.netem_unavailable) {
            ("netem", _) => "the kernel's netem on a veth pair",
            (_, Some(_)) => "handshake's delay line (the kernel's netem is not available)",
            _ => "handshake's delay line",
        };
        let mut s = format!(
            "{how} between two network namespaces ({} -> {}): RTT set {} ms",
            self.client_addr,
            self.server_addr,
            fmt_num(self.rtt_set_ms)
        );
        match self.rtt_measured_ms {
            Some(m) => {
                s += &format!(
                    ", measured {} ms (median of {} TCP connects)",
                    fmt_num(m),
                    self.probe_connects_ms.len()
                )
            }
            None => s += ", not measured (no probe connect succeeded)",
        }
        if self.jitter_ms > 0.0 {
            s += &format!("; jitter ±{} ms", fmt_num(self.jitter_ms));
        }
        if self.loss > 0.0 {
            s += &format!("; loss {} % per direction", fmt_num(self.loss * 100.0));
        }
        if let Some(b) = self.bandwidth_bps {
            s += &format!("; bandwidth {}", fmt_rate(b));
        }
        s
    }

    /// "the delay line moved 1234 packets client->server and ..., in 12 ms of CPU" (its
    /// CPU includes the kernel's receive path of every packet it writes into a side).
    pub fn describe_line(&self) -> String {
        let Some(d) = &self.delay_line else {
            return "netem: packets counted by the kernel (tc -s qdisc), not here".to_string();
        };
        let (a, b) = (&d.client_to_server, &d.server_to_client);
        format!(
            "the delay line moved {} packets client->server and {} server->client, lost {} and {}, dropped {} at the bandwidth queue, in {:.1} ms of CPU",
            a.packets,
            b.packets,
            a.lost,
            b.lost,
            a.queue_drops + b.queue_drops,
            d.cpu_s * 1000.0
        )
    }
}

pub fn fmt_num(v: f64) -> String {
    if v == v.round() && v.abs() < 1e9 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

pub fn fmt_rate(bps: u64) -> String {
    let b = bps as f64;
    if b >= 1e9 {
        format!("{} Gbit/s", fmt_num(b / 1e9))
    } else if b >= 1e6 {
        format!("{} Mbit/s", fmt_num(b / 1e6))
    } else {
        format!("{} kbit/s", fmt_num(b / 1e3))
    }
}

/// Processes started in a lab (PID, whether it leads its own process group), stopped
/// by PID when the lab ends or on a signal. Labs run one at a time, so one list serves.
type Children = Mutex<Vec<(u32, bool)>>;

fn children() -> &'static Children {
    static CHILDREN: OnceLock<Children> = OnceLock::new();
    CHILDREN.get_or_init(|| {
        watch_signals();
        Mutex::new(Vec::new())
    })
}

/// A running lab: two namespaces, the delay line between them, and what it started.
pub struct Lab {
    pub spec: LinkSpec,
    client_ns: OwnedFd,
    server_ns: OwnedFd,
    /// The delay line, when it makes the link (not with netem).
    line: Option<delay::DelayLine>,
    netem_unavailable: Option<String>,
    probe_connects_ms: Vec<f64>,
}

/// The message for a machine where the lab cannot be made.
fn no_permission(e: &std::io::Error) -> anyhow::Error {
    UsageError(format!(
        "the lab needs CAP_NET_ADMIN to create network namespaces and TUN devices ({e}): run it as root, or as a user where unprivileged user namespaces are allowed and /dev/net/tun is usable"
    ))
    .into()
}

impl Lab {
    /// Create both sides, start the delay line and stop handlers (SIGINT, SIGTERM).
    pub fn start(spec: LinkSpec) -> anyhow::Result<Lab> {
        let client = match netns::create_side() {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(no_permission(&e))
            }
            Err(e) => return Err(anyhow::anyhow!("creating the lab's client side: {e}")),
        };
        let server = netns::create_side()
            .map_err(|e| anyhow::anyhow!("creating the lab's server side: {e}"))?;
        // netem where the kernel has it (asked of a namespace of the lab's own).
        let netem = match spec.emulator {
            Emulator::DelayLine => Err("--emulator delay-line".to_string()),
            Emulator::Auto | Emulator::Netem => netem::available(&client.netns),
        };
        let (line, netem_unavailable) = match netem {
            Ok(()) => {
                netem::setup(&client.netns, &server.netns, &spec.shape())
                    .map_err(|e| anyhow::anyhow!("setting up netem: {e}"))?;
                (None, None)
            }
            Err(why) if spec.emulator == Emulator::Netem => {
                return Err(UsageError(format!(
                    "--emulator netem: the kernel's netem cannot be used here ({why}); --emulator delay-line (or auto) uses handshake's own"
                ))
                .into())
            }
            Err(why) => {
                let tun = |ns: &OwnedFd, dev: &str, local, peer| {
                    netns::add_tun(ns, dev, local, peer, MTU).map_err(|e| match e.kind() {
                        std::io::ErrorKind::PermissionDenied => no_permission(&e),
                        _ => anyhow::anyhow!("adding the lab's TUN device {dev}: {e}"),
                    })
                };
                let c = tun(&client.netns, "hs-lab-c", CLIENT_ADDR, SERVER_ADDR)?;
                let s = tun(&server.netns, "hs-lab-s", SERVER_ADDR, CLIENT_ADDR)?;
                let line = delay::DelayLine::start(c, s, spec.shape())?;
                let why = (spec.emulator == Emulator::Auto).then_some(why);
                (Some(line), why)
            }
        };
        children();
        Ok(Lab {
            spec,
            client_ns: client.netns,
            server_ns: server.netns,
            line,
            netem_unavailable,
            probe_connects_ms: Vec::new(),
        })
    }

    /// Run `f` on a thread in the client side's namespace.
    pub fn in_client<T: Send>(&self, f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
        Ok(netns::run_in(&self.client_ns, f)?)
    }

    /// Run `f` on a thread in the server side's namespace (a server it starts stays there).
    pub fn in_server<T: Send>(&self, f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
        Ok(netns::run_in(&self.server_ns, f)?)
    }

    /// Time a few TCP connects across the link to a listener of the lab's own (the
    /// server under test sees none of them). Lost SYNs make some slow; the median holds.
    pub fn measure(&mut self) -> anyhow::Result<()> {
        let listener = self.in_server(|| TcpListener::bind((SERVER_ADDR, 0)))??;
        let addr = listener.local_addr()?;
        let times = self.in_client(move || {
            let mut v = Vec::new();
            for _ in 0..PROBE_CONNECTS {
                let t0 = Instant::now();
                if TcpStream::connect_timeout(&addr, Duration::from_secs(5)).is_ok() {
                    v.push(t0.elapsed().as_secs_f64() * 1000.0);
                }
            }
            v
        })?;
        drop(listener);
        if times.is_empty() {
            anyhow::bail!("the lab's link carried no TCP connect in {PROBE_CONNECTS} tries");
        }
        self.probe_connects_ms = times;
        Ok(())
    }

    pub fn report(&self) -> LinkReport {
        let mut v = self.probe_connects_ms.clone();
        v.sort_by(f64::total_cmp);
        let median = (!v.is_empty()).then(|| {
            let n = v.len();
            if n % 2 == 1 {
                v[n / 2]
            } else {
                (v[n / 2 - 1] + v[n / 2]) / 2.0
            }
        });
        LinkReport {
            emulator: if self.line.is_some() {
                "delay-line"
            } else {
                "netem"
            },
            netem_unavailable: self.netem_unavailable.clone(),
            rtt_set_ms: self.spec.rtt.as_secs_f64() * 1000.0,
            jitter_ms: self.spec.jitter.as_secs_f64() * 1000.0,
            loss: self.spec.loss,
            bandwidth_bps: self.spec.bandwidth_bps,
            rtt_measured_ms: median,
            probe_connects_ms: self.probe_connects_ms.clone(),
            client_addr: CLIENT_ADDR.to_string(),
            server_addr: SERVER_ADDR.to_string(),
            delay_line: self.line.as_ref().map(delay::DelayLine::stats),
        }
    }

    /// Start `cmd` inside one side: it enters the namespace after fork, dies if the lab
    /// does, and is stopped by PID when the lab ends. `own_group` puts it in a process
    /// group of its own (a server: the whole group is stopped).
    fn spawn(
        &self,
        cmd: &mut std::process::Command,
        client: bool,
        own_group: bool,
    ) -> std::io::Result<std::process::Child> {
        let fd = if client {
            self.client_ns.as_raw_fd()
        } else {
            self.server_ns.as_raw_fd()
        };
        if own_group {
            cmd.process_group(0);
        }
        unsafe {
            cmd.pre_exec(move || {
                netns::die_with_parent()?;
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        children()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((child.id(), own_group));
        Ok(child)
    }

    /// Start `cmd` on the server side, in its own process group.
    pub fn spawn_server(
        &self,
        cmd: &mut std::process::Command,
    ) -> std::io::Result<std::process::Child> {
        self.spawn(cmd, false, true)
    }

    /// Start `cmd` on the client side (in the lab's process group, so a terminal's
    /// Ctrl-C reaches it).
    pub fn spawn_client(
        &self,
        cmd: &mut std::process::Command,
    ) -> std::io::Result<std::process::Child> {
        self.spawn(cmd, true, false)
    }

    /// Wait until something accepts TCP connections at `addr` on the server side, or
    /// `child` exits, or `limit` passes.
    pub fn wait_listening(
        &self,
        addr: SocketAddr,
        child: &mut std::process::Child,
        limit: Duration,
    ) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            let up = self.in_server(|| {
                TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
            })?;
            if up {
                return Ok(());
            }
            if let Some(st) = child.try_wait()? {
                anyhow::bail!("--server-cmd exited ({st}) before listening on {addr}");
            }
            if start.elapsed() > limit {
                anyhow::bail!(
                    "--server-cmd did not listen on {addr} within {} s",
                    limit.as_secs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Drop `pid` from the processes to stop (it was waited for: its PID may be reused).
    pub fn forget(&self, pid: u32) {
        children()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(p, _)| *p != pid);
    }

    /// Stop every process the lab started (SIGTERM, then SIGKILL after a grace period),
    /// end the delay line, and return the link's final report.
    pub fn finish(mut self) -> LinkReport {
        stop_children();
        if let Some(l) = &mut self.line {
            l.stop();
        }
        self.report()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        stop_children();
    }
}

fn alive(pid: u32) -> bool {
    // A zombie (exited, not yet reaped) counts as gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

fn stop_children() {
    let list: Vec<(u32, bool)> =
        std::mem::take(&mut *children().lock().unwrap_or_else(|p| p.into_inner()));
    if list.is_empty() {
        return;
    }
    let signal = |sig: libc::c_int| {
        for (pid, group) in &list {
            let target = if *group {
                -(*pid as libc::pid_t)
            } else {
                *pid as libc::pid_t
            };
            unsafe { libc::kill(target, sig) };
        }
    };
    signal(libc::SIGTERM);
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && list.iter().any(|(p, _)| alive(*p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(libc::SIGKILL);
    for (pid, _) in &list {
        // Reap what was not waited for elsewhere (ignore "no child").
        unsafe { libc::waitpid(*pid as libc::pid_t, std::ptr::null_mut(), libc::WNOHANG) };
    }
}

/// On SIGINT or SIGTERM: the first is passed to the command the lab runs, if one runs;
/// otherwise (or at the second) stop the lab's processes by PID and exit (130 or 143).
/// The namespaces and TUN devices go with the process.
fn watch_signals() {
    let _ = std::thread::Builder::new()
        .name("handshake-lab-signals".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let mut forwarded = false;
            loop {
                let got = rt.block_on(async {
                    use tokio::signal::unix::{signal, SignalKind};
                    let (Ok(mut int), Ok(mut term)) = (
                        signal(SignalKind::interrupt()),
                        signal(SignalKind::terminate()),
                    ) else {
                        return None;
                    };
                    tokio::select! {
                        _ = int.recv() => Some((libc::SIGINT, 130)),
                        _ = term.recv() => Some((libc::SIGTERM, 143)),
                    }
                });
                let Some((sig, code)) = got else { return };
                // The first signal goes to the command the lab runs (a terminal's Ctrl-C
                // reached it already): it ends as it would without the lab (an audit
                // prints its report), and the lab then ends as usual, with its status.
                let clients: Vec<u32> = children()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .filter(|(pid, group)| !group && alive(*pid))
                    .map(|(pid, _)| *pid)
                    .collect();
                if !forwarded && !clients.is_empty() {
                    forwarded = true;
                    for pid in clients {
                        unsafe { libc::kill(pid as libc::pid_t, sig) };
                    }
                    continue;
                }
                eprintln!("handshake lab: interrupted; stopping the lab's processes");
                stop_children();
                for dir in
                    std::mem::take(&mut *temp_dirs().lock().unwrap_or_else(|p| p.into_inner()))
                {
                    let _ = std::fs::remove_dir_all(dir);
                }
                std::process::exit(code);
            }
        });
}

fn temp_dirs() -> &'static Mutex<Vec<std::path::PathBuf>> {
    static DIRS: OnceLock<Mutex<Vec<std::path::PathBuf>>> = OnceLock::new();
    DIRS.get_or_init(|| Mutex::new(Vec::new()))
}

/// A directory of the lab's (the CA file for the command), removed when dropped and on
/// SIGINT or SIGTERM.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    pub fn create(path: &std::path::Path) -> std::io::Result<TempDir> {
        std::fs::create_dir_all(path)?;
        temp_dirs()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(path.to_path_buf());
        Ok(TempDir(path.to_path_buf()))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        temp_dirs()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|d| d != &self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(rtt: Option<&str>, loss: Option<&str>, bw: Option<&str>) -> LinkArgs {
        LinkArgs {
            rtt: rtt.map(String::from),
            loss: loss.map(String::from),
            bandwidth: bw.map(String::from),
            ..LinkArgs::default()
        }
    }

    #[test]
    fn bandwidth_in_tc_units() {
        assert_eq!(parse_bandwidth("10mbit").unwrap(), 10_000_000);
        assert_eq!(parse_bandwidth("500kbit").unwrap(), 500_000);
        assert_eq!(parse_bandwidth("1Gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_bandwidth("64000bit").unwrap(), 64_000);
        for bad in ["10mbps", "10", "fast", "1bit", "-5mbit"] {
            assert!(parse_bandwidth(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn link_flags_give_one_spec_per_rtt() {
        let v = parse_link(&flags(Some("0,10ms,40ms"), Some("1%"), Some("8mbit")), true).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[2].rtt, Duration::from_millis(40));
        assert_eq!(v[2].shape().one_way, Duration::from_millis(20));
        assert!((v[0].loss - 0.01).abs() < 1e-12);
        assert_eq!(v[1].bandwidth_bps, Some(8_000_000));
        assert!(parse_link(&flags(Some("10ms,20ms"), None, None), false).is_err());
        assert!(parse_link(&flags(Some("40ms"), Some("100%"), None), false).is_err());
        let none = parse_link(&flags(None, None, None), false).unwrap();
        assert_eq!(none[0].rtt, Duration::ZERO);
    }
}
