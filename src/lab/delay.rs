//! handshake's own delay line: one thread moves every IP packet between the two sides'
//! TUN devices when it is due, like netem on a veth pair.
//!
//! Per direction: a packet read at `now` is lost with probability `loss`; else, with a
//! bandwidth, it waits for the link to be free and takes `len × 8 / bandwidth` to
//! serialize (a drop-tail queue of [`QUEUE_LIMIT`] full-size packets); then it travels the one-way
//! delay (RTT / 2, plus a uniform jitter in ±`jitter`). Packets leave in the order they
//! came (a jittered packet never overtakes an earlier one). Times are nanoseconds of the
//! monotonic clock. The thread runs at a real-time priority and sleeps in `ppoll` until a
//! little before the next due time (its lead: the timer's own lateness as measured on this
//! machine, which in a virtual machine's idle CPU is 50 µs to a millisecond), then polls
//! without sleeping until the packet is due. Each packet's departure against its due time
//! is recorded ([`Lateness`]): the line's own error, reported with the link.

use std::collections::VecDeque;
use std::io;
use std::num::NonZeroU64;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rustix::event::{poll, PollFd, PollFlags};
use rustix::time::Timespec;

use crate::report::link::{tolerance_ms, DirStats, LateStats, LineStats};

/// Packets waiting per direction before the queue drops (netem's default limit).
const QUEUE_LIMIT: usize = 1000;
/// Largest packet read from a TUN device (its MTU is 1500; room for more).
const MAX_PACKET: usize = 65_536;
/// Packets in flight per direction with room made before the first (queues and buffers).
const QUEUE_PREALLOC: usize = 2048;
/// A packet buffer's room: the TUN devices' MTU and then some.
const MTU_BUFFER: usize = 1600;
/// The timer's lead at the start, and its bounds: the thread wakes this long before a
/// packet is due and polls without sleeping until it is.
const LEAD_START_NS: u64 = 300_000;
const LEAD_MIN_NS: u64 = 20_000;
const LEAD_MAX_NS: u64 = 2_000_000;
/// Margin over the timer's lateness last seen.
const LEAD_MARGIN_NS: u64 = 30_000;
/// Lateness above this is counted in the last bucket (a second).
const LATE_MAX_NS: u64 = 1_000_000_000;

/// The link's settings, per direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Shape {
    pub one_way: Duration,
    pub jitter: Duration,
    /// Probability of losing a packet, 0..1.
    pub loss: f64,
    /// Bits per second; `None` for no limit.
    pub bandwidth_bps: Option<u64>,
    /// Test-only: added one way to every packet but those of the port
    /// [`DelayLine::exempt_port`] names (the lab's probes).
    pub skew: Duration,
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
    /// The departures' lateness, handed over when the thread ends.
    lateness: std::sync::Mutex<Option<Lateness>>,
    /// A TCP or UDP port whose packets take no test skew (the probes'); 0 for none.
    exempt_port: AtomicU16,
}

/// How late each packet left the line against its due time: the delay line's own error
/// (what it adds to the set delay besides the wake-up that read the packet).
struct Lateness {
    hist: Histogram<u64>,
    /// The timer's lead when the thread ended, ns.
    lead_ns: u64,
    /// A packet later than this missed its one-way delay's tolerance, ns.
    tolerance_ns: u64,
    /// Packets beyond the tolerance already when the thread woke to write them.
    woke_late: u64,
}

impl Lateness {
    fn new(one_way: Duration) -> Lateness {
        Lateness {
            // Nanoseconds, 3 significant digits, up to a second: allocated once here.
            hist: Histogram::new_with_bounds(1, LATE_MAX_NS, 3).expect("valid bounds"),
            lead_ns: LEAD_START_NS,
            tolerance_ns: (tolerance_ms(one_way.as_secs_f64() * 1000.0) * 1e6).round() as u64,
            woke_late: 0,
        }
    }

    /// One departure `late_ns` after its due time, of which `late_at_wake_ns` had passed
    /// when the thread woke to write it (the rest went on writing the packets before it).
    fn record(&mut self, late_ns: u64, late_at_wake_ns: u64) {
        self.hist.saturating_record(late_ns.clamp(1, LATE_MAX_NS));
        if late_ns > self.tolerance_ns && late_at_wake_ns > self.tolerance_ns {
            self.woke_late += 1;
        }
    }

