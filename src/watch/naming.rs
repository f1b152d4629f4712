//! Which program opened each TCP connection of this machine, recorded in the kernel as
//! it happens: two BPF programs on the cgroup v2 root (so every process below it). At
//! `connect()` (the cgroup's connect4 and connect6 hooks, run in the calling process),
//! the socket's cookie with the process's id and name; when the connection's SYN is
//! about to leave (`sock_ops`' TCP_CONNECT_CB, its four-tuple complete), the four-tuple
//! with the cookie. `watch --metrics` names a connection's client program by the two
//! when it sees the SYN, however short the connection (one that lives 100 µs is
//! recorded like one that lives an hour). Both maps are LRU: they never fill, the oldest
//! entries (connections filtered out, UDP sockets' connects) go first. Assembled here
//! like the cgroup's record (`cgroup.rs`), and attached by links: detached when the
//! watch ends, also when it is killed.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{OwnedFd, RawFd};
use std::sync::Arc;

use super::cgroup::{cgroup2_root, insn, ld_map, CTX_FIELDS, FP, KEY_LEN, R0, R1, R2, R3, R4, R6};
use crate::sys::bpf::{self, Map};

const BPF_MAP_TYPE_LRU_HASH: u32 = 9;
const BPF_PROG_TYPE_SOCK_OPS: u32 = 13;
const BPF_PROG_TYPE_CGROUP_SOCK_ADDR: u32 = 18;
const BPF_CGROUP_SOCK_OPS: u32 = 3;
const BPF_CGROUP_INET4_CONNECT: u32 = 10;
const BPF_CGROUP_INET6_CONNECT: u32 = 11;
const BPF_SOCK_OPS_TCP_CONNECT_CB: i32 = 3;
// Helpers (linux/bpf.h's enum bpf_func_id).
const MAP_UPDATE_ELEM: i32 = 2;
const GET_CURRENT_PID_TGID: i32 = 14;
const GET_CURRENT_COMM: i32 = 16;
const GET_SOCKET_COOKIE: i32 = 46;

const ENTRIES: u32 = 65536;
/// An owner: the process's `pid_tgid` (its id in the high half), then its name (16
/// bytes, NUL-padded).
const OWNER_LEN: usize = 24;

/// `map[key at fp+key] = value at fp+value`.
fn update(p: &mut Vec<[u8; 8]>, map: RawFd, key: i16, value: i16) {
    p.extend(ld_map(R1, map));
    p.push(insn(0xbf, R2, FP, 0, 0));
    p.push(insn(0x07, R2, 0, 0, key.into()));
    p.push(insn(0xbf, R3, FP, 0, 0));
    p.push(insn(0x07, R3, 0, 0, value.into()));
    p.push(insn(0xb7, R4, 0, 0, 0)); // BPF_ANY
    p.push(insn(0x85, 0, 0, 0, MAP_UPDATE_ELEM));
}

/// The connect hook's program: `owners[cookie] = (pid_tgid, comm)`; lets the connect
/// go on (returns 1).
fn connect_program(owners: RawFd) -> Vec<[u8; 8]> {
    const KEY: i16 = -8;
    const VALUE: i16 = -32;
    let mut p = vec![
        insn(0x85, 0, 0, 0, GET_SOCKET_COOKIE), // r0 = cookie(ctx in r1)
        insn(0x7b, FP, R0, KEY, 0),             // *(u64 *)(fp + key) = r0
        insn(0x85, 0, 0, 0, GET_CURRENT_PID_TGID),
        insn(0x7b, FP, R0, VALUE, 0), // *(u64 *)(fp + value) = r0
        insn(0xbf, R1, FP, 0, 0),
        insn(0x07, R1, 0, 0, (VALUE + 8).into()), // r1 = &value.comm
        insn(0xb7, R2, 0, 0, 16),
        insn(0x85, 0, 0, 0, GET_CURRENT_COMM),
    ];
    update(&mut p, owners, KEY, VALUE);
    p.push(insn(0xb7, R0, 0, 0, 1));
    p.push(insn(0x95, 0, 0, 0, 0));
    p
}

