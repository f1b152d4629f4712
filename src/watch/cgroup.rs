//! Which connections are a program's, decided in the kernel: the program runs in a
//! cgroup (v2) of its own, or is alone in its cgroup, and a BPF `sock_ops` program
//! attached to that cgroup records the endpoints of every TCP connection one of its
//! sockets opens or accepts, at the moment it does (before the SYN leaves; when the
//! handshake of an accepted one completes). The watch drains that record. Unlike looking
//! up each socket's owner after its SYN is seen, nothing is missed however short the
//! connection: a connection of 100 µs is recorded like one of an hour.
//!
//! The program is ten-odd lines of eBPF, assembled here (as the capture's classic BPF
//! filter is): a well-kept Rust loader (aya) needs the program built by a BPF toolchain
//! (bpf-linker, LLVM) that a build of handshake should not require. It is attached by a
//! BPF link, so it is detached when the watch ends, also when the watch is killed.

use std::collections::HashSet;
use std::ffi::CString;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{OwnedFd, RawFd};

use crate::sys::bpf::{self, Map};
use std::path::{Path, PathBuf};

// Map and program types (linux/bpf.h).
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_MAP_TYPE_ARRAY: u32 = 2;
const BPF_F_NO_PREALLOC: u32 = 1;
const BPF_PROG_TYPE_SOCK_OPS: u32 = 13;
const BPF_CGROUP_SOCK_OPS: u32 = 3;
// sock_ops callbacks recorded: an active open (before its SYN is sent), its handshake
// done, a passive open's handshake done.
const BPF_SOCK_OPS_TCP_CONNECT_CB: i32 = 3;
const BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB: i32 = 4;
const BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB: i32 = 5;

/// Entries the kernel keeps between two drains (allocated as used).
const MAP_ENTRIES: u32 = 65536;
/// The key: family, local port (host order), remote port (network order in the high
/// half), local and remote IPv4, local and remote IPv6, each as `struct bpf_sock_ops`
/// holds them.
pub(super) const KEY_LEN: usize = 52;
/// Offsets in `struct bpf_sock_ops` of the key's thirteen words, in key order.
pub(super) const CTX_FIELDS: [i16; 13] = [20, 68, 64, 28, 24, 48, 52, 56, 60, 32, 36, 40, 44];

/// One eBPF instruction: opcode, destination and source registers, offset, immediate.
pub(super) fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = code;
    b[1] = (src << 4) | dst;
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    b
}

// eBPF registers: r0 the return value, r1-r5 a call's arguments, r6 kept across calls,
// r10 the frame pointer.
pub(super) const R0: u8 = 0;
pub(super) const R1: u8 = 1;
pub(super) const R2: u8 = 2;
pub(super) const R3: u8 = 3;
pub(super) const R4: u8 = 4;
pub(super) const R6: u8 = 6;
pub(super) const FP: u8 = 10;

/// `reg = map` (a 16-byte load of the map's descriptor).
pub(super) fn ld_map(reg: u8, map: RawFd) -> [[u8; 8]; 2] {
    [insn(0x18, reg, 1, 0, map), insn(0, 0, 0, 0, 0)]
}

