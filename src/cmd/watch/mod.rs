//! `handshake watch`: how a running program uses its connections, seen from the kernel
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
mod report;
mod track;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::cli::WatchArgs;
use crate::config::{parse_positive_duration, UsageError};
use crate::report::thresholds;
use report::{Acc, CaptureReport, WatchReport, Watched};
use track::{Conn, Tracker};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Which connections count.
#[derive(Clone)]
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
        self.port.map_or(true, |p| p == x.port()) && self.host.map_or(true, |h| h == x.ip())
    }

    fn conn(&self, c: &Conn) -> bool {
        self.server(&c.server)
    }
}

/// (local, remote) endpoint pairs of the watched program's sockets, with when they were
/// last seen.
type Owned = Arc<Mutex<HashMap<(SocketAddr, SocketAddr), Instant>>>;

/// Look at the watched process tree's sockets now; returns how many of its TCP
/// connections are established.
fn poll_owners(root: i32, cgroup: Option<&std::path::Path>, owned: &Owned) -> u64 {
    let mut inodes: HashSet<u32> = HashSet::new();
    // In its own cgroup, the program's processes are the cgroup's (also those that left
    // the tree, as a daemon does); else the tree of children.
    let tree = match cgroup {
        Some(dir) => cgroup::procs(dir),
        None => diag::process_tree(root),
    };
    for pid in tree {
        for i in diag::socket_inodes(pid) {
            inodes.insert(i);
        }
    }
    let mut mine = Vec::new();
    if !inodes.is_empty() {
        let _ = diag::each(diag::with_owner(), |e| {
            if inodes.contains(&e.inode) {
                mine.push(e);
            }
        });
    }
    let now = Instant::now();
    let mut g = owned.lock().expect("owner map");
    let mut established = 0;
    for e in mine {
        if e.state == diag::TCP_ESTABLISHED {
            established += 1;
        }
        g.insert((e.local, e.remote), now);
    }
    // Keep memory flat: forget sockets not seen for a minute (an ended connection's
    // entry is taken when it is accounted; this is for those never accounted).
    g.retain(|_, seen| now.duration_since(*seen) < Duration::from_secs(60));
    established
}

/// The owner of the socket with these endpoints, if it is in the tree: asked as soon
/// as its SYN is seen, while the socket is surely still open. `tree` is refreshed when
/// the inode is not found in it (a new child process).
fn resolve(
    sock: &mut netlink_sys::Socket,
    root: i32,
    tree: &mut Vec<i32>,
    local: SocketAddr,
    remote: SocketAddr,
    owned: &Owned,
) {
    let Ok(inode) = diag::lookup(sock, local, remote) else {
        return;
    };
    if inode == 0 {
        return;
    }
    for fresh in [false, true] {
        if fresh {
            *tree = diag::process_tree(root);
        }
        if tree
            .iter()
            .any(|p| diag::socket_inodes(*p).contains(&inode))
        {
            owned
                .lock()
                .expect("owner map")
                .insert((local, remote), Instant::now());
            return;
        }
    }
}

/// Whether the connection between `a` and `b` is known to be the watched program's.
fn owned_has(owned: &Owned, a: SocketAddr, b: SocketAddr) -> bool {
    let g = owned.lock().expect("owner map");
    g.contains_key(&(a, b)) || g.contains_key(&(b, a))
}

/// Whether the connection is the watched program's; its entry is taken (each connection
/// is accounted once, and its endpoints may be used again by a later one). With the
/// kernel's record, what it recorded since is drained first.
fn take_owned(owned: &Owned, rec: Option<&cgroup::Recorder>, c: &Conn) -> bool {
    let take = || {
        let mut g = owned.lock().expect("owner map");
        g.remove(&(c.client, c.server))
            .or_else(|| g.remove(&(c.server, c.client)))
            .is_some()
    };
    take()
        || rec.is_some_and(|r| {
            drain(r, owned);
            take()
        })
}

/// The connections the kernel recorded for the program's cgroup since the last time,
/// into the owner map. The map's lock is held from before the record is read until its entries are in: a
/// drain by another thread is never seen half done (taken from the kernel, not yet in
/// the map).
fn drain(rec: &cgroup::Recorder, owned: &Owned) {
    let mut g = owned.lock().expect("owner map");
    let mut got = Vec::new();
    rec.drain(&mut got);
    let now = Instant::now();
    for k in got {
        g.insert(k, now);
    }
}

/// What the capture thread hands back.
struct Outcome {
    total: Acc,
    by_endpoint: BTreeMap<SocketAddr, Acc>,
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
    /// Count a watched connection.
    fn add(&mut self, c: &Conn) {
        self.total.add(c);
        self.by_endpoint.entry(c.server).or_default().add(c);
        if c.ended.is_some() {
            self.ended.insert((c.client, c.server));
        }
    }
}

