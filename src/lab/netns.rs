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

use std::ffi::CString;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Turn a -1 return into the OS error with what was being done.
fn check(ret: libc::c_int, what: &str) -> io::Result<libc::c_int> {
    if ret < 0 {
        let e = io::Error::last_os_error();
        Err(io::Error::new(e.kind(), format!("{what}: {e}")))
    } else {
        Ok(ret)
    }
}

/// One side of the link: a network namespace (from /proc/thread-self/ns/net) with
/// loopback up.
pub struct Side {
    pub netns: OwnedFd,
}

/// Create a network namespace with loopback up (and no IPv6, whose router solicitations
/// would only cross the link as noise).
pub fn create_side() -> io::Result<Side> {
    std::thread::Builder::new()
        .name("handshake-lab-netns".into())
        .spawn(move || -> io::Result<Side> {
            // Only this thread moves; it ends when the side is made.
            check(
                unsafe { libc::unshare(libc::CLONE_NEWNET) },
                "creating a network namespace (unshare CLONE_NEWNET)",
            )?;
            let netns = open_cloexec("/proc/thread-self/ns/net", libc::O_RDONLY)?;
            for conf in ["default", "all"] {
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6"), "1");
            }
            let sock = inet_socket()?;
            set_up(sock.as_raw_fd(), "lo")?;
            Ok(Side { netns })
        })?
        .join()
        .map_err(|_| io::Error::other("the namespace thread panicked"))?
}

fn inet_socket() -> io::Result<OwnedFd> {
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    Ok(unsafe { OwnedFd::from_raw_fd(check(sock, "socket for interface setup")?) })
}

/// Add a TUN device `dev` to the namespace `ns`, holding `local` with the point-to-point
/// peer `peer` (a host route to it) and the given MTU; return it, non-blocking (IP
/// packets, no packet-information header).
pub fn add_tun(
    ns: &OwnedFd,
    dev: &str,
    local: Ipv4Addr,
    peer: Ipv4Addr,
    mtu: u32,
) -> io::Result<OwnedFd> {
    run_in(ns, || -> io::Result<OwnedFd> {
        let sock = inet_socket()?;
        let fd = sock.as_raw_fd();
        // The device is made in the namespace of the thread that opens /dev/net/tun.
        let tun = open_tun(dev)?;
        let mut req = ifreq(dev);
        req.ifr_ifru.ifru_addr = sockaddr(local);
        ioctl(fd, libc::SIOCSIFADDR, &mut req, "setting the address")?;
        req.ifr_ifru.ifru_dstaddr = sockaddr(peer);
        ioctl(fd, libc::SIOCSIFDSTADDR, &mut req, "setting the peer")?;
        req.ifr_ifru.ifru_netmask = sockaddr(Ipv4Addr::new(255, 255, 255, 255));
        ioctl(fd, libc::SIOCSIFNETMASK, &mut req, "setting the netmask")?;
        req.ifr_ifru.ifru_mtu = mtu as libc::c_int;
        ioctl(fd, libc::SIOCSIFMTU, &mut req, "setting the MTU")?;
        // Room for a burst while the delay line is busy with the other direction (best
        // effort: a user namespace may not set it; the default is 500 packets).
        req.ifr_ifru.ifru_ifindex = 4096;
        let _ = ioctl(
            fd,
            libc::SIOCSIFTXQLEN,
            &mut req,
            "setting the queue length",
        );
        set_up(fd, dev)?;
        Ok(tun)
    })?
}

fn open_cloexec(path: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
    let c = CString::new(path).expect("no NUL in path");
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC) };
    Ok(unsafe { OwnedFd::from_raw_fd(check(fd, &format!("opening {path}"))?) })
}

fn ifreq(name: &str) -> libc::ifreq {
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
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
    // sockaddr_in and sockaddr have the same size (16 bytes).
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

fn ioctl(fd: RawFd, op: libc::c_ulong, req: &mut libc::ifreq, what: &str) -> io::Result<()> {
    let name: String = req
        .ifr_name
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8 as char)
        .collect();
    check(
        unsafe { libc::ioctl(fd, op as _, req as *mut libc::ifreq) },
        &format!("{what} of {name}"),
    )?;
    Ok(())
}

fn set_up(sock: RawFd, dev: &str) -> io::Result<()> {
    let mut req = ifreq(dev);
    ioctl(sock, libc::SIOCGIFFLAGS, &mut req, "reading the flags")?;
    unsafe { req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short };
    ioctl(sock, libc::SIOCSIFFLAGS, &mut req, "bringing up")
}

/// A TUN device (IP packets, no packet-information header), in the calling thread's
/// namespace, non-blocking.
fn open_tun(dev: &str) -> io::Result<OwnedFd> {
    let fd = open_cloexec("/dev/net/tun", libc::O_RDWR | libc::O_NONBLOCK)?;
    let mut req = ifreq(dev);
    req.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    check(
        unsafe {
            libc::ioctl(
                fd.as_raw_fd(),
                libc::TUNSETIFF as _,
                &mut req as *mut libc::ifreq,
            )
        },
        &format!("creating the TUN device {dev} (TUNSETIFF)"),
    )?;
    Ok(fd)
}

/// Move the calling thread into the namespace `fd`.
pub fn enter(fd: &OwnedFd) -> io::Result<()> {
    check(
        unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) },
        "entering the lab's network namespace (setns)",
    )?;
    Ok(())
}

/// Run `f` on a new thread inside the namespace `fd` (threads it starts are inside too)
/// and return its value; the calling thread stays where it is.
pub fn run_in<T: Send>(fd: &OwnedFd, f: impl FnOnce() -> T + Send) -> io::Result<T> {
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
pub fn try_user_namespace() -> bool {
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid == 0 {
        return false;
    }
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } != 0 {
        return false;
    }
    let _ = std::fs::write("/proc/self/setgroups", "deny");
    std::fs::write("/proc/self/uid_map", format!("0 {uid} 1")).is_ok()
        && std::fs::write("/proc/self/gid_map", format!("0 {gid} 1")).is_ok()
}

/// Set the process-death signal of a child (in a `pre_exec` hook): it is killed when the
/// lab's thread that started it ends, so no process outlives a lab killed outright.
pub fn die_with_parent() -> io::Result<()> {
    check(
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) },
        "PR_SET_PDEATHSIG",
    )?;
    Ok(())
}
