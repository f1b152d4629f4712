//! Socket options and addresses that neither `socket2` nor `rustix` offers: Linux's
//! `IP_BIND_ADDRESS_NO_PORT`, `TCP_INFO`, `SO_RCVBUFFORCE`, an AF_PACKET socket's
//! address, its `PACKET_STATISTICS`, and packets read with the kernel's arrival stamps
//! (`SO_TIMESTAMPNS`).

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, SystemTime};

use socket2::SockAddr;

/// Set an int option; the OS error when the kernel refuses it.
fn set_int(fd: impl AsFd, level: libc::c_int, name: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: a descriptor borrowed for the call, and a c_int option of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            level,
            name,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Read a plain-old-data option into `out` (all zeroes is a valid `T`); whether the
/// kernel answered.
fn get_plain<T>(fd: impl AsFd, level: libc::c_int, name: libc::c_int, out: &mut T) -> bool {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `out` is valid for `len` bytes and getsockopt writes at most `len` of them
    // (a shorter answer leaves the rest as it was).
    let rc = unsafe {
        libc::getsockopt(
            fd.as_fd().as_raw_fd(),
            level,
            name,
            (out as *mut T).cast(),
            &mut len,
        )
    };
    rc == 0
}

/// `IP_BIND_ADDRESS_NO_PORT`: bind the address now, pick the port at connect time.
pub(crate) fn set_bind_address_no_port(fd: impl AsFd) -> io::Result<()> {
    set_int(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1)
}

/// `SO_RCVBUFFORCE`: a receive buffer of `bytes`, past `rmem_max` (root only).
pub(crate) fn set_recv_buffer_force(fd: impl AsFd, bytes: libc::c_int) -> io::Result<()> {
    set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes)
}

/// `TCP_INFO` of a TCP socket; fields a kernel too old to know them stay zero.
pub(crate) fn tcp_info(fd: impl AsFd) -> Option<libc::tcp_info> {
    // SAFETY: tcp_info is plain old data, for which all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    get_plain(fd, libc::IPPROTO_TCP, libc::TCP_INFO, &mut info).then_some(info)
}

/// `PACKET_STATISTICS` of an AF_PACKET socket: packets received and dropped since the
/// last reading (the kernel resets them on each).
pub(crate) fn packet_statistics(fd: impl AsFd) -> Option<(u32, u32)> {
    // SAFETY: tpacket_stats is plain old data, for which all zeroes is a valid value.
    let mut st: libc::tpacket_stats = unsafe { std::mem::zeroed() };
    get_plain(fd, libc::SOL_PACKET, libc::PACKET_STATISTICS, &mut st)
        .then_some((st.tp_packets, st.tp_drops))
}

/// The address an AF_PACKET socket binds to for every protocol (`ETH_P_ALL`) on every
/// interface (index 0).
pub(crate) fn packet_any() -> io::Result<SockAddr> {
    // SAFETY: sockaddr_ll is plain old data, for which all zeroes is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
    sll.sll_ifindex = 0;
    let size = std::mem::size_of::<libc::sockaddr_ll>();
    // SAFETY: the storage is a sockaddr_storage, larger than a sockaddr_ll, whose bytes
    // are copied in whole; `len` says how many are valid.
    let (_, addr) = unsafe {
        SockAddr::try_init(|storage, len| {
            std::ptr::copy_nonoverlapping(
                (&sll as *const libc::sockaddr_ll).cast::<u8>(),
                storage.cast::<u8>(),
                size,
            );
            *len = size as libc::socklen_t;
            Ok(())
        })?
    };
    Ok(addr)
}

/// `SO_TIMESTAMPNS`: the kernel stamps each packet received with its arrival time.
pub(crate) fn set_timestamps(fd: impl AsFd) -> io::Result<()> {
    set_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

/// Read one datagram into `buf`: its length, and the kernel's stamp of its arrival
/// (`SCM_TIMESTAMPNS`, on the realtime clock) when the socket asked for stamps.
pub(crate) fn recv_stamped(
    fd: impl AsFd,
    buf: &mut [u8],
) -> io::Result<(usize, Option<SystemTime>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // Room for a control message holding a timespec, aligned as the kernel writes it.
    let mut control = [0u64; 8];
    // SAFETY: msghdr is plain old data, for which all zeroes is a valid value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `iov` (into `buf`, of its length) and `control` (of the
    // length given), all alive for the call; recvmsg writes within them.
    let n = unsafe { libc::recvmsg(fd.as_fd().as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut stamp = None;
    // SAFETY: the control messages walked are those recvmsg wrote into `control`
    // (msg_controllen set to their length); CMSG_NXTHDR stops at its end; a timestamp's
    // data is a timespec, read unaligned.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                stamp = Some(
                    SystemTime::UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
                );
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, stamp))
}
