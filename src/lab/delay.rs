//! handshake's own delay line: one thread moves every IP packet between the two sides'
//! TUN devices when it is due, like netem on a veth pair.
//!
//! Per direction: a packet read at `now` is lost with probability `loss`; else, with a
//! bandwidth, it waits for the link to be free and takes `len × 8 / bandwidth` to
//! serialize (a drop-tail queue of [`QUEUE_LIMIT`] full-size packets); then it travels the one-way
//! delay (RTT / 2, plus a uniform jitter in ±`jitter`). Packets leave in the order they
//! came (a jittered packet never overtakes an earlier one). Times are nanoseconds of the
//! monotonic clock; the thread sleeps in `ppoll` with a nanosecond timeout, a 1 ns
//! timer slack and a real-time priority, so a packet leaves within a few microseconds of
//! its due time.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::report::link::{DirStats, LineStats};

/// Packets waiting per direction before the queue drops (netem's default limit).
pub const QUEUE_LIMIT: usize = 1000;
/// Largest packet read from a TUN device (its MTU is 1500; room for more).
const MAX_PACKET: usize = 65_536;

/// The link's settings, per direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shape {
    pub one_way: Duration,
    pub jitter: Duration,
    /// Probability of losing a packet, 0..1.
    pub loss: f64,
    /// Bits per second; `None` for no limit.
    pub bandwidth_bps: Option<u64>,
}

/// What the delay line did in one direction.
#[derive(Debug, Default)]
struct DirCounters {
    packets: AtomicU64,
    bytes: AtomicU64,
    lost: AtomicU64,
    queue_drops: AtomicU64,
}

struct Shared {
    dirs: [DirCounters; 2],
    cpu_ns: AtomicU64,
}

/// The running delay line; stopping (or dropping) it ends the thread.
pub struct DelayLine {
    stop: OwnedFd,
    thread: Option<std::thread::JoinHandle<()>>,
    shared: Arc<Shared>,
}

struct Packet {
    due_ns: u64,
    data: Vec<u8>,
}

struct Direction {
    from: RawFd,
    to: RawFd,
    queue: VecDeque<Packet>,
    /// When the serializer is next free (bandwidth), ns.
    link_free_ns: u64,
    last_due_ns: u64,
    shape: Shape,
    index: usize,
}