pub fn run(a: WatchArgs) -> anyhow::Result<i32> {
    let thresholds = thresholds::parse_all(&a.fail_if, thresholds::Subject::Audit)?;
    let duration = a
        .duration
        .as_deref()
        .map(|d| parse_positive_duration("-d/--duration", d))
        .transpose()?;
    let host = a
        .host
        .as_deref()
        .map(|h| {
            h.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
                .map_err(|_| UsageError(format!("--host {h:?}: expected an IP address")))
        })
        .transpose()?;
    if let Some(pid) = a.pid {
        if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return Err(UsageError(format!("--pid {pid}: no such process")).into());
        }
    }
    let buffer = match a.buffer.as_deref() {
        Some(b) => crate::config::parse_bytes("--buffer", b)?,
        None => 32 << 20,
    };
    let filter = Filter { port: a.port, host };
    // The capture first: a command's first connection must not come before it.
    let mut cap = capture::Capture::open(buffer).map_err(|e| -> anyhow::Error {
        if capture::is_permission(&e) {
            UsageError(format!(
                "watch needs CAP_NET_RAW and CAP_NET_ADMIN to capture packets and read sockets (run it as root): {e}"
            ))
            .into()
        } else {
            anyhow::Error::new(e).context("opening the packet capture (AF_PACKET)")
        }
    })?;
    let listening = diag::listening().context("reading the TCP sockets (sock_diag)")?;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
    let started = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let owned: Owned = Arc::new(Mutex::new(HashMap::new()));
    // The endpoints of each SYN seen, for the owner thread to look up at once.
    let (syn_tx, syn_rx) = mpsc::sync_channel::<(SocketAddr, SocketAddr)>(4096);

    // Which connections are the program's: recorded in the kernel for its cgroup (the
    // command's own, or the process's when nothing else is in it); failing that, by
    // looking up socket owners, and the report says so and why.
    let mut attribution_note = None;
    let recorder = if !a.command.is_empty() {
        cgroup::Recorder::for_command()
            .map_err(|e| attribution_note = Some(format!("no cgroup of its own: {e}")))
            .ok()
    } else if let Some(pid) = a.pid {
        cgroup::Recorder::for_process(pid, &diag::process_tree(pid))
            .map_err(|e| attribution_note = Some(format!("its cgroup is not its own: {e}")))
            .ok()
    } else {
        None
    };

    // The command, started after the capture, in its cgroup from before it runs.
    let mut child = None;
    if !a.command.is_empty() {
        let to_stderr = std::io::stderr().as_fd().try_clone_to_owned()?;
        let mut cmd = std::process::Command::new(&a.command[0]);
        cmd.args(&a.command[1..])
            .stdout(std::process::Stdio::from(to_stderr));
        if let Some(r) = &recorder {
            use std::os::unix::process::CommandExt;
            let join = r.join_in_child()?;
            // SAFETY: the hook only opens, writes and closes a file (async-signal-safe).
            unsafe {
                cmd.pre_exec(join);
            }
        }
        child = Some(
            cmd.spawn()
                .map_err(|e| UsageError(format!("starting {}: {e}", a.command[0])))?,
        );
    }
    let root = child.as_ref().map(|c| c.id() as i32).or(a.pid);
    let rec = recorder.map(Arc::new);
    let cgroup_dir = rec.as_ref().map(|r| r.dir.clone());

    // Who owns which socket: each SYN's socket at once (a thread of its own, so that a
    // short connection is looked up while it is surely open), and every socket of the
    // tree every 10 ms (for connections it accepts, and those open before the watch).
    // Watching a process, its peak of concurrent connections is sampled there.
    let resolver_thread = root.filter(|_| rec.is_none()).map(|root| {
        let owned = owned.clone();
        std::thread::spawn(move || {
            // Ahead of other work on a busy machine (best effort: root may raise it): a
            // lookup that comes after the connection ended finds nothing. Not real-time:
            // at thousands of connections a second it would starve the capture and the
            // program watched.
            // SAFETY: this thread's own priority (a thread id is a valid `who`).
            unsafe {
                libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, -10);
            }
            let mut tree = diag::process_tree(root);
            let Ok(mut sock) = diag::lookup_socket() else {
                return;
            };
            // Ends when the capture thread drops its sender.
            while let Ok((src, dst)) = syn_rx.recv() {
                resolve(&mut sock, root, &mut tree, src, dst, &owned);
            }
        })
    });
    let owner_thread = root.map(|root| {
        let (stop, owned, dir, rec) =
            (stop.clone(), owned.clone(), cgroup_dir.clone(), rec.clone());
        std::thread::spawn(move || {
            let mut peak = 0;
            while !stop.load(Ordering::Relaxed) {
                // The kernel's record is drained here too, so that it never fills with
                // connections the capture does not end (filtered out, or long-lived).
                if let Some(r) = &rec {
                    drain(r, &owned);
                }
                peak = peak.max(poll_owners(root, dir.as_deref(), &owned));
                std::thread::sleep(Duration::from_millis(10));
            }
            peak
        })
    });

    let capture_thread = {
        let (stop, owned, filter, rec) = (stop.clone(), owned.clone(), filter.clone(), rec.clone());
        let process_mode = root.is_some();
        type Ended = (Outcome, Vec<Conn>, VecDeque<(Instant, Conn)>);
        std::thread::spawn(move || -> std::io::Result<Ended> {
            let mut tracker = Tracker::default();
            let mut out = Outcome {
                total: Acc::default(),
                by_endpoint: BTreeMap::new(),
                ended: HashSet::new(),
                other: 0,
                packets: 0,
                drops: 0,
                segments: 0,
                peak: 0,
            };
            // Ended connections whose owner is not known yet (process mode).
            let mut pending: VecDeque<(Instant, Conn)> = VecDeque::new();
            let is_listening = |x: &SocketAddr| {
                listening.contains(x)
                    || listening.contains(&SocketAddr::new(
                        if x.is_ipv4() {
                            IpAddr::from([0u8; 4])
                        } else {
                            IpAddr::from([0u16; 8])
                        },
                        x.port(),
                    ))
            };
            let account = |c: Conn,
                           out: &mut Outcome,
                           pending: &mut VecDeque<(Instant, Conn)>,
                           last_chance: bool| {
                if !filter.conn(&c) {
                    return;
                }
                if process_mode && !take_owned(&owned, rec.as_deref(), &c) {
                    // Looking up owners, one may come a little later; the kernel's
                    // record has every connection of the cgroup already.
                    if !last_chance && rec.is_none() {
                        pending.push_back((Instant::now(), c));
                    } else {
                        out.other += 1;
                    }
                    return;
                }
                out.add(&c);
            };
            // With the kernel's record, the program's connections open now, from their
            // SYN to their first FIN or RST, for an exact peak (the 10 ms sampling of its
            // established sockets can miss short ones).
            let mut mine_open: HashSet<(SocketAddr, SocketAddr)> = HashSet::new();
            let mut last_stats = Instant::now();
            while !stop.load(Ordering::Relaxed) {
                let mut ended = None;
                let mut opened = None;
                let mut closing = None;
                let got = cap.next(&mut |seg| {
                    if !filter.packet(&seg.src, &seg.dst) {
                        return;
                    }
                    if process_mode && rec.is_none() && seg.syn {
                        // The SYN's sender is the client; the SYN-ACK's, the server.
                        let _ = syn_tx.try_send((seg.src, seg.dst));
                    }
                    if seg.syn && !seg.ack && filter.server(&seg.dst) {
                        opened = Some((seg.src, seg.dst));
                    }
                    if seg.fin || seg.rst {
                        // No longer open for requests (as the tracker counts).
                        closing = Some((seg.src, seg.dst));
                    }
                    ended = tracker.segment(seg, &is_listening);
                })?;
                if let Some((a, b)) = closing {
                    if !mine_open.remove(&(a, b)) {
                        mine_open.remove(&(b, a));
                    }
                }
                if let Some(c) = ended {
                    mine_open.remove(&(c.client, c.server));
                    account(c, &mut out, &mut pending, false);
                }
                if let (Some((client, server)), Some(r)) = (opened, rec.as_deref()) {
                    // Recorded before the SYN left, so a drain finds it if it is there.
                    let mine = owned_has(&owned, client, server) || {
                        drain(r, &owned);
                        owned_has(&owned, client, server)
                    };
                    if mine {
                        mine_open.insert((client, server));
                        out.peak = out.peak.max(mine_open.len() as u64);
                    }
                }
                // Owners found since: account the pending ones; give up after 2 s.
                if !pending.is_empty() && (!got || pending.len() > 64) {
                    let now = Instant::now();
                    let mut keep = VecDeque::new();
                    while let Some((t, c)) = pending.pop_front() {
                        if owned_has(&owned, c.client, c.server)
                            || now.duration_since(t) > Duration::from_secs(2)
                        {
                            account(c, &mut out, &mut keep, true);
                        } else {
                            keep.push_back((t, c));
                        }
                    }
                    pending = keep;
                }
                if last_stats.elapsed() > Duration::from_millis(500) {
                    cap.read_stats();
                    last_stats = Instant::now();
                }
            }
            cap.read_stats();
            // Watching an endpoint, every connection the tracker holds counts; watching a
            // program, only its own (exact with the kernel's record, else sampled).
            if !process_mode {
                out.peak = tracker.peak_open;
            }
            out.segments = tracker.segments;
            (out.packets, out.drops) = (cap.packets, cap.drops);
            Ok((out, tracker.finish(), pending))
        })
    };

    // Until the command or process ends, -d passes, or Ctrl-C.
    let mut status = None;
    loop {
        if INTERRUPTED.load(Ordering::SeqCst) {
            break;
        }
        if duration.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        if let Some(c) = &mut child {
            if let Some(st) = c.try_wait()? {
                use std::os::unix::process::ExitStatusExt;
                status = Some(st.code().unwrap_or(128 + st.signal().unwrap_or(0)));
                break;
            }
        } else if let Some(pid) = a.pid {
            if !diag::alive(pid) {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Let the last packets (closes, resets) arrive.
    std::thread::sleep(Duration::from_millis(200));
    if let Some(root) = root {
        poll_owners(root, cgroup_dir.as_deref(), &owned);
    }
    stop.store(true, Ordering::SeqCst);
    let (mut out, open, pending) = capture_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the capture thread panicked"))?
        .context("reading the packet capture")?;
    if let Some(t) = owner_thread {
        if let Ok(peak) = t.join() {
            out.peak = out.peak.max(peak);
        }
    }
    if let Some(t) = resolver_thread {
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
    for c in open.into_iter().chain(pending.into_iter().map(|(_, c)| c)) {
        if !filter.conn(&c) {
            continue;
        }
        if root.is_some() && !take_owned(&owned, rec.as_deref(), &c) {
            out.other += 1;
            continue;
        }
        out.add(&c);
    }
    // The watched connections' sockets left in TIME_WAIT at the end, per endpoint and
    // side (the side that closed first holds one); others' (an earlier run's, another
    // program's) are not theirs to count.
    let mut tw_total: BTreeMap<String, u64> = BTreeMap::new();
    let mut tw: HashMap<SocketAddr, BTreeMap<String, u64>> = HashMap::new();
    let _ = diag::each(diag::StateFlags::TIME_WAIT, |e| {
        let (endpoint, side) = if out.ended.contains(&(e.local, e.remote)) {
            (e.remote, "client")
        } else if out.ended.contains(&(e.remote, e.local)) {
            (e.local, "server")
        } else {
            return;
        };
        *tw.entry(endpoint)
            .or_default()
            .entry(side.into())
            .or_default() += 1;
        *tw_total.entry(side.into()).or_default() += 1;
    });
    let time_wait = |ep: Option<SocketAddr>| match ep {
        Some(ep) => tw.get(&ep).cloned().unwrap_or_default(),
        None => tw_total.clone(),
    };
    let endpoints: Vec<_> = out
        .by_endpoint
        .iter()
        .map(|(ep, acc)| acc.summary(ep.to_string(), time_wait(Some(*ep))))
        .collect();
    let mut rep = WatchReport {
        schema_version: crate::report::SCHEMA_VERSION,
        tool: "handshake",
        version: env!("CARGO_PKG_VERSION"),
        watched: Watched {
            command: (!a.command.is_empty()).then(|| a.command.clone()),
            pid: a.pid,
            port: a.port,
            host: a.host.clone(),
            duration_s: started.elapsed().as_secs_f64(),
        },
        exit_status: status,
        capture: CaptureReport {
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
        },
        peak_concurrent_connections: out.peak,
        total: out.total.summary("all".into(), time_wait(None)),
        endpoints,
        other_connections: root.map(|_| out.other),
        verdict: Vec::new(),
    };
    rep.verdict = report::verdict(&rep);
    let mut lines = Vec::new();
    let mut failed = false;
    if !thresholds.is_empty() {
        let v = serde_json::to_value(&rep).expect("watch report serializes");
        let results = thresholds::check(&thresholds, &[(None, String::new(), v)])?;
        failed = results.iter().any(|r| r.failed);
        lines = thresholds::describe(&results, &thresholds);
    }
    let text = if a.json {
        serde_json::to_string_pretty(&rep).expect("watch report serializes")
    } else {
        report::render(&rep)
    };
    println!("{text}");
    for l in lines {
        eprintln!("{l}");
    }
    Ok(match status {
        Some(code) if code != 0 => code,
        _ => i32::from(failed),
    })
}
