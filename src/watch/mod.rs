//! The watch: how a running program uses its connections, seen from the kernel
//! without touching the program. A packet capture (AF_PACKET, all interfaces) gives the
//! moments of each TCP connection (SYN, FIN, RST), the HTTP/1 heads on cleartext
//! connections and the TLS hellos; socket diagnostics (sock_diag) and /proc give which
//! process owns which socket. With a command (or `--pid`), only that process tree's
//! connections count; with `--port`/`--host`, every connection to that endpoint.
//!
//! Needs CAP_NET_RAW and CAP_NET_ADMIN (root). Only this network namespace is seen.

mod capture;
mod cgroup;
mod diag;
pub(crate) mod meter;
mod naming;
mod owners;
mod summary;

/// Which program owns the client side of a local connection (the audit names its
/// clients by it too).
pub(crate) use owners::Programs;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::parse::UsageError;
use crate::report::watch::{CaptureReport, ProgramSummary, WatchReport, Watched};
use crate::track::{Conn, Tracker};
use owners::Owned;
use summary::Acc;

/// Which connections count.
#[derive(Clone, Copy)]
struct Filter {
    port: Option<u16>,
    host: Option<IpAddr>,
}

impl Filter {
    /// Whether either side could be the watched server endpoint (decided per packet,
    /// before the client is known).
    fn packet(&self, a: &SocketAddr, b: &SocketAddr) -> bool {
        self.server(a) || self.server(b)
    }

    /// Whether `x`, a connection's server side, is the watched endpoint.
    fn server(&self, x: &SocketAddr) -> bool {
        self.port.is_none_or(|p| p == x.port()) && self.host.is_none_or(|h| h == x.ip())
    }

    fn conn(&self, c: &Conn) -> bool {
        self.server(&c.server)
    }
}

/// What to watch, and for how long (from `watch`'s arguments).
pub(crate) struct Options {
    /// A command to start and watch (empty: none).
    pub command: Vec<String>,
    pub pid: Option<i32>,
    pub port: Option<u16>,
    pub host: Option<IpAddr>,
    /// `--host` as the user wrote it, for the report.
    pub host_as_given: Option<String>,
    pub duration: Option<Duration>,
    /// The capture's ring buffer, bytes.
    pub buffer: u64,
    /// `--metrics`, `--remote-write`: where the connections are counted live.
    pub meter: Option<Arc<meter::Meter>>,
}

/// What the capture thread hands back.
#[derive(Default)]
struct Outcome {
    total: Acc,
    by_endpoint: BTreeMap<SocketAddr, Acc>,
    /// Watching an endpoint: the figures of each client program (by name), with the
    /// addresses its connections came from.
    by_program: BTreeMap<Arc<str>, (Acc, BTreeSet<IpAddr>)>,
    /// The watched connections that ended, as (client, server): only their sockets are
    /// counted in TIME_WAIT at the end.
    ended: HashSet<(SocketAddr, SocketAddr)>,
    other: u64,
    packets: u64,
    drops: u64,
    segments: u64,
    peak: u64,
}

impl Outcome {
    /// Count a watched connection, and under its client program when it is named.
    fn add(&mut self, c: &Conn, program: Option<Arc<str>>) {
        self.total.add(c);
        self.by_endpoint.entry(c.server).or_default().add(c);
        if let Some(p) = program {
            let (acc, clients) = self.by_program.entry(p).or_default();
            acc.add(c);
            clients.insert(c.client.ip());
        }
        if c.ended.is_some() {
            self.ended.insert((c.client, c.server));
        }
    }
}

/// Ended connections whose owner is not known yet (process mode), with when they ended.
type Pending = VecDeque<(Instant, Conn)>;

/// What the capture thread reads with: the filter, and whose connections count.
struct Accounting {
    filter: Filter,
    owned: Owned,
    rec: Option<Arc<cgroup::Recorder>>,
    /// Watching a program (a command or `--pid`): only its connections count.
    process_mode: bool,
    /// The live metrics, the watched program's name (process mode) and the client
    /// programs' names looked up from the SYNs (endpoint mode).
    meter: Option<Arc<meter::Meter>>,
    program: Arc<str>,
    names: meter::Names,
    /// The kernel's record of every connection's program, where BPF can be attached:
    /// the client programs of an endpoint (else `names`, from /proc), and the programs
    /// within a watched command.
    namer: Option<Mutex<naming::Namer>>,
}

