//! Network namespaces and TUN devices for the lab, through the kernel's own calls.
//!
//! Each side of the link is an anonymous network namespace, created by a short-lived
//! thread that unshares its network namespace and brings loopback up, handed back as a
//! descriptor; the delay line adds a TUN device with a point-to-point address to each
//! (opened by a thread inside, so the device is made there). Nothing is named in /run/netns and nothing is left in the root
//! namespace: the namespace lives while its descriptor or a process inside holds it, and
//! the TUN device lives while its descriptor is open, so both go when the run's process
//! exits, however it exits (Ctrl-C, an error, SIGKILL). Processes the lab starts inside
//! are stopped by their PID (and die with the lab by PR_SET_PDEATHSIG).

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{Mode, OFlags};

use crate::sys;

/// One side of the link: a network namespace (from /proc/thread-self/ns/net) with
/// loopback up.
pub(crate) struct Side {
    pub netns: OwnedFd,
    /// Its TCP congestion control, as the kernel reads it back.
    pub congestion_control: String,
}

/// The TCP congestion control both sides use: the kernel's default, whatever this
/// machine's own is (a distant server is not this machine; BBR, say, paces a first
/// flight above the initial window over milliseconds, which no round trip explains).
pub(super) const CONGESTION_CONTROL: &str = "cubic";

/// Create a network namespace with loopback up, TCP congestion control
/// [`CONGESTION_CONTROL`] where the machine allows a namespace to make it its default
/// (else what the kernel has: the link's routes carry it then, `add_tun`) and no IPv6
/// (whose router solicitations would only cross the link as noise).
pub(crate) fn create_side() -> io::Result<Side> {
    std::thread::Builder::new()
        .name("handshake-lab-netns".into())
        .spawn(move || -> io::Result<Side> {
            // Only this thread moves; it ends when the side is made.
            sys::ns::unshare_network()?;
            let netns = open_cloexec("/proc/thread-self/ns/net", OFlags::RDONLY)?;
            for conf in ["default", "all"] {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6"), "1");
            }
            // A new namespace starts with the machine's own (since Linux 4.15).
            let cc = "/proc/sys/net/ipv4/tcp_congestion_control";
            let _ = std::fs::write(cc, CONGESTION_CONTROL);
            let congestion_control = std::fs::read_to_string(cc)
                .map_or_else(|_| "unknown".to_string(), |s| s.trim().to_string());
            let sock = inet_socket()?;
            sys::netif::set_up(&sock, "lo")?;
            Ok(Side {
                netns,
                congestion_control,
            })
        })?
        .join()
        .map_err(|_| io::Error::other("the namespace thread panicked"))?
}

/// An AF_INET socket for the device ioctls.
fn inet_socket() -> io::Result<OwnedFd> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)
        .map_err(|e| io::Error::new(e.kind(), format!("socket for interface setup: {e}")))?;
    Ok(sock.into())
}

/// Add a TUN device `dev` to the namespace `ns`, holding `local` with the point-to-point
/// peer `peer` (a host route to it, carrying [`CONGESTION_CONTROL`]) and the given MTU;
/// return it, non-blocking (IP packets, no packet-information header), and whether the
/// route took the congestion control (a kernel before 4.0 has no such route metric).
pub(crate) fn add_tun(
    ns: &OwnedFd,
    dev: &str,
    local: Ipv4Addr,
    peer: Ipv4Addr,
    mtu: u32,
) -> io::Result<(OwnedFd, bool)> {
    run_in(ns, || -> io::Result<(OwnedFd, bool)> {
        let sock = inet_socket()?;
        // The device is made in the namespace of the thread that opens /dev/net/tun.
        let tun = open_tun(dev)?;
        sys::netif::set_point_to_point(&sock, dev, local, peer, mtu)?;
        // Room for a burst while the delay line is busy with the other direction (best
        // effort: a user namespace may not set it; the default is 500 packets).
        let _ = sys::netif::set_tx_queue_len(&sock, dev, 4096);
        sys::netif::set_up(&sock, dev)?;
        let cc = super::route::peer_route_with(dev, local, peer, CONGESTION_CONTROL).is_ok();
        Ok((tun, cc))
    })?
}

fn open_cloexec(path: &str, flags: OFlags) -> io::Result<OwnedFd> {
    rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("opening {path}: {e}")))
}

/// A TUN device (IP packets, no packet-information header), in the calling thread's
/// namespace, non-blocking.
fn open_tun(dev: &str) -> io::Result<OwnedFd> {
    let fd = open_cloexec("/dev/net/tun", OFlags::RDWR | OFlags::NONBLOCK)?;
    sys::netif::make_tun(&fd, dev)?;
    Ok(fd)
}

/// Move the calling thread into the namespace `fd`.
pub(crate) fn enter(fd: &OwnedFd) -> io::Result<()> {
    rustix::thread::move_into_link_name_space(
        fd.as_fd(),
        Some(rustix::thread::LinkNameSpaceType::Network),
    )
    .map_err(|e| {
        io::Error::new(
            io::Error::from(e).kind(),
            format!("entering the lab's network namespace (setns): {e}"),
        )
    })
}

/// Run `f` on a new thread inside the namespace `fd` (threads it starts are inside too)
/// and return its value; the calling thread stays where it is.
pub(crate) fn run_in<T: Send>(fd: &OwnedFd, f: impl FnOnce() -> T + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .name("handshake-lab".into())
            .spawn_scoped(s, || -> io::Result<T> {
                enter(fd)?;
                Ok(f())
            })?
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

/// Without root, enter a new user namespace (mapping this user to root inside it) so that
/// network namespaces can be made, where the kernel allows it. Must run before the
/// process starts a second thread. Returns whether it did.
pub(crate) fn try_user_namespace() -> bool {
    let (uid, gid) = (
        rustix::process::geteuid().as_raw(),
        rustix::process::getegid().as_raw(),
    );
    if uid == 0 || sys::ns::unshare_user().is_err() {
        return false;
    }
    let _ = std::fs::write("/proc/self/setgroups", "deny");
    std::fs::write("/proc/self/uid_map", format!("0 {uid} 1")).is_ok()
        && std::fs::write("/proc/self/gid_map", format!("0 {gid} 1")).is_ok()
}