/// The sock_ops program: on an active open, `conns[four-tuple] = cookie`. The key has
/// the layout of `CTX_FIELDS` with the other family's addresses zeroed, so that the
/// capture thread can build it from the two endpoints it sees and look it up directly.
fn sock_ops_program(conns: RawFd) -> Vec<[u8; 8]> {
    const KEY: i16 = -56;
    const VALUE: i16 = -64;
    let mut p = vec![
        insn(0xbf, R6, R1, 0, 0),                          // r6 = ctx
        insn(0x61, R2, R6, 0, 0),                          // r2 = ctx->op
        insn(0x55, R2, 0, 0, BPF_SOCK_OPS_TCP_CONNECT_CB), // if r2 != connect goto out (patched)
    ];
    let to_out = p.len() - 1;
    for (i, field) in CTX_FIELDS.iter().enumerate() {
        p.push(insn(0x61, R2, R6, *field, 0));
        p.push(insn(0x63, FP, R2, KEY + 4 * i as i16, 0));
    }
    // Word 0 is the family: an IPv4 socket's IPv6 words are zeroed, an IPv6 socket's
    // IPv4 words (an IPv4-mapped peer is then found by its IPv6 form).
    p.push(insn(0x61, R2, FP, KEY, 0)); // r2 = family
    let ip6_words = 5..13;
    p.push(insn(0x55, R2, 0, ip6_words.len() as i16 + 1, libc::AF_INET)); // if != AF_INET skip
    for i in ip6_words {
        p.push(insn(0x62, FP, 0, KEY + 4 * i, 0)); // *(u32 *)(fp + key + 4i) = 0
    }
    p.push(insn(0x05, 0, 0, 2, 0)); // goto cookie
    for i in 3..5 {
        p.push(insn(0x62, FP, 0, KEY + 4 * i, 0));
    }
    p.push(insn(0xbf, R1, R6, 0, 0));
    p.push(insn(0x85, 0, 0, 0, GET_SOCKET_COOKIE));
    p.push(insn(0x7b, FP, R0, VALUE, 0));
    update(&mut p, conns, KEY, VALUE);
    let out = p.len();
    p.push(insn(0xb7, R0, 0, 0, 1));
    p.push(insn(0x95, 0, 0, 0, 0));
    p[to_out][2..4].copy_from_slice(&((out - to_out - 1) as i16).to_ne_bytes());
    p
}

/// The record's key of a connection from `local` to `remote` made by a socket of
/// `family` (the layout of `CTX_FIELDS`, the other family's words zero).
fn key(family: i32, local: SocketAddr, remote: SocketAddr) -> [u8; KEY_LEN] {
    let mut k = [0u8; KEY_LEN];
    k[0..4].copy_from_slice(&(family as u32).to_ne_bytes());
    k[4..8].copy_from_slice(&u32::from(local.port()).to_ne_bytes());
    k[8..12].copy_from_slice(&u32::from(remote.port()).to_be_bytes());
    for (ip, v4, v6) in [(local.ip(), 12, 20), (remote.ip(), 16, 36)] {
        match (family, ip) {
            (libc::AF_INET, IpAddr::V4(a)) => k[v4..v4 + 4].copy_from_slice(&a.octets()),
            (_, IpAddr::V4(a)) => k[v6..v6 + 16].copy_from_slice(&a.to_ipv6_mapped().octets()),
            (_, IpAddr::V6(a)) => k[v6..v6 + 16].copy_from_slice(&a.octets()),
        }
    }
    k
}

/// The record, attached; the connections read from it so far, with their cookies.
pub(super) struct Namer {
    conns: Map,
    owners: Map,
    _progs: Vec<OwnedFd>,
    _links: Vec<OwnedFd>,
}

impl Namer {
    /// Load and attach both programs (root: CAP_BPF and CAP_NET_ADMIN, or
    /// CAP_SYS_ADMIN); an error says why it cannot (then names come from /proc).
    pub(super) fn attach() -> io::Result<Namer> {
        let conns = Map::create(BPF_MAP_TYPE_LRU_HASH, KEY_LEN, 8, ENTRIES, 0)?;
        let owners = Map::create(BPF_MAP_TYPE_LRU_HASH, 8, OWNER_LEN, ENTRIES, 0)?;
        let root = OwnedFd::from(std::fs::File::open(cgroup2_root()?)?);
        let mut progs = Vec::new();
        let mut links = Vec::new();
        for hook in [BPF_CGROUP_INET4_CONNECT, BPF_CGROUP_INET6_CONNECT] {
            let prog = bpf::load_program_for(
                BPF_PROG_TYPE_CGROUP_SOCK_ADDR,
                hook,
                &connect_program(owners.raw_fd()),
                c"handshake_owner",
            )?;
            links.push(bpf::link(&prog, &root, hook)?);
            progs.push(prog);
        }
        let prog = bpf::load_program(
            BPF_PROG_TYPE_SOCK_OPS,
            &sock_ops_program(conns.raw_fd()),
            c"handshake_conn",
        )?;
        links.push(bpf::link(&prog, &root, BPF_CGROUP_SOCK_OPS)?);
        progs.push(prog);
        Ok(Namer {
            conns,
            owners,
            _progs: progs,
            _links: links,
        })
    }

    /// The name of the program that opened the connection from `client` to `server`
    /// on this machine, if it was recorded (taken: each connection is named once). Two
    /// or three lookups by key, whatever the number of connections recorded.
    pub(super) fn name(&mut self, client: SocketAddr, server: SocketAddr) -> Option<Arc<str>> {
        let mut cookie = [0u8; 8];
        let families: &[i32] = match client {
            // An IPv4 connection from an IPv4 socket, or from a dual-stack IPv6 one.
            SocketAddr::V4(_) => &[libc::AF_INET, libc::AF_INET6],
            SocketAddr::V6(_) => &[libc::AF_INET6],
        };
        families.iter().find(|f| {
            self.conns
                .take(&key(**f, client, server), &mut cookie)
                .is_ok()
        })?;
        let mut owner = [0u8; OWNER_LEN];
        self.owners.take(&cookie, &mut owner).ok()?;
        let comm = &owner[8..];
        let end = comm.iter().position(|b| *b == 0).unwrap_or(comm.len());
        Some(Arc::from(String::from_utf8_lossy(&comm[..end]).as_ref()))
    }
}