impl Accounting {
    /// Count an ended connection, hold it back until its owner is known, or count it as
    /// another program's.
    fn account(&self, mut c: Conn, out: &mut Outcome, pending: &mut Pending, last_chance: bool) {
        if !self.filter.conn(&c) {
            return;
        }
        if self.process_mode && !owners::take_owned(&self.owned, self.rec.as_deref(), &c) {
            // Looking up owners, one may come a little later; the kernel's record has
            // every connection of the cgroup already.
            if !last_chance && self.rec.is_none() {
                pending.push_back((Instant::now(), c));
            } else {
                out.other += 1;
            }
            return;
        }
        // Counted once, under the same name in the report and the live metrics.
        let program = self.program_of(&mut c);
        if let Some(m) = &self.meter {
            // Watching a program, its metrics carry its own name (the command's).
            let l = match &program {
                Some(p) if !self.process_mode => p.clone(),
                _ => self.program.clone(),
            };
            m.update(&mut c, l);
        }
        out.add(&c, program);
    }

    /// Watching an endpoint: the client program of an ended (or last) connection, kept
    /// as its label; `unknown` when it could not be named (a client on another machine,
    /// or one gone before it was looked up). Watching a program: the program within it
    /// that opened the connection (`sh -c 'curl …; python3 …'` is two), where the
    /// kernel's record of each connect is open; else none (the command is the one).
    fn program_of(&self, c: &mut Conn) -> Option<Arc<str>> {
        if self.process_mode {
            let n = self.namer.as_ref()?;
            let named = n
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .name(c.client, c.server);
            return Some(named.unwrap_or_else(|| Arc::from("unknown")));
        }
        let l = self.label(c, true).unwrap_or_else(|| Arc::from("unknown"));
        c.metered.label = Some(l.clone());
        Some(l)
    }

    /// The label of a connection for the metrics, when it is known: the watched
    /// program's name for its own connections (process mode), the client program's
    /// name looked up from the SYN (endpoint mode; `unknown` once the lookup is
    /// overdue, or `last`).
    fn label(&self, c: &Conn, last: bool) -> Option<Arc<str>> {
        if let Some(l) = &c.metered.label {
            return Some(l.clone());
        }
        if self.process_mode {
            return owners::owned_has(&self.owned, c.client, c.server)
                .then(|| self.program.clone());
        }
        if let Some(n) = &self.namer {
            // Recorded before the SYN left: not there, the client is not this
            // machine's (or began before the watch).
            let named = n
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .name(c.client, c.server);
            return Some(named.unwrap_or_else(|| Arc::from("unknown")));
        }
        let named = self
            .names
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&(c.client, c.server));
        match named {
            Some((n, _)) => Some(n),
            None if last || c.already_open || c.opened.elapsed() > Duration::from_secs(2) => {
                Some(Arc::from("unknown"))
            }
            None => None,
        }
    }

    /// Count what is new on a live connection, once its label is known.
    fn meter_live(&self, c: &mut Conn) {
        let Some(m) = &self.meter else {
            c.new_gaps.clear();
            return;
        };
        match self.label(c, false) {
            Some(l) => m.update(c, l),
            // Named within 2 s (then `unknown`): its gaps wait for it.
            None if !self.process_mode => {}
            None => c.new_gaps.clear(),
        }
    }

    /// Account the pending connections whose owner was found since; give up on one
    /// after 2 s.
    fn settle(&self, out: &mut Outcome, pending: &mut Pending) {
        let now = Instant::now();
        let mut keep = VecDeque::new();
        while let Some((t, c)) = pending.pop_front() {
            if owners::owned_has(&self.owned, c.client, c.server)
                || now.duration_since(t) > Duration::from_secs(2)
            {
                self.account(c, out, &mut keep, true);
            } else {
                keep.push_back((t, c));
            }
        }
        *pending = keep;
    }
}

/// The watched program's name for the metrics: the command's (its file name), or the
/// process's (`--pid`).
fn program_name(o: &Options) -> Arc<str> {
    let name = match (o.command.first(), o.pid) {
        (Some(c), _) => std::path::Path::new(c)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned()),
        (None, Some(pid)) => std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .ok()
            .map(|s| s.trim_end().to_string()),
        (None, None) => None,
    };
    Arc::from(name.unwrap_or_else(|| "unknown".into()).as_str())
}

/// Whether `x` is a listening socket's address (or under a wildcard listener).
fn listens(listening: &HashSet<SocketAddr>, x: &SocketAddr) -> bool {
    let any = if x.is_ipv4() {
        IpAddr::from([0u8; 4])
    } else {
        IpAddr::from([0u16; 8])
    };
    listening.contains(x) || listening.contains(&SocketAddr::new(any, x.port()))
}

