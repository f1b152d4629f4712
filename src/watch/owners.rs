//! Which connections are the watched program's: the kernel's record of its cgroup, or
//! the owner of each socket looked up in /proc and socket diagnostics.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{cgroup, diag};
use crate::track::Conn;

/// (local, remote) endpoint pairs of the watched program's sockets, with when they were
/// last seen.
pub(super) type Owned = Arc<Mutex<HashMap<(SocketAddr, SocketAddr), Instant>>>;

/// Look at the watched process tree's sockets now; returns how many of its TCP
/// connections are established.
pub(super) fn poll_owners(root: i32, cgroup: Option<&std::path::Path>, owned: &Owned) -> u64 {
    let mut inodes: HashSet<u32> = HashSet::new();
    // In its own cgroup, the program's processes are the cgroup's (also those that left
    // the tree, as a daemon does); else the tree of children.
    let tree = match cgroup {
        Some(dir) => cgroup::procs(dir),
        None => crate::procs::process_tree(root),
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
pub(super) fn resolve(
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
            *tree = crate::procs::process_tree(root);
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
pub(super) fn owned_has(owned: &Owned, a: SocketAddr, b: SocketAddr) -> bool {
    let g = owned.lock().expect("owner map");
    g.contains_key(&(a, b)) || g.contains_key(&(b, a))
}

/// Whether the connection is the watched program's; its entry is taken (each connection
/// is accounted once, and its endpoints may be used again by a later one). With the
/// kernel's record, what it recorded since is drained first.
pub(super) fn take_owned(owned: &Owned, rec: Option<&cgroup::Recorder>, c: &Conn) -> bool {
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
pub(super) fn drain(rec: &cgroup::Recorder, owned: &Owned) {
    let mut g = owned.lock().expect("owner map");
    let mut got = Vec::new();
    rec.drain(&mut got);
    let now = Instant::now();
    for k in got {
        g.insert(k, now);
    }
}

/// Looks up the owner of each SYN's socket at once (a thread of its own, so that a
/// short connection is looked up while it is surely open). Ends when the capture drops
/// its sender.
pub(super) fn spawn_resolver(
    root: i32,
    syns: mpsc::Receiver<(SocketAddr, SocketAddr)>,
    owned: Owned,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        // Ahead of other work on a busy machine (best effort: root may raise it): a
        // lookup that comes after the connection ended finds nothing. Not real-time:
        // at thousands of connections a second it would starve the capture and the
        // program watched.
        // This thread's own priority (PRIO_PROCESS with a thread's id sets the thread's).
        let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), -10);
        let mut tree = crate::procs::process_tree(root);
        let Ok(mut sock) = diag::lookup_socket() else {
            return;
        };
        while let Ok((src, dst)) = syns.recv() {
            resolve(&mut sock, root, &mut tree, src, dst, &owned);
        }
    })
}

/// Every socket of the tree every 10 ms (for connections it accepts, and those open
/// before the watch), until `stop`; returns the peak of its established connections.
pub(super) fn spawn_poller(
    root: i32,
    stop: Arc<AtomicBool>,
    owned: Owned,
    dir: Option<std::path::PathBuf>,
    rec: Option<Arc<cgroup::Recorder>>,
) -> JoinHandle<u64> {
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
}

/// Names the client program of each SYN's socket (watching an endpoint with
/// `--metrics`), at once, on a thread of its own: the socket's inode from socket
/// diagnostics, its process from a table of every process's socket inodes (read again
/// when the inode is not in it), its name from /proc/PID/comm; `unknown` when the
/// socket is not this machine's or was gone first. Ends when the capture drops its
/// sender.
pub(super) fn spawn_namer(
    syns: mpsc::Receiver<(SocketAddr, SocketAddr)>,
    names: super::meter::Names,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), -10);
        let Ok(mut programs) = Programs::new() else {
            return;
        };
        let unknown: Arc<str> = Arc::from("unknown");
        while let Ok((client, server)) = syns.recv() {
            let name = programs
                .name(client, server)
                .unwrap_or_else(|| unknown.clone());
            let now = Instant::now();
            let mut g = names.lock().unwrap_or_else(|p| p.into_inner());
            if g.len() > 4096 {
                // Flat memory: names never taken (connections filtered out) go after a
                // minute.
                g.retain(|_, (_, at)| now.duration_since(*at) < Duration::from_secs(60));
            }
            g.insert((client, server), (name, now));
        }
    })
}

/// Which program on this machine owns the client side of a local TCP connection: its
/// socket's inode from socket diagnostics, then the process that holds it in /proc
/// (the latest owners first, then the processes not read before, then all), and its
/// name. Asked while the client's socket is open (at its SYN, or as its connection is
/// accepted).
pub(crate) struct Programs {
    sock: netlink_sys::Socket,
    table: Table,
}

impl Programs {
    /// Every process read now: a lookup then reads only those started since.
    pub(crate) fn new() -> std::io::Result<Programs> {
        let sock = diag::lookup_socket()?;
        let mut table = Table::default();
        table.read(false);
        Ok(Programs { sock, table })
    }

    /// The name (`/proc/PID/comm`) of the program whose socket connects `client` to
    /// `server`, if it is found.
    pub(crate) fn name(&mut self, client: SocketAddr, server: SocketAddr) -> Option<Arc<str>> {
        program_of(&mut self.sock, &mut self.table, client, server)
    }
}

/// Every process's socket inodes, as last read, and the processes read.
#[derive(Default)]
struct Table {
    owner: HashMap<u32, i32>,
    seen: HashSet<i32>,
    /// The processes that owned the latest connections named, latest first: a client
    /// opens its next connection soon (ab without -k: one per request).
    recent: std::collections::VecDeque<i32>,
}

impl Table {
    /// Read again the sockets of the latest owners.
    fn read_recent(&mut self) {
        for pid in self.recent.clone() {
            for i in diag::socket_inodes(pid) {
                self.owner.insert(i, pid);
            }
        }
    }

    fn owned_by(&mut self, pid: i32) {
        self.recent.retain(|p| *p != pid);
        self.recent.push_front(pid);
        self.recent.truncate(8);
    }
    /// Read the sockets of the processes not read before (a client just started is
    /// one: found in a few reads rather than one per process), or of all.
    fn read(&mut self, all: bool) {
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return;
        };
        let pids: Vec<i32> = procs
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
            .collect();
        if all {
            self.owner.clear();
            self.seen.clear();
        }
        for pid in pids {
            if self.seen.insert(pid) {
                for i in diag::socket_inodes(pid) {
                    self.owner.insert(i, pid);
                }
            }
        }
    }
}

fn program_of(
    sock: &mut netlink_sys::Socket,
    table: &mut Table,
    client: SocketAddr,
    server: SocketAddr,
) -> Option<Arc<str>> {
    let inode = diag::lookup(sock, client, server)
        .ok()
        .filter(|i| *i != 0)?;
    for pass in 0..4 {
        match pass {
            0 => {}
            1 => table.read_recent(),
            2 => table.read(false),
            _ => table.read(true),
        }
        if let Some(&pid) = table.owner.get(&inode) {
            table.owned_by(pid);
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            return Some(Arc::from(comm.trim_end()));
        }
    }
    None
}
