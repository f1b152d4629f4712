//! HTTP/1 over plain TCP in a closed loop, driven by readiness: one loop per client
//! thread over all its workers' connections (epoll through `mio`, as wrk's own loop),
//! instead of a tokio task per worker, whose wake, poll and hand-over to the collector
//! cost more user time per request than the request's own work.
//!
//! The same parser (`proto::h1::reading`), the same decisions about a connection after a
//! response (`h1::ending`, `h1::fin_here`), the same connect (`net::dial::start_connect`)
//! and the same records and events as the task way (`h1`, `open`, `worker`), handed to
//! the thread's collector directly: the collector stays the recorder's one writer. It
//! runs where nothing else is asked of a run: plain `http://` (no proxy, no Unix
//! socket, no TLS), one origin, a closed loop, no redirects to follow and no read
//! limits; everything else goes the task way. A name is looked up beside the loop
//! (`lookup`), through the run's cache, with the task way's accounting; a connect tries
//! the addresses in turn, as `net::dial::connect`.

mod exchange;
mod lookup;

use std::collections::VecDeque;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use self::lookup::Lookups;
use super::collect::Collector;
use super::gate::{Gate, Gates};
use super::open::{connect_deadline, ConnectTurns};
use super::worker::{attempt_deadline, ns, Dns, Fail};
use crate::cpu::CpuTime;
use crate::net::classify_connect_error;
use crate::net::dns::{with_port, Resolution};
use crate::plan::{LoadShape, Scenario};
use crate::proto::h1::conn::{give_buf, make_room, take_buf};
use crate::proto::h1::reading::Reading;
use crate::record::notes::Taken;
use crate::record::{CloseReason, Phase, Phases};
use crate::stats::event::{ConnEvent, Note};

/// Whether `sc` is a run this loop carries (see the module's notes); a plan may ask for
/// the task way (`task_per_worker`, to compare the two).
pub(super) fn eligible(sc: &Scenario) -> bool {
    let plain = |o: &crate::net::Origin| {
        !o.tls
            && o.proxy.is_none()
            && o.unix.is_none()
            && o.fixed_addrs.as_ref().is_none_or(|a| !a.is_empty())
    };
    !sc.task_per_worker
        && !sc.strategy.multiplexed()
        && !sc.strategy.quic()
        && matches!(sc.load, LoadShape::Closed)
        && sc.redirects.is_none()
        && sc.limits.wait.is_none()
        && sc.limits.min_speed.is_none()
        && sc.origins.len() == 1
        && plain(&sc.origins[0])
        && sc
            .targets
            .iter()
            .all(|t| t.origin == 0 && t.found_origin.is_none())
}

/// The longest the loop sleeps without looking at Ctrl-C.
const LOOK_EVERY: std::time::Duration = std::time::Duration::from_millis(50);

/// A worker's connection.
struct Conn {
    sock: TcpStream,
    /// The read buffer, lent from the thread's spares while a response arrives.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Responses it carried.
    requests: u64,
    /// Bytes read over its life.
    read_total: u64,
}

impl Conn {
    /// Read into the buffer (taken if none): Ok(0) at the end of the stream.
    fn fill(&mut self) -> io::Result<usize> {
        if self.buf.is_empty() {
            self.buf = take_buf();
        }
        make_room(&mut self.buf, &mut self.start, &mut self.end);
        let n = (&self.sock).read(&mut self.buf[self.end..])?;
        self.end += n;
        self.read_total += n as u64;
        Ok(n)
    }

    fn recycle(self) {
        give_buf(self.buf);
    }
}

enum State {
    /// Between requests.
    Idle,
    /// Waiting, before its next ticket, for its turn to try a new connection to a hop
    /// that could not be reached (the gate's).
    Backoff,
    /// Waiting since `asked` for its turn to connect (`--connect-rate`).
    Pacing {
        asked: Instant,
    },
    /// The origin's name looked up since `since` (`by`: the connect's deadline).
    Resolving {
        since: Instant,
        by: Instant,
    },
    /// Connecting since `since` to the `at`th of its addresses, by `by`.
    Connecting {
        since: Instant,
        source: Option<usize>,
        at: usize,
        by: Instant,
    },
    /// The request written up to `at`.
    Sending {
        at: usize,
    },
    Reading(Reading),
    /// The response ended the connection from the server's side: its FIN awaited, so
    /// that TIME_WAIT stays on the server.
    Closing,
    /// Its quota is done, or the run is over.
    Done,
}