/// The sock_ops program: on the three callbacks, `keys[endpoints] = op`; when that map
/// is full, `lost[0] += 1`. Always lets the socket go on (returns 1).
fn program(keys: RawFd, lost: RawFd) -> Vec<[u8; 8]> {
    const KEY: i16 = -56;
    const VALUE: i16 = -64;
    const INDEX: i16 = -68;
    let mut p = vec![
        insn(0xbf, R6, R1, 0, 0),                                  // r6 = ctx
        insn(0x61, R2, R6, 0, 0),                                  // r2 = ctx->op
        insn(0x15, R2, 0, 3, BPF_SOCK_OPS_TCP_CONNECT_CB),         // to record
        insn(0x15, R2, 0, 2, BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB),  // to record
        insn(0x15, R2, 0, 1, BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB), // to record
        insn(0x05, 0, 0, 0, 0),                                    // goto out (patched)
    ];
    let to_out = p.len() - 1;
    // record: the key on the stack, word by word.
    for (i, field) in CTX_FIELDS.iter().enumerate() {
        p.push(insn(0x61, R2, R6, *field, 0)); // r2 = *(u32 *)(ctx + field)
        p.push(insn(0x63, FP, R2, KEY + 4 * i as i16, 0)); // *(u32 *)(fp + key + 4i) = r2
    }
    p.push(insn(0x61, R2, R6, 0, 0)); // r2 = ctx->op
    p.push(insn(0x7b, FP, R2, VALUE, 0)); // *(u64 *)(fp + value) = r2
    p.extend(ld_map(R1, keys));
    p.push(insn(0xbf, R2, FP, 0, 0));
    p.push(insn(0x07, R2, 0, 0, KEY.into())); // r2 = &key
    p.push(insn(0xbf, R3, FP, 0, 0));
    p.push(insn(0x07, R3, 0, 0, VALUE.into())); // r3 = &value
    p.push(insn(0xb7, R4, 0, 0, 0)); // BPF_ANY
    p.push(insn(0x85, 0, 0, 0, 2)); // map_update_elem
    p.push(insn(0x15, R0, 0, 0, 0)); // if r0 == 0 goto out (patched)
    let ok_out = p.len() - 1;
    p.push(insn(0x62, FP, 0, INDEX, 0)); // *(u32 *)(fp + index) = 0
    p.extend(ld_map(R1, lost));
    p.push(insn(0xbf, R2, FP, 0, 0));
    p.push(insn(0x07, R2, 0, 0, INDEX.into())); // r2 = &index
    p.push(insn(0x85, 0, 0, 0, 1)); // map_lookup_elem
    p.push(insn(0x15, R0, 0, 0, 0)); // if r0 == 0 goto out (patched)
    let null_out = p.len() - 1;
    p.push(insn(0xb7, R1, 0, 0, 1));
    p.push(insn(0xdb, R0, R1, 0, 0)); // lock *(u64 *)r0 += r1
    let out = p.len();
    p.push(insn(0xb7, R0, 0, 0, 1)); // out: r0 = 1
    p.push(insn(0x95, 0, 0, 0, 0)); // exit
    for j in [to_out, ok_out, null_out] {
        p[j][2..4].copy_from_slice(&((out - j - 1) as i16).to_ne_bytes());
    }
    p
}

/// The cgroup v2 hierarchy's mount point.
pub(super) fn cgroup2_root() -> io::Result<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    info.lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let mount = pre.split(' ').nth(4)?;
            (post.split(' ').next() == Some("cgroup2")).then(|| PathBuf::from(mount))
        })
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no cgroup v2 hierarchy is mounted"))
}

/// A process's cgroup v2 directory.
fn cgroup_of(root: &Path, pid: &str) -> io::Result<PathBuf> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))?;
    let rel = s
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not in a cgroup v2"))?;
    Ok(root.join(rel.trim_start_matches('/')))
}

/// The pids in a cgroup and its descendants.
pub(super) fn procs(dir: &Path) -> Vec<i32> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(s) = std::fs::read_to_string(d.join("cgroup.procs")) {
            out.extend(s.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        }
        if let Ok(rd) = std::fs::read_dir(&d) {
            stack.extend(rd.flatten().filter(|e| e.path().is_dir()).map(|e| e.path()));
        }
    }
    out
}

/// The (local, remote) endpoints of a record's key (the layout of `CTX_FIELDS`).
pub(super) fn endpoints(key: &[u8; KEY_LEN]) -> (SocketAddr, SocketAddr) {
    let w = |i: usize| &key[4 * i..4 * i + 4];
    let family = u32::from_ne_bytes(w(0).try_into().expect("4 bytes"));
    let local_port = u32::from_ne_bytes(w(1).try_into().expect("4 bytes")) as u16;
    let remote_port = u32::from_be_bytes(w(2).try_into().expect("4 bytes")) as u16;
    let local = addr(family, w(3), &key[20..36], local_port);
    let remote = addr(family, w(4), &key[36..52], remote_port);
    (local, remote)
}

fn addr(family: u32, ip4: &[u8], ip6: &[u8], port: u16) -> SocketAddr {
    let ip = if family == libc::AF_INET as u32 {
        IpAddr::V4(Ipv4Addr::new(ip4[0], ip4[1], ip4[2], ip4[3]))
    } else {
        let v6 = Ipv6Addr::from(<[u8; 16]>::try_from(ip6).expect("16 bytes"));
        // A dual-stack socket talking IPv4 is seen on the wire as IPv4.
        v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
    };
    SocketAddr::new(ip, port)
}

