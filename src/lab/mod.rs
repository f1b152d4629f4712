//! `handshake lab`: a distant server emulated on this machine. Two network namespaces
//! (client side, server side) joined by a link with a set round-trip time, jitter, loss
//! and bandwidth, so the kernel's real TCP and TLS pay real round trips.
//!
//! The link is the kernel's netem on a veth pair ([`netem`]) where the kernel has it, else
//! handshake's own delay line ([`delay`]) between a TUN device on each side (the kernel
//! here has no netem). The namespaces are anonymous and go with the process (see
//! [`netns`]); commands and servers started inside are stopped by PID.

pub(crate) mod delay;
pub(crate) mod netem;
pub(crate) mod netns;
mod reference;
mod route;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::parse::UsageError;
use crate::progress::Steps;
use rustix::process::{Pid, Signal};

use crate::report::link::{LinkReport, ProbeSummary};
pub(crate) use delay::Shape;

/// The client side's address.
pub(crate) const CLIENT_ADDR: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 1);
/// The server side's address (the embedded server's certificate names it).
pub(crate) const SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 200, 0, 2);
/// The TUN devices' MTU: Ethernet's.
const MTU: u32 = 1500;
/// TCP connects timed across the link before the run.
const PROBE_CONNECTS: usize = 5;
/// One TCP connect across the link this often while the run goes on.
const PROBE_EVERY: Duration = Duration::from_millis(500);
/// The most probes of a run kept (an hour of them).
const PROBES_KEPT: usize = 7200;

/// What the link should do (the command line's `--rtt/--jitter/--loss/--bandwidth`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LinkSpec {
    pub rtt: Duration,
    pub jitter: Duration,
    /// Per direction, independent, 0..1.
    pub loss: f64,
    pub bandwidth_bps: Option<u64>,
    pub emulator: Emulator,
    /// Test-only (`HANDSHAKE_TEST_LINK_SKEW_MS`): one way, added by the delay line to
    /// every packet but the probes'; zero otherwise.
    pub test_skew: Duration,
}

/// Which emulator makes the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Emulator {
    /// netem where the kernel has it, else the delay line.
    Auto,
    Netem,
    DelayLine,
}

impl LinkSpec {
    pub(crate) fn shape(&self) -> Shape {
        Shape {
            one_way: self.rtt / 2,
            jitter: self.jitter,
            loss: self.loss,
            bandwidth_bps: self.bandwidth_bps,
            skew: self.test_skew,
        }
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
pub(crate) struct Lab {
    pub spec: LinkSpec,
    client_ns: OwnedFd,
    server_ns: OwnedFd,
    /// The delay line, when it makes the link (not with netem).
    line: Option<delay::DelayLine>,
    netem_unavailable: Option<String>,
    /// The connects timed before the run.
    before: Vec<Probe>,
    /// The prober timing a connect every [`PROBE_EVERY`] while the run goes on.
    prober: Option<Prober>,
    during: Vec<Probe>,
    congestion_control: String,
    /// The CPUs held out of deep idle while the lab runs (none where not allowed).
    awake: Option<std::fs::File>,
    /// The machine's steal time when the lab started (ms, all CPUs).
    steal_at_start_ms: Option<f64>,
    started: Instant,
}

/// The time the hypervisor ran something else while this (virtual) machine's CPUs had
/// work, summed over its CPUs (/proc/stat's steal), ms; none where the kernel does not say.
fn steal_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: f64 = cpu.split_whitespace().nth(8)?.parse().ok()?;
    // USER_HZ: 100 on every Linux architecture that matters here.
    Some(ticks * 10.0)
}

/// One TCP connect across the link: as the client timed it, and as the kernel timed the
/// SYN's answer (none when the SYN was sent again: Karn's rule); and a TLS handshake in
/// memory on the client's side, due a millisecond after it (this machine's own work, and
/// its wait for a CPU).
#[derive(Debug, Clone, Copy)]
struct Probe {
    connect_ms: f64,
    kernel_ms: Option<f64>,
    handshake: Option<reference::Timed>,
}

/// A thread on the client side timing a TCP connect to the lab's own listener every
/// [`PROBE_EVERY`] until told to stop.
struct Prober {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Vec<Probe>>,
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
    pub(crate) fn start(spec: LinkSpec) -> anyhow::Result<Lab> {
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
        // Whether the link's routes carry the lab's congestion control (else each side
        // has its namespace's default).
        let (line, netem_unavailable, routed_cc) = match netem {
            Ok(()) => {
                let routed = netem::setup(&client.netns, &server.netns, &spec.shape())
                    .map_err(|e| anyhow::anyhow!("setting up netem: {e}"))?;
                (None, None, routed)
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
                let (c, c_cc) = tun(&client.netns, "hs-lab-c", CLIENT_ADDR, SERVER_ADDR)?;
                let (s, s_cc) = tun(&server.netns, "hs-lab-s", SERVER_ADDR, CLIENT_ADDR)?;
                let line = delay::DelayLine::start(c, s, spec.shape())?;
                let why = (spec.emulator == Emulator::Auto).then_some(why);
                (Some(line), why, c_cc && s_cc)
            }
        };
        let congestion_control = if routed_cc {
            netns::CONGESTION_CONTROL.to_string()
        } else {
            server.congestion_control
        };
        children();
        let awake = crate::sys::process::hold_cpus_awake().ok();
        Ok(Lab {
            spec,
            client_ns: client.netns,
            server_ns: server.netns,
            line,
            netem_unavailable,
            before: Vec::new(),
            prober: None,
            during: Vec::new(),
            congestion_control,
            awake,
            steal_at_start_ms: steal_ms(),
            started: Instant::now(),
        })
    }