    fn stats(&self) -> LateStats {
        let us = |ns: u64| ns as f64 / 1000.0;
        let h = &self.hist;
        LateStats {
            packets: h.len(),
            mean_us: if h.is_empty() { 0.0 } else { h.mean() / 1000.0 },
            p50_us: us(h.value_at_quantile(0.5)),
            p99_us: us(h.value_at_quantile(0.99)),
            max_us: us(h.max()),
            tolerance_us: us(self.tolerance_ns),
            beyond_tolerance: h.count_between(self.tolerance_ns + 1, LATE_MAX_NS),
            woke_late: self.woke_late,
            timer_lead_us: us(self.lead_ns),
        }
    }
}

/// The running delay line; stopping (or dropping) it ends the thread.
pub(crate) struct DelayLine {
    stop: OwnedFd,
    thread: Option<std::thread::JoinHandle<()>>,
    shared: Arc<Shared>,
}

struct Packet {
    due_ns: u64,
    data: Vec<u8>,
}

struct Direction<'a> {
    from: BorrowedFd<'a>,
    to: BorrowedFd<'a>,
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
    pub(crate) fn start(
        client_tun: OwnedFd,
        server_tun: OwnedFd,
        shape: Shape,
    ) -> io::Result<DelayLine> {
        use rustix::event::{eventfd, EventfdFlags};
        let stop = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        // The thread's own handle on the same eventfd: a write to either wakes it.
        let stop_rx = stop.try_clone()?;
        let shared = Arc::new(Shared {
            dirs: Default::default(),
            cpu_ns: AtomicU64::new(0),
            lateness: std::sync::Mutex::new(None),
            exempt_port: AtomicU16::new(0),
        });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("handshake-delay-line".into())
            .spawn(move || {
                // The fds live as long as this thread: the devices go with it.
                let (c, s) = (client_tun, server_tun);
                run([c.as_fd(), s.as_fd()], stop_rx.as_fd(), shape, &sh);
            })?;
        Ok(DelayLine {
            stop,
            thread: Some(thread),
            shared,
        })
    }

    /// Packets to or from `port` take no test skew ([`Shape::skew`]).
    pub(crate) fn exempt_port(&self, port: u16) {
        self.shared.exempt_port.store(port, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> LineStats {
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
            lateness: self
                .shared
                .lateness
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .map(Lateness::stats),
        }
    }

    /// End the thread (the TUN devices close with it) and return the final counts, with
    /// the departures' lateness.
    pub(crate) fn stop(&mut self) -> LineStats {
        if let Some(t) = self.thread.take() {
            let _ = rustix::io::write(&self.stop, &1u64.to_ne_bytes());
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

/// The calling thread's CPU time (user + system), ns.
pub(super) fn thread_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn run([client, server]: [BorrowedFd<'_>; 2], stop: BorrowedFd<'_>, shape: Shape, shared: &Shared) {
    // Wake up on time, not up to 50 µs late (the default timer slack), and ahead of the
    // client's and server's threads when a packet is due (a real-time priority where
    // allowed: the kernel's netem runs in softirq, ahead of any task). The thread sleeps
    // whenever nothing is due, and the kernel's real-time throttling bounds it anyway.
    let _ = rustix::thread::set_current_timer_slack(NonZeroU64::new(1));
    let _ = crate::sys::process::realtime_fifo(10);
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
            queue: VecDeque::with_capacity(QUEUE_PREALLOC),
            link_free_ns: 0,
            last_due_ns: 0,
            shape,
            index: 0,
        },
        Direction {
            from: server,
            to: client,
            queue: VecDeque::with_capacity(QUEUE_PREALLOC),
            link_free_ns: 0,
            last_due_ns: 0,
            shape,
            index: 1,
        },
    ];
    let mut buf = vec![0u8; MAX_PACKET];
    // Packet buffers made before the first packet: the packet path takes them from here
    // and gives them back (it allocates only past this many packets in flight).
    let mut spare: Vec<Vec<u8>> = (0..QUEUE_PREALLOC)
        .map(|_| Vec::with_capacity(MTU_BUFFER))
        .collect();
    let mut late = Lateness::new(shape.one_way);
    loop {
        let woke = now_ns();
        for d in &mut dirs {
            release(
                d,
                &now_ns,
                &shared.dirs[d.index],
                &mut spare,
                &mut late,
                woke,
            );
        }
        let next_due = dirs
            .iter()
            .filter_map(|d| d.queue.front().map(|p| p.due_ns))
            .min();
        // Sleep until the lead before the next due time; inside the lead, poll without
        // sleeping (a zero timeout) until it is due.
        let now = now_ns();
        let wake = next_due.map(|due| due.saturating_sub(late.lead_ns).max(now));
        let timeout = wake.map(|w| {
            let wait = w - now;
            Timespec {
                tv_sec: (wait / 1_000_000_000) as i64,
                tv_nsec: (wait % 1_000_000_000) as i64,
            }
        });
        let mut fds = [
            PollFd::from_borrowed_fd(client, PollFlags::IN),
            PollFd::from_borrowed_fd(server, PollFlags::IN),
            PollFd::from_borrowed_fd(stop, PollFlags::IN),
        ];
        let ready = match poll(&mut fds, timeout.as_ref()) {
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => break,
            Ok(n) => n,
        };
        if let (0, Some(w)) = (ready, wake.filter(|&w| w > now)) {
            // The timer woke the thread: how late it was sets the next lead.
            adapt_lead(&mut late.lead_ns, now_ns().saturating_sub(w));
        }
        let revents = fds.map(|f| f.revents());
        if !revents[2].is_empty() {
            break;
        }
        let mut closed = false;
        for (k, d) in dirs.iter_mut().enumerate() {
            if revents[k].intersects(PollFlags::ERR | PollFlags::HUP | PollFlags::NVAL) {
                closed = true;
            } else if revents[k].contains(PollFlags::IN) {
                take_in(d, &mut buf, &mut spare, &mut rng, &now_ns, shared);
            }
        }
        if closed {
            break;
        }
        if ready > 0 {
            shared.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
        }
    }
    shared.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
    *shared.lateness.lock().unwrap_or_else(|p| p.into_inner()) = Some(late);
}

/// The next lead from the timer's lateness just seen: up at once to cover it (with a
/// margin), down slowly (a sixteenth of the way a wake-up), within bounds.
fn adapt_lead(lead_ns: &mut u64, timer_late_ns: u64) {
    let want = timer_late_ns + LEAD_MARGIN_NS;
    *lead_ns = if want >= *lead_ns {
        want
    } else {
        *lead_ns - (*lead_ns - want) / 16
    }
    .clamp(LEAD_MIN_NS, LEAD_MAX_NS);
}

/// Read what the device has (up to a batch, so the other direction is not starved) and
/// queue each packet with its due time.
fn take_in(
    d: &mut Direction,
    buf: &mut [u8],
    spare: &mut Vec<Vec<u8>>,
    rng: &mut Rng,
    now_ns: &impl Fn() -> u64,
    shared: &Shared,
) {
    let counters = &shared.dirs[d.index];
    let exempt_port = shared.exempt_port.load(Ordering::Relaxed);
    for _ in 0..64 {
        let len = match rustix::io::read(d.from, &mut *buf) {
            Ok(n) if n > 0 => n,
            _ => return,
        };
        let now = now_ns();
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
        if !s.skew.is_zero() && !has_port(&buf[..len], exempt_port) {
            delay += s.skew.as_nanos() as i128;
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

/// Write every packet that is due into the other side, recording how late each left.
fn release(
    d: &mut Direction,
    now_ns: &impl Fn() -> u64,
    counters: &DirCounters,
    spare: &mut Vec<Vec<u8>>,
    late: &mut Lateness,
    woke: u64,
) {
    let mut now = now_ns();
    while d.queue.front().is_some_and(|p| p.due_ns <= now) {
        let p = d.queue.pop_front().expect("front exists");
        late.record(now - p.due_ns, woke.saturating_sub(p.due_ns));
        if rustix::io::write(d.to, &p.data).is_ok_and(|n| n > 0) {
            counters.packets.fetch_add(1, Ordering::Relaxed);
            counters
                .bytes
                .fetch_add(p.data.len() as u64, Ordering::Relaxed);
        } else {
            counters.queue_drops.fetch_add(1, Ordering::Relaxed);
        }
        if spare.len() < 2 * QUEUE_PREALLOC {
            spare.push(p.data);
        }
        // A write runs the other side's receive path (its TCP, its replies): time passes.
        now = now_ns();
    }
}

/// Whether an IPv4 TCP or UDP packet comes from or goes to `port`.
fn has_port(packet: &[u8], port: u16) -> bool {
    let Some(&first) = packet.first() else {
        return false;
    };
    let header = usize::from(first & 0x0f) * 4;
    let transport = packet.get(9).is_some_and(|p| *p == 6 || *p == 17);
    let ports = packet.get(header..header + 4);
    match (first >> 4, transport, ports) {
        (4, true, Some(p)) => {
            u16::from_be_bytes([p[0], p[1]]) == port || u16::from_be_bytes([p[2], p[3]]) == port
        }
        _ => false,
    }
}
