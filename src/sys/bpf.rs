//! bpf(2), which neither `rustix` nor `libc` wraps: maps that know their key and value
//! sizes (so the kernel never writes past a buffer of ours), a program loaded with its
//! verifier's log, and a link that attaches it. The attributes are a zero-padded
//! `union bpf_attr` (linux/bpf.h) built here, with pointers only to buffers borrowed for
//! the call.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const MAP_CREATE: libc::c_long = 0;
const MAP_LOOKUP_ELEM: libc::c_long = 1;
const MAP_GET_NEXT_KEY: libc::c_long = 4;
const PROG_LOAD: libc::c_long = 5;
const MAP_LOOKUP_AND_DELETE_ELEM: libc::c_long = 21;
const LINK_CREATE: libc::c_long = 28;

/// The size of the attributes passed (the kernel takes a prefix of its union, and
/// requires what it does not know to be zero).
const ATTR: usize = 128;

fn put(attr: &mut [u8; ATTR], off: usize, v: &[u8]) {
    attr[off..off + v.len()].copy_from_slice(v);
}

/// One bpf(2) call. Every pointer in `attr` must point to a buffer borrowed for the
/// call, as large as the kernel will read or write through it: each caller below says
/// why it is.
fn call(cmd: libc::c_long, attr: &mut [u8; ATTR]) -> io::Result<i64> {
    // SAFETY: `attr` is a zero-padded bpf_attr of the size passed; the pointers in it are
    // the callers' (see each), valid for the sizes the kernel uses.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A new descriptor that bpf(2) returned.
fn owned(r: i64) -> OwnedFd {
    // SAFETY: a bpf(2) command that makes an object returns a new descriptor for it,
    // which nothing else owns.
    unsafe { OwnedFd::from_raw_fd(r as RawFd) }
}

/// A BPF map, with the sizes of its keys and values.
pub(crate) struct Map {
    fd: OwnedFd,
    key_len: usize,
    value_len: usize,
}

impl Map {
    /// `BPF_MAP_CREATE` of `kind` (BPF_MAP_TYPE_*), `entries` long, with `flags`.
    pub(crate) fn create(
        kind: u32,
        key_len: usize,
        value_len: usize,
        entries: u32,
        flags: u32,
    ) -> io::Result<Map> {
        let mut a = [0u8; ATTR];
        for (i, v) in [kind, key_len as u32, value_len as u32, entries, flags]
            .into_iter()
            .enumerate()
        {
            put(&mut a, i * 4, &v.to_ne_bytes());
        }
        // No pointer in these attributes.
        let fd = owned(call(MAP_CREATE, &mut a)?);
        Ok(Map {
            fd,
            key_len,
            value_len,
        })
    }

    /// Its descriptor, for a program's instructions that load it.
    pub(crate) fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// `map_fd`, `key` and `value` (or the next key): the element commands' attributes.
    /// The lengths are checked against the map's, so the kernel reads `key_len` bytes
    /// from `key` and writes at most `out.len()` into `out`.
    fn elem(&self, cmd: libc::c_long, key: Option<&[u8]>, out: &mut [u8]) -> io::Result<()> {
        let mut a = [0u8; ATTR];
        put(&mut a, 0, &(self.fd.as_raw_fd() as u32).to_ne_bytes());
        put(
            &mut a,
            8,
            &(key.map_or(0, |k| k.as_ptr() as u64)).to_ne_bytes(),
        );
        put(&mut a, 16, &(out.as_mut_ptr() as u64).to_ne_bytes());
        call(cmd, &mut a).map(|_| ())
    }

    /// The key after `key` (the first with `None`) into `next`.
    pub(crate) fn next_key(&self, key: Option<&[u8]>, next: &mut [u8]) -> io::Result<()> {
        assert!(key.is_none_or(|k| k.len() == self.key_len) && next.len() == self.key_len);
        self.elem(MAP_GET_NEXT_KEY, key, next)
    }

    /// The value of `key` into `value`.
    pub(crate) fn lookup(&self, key: &[u8], value: &mut [u8]) -> io::Result<()> {
        assert!(key.len() == self.key_len && value.len() == self.value_len);
        self.elem(MAP_LOOKUP_ELEM, Some(key), value)
    }

    /// The value of `key` into `value`, and the entry deleted.
    pub(crate) fn take(&self, key: &[u8], value: &mut [u8]) -> io::Result<()> {
        assert!(key.len() == self.key_len && value.len() == self.value_len);
        self.elem(MAP_LOOKUP_AND_DELETE_ELEM, Some(key), value)
    }
}

/// `BPF_PROG_LOAD` of `insns` (8 bytes each) as a program of `kind`, licensed "GPL",
/// named `name` (at most 15 bytes); a refusal carries the verifier's log.
pub(crate) fn load_program(kind: u32, insns: &[[u8; 8]], name: &CStr) -> io::Result<OwnedFd> {
    load_program_for(kind, 0, insns, name)
}

/// [`load_program`] for a program that says at load where it will be attached
/// (`expected_attach_type`: a cgroup's connect hook, say).
pub(crate) fn load_program_for(
    kind: u32,
    attach_type: u32,
    insns: &[[u8; 8]],
    name: &CStr,
) -> io::Result<OwnedFd> {
    let code: Vec<u8> = insns.concat();
    let license = c"GPL";
    let mut log = vec![0u8; 16384];
    let name = name.to_bytes_with_nul();
    assert!(name.len() <= 16, "a BPF object's name is 15 bytes at most");
    let mut a = [0u8; ATTR];
    put(&mut a, 0, &kind.to_ne_bytes());
    put(&mut a, 4, &(insns.len() as u32).to_ne_bytes());
    // The code, `insns.len()` instructions of 8 bytes, read by the kernel.
    put(&mut a, 8, &(code.as_ptr() as u64).to_ne_bytes());
    // The license, a NUL-terminated string.
    put(&mut a, 16, &(license.as_ptr() as u64).to_ne_bytes());
    put(&mut a, 24, &1u32.to_ne_bytes()); // log level
                                          // The log, written by the kernel up to its length.
    put(&mut a, 28, &(log.len() as u32).to_ne_bytes());
    put(&mut a, 32, &(log.as_mut_ptr() as u64).to_ne_bytes());
    put(&mut a, 48, name);
    put(&mut a, 68, &attach_type.to_ne_bytes()); // expected_attach_type
    call(PROG_LOAD, &mut a).map(owned).map_err(|e| {
        let end = log.iter().position(|b| *b == 0).unwrap_or(log.len());
        let why = String::from_utf8_lossy(&log[..end]);
        io::Error::new(e.kind(), format!("{e}; verifier: {}", why.trim()))
    })
}

/// `BPF_LINK_CREATE`: attach `prog` to `target` (a cgroup's directory, say) as
/// `attach_type`; detached when the link's descriptor closes.
pub(crate) fn link(prog: &OwnedFd, target: &OwnedFd, attach_type: u32) -> io::Result<OwnedFd> {
    let mut a = [0u8; ATTR];
    put(&mut a, 0, &(prog.as_raw_fd() as u32).to_ne_bytes());
    put(&mut a, 4, &(target.as_raw_fd() as u32).to_ne_bytes());
    put(&mut a, 8, &attach_type.to_ne_bytes());
    // No pointer in these attributes.
    call(LINK_CREATE, &mut a).map(owned)
}