    /// Run `f` on a thread in the client side's namespace.
    pub(crate) fn in_client<T: Send>(&self, f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
        Ok(netns::run_in(&self.client_ns, f)?)
    }

    /// Run `f` on a thread in the server side's namespace (a server it starts stays there).
    pub(crate) fn in_server<T: Send>(&self, f: impl FnOnce() -> T + Send) -> anyhow::Result<T> {
        Ok(netns::run_in(&self.server_ns, f)?)
    }

    /// Time a few TCP connects across the link to a listener of the lab's own (the
    /// server under test sees none of them), then one every [`PROBE_EVERY`] until the lab
    /// finishes. Lost SYNs make some slow; the median holds. Each connect before the run
    /// is shown on `steps`' bar.
    pub(crate) fn measure(&mut self, steps: &Steps) -> anyhow::Result<()> {
        let listener = self.in_server(|| TcpListener::bind((SERVER_ADDR, 0)))??;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        if let Some(line) = &self.line {
            line.exempt_port(addr.port());
        }
        let rtt = crate::fmt::num(self.spec.rtt.as_secs_f64() * 1000.0);
        let reference = std::sync::Arc::new(reference::Reference::new()?);
        let times = self.in_client(|| {
            let mut v = Vec::new();
            for k in 1..=PROBE_CONNECTS {
                steps.show(&format!(
                    "lab: checking the link ({rtt} ms RTT): TCP connect {k} of {PROBE_CONNECTS}"
                ));
                v.extend(probe(addr, &listener, &reference));
            }
            v
        })?;
        if times.is_empty() {
            anyhow::bail!("the lab's link carried no TCP connect in {PROBE_CONNECTS} tries");
        }
        self.before = times;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let ns = self.client_ns.try_clone()?;
        let thread = std::thread::Builder::new()
            .name("handshake-lab-probe".into())
            .spawn(move || {
                let mut v = Vec::new();
                if netns::enter(&ns).is_err() {
                    return v;
                }
                while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(PROBE_EVERY)
                {
                    if v.len() < PROBES_KEPT {
                        v.extend(probe(addr, &listener, &reference));
                    }
                }
                v
            })?;
        self.prober = Some(Prober { stop, thread });
        Ok(())
    }

    /// End the probes during the run and keep what they timed.
    fn stop_prober(&mut self) {
        if let Some(p) = self.prober.take() {
            let _ = p.stop.send(());
            self.during = p.thread.join().unwrap_or_default();
        }
    }