/// One worker: its tickets, its connection and the request under way.
struct Worker {
    id: usize,
    /// Tickets taken, and how many it may take.
    k: u64,
    quota: Option<u64>,
    conn: Option<Conn>,
    /// Sockets it opened: a token names the socket's generation, so that an event of a
    /// socket closed meanwhile is not taken for its successor's.
    gen: usize,
    /// Which `--local-addr` its next connection starts with.
    turn: usize,
    /// The addresses its connection is made to.
    addrs: Arc<[SocketAddr]>,
    /// Turns to connect it waited for: names its place in the queue of them.
    paced: u64,
    state: State,
    /// When its current wait ends.
    due: Option<Instant>,
    target: usize,
    t0: Instant,
    deadline: Instant,
    phases: Phases,
    reused: bool,
    retried: bool,
    /// The request is the connection's last (`--requests-per-connection`).
    last: bool,
    t_send: Instant,
    t_sent: Instant,
    first_byte: Option<Instant>,
    /// Response bytes read for the attempt.
    got: u64,
}

/// One client thread's loop.
struct Loop<'a> {
    sc: &'a Scenario,
    col: &'a mut Collector,
    poll: Poll,
    workers: Vec<Worker>,
    /// The origin's addresses when fixed (an address, `--resolve`); else its name is
    /// looked up, by the cache (a hit) or `lookups`.
    fixed: Option<Arc<[SocketAddr]>>,
    dns: Arc<Dns>,
    lookups: Option<Lookups>,
    run_deadline: Option<Instant>,
    /// Not after the earliest of the workers' `due`.
    next_due: Option<Instant>,
    in_flight: u64,
    live: usize,
    /// Workers: a token is `worker + generation * n`.
    n: usize,
    /// `--connect-rate`: the thread's turns, and the workers waiting for theirs (in the
    /// order of their turns: the time, the worker, its `paced`).
    turns: Option<ConnectTurns>,
    pacing: VecDeque<(Instant, usize, u64)>,
    /// The statuses whose example the thread's workers have taken.
    taken: Taken,
    /// The origin's gate: closed while it cannot be reached.
    gate: Option<&'a Gate>,
}

/// Thread `t` of `threads`'s workers, each before its first ticket.
fn workers(sc: &Scenario, (t, threads): (usize, usize), start: Instant) -> Vec<Worker> {
    (t..sc.concurrency)
        .step_by(threads)
        .map(|id| Worker {
            id,
            k: 0,
            quota: sc.worker_quota(id),
            conn: None,
            gen: 0,
            turn: id,
            addrs: Arc::from([]),
            paced: 0,
            state: State::Idle,
            due: None,
            target: 0,
            t0: start,
            deadline: start,
            phases: Phases::default(),
            reused: false,
            retried: false,
            last: false,
            t_send: start,
            t_sent: start,
            first_byte: None,
            got: 0,
        })
        .collect()
}

/// The token of the wake-up the lookups' answers bring (no worker's: a worker's token
/// is below `n * (its generation + 1)`, never this high).
const LOOKED: Token = Token(usize::MAX);

