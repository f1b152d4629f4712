//! What a child does between fork and exec (`pre_exec` hooks), which only
//! async-signal-safe calls may do: enter the lab's network namespace, die with the
//! thread that started it, join a cgroup.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The child of `cmd` enters the network namespace `ns` before it runs, and with
/// `die_with_parent` is killed (SIGKILL) when the thread that started it ends. `ns`
/// must stay open until `cmd` is spawned (closed, the child fails to start with
/// EBADF).
pub(crate) fn enter_network_namespace(
    cmd: &mut Command,
    ns: BorrowedFd<'_>,
    die_with_parent: bool,
) {
    let fd = ns.as_raw_fd();
    // SAFETY: the hook makes two system calls, prctl and setns, both async-signal-safe,
    // touches no lock and allocates nothing; an fd closed by then is an error, not
    // undefined behaviour.
    unsafe {
        cmd.pre_exec(move || {
            if die_with_parent && libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The child of `cmd` writes "0\n" to `procs` (a cgroup's `cgroup.procs`: it joins the
/// cgroup) before it runs.
pub(crate) fn join_cgroup(cmd: &mut Command, procs: CString) {
    // SAFETY: the hook makes three system calls, open, write and close, all
    // async-signal-safe, on a path and a buffer made before the fork; it touches no lock
    // and allocates nothing (the error is built from errno alone).
    unsafe {
        cmd.pre_exec(move || {
            let f = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if f < 0 {
                return Err(io::Error::last_os_error());
            }
            let ok = libc::write(f, b"0\n".as_ptr().cast(), 2) == 2;
            let err = io::Error::last_os_error();
            libc::close(f);
            if ok {
                Ok(())
            } else {
                Err(err)
            }
        });
    }
}