    pub(crate) fn report(&self) -> LinkReport {
        let connects = |p: &[Probe]| p.iter().map(|p| p.connect_ms).collect::<Vec<_>>();
        let handshakes = |p: &[Probe], of: fn(&reference::Timed) -> f64| {
            median(
                p.iter()
                    .filter_map(|p| p.handshake.as_ref().map(of))
                    .collect(),
            )
        };
        let all: Vec<Probe> = self.before.iter().chain(&self.during).copied().collect();
        let probes = ProbeSummary {
            during_run: self.during.len(),
            rtt_during_run_ms: median(connects(&self.during)),
            rtt_kernel_ms: median(all.iter().filter_map(|p| p.kernel_ms).collect()),
            local_wait_ms: median(
                all.iter()
                    .filter_map(|p| p.kernel_ms.map(|k| (p.connect_ms - k).max(0.0)))
                    .collect(),
            ),
            handshake_cpu_ms: handshakes(&all, |t| t.cpu_ms),
            handshake_before_run_ms: handshakes(&self.before, |t| t.wall_ms),
            handshake_during_run_ms: handshakes(&self.during, |t| t.wall_ms),
            handshake_wait_ms: handshakes(&all, reference::Timed::waited_ms),
        };
        let line = self.line.as_ref().map(delay::DelayLine::stats);
        let steal = self
            .steal_at_start_ms
            .zip(steal_ms())
            .map(|(a, b)| (b - a).max(0.0));
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let cpu_ms = self.started.elapsed().as_secs_f64() * 1000.0 * cpus;
        let mut r = LinkReport {
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
            test_skew_ms: (!self.spec.test_skew.is_zero() && self.line.is_some())
                .then_some(self.spec.test_skew.as_secs_f64() * 1000.0),
            rtt_measured_ms: median(connects(&self.before)),
            probe_connects_ms: connects(&self.before),
            probes,
            tcp_congestion_control: self.congestion_control.clone(),
            cpus_held_awake: self.awake.is_some(),
            steal_ms: steal,
            steal_share: steal.map(|s| (s / cpu_ms).min(1.0)),
            check: None,
            client_addr: CLIENT_ADDR.to_string(),
            server_addr: SERVER_ADDR.to_string(),
            delay_line: line,
        };
        r.check = Some(r.judge());
        r
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
        let ns = if client {
            &self.client_ns
        } else {
            &self.server_ns
        };
        if own_group {
            cmd.process_group(0);
        }
        crate::sys::exec::enter_network_namespace(cmd, ns.as_fd(), true);
        let child = cmd.spawn()?;
        children()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((child.id(), own_group));
        Ok(child)
    }

    /// Start `cmd` on the server side, in its own process group.
    pub(crate) fn spawn_server(
        &self,
        cmd: &mut std::process::Command,
    ) -> std::io::Result<std::process::Child> {
        self.spawn(cmd, false, true)
    }

    /// Start `cmd` on the client side (in the lab's process group, so a terminal's
    /// Ctrl-C reaches it).
    pub(crate) fn spawn_client(
        &self,
        cmd: &mut std::process::Command,
    ) -> std::io::Result<std::process::Child> {
        self.spawn(cmd, true, false)
    }

    /// Wait until something accepts TCP connections at `addr` on the server side, or
    /// `child` exits, or `limit` passes.
    pub(crate) fn wait_listening(
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
    pub(crate) fn forget(&self, pid: u32) {
        children()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(p, _)| *p != pid);
    }

    /// Stop every process the lab started (SIGTERM, then SIGKILL after a grace period),
    /// end the delay line, and return the link's final report.
    pub(crate) fn finish(mut self) -> LinkReport {
        stop_children();
        self.stop_prober();
        if let Some(l) = &mut self.line {
            l.stop();
        }
        self.report()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        stop_children();
        self.stop_prober();
    }
}

/// One TCP connect to `addr` (the lab's own listener, whose queue it then empties),
/// timed by the client and by the kernel; none when it failed within 2 s.
fn probe(
    addr: SocketAddr,
    listener: &TcpListener,
    reference: &reference::Reference,
) -> Option<Probe> {
    let t0 = Instant::now();
    let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2));
    let connect_ms = t0.elapsed().as_secs_f64() * 1000.0;
    let kernel_ms = s
        .as_ref()
        .ok()
        .and_then(crate::net::kernel::tcp_view)
        .filter(|v| v.total_retrans == 0 && v.rtt_us > 0)
        .map(|v| f64::from(v.rtt_us) / 1000.0);
    let connected = s.is_ok();
    drop(s);
    while listener.accept().is_ok() {}
    connected.then(|| Probe {
        connect_ms,
        kernel_ms,
        handshake: reference.time(),
    })
}