/// xorshift64*: loss and jitter draws (statistics, not secrets).
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl DelayLine {
    /// Start moving packets between `client_tun` and `server_tun`.
    pub fn start(client_tun: OwnedFd, server_tun: OwnedFd, shape: Shape) -> io::Result<DelayLine> {
        let stop = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if stop < 0 {
            return Err(io::Error::last_os_error());
        }
        let stop = unsafe { OwnedFd::from_raw_fd(stop) };
        let stop_fd = stop.as_raw_fd();
        let shared = Arc::new(Shared {
            dirs: Default::default(),
            cpu_ns: AtomicU64::new(0),
        });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("handshake-delay-line".into())
            .spawn(move || {
                // The fds live as long as this thread: the devices go with it.
                let (c, s) = (client_tun, server_tun);
                run(c.as_raw_fd(), s.as_raw_fd(), stop_fd, shape, &sh);
            })?;
        Ok(DelayLine {
            stop,
            thread: Some(thread),
            shared,
        })
    }

    pub fn stats(&self) -> LineStats {
        let d = |i: usize| {
            let c = &self.shared.dirs[i];
            DirStats {
                packets: c.packets.load(Ordering::Relaxed),
                bytes: c.bytes.load(Ordering::Relaxed),
                lost: c.lost.load(Ordering::Relaxed),
                queue_drops: c.queue_drops.load(Ordering::Relaxed),
            }
        };
        LineStats {
            client_to_server: d(0),
            server_to_client: d(1),
            cpu_s: self.shared.cpu_ns.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }

    /// End the thread (the TUN devices close with it) and return the final counts.
    pub fn stop(&mut self) -> LineStats {
        if let Some(t) = self.thread.take() {
            let one: u64 = 1;
            unsafe {
                libc::write(self.stop.as_raw_fd(), (&one as *const u64).cast(), 8);
            }
            let _ = t.join();
        }
        self.stats()
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        self.stop();
    }
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn run(client: RawFd, server: RawFd, stop: RawFd, shape: Shape, shared: &Shared) {
    // Wake up on time, not up to 50 µs late (the default timer slack), and ahead of the
    // client's and server's threads when a packet is due (a real-time priority where
    // allowed: the kernel's netem runs in softirq, ahead of any task). The thread sleeps
    // whenever nothing is due, and the kernel's real-time throttling bounds it anyway.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0);
        let param = libc::sched_param { sched_priority: 10 };
        libc::sched_setscheduler(0, libc::SCHED_FIFO, &param);
    }
    let epoch = Instant::now();
    let now_ns = || epoch.elapsed().as_nanos() as u64;
    let mut rng = Rng(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x9e37_79b9_7f4a_7c15, |d| d.as_nanos() as u64)
        | 1);
    let mut dirs = [
        Direction {
            from: client,
            to: server,
            queue: VecDeque::new(),
            link_free_ns: 0,
            last_due_ns: 0,
            shape,
            index: 0,
        },
        Direction {
            from: server,
            to: client,
            queue: VecDeque::new(),
            link_free_ns: 0,
            last_due_ns: 0,
            shape,
            index: 1,
        },
    ];
    let mut buf = vec![0u8; MAX_PACKET];
    let mut spare: Vec<Vec<u8>> = Vec::new();
    loop {
        let now = now_ns();
        for d in &mut dirs {
            release(d, now, &shared.dirs[d.index], &mut spare);
        }
        let next_due = dirs
            .iter()
            .filter_map(|d| d.queue.front().map(|p| p.due_ns))
            .min();
        let timeout = next_due.map(|due| {
            let wait = due.saturating_sub(now_ns());
            libc::timespec {
                tv_sec: (wait / 1_000_000_000) as libc::time_t,
                tv_nsec: (wait % 1_000_000_000) as libc::c_long,
            }
        });
        let mut fds = [
            libc::pollfd {
                fd: client,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: server,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: stop,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let tp = timeout
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        let n = unsafe { libc::ppoll(fds.as_mut_ptr(), 3, tp, std::ptr::null()) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            break;
        }
        if fds[2].revents != 0 {
            break;
        }
        for (k, d) in dirs.iter_mut().enumerate() {
            if fds[k].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                shared.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
                return;
            }
            if fds[k].revents & libc::POLLIN != 0 {
                take_in(d, &mut buf, &mut spare, &mut rng, &now_ns, &shared.dirs[k]);
            }
        }
        shared.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
    }
    shared.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
}

/// Read what the device has (up to a batch, so the other direction is not starved) and
/// queue each packet with its due time.
fn take_in(
    d: &mut Direction,
    buf: &mut [u8],
    spare: &mut Vec<Vec<u8>>,
    rng: &mut Rng,
    now_ns: &impl Fn() -> u64,
    counters: &DirCounters,
) {
    for _ in 0..64 {
        let n = unsafe { libc::read(d.from, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            return;
        }
        let now = now_ns();
        let len = n as usize;
        let s = d.shape;
        if s.loss > 0.0 && rng.unit() < s.loss {
            counters.lost.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let mut leave = now;
        if let Some(bps) = s.bandwidth_bps {
            // Bytes still waiting to be serialized: over the queue's room, drop the tail.
            let backlog = d.link_free_ns.saturating_sub(now) as u128 * bps as u128 / 8_000_000_000;
            if backlog >= (QUEUE_LIMIT * 1500) as u128 {
                counters.queue_drops.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let tx_ns = (len as u128 * 8 * 1_000_000_000 / bps as u128) as u64;
            d.link_free_ns = d.link_free_ns.max(now) + tx_ns;
            leave = d.link_free_ns;
        }
        let mut delay = s.one_way.as_nanos() as i128;
        if !s.jitter.is_zero() {
            let j = s.jitter.as_nanos() as f64;
            delay += ((rng.unit() * 2.0 - 1.0) * j) as i128;
        }
        let due = (leave as i128 + delay.max(0)) as u64;
        let due = due.max(d.last_due_ns);
        d.last_due_ns = due;
        let mut data = spare.pop().unwrap_or_default();
        data.clear();
        data.extend_from_slice(&buf[..len]);
        d.queue.push_back(Packet { due_ns: due, data });
    }
}

/// Write every packet that is due into the other side.
fn release(d: &mut Direction, now: u64, counters: &DirCounters, spare: &mut Vec<Vec<u8>>) {
    while d.queue.front().is_some_and(|p| p.due_ns <= now) {
        let p = d.queue.pop_front().expect("front exists");
        let n = unsafe { libc::write(d.to, p.data.as_ptr().cast(), p.data.len()) };
        if n > 0 {
            counters.packets.fetch_add(1, Ordering::Relaxed);
            counters
                .bytes
                .fetch_add(p.data.len() as u64, Ordering::Relaxed);
        } else {
            counters.queue_drops.fetch_add(1, Ordering::Relaxed);
        }
        if spare.len() < 4096 {
            spare.push(p.data);
        }
    }
}