/// The capture thread: reads segments until `stop`, tracks connections and accounts
/// each as it ends. Returns the outcome, the connections still open and those whose
/// owner was not found yet.
fn capture_loop(
    mut cap: capture::Capture,
    listening: HashSet<SocketAddr>,
    acc: Accounting,
    syns: mpsc::SyncSender<(SocketAddr, SocketAddr)>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<(Outcome, Vec<Conn>, Pending, Accounting)> {
    let mut tracker = Tracker::default();
    let mut out = Outcome::default();
    let mut pending = Pending::new();
    let is_listening = |x: &SocketAddr| listens(&listening, x);
    // With the kernel's record, the program's connections open now, from their SYN to
    // their first FIN or RST, for an exact peak (the 10 ms sampling of its established
    // sockets can miss short ones).
    let mut mine_open: HashSet<(SocketAddr, SocketAddr)> = HashSet::new();
    let mut last_stats = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let mut ended = None;
        let mut opened = None;
        let mut closing = None;
        let got = cap.next(&mut |seg| {
            if !acc.filter.packet(&seg.src, &seg.dst) {
                return;
            }
            if acc.process_mode && acc.rec.is_none() && seg.syn {
                // The SYN's sender is the client; the SYN-ACK's, the server.
                let _ = syns.try_send((seg.src, seg.dst));
            }
            if seg.syn && !seg.ack && acc.filter.server(&seg.dst) {
                if !acc.process_mode {
                    // Its client program, named while the connection is young.
                    let _ = syns.try_send((seg.src, seg.dst));
                }
                opened = Some((seg.src, seg.dst));
            }
            if seg.fin || seg.rst {
                // No longer open for requests (as the tracker counts).
                closing = Some((seg.src, seg.dst));
            }
            ended = tracker.segment(seg, &is_listening);
            if let Some(c) = tracker.touched() {
                if acc.filter.conn(c) {
                    acc.meter_live(c);
                } else {
                    c.new_gaps.clear();
                }
            }
        })?;
        if let Some((a, b)) = closing {
            if !mine_open.remove(&(a, b)) {
                mine_open.remove(&(b, a));
            }
        }
        if let Some(c) = ended {
            mine_open.remove(&(c.client, c.server));
            acc.account(c, &mut out, &mut pending, false);
        }
        if let (Some((client, server)), Some(r)) = (opened, acc.rec.as_deref()) {
            // Recorded before the SYN left, so a drain finds it if it is there.
            let mine = owners::owned_has(&acc.owned, client, server) || {
                owners::drain(r, &acc.owned);
                owners::owned_has(&acc.owned, client, server)
            };
            if mine {
                mine_open.insert((client, server));
                out.peak = out.peak.max(mine_open.len() as u64);
            }
        }
        if !pending.is_empty() && (!got || pending.len() > 64) {
            acc.settle(&mut out, &mut pending);
        }
        if last_stats.elapsed() > Duration::from_millis(500) {
            cap.read_stats();
            last_stats = Instant::now();
        }
    }
    cap.read_stats();
    // Watching an endpoint, every connection the tracker holds counts; watching a
    // program, only its own (exact with the kernel's record, else sampled).
    if !acc.process_mode {
        out.peak = tracker.peak_open;
    }
    out.segments = tracker.segments;
    (out.packets, out.drops) = (cap.packets, cap.drops);
    Ok((out, tracker.finish(), pending, acc))
}

/// The packet capture, opened first: a command's first connection must not come before
/// it.
fn open_capture(buffer: u64) -> anyhow::Result<capture::Capture> {
    capture::Capture::open(buffer).map_err(|e| -> anyhow::Error {
        if capture::is_permission(&e) {
            UsageError(format!(
                "watch needs CAP_NET_RAW and CAP_NET_ADMIN to capture packets and read sockets (run it as root): {e}"
            ))
            .into()
        } else {
            anyhow::Error::new(e).context("opening the packet capture (AF_PACKET)")
        }
    })
}

/// Which connections are the program's: recorded in the kernel for its cgroup (the
/// command's own, or the process's when nothing else is in it); failing that (`None`,
/// with why), by looking up socket owners.
fn cgroup_recorder(o: &Options) -> (Option<cgroup::Recorder>, Option<String>) {
    let got = if !o.command.is_empty() {
        cgroup::Recorder::for_command().map_err(|e| format!("no cgroup of its own: {e}"))
    } else if let Some(pid) = o.pid {
        cgroup::Recorder::for_process(pid, &crate::procs::process_tree(pid))
            .map_err(|e| format!("its cgroup is not its own: {e}"))
    } else {
        return (None, None);
    };
    match got {
        Ok(r) => (Some(r), None),
        Err(why) => (None, Some(why)),
    }
}