/// The median of samples, none of none.
fn median(v: Vec<f64>) -> Option<f64> {
    (!v.is_empty()).then(|| crate::report::comparison::Spread::of(&v).median)
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
    let signal = |sig: Signal| {
        for (pid, group) in &list {
            let Some(pid) = Pid::from_raw(*pid as i32) else {
                continue;
            };
            let _ = if *group {
                rustix::process::kill_process_group(pid, sig)
            } else {
                rustix::process::kill_process(pid, sig)
            };
        }
    };
    signal(Signal::TERM);
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline && list.iter().any(|(p, _)| alive(*p)) {
        std::thread::sleep(Duration::from_millis(20));
    }
    signal(Signal::KILL);
    for (pid, _) in &list {
        // Reap what was not waited for elsewhere (ignore "no child").
        if let Some(pid) = Pid::from_raw(*pid as i32) {
            let _ = rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG);
        }
    }
}

/// Stop the lab's processes by PID and remove its files (the namespaces and TUN
/// devices go with the process).
fn clean_up() {
    stop_children();
    for dir in std::mem::take(&mut *temp_dirs().lock().unwrap_or_else(|p| p.into_inner())) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// On SIGINT or SIGTERM: the first is passed to the command the lab runs, if one runs,
/// and marks the run interrupted by it; otherwise (or at the second) stop the lab's
/// processes by PID and exit (130 or 143). Both are left to a command that handles them
/// itself in this process (`bench --rtt` reports what it measured; a third signal exits
/// through it, after the lab's cleanup).
fn watch_signals() {
    crate::interrupt::on_exit(clean_up);
    let _ = std::thread::Builder::new()
        .name("handshake-lab-signals".into())
        .spawn(move || {
            let Ok(rt) = crate::runtime_thread::current_thread_runtime() else {
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
                if crate::interrupt::installed() {
                    // The command in this process acts on every signal itself: the first
                    // stops its work, the third exits after the lab's cleanup (its
                    // `on_exit`). One exit, not two threads racing to it.
                    continue;
                }
                if !forwarded && !clients.is_empty() {
                    forwarded = true;
                    crate::interrupt::request_by(if sig == libc::SIGTERM {
                        crate::interrupt::By::SIGTERM
                    } else {
                        crate::interrupt::By::SIGINT
                    });
                    // A terminal's Ctrl-C reached the whole foreground group, the
                    // command with it: a second one would end it at once, unreported.
                    if !(sig == libc::SIGINT && crate::interrupt::from_terminal()) {
                        let sig = Signal::from_named_raw(sig);
                        for pid in clients {
                            if let (Some(pid), Some(sig)) = (Pid::from_raw(pid as i32), sig) {
                                let _ = rustix::process::kill_process(pid, sig);
                            }
                        }
                    }
                    continue;
                }
                crate::progress::note("handshake lab: interrupted; stopping the lab's processes");
                clean_up();
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
pub(crate) struct TempDir(std::path::PathBuf);

impl TempDir {
    pub(crate) fn create(path: &std::path::Path) -> std::io::Result<TempDir> {
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

/// A lab command's argument with its placeholders filled: `{url}`, `{https_url}` and
/// `{cacert}`; `{{` and `}}` stand for literal braces, so `{{url}}` is left as `{url}`
/// for a command that fills it itself (`handshake audit -- curl {{url}}`).
pub(crate) fn fill(arg: &str, url: &str, https_url: &str, cacert: &str) -> String {
    arg.replace("{{", "\u{0}(")
        .replace("}}", "\u{0})")
        .replace("{https_url}", https_url)
        .replace("{url}", url)
        .replace("{cacert}", cacert)
        .replace("\u{0}(", "{")
        .replace("\u{0})", "}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_are_filled_and_doubled_braces_left_as_one() {
        let f = |a| super::fill(a, "http://s/", "https://s/", "/tmp/ca.pem");
        assert_eq!(f("{url}x"), "http://s/x");
        assert_eq!(f("--cacert={cacert}"), "--cacert=/tmp/ca.pem");
        assert_eq!(f("{https_url}"), "https://s/");
        assert_eq!(f("curl {{url}}"), "curl {url}");
        assert_eq!(f("{{https_url}} {url}"), "{https_url} http://s/");
    }
}
