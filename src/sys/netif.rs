//! Network devices by their ioctls (`SIOCSIF*`, `TUNSETIFF`), which `rustix` does not
//! offer: a device brought up, a point-to-point IPv4 address and its MTU, a TUN device
//! made. Each call takes an AF_INET socket (any will do) and names its device.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// An `ifreq` naming `dev` (cut to IFNAMSIZ - 1 bytes, NUL-terminated), the rest zero.
fn ifreq(dev: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain old data (a name and a union of plain data), for which all
    // zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req
        .ifr_name
        .iter_mut()
        .zip(dev.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    req
}

fn sockaddr(ip: Ipv4Addr) -> libc::sockaddr {
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: sockaddr_in and sockaddr are both 16 bytes of plain data; the kernel reads
    // a sockaddr by its family.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// One ifreq ioctl on `fd`, its error naming `what` and the device.
fn ioctl(fd: impl AsFd, op: libc::c_ulong, req: &mut libc::ifreq, what: &str) -> io::Result<()> {
    // SAFETY: `req` is a valid ifreq, for the kernel to read and write, for the call;
    // every `op` passed here takes an ifreq.
    let rc = unsafe { libc::ioctl(fd.as_fd().as_raw_fd(), op as _, req as *mut libc::ifreq) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        let name: String = req
            .ifr_name
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8 as char)
            .collect();
        return Err(io::Error::new(e.kind(), format!("{what} of {name}: {e}")));
    }
    Ok(())
}

/// Bring `dev` up (IFF_UP | IFF_RUNNING, its other flags kept).
pub(crate) fn set_up(sock: impl AsFd, dev: &str) -> io::Result<()> {
    let mut req = ifreq(dev);
    ioctl(
        sock.as_fd(),
        libc::SIOCGIFFLAGS,
        &mut req,
        "reading the flags",
    )?;
    // SAFETY: SIOCGIFFLAGS has just filled the union's flags member.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
    ioctl(sock, libc::SIOCSIFFLAGS, &mut req, "bringing up")
}

/// Give `dev` the address `local` with the point-to-point peer `peer` (a /32: a host
/// route to the peer) and the MTU `mtu`.
pub(crate) fn set_point_to_point(
    sock: impl AsFd,
    dev: &str,
    local: Ipv4Addr,
    peer: Ipv4Addr,
    mtu: u32,
) -> io::Result<()> {
    let fd = sock.as_fd();
    let mut req = ifreq(dev);
    req.ifr_ifru.ifru_addr = sockaddr(local);
    ioctl(fd, libc::SIOCSIFADDR, &mut req, "setting the address")?;
    req.ifr_ifru.ifru_dstaddr = sockaddr(peer);
    ioctl(fd, libc::SIOCSIFDSTADDR, &mut req, "setting the peer")?;
    req.ifr_ifru.ifru_netmask = sockaddr(Ipv4Addr::new(255, 255, 255, 255));
    ioctl(fd, libc::SIOCSIFNETMASK, &mut req, "setting the netmask")?;
    req.ifr_ifru.ifru_mtu = mtu as libc::c_int;
    ioctl(fd, libc::SIOCSIFMTU, &mut req, "setting the MTU")
}

/// The length of `dev`'s transmit queue, in packets.
pub(crate) fn set_tx_queue_len(sock: impl AsFd, dev: &str, packets: u32) -> io::Result<()> {
    let mut req = ifreq(dev);
    // SIOCSIFTXQLEN reads the length from the union's int member.
    req.ifr_ifru.ifru_ifindex = packets as libc::c_int;
    ioctl(
        sock,
        libc::SIOCSIFTXQLEN,
        &mut req,
        "setting the queue length",
    )
}

/// Make the TUN device `dev` (IP packets, no packet-information header) in the calling
/// thread's network namespace, through `tun`: /dev/net/tun opened.
pub(crate) fn make_tun(tun: &OwnedFd, dev: &str) -> io::Result<()> {
    let mut req = ifreq(dev);
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    ioctl(
        tun,
        libc::TUNSETIFF as libc::c_ulong,
        &mut req,
        "creating the TUN device (TUNSETIFF)",
    )
}