/// The command, started after the capture, in its cgroup from before it runs; its
/// standard output goes to stderr (stdout is the report's).
fn spawn_command(
    command: &[String],
    rec: Option<&cgroup::Recorder>,
) -> anyhow::Result<Option<std::process::Child>> {
    let Some(program) = command.first() else {
        return Ok(None);
    };
    let to_stderr = std::io::stderr().as_fd().try_clone_to_owned()?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(&command[1..])
        .stdout(std::process::Stdio::from(to_stderr));
    if let Some(r) = rec {
        r.join_at_exec(&mut cmd)?;
    }
    let child = cmd
        .spawn()
        .map_err(|e| UsageError(format!("starting {program}: {e}")))?;
    Ok(Some(child))
}

/// Waits until the command or process ends, the duration passes, or Ctrl-C; returns the
/// command's exit status when it ended.
fn wait_for_end(
    o: &Options,
    child: &mut Option<std::process::Child>,
    started: Instant,
) -> anyhow::Result<Option<i32>> {
    let mut grace = crate::interrupt::ChildGrace::default();
    loop {
        if crate::interrupt::requested() {
            // A command watched gets the interrupt too and a moment to end on its own,
            // its last closes seen.
            match child {
                None => return Ok(None),
                Some(c) if grace.over(c.id()) => return Ok(None),
                Some(_) => {}
            }
        }
        if o.duration.is_some_and(|d| started.elapsed() >= d) {
            return Ok(None);
        }
        if let Some(c) = child {
            if let Some(st) = c.try_wait()? {
                use std::os::unix::process::ExitStatusExt;
                return Ok(Some(st.code().unwrap_or(128 + st.signal().unwrap_or(0))));
            }
        } else if let Some(pid) = o.pid {
            if !diag::alive(pid) {
                return Ok(None);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The watched connections' sockets left in TIME_WAIT at the end, per endpoint and
/// side (the side that closed first holds one); others' (an earlier run's, another
/// program's) are not theirs to count.
#[derive(Default)]
struct TimeWait {
    total: BTreeMap<String, u64>,
    by_endpoint: HashMap<SocketAddr, BTreeMap<String, u64>>,
}

impl TimeWait {
    fn read(ended: &HashSet<(SocketAddr, SocketAddr)>) -> TimeWait {
        let mut tw = TimeWait::default();
        let _ = diag::each(diag::StateFlags::TIME_WAIT, |e| {
            let (endpoint, side) = if ended.contains(&(e.local, e.remote)) {
                (e.remote, "client")
            } else if ended.contains(&(e.remote, e.local)) {
                (e.local, "server")
            } else {
                return;
            };
            *tw.by_endpoint
                .entry(endpoint)
                .or_default()
                .entry(side.into())
                .or_default() += 1;
            *tw.total.entry(side.into()).or_default() += 1;
        });
        tw
    }

    fn at(&self, ep: SocketAddr) -> BTreeMap<String, u64> {
        self.by_endpoint.get(&ep).cloned().unwrap_or_default()
    }
}

/// Watches until the command or process ends, the duration passes or Ctrl-C, and
/// reports what the watched connections did (the report's `verdict` included).
pub(crate) fn run(o: &Options) -> anyhow::Result<WatchReport> {
    let cap = open_capture(o.buffer)?;
    let listening = diag::listening().context("reading the TCP sockets (sock_diag)")?;
    crate::interrupt::install();
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let owned: Owned = Arc::new(Mutex::new(HashMap::new()));
    // The endpoints of each SYN seen, for the resolver thread to look up at once.
    let (syn_tx, syn_rx) = mpsc::sync_channel::<(SocketAddr, SocketAddr)>(4096);
    let (recorder, attribution_note) = cgroup_recorder(o);
    // Each connection's client program, named by the kernel's record of each connect:
    // watching an endpoint (else looked up from each SYN), and the programs within a
    // watched command (attached before it starts, so that its first connect is
    // recorded).
    let namer = naming::Namer::attach().ok();
    let mut child = spawn_command(&o.command, recorder.as_ref())?;
    let root = child.as_ref().map(|c| c.id() as i32).or(o.pid);
    let rec = recorder.map(Arc::new);
    let cgroup_dir = rec.as_ref().map(|r| r.dir.clone());
    // Watching a process without the kernel's record: each SYN's owner at once; and
    // every 10 ms its sockets (the peak of concurrent connections is sampled there).
    let names = meter::Names::default();
    let resolver = match root {
        Some(root) if rec.is_none() => Some(owners::spawn_resolver(root, syn_rx, owned.clone())),
        None if namer.is_none() => Some(owners::spawn_namer(syn_rx, names.clone())),
        _ => None,
    };
    let poller = root.map(|root| {
        let (stop, owned, dir, rec) =
            (stop.clone(), owned.clone(), cgroup_dir.clone(), rec.clone());
        owners::spawn_poller(root, stop, owned, dir, rec)
    });
    let filter = Filter {
        port: o.port,
        host: o.host,
    };
    let acc = Accounting {
        filter,
        owned: owned.clone(),
        rec: rec.clone(),
        process_mode: root.is_some(),
        meter: o.meter.clone(),
        program: program_name(o),
        names,
        namer: namer.map(Mutex::new),
    };
    let capture_thread = {
        let stop = stop.clone();
        std::thread::spawn(move || capture_loop(cap, listening, acc, syn_tx, stop))
    };
    let mut status = wait_for_end(o, &mut child, started)?;
    // Let the last packets (closes, resets) arrive.
    std::thread::sleep(Duration::from_millis(200));
    if let Some(root) = root {
        owners::poll_owners(root, cgroup_dir.as_deref(), &owned);
    }
    stop.store(true, Ordering::SeqCst);
    let (mut out, open, pending, acc) = capture_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the capture thread panicked"))?
        .context("reading the packet capture")?;
    if let Some(peak) = poller.and_then(|t| t.join().ok()) {
        out.peak = out.peak.max(peak);
    }
    if let Some(t) = resolver {
        let _ = t.join();
    }
    if let Some(c) = &mut child {
        // -d or Ctrl-C ended the watch before the command ended: stop it (by its PID).
        if status.is_none() {
            match c.try_wait() {
                Ok(Some(st)) => status = st.code(),
                _ => {
                    let _ = c.kill();
                    let _ = c.wait();
                }
            }
        }
    }
    // Those still open, and those whose owner was not found in time: their last chance.
    for c in open.into_iter().chain(pending.into_iter().map(|(_, c)| c)) {
        acc.account(c, &mut out, &mut Pending::new(), true);
    }
    let capture = CaptureReport {
        packets: out.packets,
        kernel_drops: out.drops,
        segments: out.segments,
        attribution: root.map(|_| if rec.is_some() { "cgroup" } else { "sockets" }),
        attribution_note: if rec.is_some() {
            None
        } else {
            attribution_note
        },
        attribution_lost: rec.as_ref().map(|r| r.lost()),
    };
    Ok(report(o, started, status, capture, root.is_some(), &out))
}

/// The report of what was seen, with its verdict.
fn report(
    o: &Options,
    started: Instant,
    status: Option<i32>,
    capture: CaptureReport,
    process_mode: bool,
    out: &Outcome,
) -> WatchReport {
    let time_wait = TimeWait::read(&out.ended);
    let endpoints: Vec<_> = out
        .by_endpoint
        .iter()
        .map(|(ep, acc)| acc.summary(ep.to_string(), time_wait.at(*ep)))
        .collect();
    let total = out.total.summary("all".into(), time_wait.total.clone());
    let programs: Vec<ProgramSummary> = out
        .by_program
        .iter()
        .map(|(name, (acc, clients))| ProgramSummary {
            program: name.to_string(),
            clients: clients.iter().map(ToString::to_string).collect(),
            figures: acc.summary("all".into(), BTreeMap::new()),
        })
        .collect();
    let mut rep = WatchReport {
        schema_version: crate::report::SCHEMA_VERSION,
        tool: "handshake",
        version: env!("CARGO_PKG_VERSION"),
        watched: Watched {
            command: (!o.command.is_empty()).then(|| o.command.clone()),
            pid: o.pid,
            port: o.port,
            host: o.host_as_given.clone(),
            duration_s: started.elapsed().as_secs_f64(),
        },
        exit_status: status,
        capture,
        peak_concurrent_connections: out.peak,
        endpoints,
        other_connections: process_mode.then_some(out.other),
        interrupted: crate::interrupt::by().map(|by| {
            crate::report::finding::ended_by_interrupt(
                by,
                "the connections seen",
                started.elapsed().as_secs_f64(),
            )
        }),
        headline: summary::headline(&total, &programs),
        total,
        programs,
        verdict: Vec::new(),
    };
    rep.verdict = summary::verdict(&rep);
    rep
}