/// Run thread `t` of `threads`'s workers to their quotas or the run's end; the requests
/// still in flight when an interrupt's grace ran out, if it did, and the CPU time of the
/// lookups' thread. `rt` and `dns`: the thread's runtime and resolver, for a name to
/// look up.
pub(super) fn run(
    sc: &Scenario,
    (t, threads): (usize, usize),
    col: &mut Collector,
    (start, run_deadline): (Instant, Option<Instant>),
    (rt, dns, gates): (tokio::runtime::Runtime, Arc<Dns>, &Gates),
) -> io::Result<(Option<u64>, CpuTime)> {
    let workers = workers(sc, (t, threads), start);
    let origin = &sc.origins[0];
    let fixed: Option<Arc<[SocketAddr]>> = origin.fixed_addrs.as_deref().map(Arc::from);
    let poll = Poll::new()?;
    let lookups = match fixed {
        Some(_) => None,
        None => {
            let waker = mio::Waker::new(poll.registry(), LOOKED)?;
            let host = origin.dial_host.clone();
            Some(Lookups::start(rt, dns.clone(), host, waker)?)
        }
    };
    let mut l = Loop {
        sc,
        col,
        poll,
        live: workers.len(),
        workers,
        fixed,
        dns,
        lookups,
        run_deadline,
        next_due: None,
        in_flight: 0,
        n: 0,
        turns: sc
            .limits
            .connect_rate
            .map(|r| ConnectTurns::new(r / threads as f64, start)),
        pacing: VecDeque::new(),
        taken: Taken::default(),
        gate: gates.of(0),
    };
    l.n = l.workers.len().max(1);
    let mut now = Instant::now();
    for i in 0..l.workers.len() {
        l.next(i, now);
    }
    let mut events = Events::with_capacity(1024);
    let n = l.n;
    while l.live > 0 {
        if crate::interrupt::grace_passed() {
            let cpu = l.lookups.take().map(Lookups::finish);
            return Ok((Some(l.in_flight), cpu.unwrap_or_default()));
        }
        let due = match (l.next_due, l.pacing.front()) {
            (Some(d), Some(p)) => Some(d.min(p.0)),
            (d, p) => d.or(p.map(|p| p.0)),
        };
        let wait = due.map_or(LOOK_EVERY, |d| {
            d.saturating_duration_since(now).min(LOOK_EVERY)
        });
        match l.poll.poll(&mut events, Some(wait)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for ev in &events {
            if ev.token() == LOOKED {
                l.looked();
                continue;
            }
            let (i, gen) = (ev.token().0 % n, ev.token().0 / n);
            if l.workers[i].gen == gen {
                l.ready(i, ev);
            }
        }
        // One reading of the clock a turn, for the waits.
        now = Instant::now();
        l.release(now);
        if l.next_due.is_some_and(|d| now >= d) {
            l.sweep(now);
        }
        l.col.show();
    }
    let cpu = l.lookups.take().map(Lookups::finish);
    Ok((None, cpu.unwrap_or_default()))
}

impl Loop<'_> {
    fn note(&mut self, e: ConnEvent) {
        self.col.take(&Note::Conn(e));
    }

    /// The worker waits until `due` at the latest.
    fn arm(&mut self, i: usize, due: Instant) {
        self.workers[i].due = Some(due);
        if self.next_due.is_none_or(|d| due < d) {
            self.next_due = Some(due);
        }
    }

    /// Worker `i` takes its next ticket, or ends.
    /// `now`: the clock's last reading (the end of the last request, when nothing
    /// happened since that took time).
    fn next(&mut self, i: usize, now: Instant) {
        let w = &mut self.workers[i];
        w.due = None;
        if w.quota.is_some_and(|q| w.k >= q)
            || crate::interrupt::requested()
            || self.run_deadline.is_some_and(|d| now >= d)
        {
            if let Some(conn) = w.conn.take() {
                self.closed(conn, CloseReason::EndOfRun);
            }
            self.workers[i].state = State::Done;
            self.live -= 1;
            return;
        }
        // A new connection to a hop that cannot be reached waits for its turn to try,
        // before its ticket: the wait is the server's absence, not a request's time.
        if w.conn.is_none() {
            if let Some(Err(at)) = self.gate.map(|g| g.turn(now)) {
                w.state = State::Backoff;
                let at = self.run_deadline.map_or(at, |d| d.min(at));
                self.arm(i, at);
                return;
            }
        }
        let w = &mut self.workers[i];
        let ticket = w.id as u64 + w.k * self.sc.concurrency as u64;
        w.k += 1;
        w.target = (ticket % self.sc.targets.len() as u64) as usize;
        w.t0 = now;
        w.deadline = attempt_deadline(self.sc, now, None, self.run_deadline);
        w.retried = false;
        self.in_flight += 1;
        self.try_once(i, now);
    }

    /// One try of worker `i`'s request: on its connection, or a new one.
    fn try_once(&mut self, i: usize, now: Instant) {
        let w = &mut self.workers[i];
        w.phases = Phases::default();
        w.reused = w.conn.is_some();
        w.got = 0;
        w.first_byte = None;
        if w.reused {
            self.send(i, now);
            return;
        }
        if let Some(turns) = &self.turns {
            let at = turns.take(now);
            if at > now {
                w.paced += 1;
                w.state = State::Pacing { asked: now };
                self.pacing.push_back((at, i, w.paced));
                let deadline = w.deadline;
                self.arm(i, deadline);
                return;
            }
        }
        self.connect(i, now);
    }

    /// The workers whose turn to connect has come connect.
    fn release(&mut self, now: Instant) {
        while let Some(&(at, i, seq)) = self.pacing.front() {
            if at > now {
                return;
            }
            self.pacing.pop_front();
            let w = &mut self.workers[i];
            if let (State::Pacing { asked }, true) = (&w.state, w.paced == seq) {
                w.phases[Phase::Blocked] =
                    Some(w.phases[Phase::Blocked].unwrap_or(0) + ns(*asked, now));
                self.connect(i, now);
            }
        }
    }

    /// Worker `i` begins a new connection at `since`: its addresses (fixed, a cache hit,
    /// or a lookup to wait for), then its connect, all by the connect's deadline.
    fn connect(&mut self, i: usize, since: Instant) {
        let by = connect_deadline(self.workers[i].deadline, self.sc.limits.connect);
        self.workers[i].turn = self.workers[i].turn.wrapping_add(1);
        if let Some(addrs) = &self.fixed {
            self.workers[i].addrs = addrs.clone();
            self.dial(i, (since, by), 0);
            return;
        }
        let o = &self.sc.origins[0];
        let hit = self.dns.cache.as_ref().and_then(|c| c.hit(&o.dial_host));
        if let Some(ips) = hit {
            self.workers[i].addrs = with_port(&ips, o.dial_port).into();
            self.note(ConnEvent::Dns(Resolution::CacheHit));
            self.dial(i, (since, by), 0);
            return;
        }
        let w = &mut self.workers[i];
        w.gen += 1;
        w.state = State::Resolving { since, by };
        if let Some(l) = &self.lookups {
            l.ask(i, w.gen);
        }
        self.arm(i, by);
    }

    /// The lookups' answers: each worker still waiting for its own goes on to connect,
    /// its `dns` phase ending as it does (as the task way's, unless a cache hit).
    fn looked(&mut self) {
        // Taken first: a worker that fails here takes its next ticket, which may ask.
        let answers: Vec<lookup::Looked> = match &self.lookups {
            Some(l) => l.answers().collect(),
            None => return,
        };
        for a in answers {
            let w = &mut self.workers[a.worker];
            let State::Resolving { since, by } = w.state else {
                continue;
            };
            if w.gen != a.gen {
                continue;
            }
            let now = Instant::now();
            if a.how != Resolution::CacheHit {
                w.phases[Phase::Dns] = Some(ns(since, now));
            }
            self.note(ConnEvent::Dns(a.how));
            match a.result {
                Ok(ips) => {
                    let port = self.sc.origins[0].dial_port;
                    self.workers[a.worker].addrs = with_port(&ips, port).into();
                    self.dial(a.worker, (now, by), 0);
                }
                Err(f) => self.fail(a.worker, Fail::new(f), None),
            }
        }
    }

    /// Worker `i` connects to the `at`th of its addresses (the next after one that
    /// failed, as `net::dial::connect`), its connect timed from `since`.
    fn dial(&mut self, i: usize, (since, by): (Instant, Instant), at: usize) {
        let w = &mut self.workers[i];
        w.gen += 1;
        let token = Token(i + w.gen * self.n);
        let local = &self.sc.origins[0].local_addrs;
        let registry = self.poll.registry();
        let Some(&addr) = w.addrs.get(at) else {
            let e = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
            self.fail(
                i,
                Fail::new(classify_connect_error(&e)).at(self.sc.origins[0].hop.as_ref()),
                None,
            );
            return;
        };
        let started =
            crate::net::dial::start_connect(addr, local, w.turn).and_then(|(socket, source)| {
                let mut sock = TcpStream::from_std(std::net::TcpStream::from(socket));
                registry.register(&mut sock, token, Interest::READABLE | Interest::WRITABLE)?;
                Ok((sock, source))
            });
        match started {
            Ok((sock, source)) => {
                w.conn = Some(Conn {
                    sock,
                    buf: Vec::new(),
                    start: 0,
                    end: 0,
                    requests: 0,
                    read_total: 0,
                });
                w.state = State::Connecting {
                    since,
                    source,
                    at,
                    by,
                };
                self.arm(i, by);
            }
            Err(_) if at + 1 < w.addrs.len() => self.dial(i, (since, by), at + 1),
            Err(e) => {
                let f = Fail::new(classify_connect_error(&e)).at(self.sc.origins[0].hop.as_ref());
                self.fail(i, f, None);
            }
        }
    }
}

impl Loop<'_> {
    /// The waits that have run out end; the next earliest is found.
    fn sweep(&mut self, now: Instant) {
        for i in 0..self.workers.len() {
            if self.workers[i].due.is_some_and(|d| d <= now) {
                self.workers[i].due = None;
                self.expired(i);
            }
        }
        self.next_due = self.workers.iter().filter_map(|w| w.due).min();
    }

    /// Worker `i`'s wait ran out.
    fn expired(&mut self, i: usize) {
        let run_deadline = self.run_deadline;
        let phase = match &self.workers[i].state {
            State::Resolving { .. } => Phase::Dns,
            State::Connecting { .. } | State::Pacing { .. } => Phase::Connect,
            State::Sending { .. } => Phase::Send,
            State::Reading(_) if self.workers[i].first_byte.is_some() => Phase::Receive,
            State::Reading(_) => Phase::Wait,
            State::Closing => {
                self.end_closing(i);
                return;
            }
            State::Backoff => {
                self.next(i, Instant::now());
                return;
            }
            State::Idle | State::Done => return,
        };
        let reason = (phase != Phase::Connect).then_some(CloseReason::Error);
        self.fail(i, Fail::timed_out(phase, run_deadline), reason);
    }
}
