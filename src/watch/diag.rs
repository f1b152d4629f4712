//! This machine's TCP sockets from the kernel (sock_diag over netlink: endpoints, state,
//! owner inode), and which process owns which socket (its file descriptors in /proc).

use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
pub(super) use netlink_packet_sock_diag::inet::StateFlags;
use netlink_packet_sock_diag::{
    constants::{AF_INET, AF_INET6, IPPROTO_TCP},
    inet::{ExtensionFlags, InetRequest, SocketId},
    SockDiagMessage,
};
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket as NlSocket, SocketAddr as NlAddr};

pub(super) const TCP_ESTABLISHED: u8 = 1;

#[derive(Debug, Clone, Copy)]
pub(super) struct SockEntry {
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub state: u8,
    pub inode: u32,
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Every TCP socket of this network namespace in `states`, IPv4 and IPv6, handed to
/// `f` one by one (after many short connections there are tens of thousands in
/// TIME_WAIT: none is kept here).
pub(super) fn each(states: StateFlags, mut f: impl FnMut(SockEntry)) -> io::Result<()> {
    for family in [AF_INET, AF_INET6] {
        each_of_family(family, states.clone(), &mut f)?;
    }
    Ok(())
}

/// The sockets that own a file (all but TIME_WAIT and half-open ones, which have no
/// inode).
pub(super) fn with_owner() -> StateFlags {
    StateFlags::all() - StateFlags::TIME_WAIT - StateFlags::SYN_RECV
}

fn each_of_family(family: u8, states: StateFlags, f: &mut impl FnMut(SockEntry)) -> io::Result<()> {
    let mut sock = lookup_socket()?;
    let socket_id = if family == AF_INET {
        SocketId::new_v4()
    } else {
        SocketId::new_v6()
    };
    send_request(
        &mut sock,
        NLM_F_REQUEST | NLM_F_DUMP,
        family,
        socket_id,
        states,
    )?;
    loop {
        let (data, _) = sock.recv_from_full()?;
        let mut off = 0;
        while off < data.len() {
            let m =
                NetlinkMessage::<SockDiagMessage>::deserialize(&data[off..]).map_err(invalid)?;
            let len = m.header.length as usize;
            match m.payload {
                NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => {
                    let id = &r.header.socket_id;
                    f(SockEntry {
                        local: SocketAddr::new(id.source_address, id.source_port),
                        remote: SocketAddr::new(id.destination_address, id.destination_port),
                        state: r.header.state,
                        inode: r.header.inode,
                    });
                }
                NetlinkPayload::Done(_) => return Ok(()),
                NetlinkPayload::Error(e) => return Err(e.to_io()),
                _ => {}
            }
            if len == 0 {
                break;
            }
            off += (len + 3) & !3;
        }
    }
}

/// Ask for the TCP sockets of `family` matching `socket_id` (all of them with
/// NLM_F_DUMP) in `states`.
fn send_request(
    sock: &mut NlSocket,
    flags: u16,
    family: u8,
    socket_id: SocketId,
    states: StateFlags,
) -> io::Result<()> {
    let mut header = NetlinkHeader::default();
    header.flags = flags;
    let mut msg = NetlinkMessage::new(
        header,
        SockDiagMessage::InetRequest(InetRequest {
            family,
            protocol: IPPROTO_TCP,
            extensions: ExtensionFlags::empty(),
            states,
            socket_id,
        })
        .into(),
    );
    msg.finalize();
    let mut buf = vec![0u8; msg.buffer_len()];
    msg.serialize(&mut buf);
    sock.send(&buf, 0)?;
    Ok(())
}

/// A netlink socket for sock_diag requests (`lookup` keeps one open between lookups).
pub(super) fn lookup_socket() -> io::Result<NlSocket> {
    let mut sock = NlSocket::new(NETLINK_SOCK_DIAG)?;
    sock.bind_auto()?;
    sock.connect(&NlAddr::new(0, 0))?;
    Ok(sock)
}

/// The inode of the socket with these endpoints (0: none, or no owner any more).
pub(super) fn lookup(
    sock: &mut NlSocket,
    local: SocketAddr,
    remote: SocketAddr,
) -> io::Result<u32> {
    let family = if local.is_ipv4() { AF_INET } else { AF_INET6 };
    let mut socket_id = if family == AF_INET {
        SocketId::new_v4()
    } else {
        SocketId::new_v6()
    };
    socket_id.source_address = local.ip();
    socket_id.source_port = local.port();
    socket_id.destination_address = remote.ip();
    socket_id.destination_port = remote.port();
    // INET_DIAG_NOCOOKIE: any socket with these endpoints.
    socket_id.cookie = [0xff; 8];
    send_request(sock, NLM_F_REQUEST, family, socket_id, StateFlags::all())?;
    let (data, _) = sock.recv_from_full()?;
    let m = NetlinkMessage::<SockDiagMessage>::deserialize(&data).map_err(invalid)?;
    Ok(match m.payload {
        NetlinkPayload::InnerMessage(SockDiagMessage::InetResponse(r)) => r.header.inode,
        _ => 0,
    })
}

/// The local endpoints that listen (a connection to one of them is served here).
pub(super) fn listening() -> io::Result<HashSet<SocketAddr>> {
    let mut out = HashSet::new();
    each(StateFlags::LISTEN, |e| {
        out.insert(e.local);
    })?;
    Ok(out)
}

/// Whether a process runs: it exists and is not a zombie (ended, not yet reaped).
pub(super) fn alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .is_some_and(|state| state != "Z" && state != "X")
}

/// The socket inodes a process holds open.
pub(super) fn socket_inodes(pid: i32) -> Vec<u32> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|t| {
            t.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}