/// The kernel's record of one cgroup's connections.
pub(super) struct Recorder {
    keys: Map,
    lost: Map,
    _prog: OwnedFd,
    _link: OwnedFd,
    /// The cgroup the watch made for its command (removed at the end), if it did.
    made: Option<PathBuf>,
    pub dir: PathBuf,
}

impl Recorder {
    fn attach(dir: PathBuf, made: Option<PathBuf>) -> io::Result<Recorder> {
        let keys = Map::create(
            BPF_MAP_TYPE_HASH,
            KEY_LEN,
            8,
            MAP_ENTRIES,
            BPF_F_NO_PREALLOC,
        )?;
        let lost = Map::create(BPF_MAP_TYPE_ARRAY, 4, 8, 1, 0)?;
        let prog = bpf::load_program(
            BPF_PROG_TYPE_SOCK_OPS,
            &program(keys.raw_fd(), lost.raw_fd()),
            c"handshake_watch",
        )?;
        let cg = std::fs::File::open(&dir)?;
        let link = bpf::link(&prog, &OwnedFd::from(cg), BPF_CGROUP_SOCK_OPS)?;
        Ok(Recorder {
            keys,
            lost,
            _prog: prog,
            _link: link,
            made,
            dir,
        })
    }

    /// A new cgroup for a command the watch starts, below the watch's own cgroup (so that
    /// the limits on the watch hold for it), with the recorder attached. The command joins
    /// it with [`Recorder::join_in_child`] before it runs.
    pub(super) fn for_command() -> io::Result<Recorder> {
        let root = cgroup2_root()?;
        let dir = cgroup_of(&root, "self")?.join(format!("handshake-watch-{}", std::process::id()));
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        Recorder::attach(dir.clone(), Some(dir.clone())).inspect_err(|_| {
            let _ = std::fs::remove_dir(&dir);
        })
    }

    /// The cgroup of a running process, when nothing but that process's tree is in it
    /// (else its record would hold other programs' connections too).
    pub(super) fn for_process(pid: i32, tree: &[i32]) -> io::Result<Recorder> {
        let root = cgroup2_root()?;
        let dir = cgroup_of(&root, &pid.to_string())?;
        let tree: HashSet<i32> = tree.iter().copied().collect();
        let others = procs(&dir)
            .into_iter()
            .filter(|p| !tree.contains(p))
            .count();
        if others > 0 || dir == root {
            return Err(io::Error::other(format!(
                "{} holds {others} other processes",
                dir.display()
            )));
        }
        Recorder::attach(dir, None)
    }

    /// The child of `cmd` joins the cgroup between fork and exec.
    pub(super) fn join_at_exec(&self, cmd: &mut std::process::Command) -> io::Result<()> {
        let procs = CString::new(
            self.dir
                .join("cgroup.procs")
                .into_os_string()
                .into_encoded_bytes(),
        )
        .map_err(io::Error::other)?;
        crate::sys::exec::join_cgroup(cmd, procs);
        Ok(())
    }

    /// Take every connection recorded since the last drain, as (local, remote) of the
    /// program's socket.
    pub(super) fn drain(&self, out: &mut Vec<(SocketAddr, SocketAddr)>) {
        let mut key = [0u8; KEY_LEN];
        let mut value = [0u8; 8];
        // Each key is deleted as it is read, so the first key is always the next one.
        while self.keys.next_key(None, &mut key).is_ok() {
            if self.keys.take(&key, &mut value).is_err() {
                break;
            }
            out.push(endpoints(&key));
        }
    }

    /// Connections not recorded because the record was full (not drained in time).
    pub(super) fn lost(&self) -> u64 {
        let mut v = [0u8; 8];
        let key = 0u32.to_ne_bytes();
        match self.lost.lookup(&key, &mut v) {
            Ok(()) => u64::from_ne_bytes(v),
            Err(_) => 0,
        }
    }
}

impl Drop for Recorder {
    /// The cgroup the watch made is removed; processes still in it (a daemon the command
    /// left behind) are moved to its parent first.
    fn drop(&mut self) {
        let Some(dir) = &self.made else { return };
        if let Some(parent) = dir.parent() {
            for pid in procs(dir) {
                let _ = std::fs::write(parent.join("cgroup.procs"), pid.to_string());
            }
        }
        let _ = std::fs::remove_dir(dir);
    }
}
