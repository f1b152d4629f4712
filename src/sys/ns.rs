//! Namespaces the calling thread leaves for new ones (unshare), which `rustix` offers
//! only as `unsafe` (unsharing the file table can strand descriptors: not done here).

use std::io;

use rustix::thread::UnshareFlags;

fn unshare(flags: UnshareFlags, what: &str) -> io::Result<()> {
    // SAFETY: neither flag passed here is `UnshareFlags::FILES`, the one that can leave
    // other threads with descriptors this thread no longer has.
    unsafe { rustix::thread::unshare_unsafe(flags) }
        .map_err(|e| io::Error::new(io::Error::from(e).kind(), format!("{what}: {e}")))
}

/// Move the calling thread into a new network namespace.
pub(crate) fn unshare_network() -> io::Result<()> {
    unshare(
        UnshareFlags::NEWNET,
        "creating a network namespace (unshare CLONE_NEWNET)",
    )
}

/// Move the calling process (a single thread yet) into a new user namespace.
pub(crate) fn unshare_user() -> io::Result<()> {
    unshare(
        UnshareFlags::NEWUSER,
        "creating a user namespace (unshare CLONE_NEWUSER)",
    )
}
