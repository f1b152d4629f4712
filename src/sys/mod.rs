//! System calls behind one door. Where `rustix` offers a call safely, the code calls it
//! there; what it does not offer (getrusage, a thread's CPU clock, socket options and
//! ioctls of the network devices, AF_PACKET, bpf(2) with its maps, hooks between fork and exec,
//! registering a descriptor with tokio) is here, as small safe functions, each `unsafe`
//! block with its `SAFETY:` reason. No `unsafe` outside this module
//! (`tests/architecture.rs`). It imports nothing of the crate.

pub(crate) mod bpf;
pub(crate) mod exec;
pub(crate) mod netif;
pub(crate) mod ns;
pub(crate) mod process;
pub(crate) mod socket;

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Register `inner` with tokio's reactor. `T` owns its descriptor (it converts into an
/// [`OwnedFd`]: a `TcpListener`, a `TcpStream`, an `OwnedFd`), so the descriptor stays
/// open and the same while the `AsyncFd` holds it.
pub(crate) fn async_fd<T>(inner: T, interest: Interest) -> io::Result<AsyncFd<T>>
where
    T: AsRawFd,
    OwnedFd: From<T>,
{
    // SAFETY: `T` owns its descriptor (it converts into an `OwnedFd`); nothing else can
    // close or replace it while the `AsyncFd` owns `T`, and `as_raw_fd` of such a type
    // returns the same descriptor for its whole life.
    Ok(unsafe { AsyncFd::register_with_interest(inner, interest) }?)
}
