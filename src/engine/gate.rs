//! Outages as windows, not error storms: one gate per origin, shared by the run's
//! threads. A connect that cannot reach its hop (refused, timed out, unreachable, a
//! lookup that failed) closes the gate; while it is closed the workers that need a new
//! connection wait (once the hop was reached in the run: one never reached, a wrong
//! port, fails fast), and one try goes at a time: the first 10 ms after, each failed one
//! doubling the wait up to the longest (`--retry-backoff`, 500 ms by default) divided by
//! the workers, so that each worker tries at most once in the longest wait and together
//! they look every longest/c (with -c 10: every 50 ms); each wait is shortened by a random
//! part of up to a half, so that clients started together do not try in step. The first
//! connect that succeeds opens it, and the window it was closed is kept for the report.
//! Connections already open go on meanwhile: what fails on them is counted in the window
//! (or just before it, the first sign of a server gone).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::plan::Backoff;
use crate::record::outage::{Outage, Restart, Unreachable};

/// A request in flight that failed this long before the first failed connect is the
/// window's first sign.
const FIRST_SIGN: Duration = Duration::from_millis(100);

/// Connections a server ends within this of each other are one burst (a restart's: a
/// loaded machine spreads them).
const BURST_GAP: Duration = Duration::from_millis(250);

/// The grain of the last success on a reused connection, ms: the shared time is written
/// at most this often, not once a request.
const STEADY_GRAIN_MS: u64 = 10;

/// What an origin's connects reach, as a window names it: the proxy, the Unix socket,
/// the address its name was sent to, or its URL's scheme, host and port.
fn hop_of(o: &crate::net::Origin) -> String {
    if let Some(p) = &o.proxy {
        return format!("the proxy {}", p.display());
    }
    if let Some(path) = &o.unix {
        return format!("the Unix socket {}", path.display());
    }
    if o.dial_host != o.host || o.dial_port != o.port {
        return format!("{} at {}:{}", o.url_origin(), o.dial_host, o.dial_port);
    }
    o.url_origin()
}

/// A run's gates, one per origin of its scenario.
pub(crate) struct Gates {
    gates: Vec<Gate>,
}

impl Gates {
    /// A gate for each of `hops` (what each origin's connects reach, as the report names
    /// it); with `backoff`, the waits between tries of `workers` workers.
    pub(crate) fn new(hops: Vec<String>, backoff: Option<Backoff>, workers: usize) -> Gates {
        Gates {
            gates: hops
                .into_iter()
                .map(|hop| Gate::new(hop, backoff, workers))
                .collect(),
        }
    }

    /// The gates of `sc`'s origins, with its `--retry-backoff` over its workers. A run
    /// bounded by time alone waits between tries also for a hop it never reached: with
    /// no count of requests to spend, failing fast would send connects for the whole
    /// duration (tens of thousands a second at a wrong port).
    pub(crate) fn of_scenario(sc: &crate::plan::Scenario) -> Gates {
        let mut g = Gates::new(
            sc.origins.iter().map(hop_of).collect(),
            sc.limits.retry_backoff,
            sc.concurrency,
        );
        if sc.stop.requests.is_none() && sc.stop.duration.is_some() {
            for gate in &mut g.gates {
                gate.wait_unreached = true;
            }
        }
        g
    }

    /// The gate of origin `index` (none for an origin a redirect found).
    pub(crate) fn of(&self, index: usize) -> Option<&Gate> {
        self.gates.get(index)
    }

    /// A try's failure `f` on the way to origin `index`, at `at`: a hop that could not be
    /// reached closes its gate; a request in flight that failed is counted.
    pub(crate) fn failed(
        &self,
        index: usize,
        f: &crate::record::Failure,
        (began, at): (Instant, Instant),
    ) {
        if let Some(g) = self.of(index) {
            g.failed(f, (began, at));
        }
    }

    /// The windows of every gate, in seconds from `start` (which the wall clock read
    /// `start_wall`); one still closed at `end` lasts to it.
    pub(crate) fn outages(
        &self,
        (start, start_wall): (Instant, std::time::SystemTime),
        end: Instant,
    ) -> Vec<Outage> {
        let mut all = Vec::new();
        for g in &self.gates {
            let s = g.lock();
            let secs = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
            let wall = |t: Instant| by_the_clock((start, start_wall), t);
            for w in s.closed.iter().chain(&s.open) {
                all.push(Outage {
                    hop: g.hop.clone(),
                    start_s: secs(w.start),
                    end_s: w.end.map(secs),
                    last_failed_s: secs(w.last_failed),
                    duration_s: w
                        .end
                        .unwrap_or(end)
                        .saturating_duration_since(w.start)
                        .as_secs_f64(),
                    start_at: wall(w.start),
                    end_at: w.end.map(wall),
                    connects_refused: w.refused,
                    connects_timed_out: w.timed_out,
                    connects_other: w.other,
                    lookups_failed: w.lookups,
                    failed_in_flight: w.in_flight,
                });
            }
        }
        all.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
        all
    }

    /// The restarts each gate saw: bursts of ended connections under requests (at least
    /// two, or the one worker's), each with the window that followed it, if any; in
    /// seconds from `start` (the wall clock's `start_wall`).
    pub(crate) fn restarts(
        &self,
        (start, start_wall): (Instant, std::time::SystemTime),
        end: Instant,
    ) -> Vec<Restart> {
        let mut all = Vec::new();
        for g in &self.gates {
            let s = g.lock();
            for e in &s.ends {
                if !e.is_restart(g.burst_least) {
                    continue;
                }
                // The window that began with it, or within a second after.
                let followed = s.closed.iter().chain(&s.open).find(|w| {
                    w.start + FIRST_SIGN >= e.first && w.start <= e.last + Duration::from_secs(1)
                });
                // An event needs a contrast: the run's steady state (requests answered on
                // reused connections, and no end) for a stretch before it, and again after
                // it or the server gone. A server that ends connections from the first
                // (no keep-alive, HTTP/2 only, a GOAWAY every few streams) does so by its
                // policy, which the diagnosis says, not a restart.
                let (before, after) = g.steady_around(e);
                if !before || !(after || followed.is_some()) {
                    continue;
                }
                all.push(Restart {
                    hop: g.hop.clone(),
                    verdict: if e.failed > 0 { "hard" } else { "graceful" }.to_string(),
                    at_s: e.first.saturating_duration_since(start).as_secs_f64(),
                    at: by_the_clock((start, start_wall), e.first),
                    retried: e.retried,
                    closed_after_answer: e.by_header,
                    failed_in_flight: e.failed,
                    unreachable_for_s: followed.map(|w| {
                        w.end
                            .unwrap_or(end)
                            .saturating_duration_since(w.start)
                            .as_secs_f64()
                    }),
                });
            }
        }
        all.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        all
    }
}

/// `t` by the wall clock, which read `start_wall` at `start` (RFC 3339, to the ms).
fn by_the_clock((start, start_wall): (Instant, std::time::SystemTime), t: Instant) -> String {
    crate::host::rfc3339(start_wall + t.saturating_duration_since(start))
}

/// One origin's gate.
pub(crate) struct Gate {
    hop: String,
    /// Read without the lock on every new connection: false while the hop is reached.
    closed: AtomicBool,
    /// A connect reached the hop in this run: only then do tries wait, in a run with a
    /// count of requests (a hop never reached, a wrong port, fails fast and is said at
    /// once).
    reached_once: AtomicBool,
    /// Tries wait for a hop never reached too (a run bounded by time alone).
    wait_unreached: bool,
    state: Mutex<State>,
    backoff: Option<Backoff>,
    /// The longest wait between two tries of the run's workers together.
    spacing: Duration,
    /// The fewest ended connections a burst needs to be a restart: two, or one with a
    /// single worker.
    burst_least: u64,
    /// When a request on a reused connection was first and last answered, ms after
    /// `epoch` plus one (0: never): the run's steady state, which a restart interrupts.
    epoch: Instant,
    first_steady_ms: AtomicU64,
    last_steady_ms: AtomicU64,
}

#[derive(Default)]
struct State {
    open: Option<Window>,
    closed: Vec<Window>,
    /// When the next try may go, and the wait after it.
    next_try: Option<Instant>,
    step: Duration,
    /// Requests in flight that failed while the gate was open: the first and last time,
    /// and how many (the last within `FIRST_SIGN` of the one before).
    recent: Option<(Instant, Instant, u64)>,
    /// Connections the server ended under a request, in bursts.
    ends: Vec<Ends>,
    /// The most requests a connection the server closed by `Connection: close` carried:
    /// its limit, when it has one.
    header_limit: u64,
}

/// Connections the server ended under requests within `BURST_GAP` of each other: the
/// requests that met them and were retried, by how the connection ended, and those that
/// failed.
#[derive(Debug, Clone, Copy)]
struct Ends {
    pub first: Instant,
    pub last: Instant,
    /// Retried: the connection had ended (EOF or a reset) before any byte of the answer.
    pub retried: u64,
    /// Ended after their answer by the server's `Connection: close` before the server's
    /// own limit (fewer requests than the most a connection closed so carried).
    pub by_header: u64,
    /// Failed: reset, closed or timed out in flight, not retried.
    pub failed: u64,
}

struct Window {
    start: Instant,
    /// When the failure that opened it was seen: a connect begun before then may have
    /// been answered before the hop went (its handshake done by the kernel, the
    /// connection still in the listener's queue), so it does not end the window.
    opened: Instant,
    last_failed: Instant,
    end: Option<Instant>,
    refused: u64,
    timed_out: u64,
    other: u64,
    lookups: u64,
    in_flight: u64,
}

impl Window {
    fn count(&mut self, how: Unreachable) {
        match how {
            Unreachable::Refused => self.refused += 1,
            Unreachable::TimedOut => self.timed_out += 1,
            Unreachable::Other => self.other += 1,
            Unreachable::Lookup => self.lookups += 1,
        }
    }
}

impl Ends {
    /// Whether it is a restart: at least `least` ends, all within a second (a longer
    /// chain is a server's steady habit, such as idle closes under a slow rate).
    fn is_restart(&self, least: u64) -> bool {
        self.retried + self.failed + self.by_header >= least
            && self.last.saturating_duration_since(self.first) <= Duration::from_secs(1)
    }
}

impl State {
    /// The burst of ends `at` belongs to: the last, if within `BURST_GAP` of it. A burst
    /// that ended without being a restart (of `least` ends) is not kept, so that a long
    /// run of scattered failures holds one.
    fn burst(&mut self, at: Instant, least: u64) -> &mut Ends {
        let joins = self
            .ends
            .last()
            .is_some_and(|e| at.saturating_duration_since(e.last) <= BURST_GAP);
        if !joins {
            if self.ends.last().is_some_and(|e| !e.is_restart(least)) {
                self.ends.pop();
            }
            self.ends.push(Ends {
                first: at,
                last: at,
                retried: 0,
                by_header: 0,
                failed: 0,
            });
        }
        let e = self.ends.last_mut().expect("a burst");
        e.last = e.last.max(at);
        e
    }
}

impl Gate {
    fn new(hop: String, backoff: Option<Backoff>, workers: usize) -> Gate {
        let spacing = backoff.map_or(Duration::ZERO, |b| {
            (b.longest / workers.max(1) as u32).max(Duration::from_micros(100))
        });
        Gate {
            hop,
            closed: AtomicBool::new(false),
            reached_once: AtomicBool::new(false),
            wait_unreached: false,
            state: Mutex::new(State::default()),
            backoff,
            spacing,
            burst_least: workers.clamp(1, 2) as u64,
            epoch: Instant::now(),
            first_steady_ms: AtomicU64::new(0),
            last_steady_ms: AtomicU64::new(0),
        }
    }

    fn steady_ms(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_millis() as u64 + 1
    }

    /// A request on a reused connection was answered at `at`: the steady state. Read
    /// first, written rarely (the first time, then every [`STEADY_GRAIN_MS`]), so that
    /// the workers' threads do not pass its cache line between them on every request.
    pub(crate) fn steady(&self, at: Instant) {
        let ms = self.steady_ms(at);
        if self.first_steady_ms.load(Ordering::Relaxed) == 0 {
            let _ =
                self.first_steady_ms
                    .compare_exchange(0, ms, Ordering::Relaxed, Ordering::Relaxed);
        }
        if ms >= self.last_steady_ms.load(Ordering::Relaxed) + STEADY_GRAIN_MS {
            self.last_steady_ms.fetch_max(ms, Ordering::Relaxed);
        }
    }

    /// Whether the steady state held for a stretch before burst `e` (as long as the gap
    /// that parts bursts: ends closer than it would have joined `e`) and for as long
    /// after it.
    fn steady_around(&self, e: &Ends) -> (bool, bool) {
        let first = self.first_steady_ms.load(Ordering::Relaxed);
        let last = self.last_steady_ms.load(Ordering::Relaxed);
        let stretch = BURST_GAP.as_millis() as u64;
        (
            first != 0 && first + stretch <= self.steady_ms(e.first),
            last >= self.steady_ms(e.last) + stretch,
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a new connection may be tried at `now`: yes while the hop is reached (or
    /// there is no backoff); while it is not, yes to the one whose turn it is (the next
    /// try is then set), and otherwise when to ask again.
    pub(crate) fn turn(&self, now: Instant) -> Result<(), Instant> {
        if !self.closed.load(Ordering::Relaxed)
            || self.backoff.is_none()
            || !(self.wait_unreached || self.reached_once.load(Ordering::Relaxed))
        {
            return Ok(());
        }
        let mut s = self.lock();
        match s.next_try {
            Some(at) if now < at => Err(at),
            _ if s.open.is_none() => Ok(()),
            _ => {
                // A random part of up to half the wait taken off, never added: the hop is
                // looked at at least every `spacing`.
                let wait = s.step.mul_f64(1.0 - fastrand::f64() / 2.0);
                s.next_try = Some(now + wait);
                s.step = (s.step * 2).min(self.spacing);
                Ok(())
            }
        }
    }

    /// A try's failure `f` at `at`: a hop that could not be reached closes the gate; a
    /// request in flight that failed is counted.
    pub(crate) fn failed(&self, f: &crate::record::Failure, (began, at): (Instant, Instant)) {
        if let Some(how) = Unreachable::of(f) {
            self.unreachable((began, at), how);
        } else if crate::record::outage::in_flight(f) {
            self.failed_in_flight(at);
        }
    }

    /// A request met a connection the server had ended (before any byte of its answer)
    /// at `at`, and is sent again on a new one.
    pub(crate) fn retried(&self, at: Instant) {
        self.lock().burst(at, self.burst_least).retried += 1;
    }

    /// The server ended a connection after its answer with `Connection: close`, at `at`,
    /// after `requests` on it: its own limit (as many as the most any connection closed
    /// so carried: nginx's `keepalive_requests`), or, with fewer, an end of the server's
    /// choosing (a reload's).
    pub(crate) fn ended_by_header(&self, requests: u64, at: Instant) {
        let mut s = self.lock();
        if requests >= s.header_limit {
            s.header_limit = requests;
            return;
        }
        s.burst(at, self.burst_least).by_header += 1;
    }

    /// A connect (or a lookup) to the hop, begun at `began`, failed so at `at`: the gate
    /// closes if it was open. One begun before the last window ended (a lookup that
    /// waited out its timeout across the hop's return) is counted in that window.
    pub(crate) fn unreachable(&self, (began, at): (Instant, Instant), how: Unreachable) {
        let mut s = self.lock();
        let straggler = s.open.is_none()
            && s.closed
                .last()
                .and_then(|w| w.end)
                .is_some_and(|end| began <= end);
        if straggler {
            let w = s.closed.last_mut().expect("a window");
            w.count(how);
            return;
        }
        if s.open.is_none() {
            // The first sign: requests in flight that failed just before, or the try
            // itself when it waited out a timeout (the hop was silent since it began).
            let first = if how == Unreachable::Refused {
                at
            } else {
                began.min(at)
            };
            let (start, in_flight) = match s.recent.take() {
                Some((f, last, n)) if at.saturating_duration_since(last) <= FIRST_SIGN => {
                    (f.min(first), n)
                }
                _ => (first, 0),
            };
            s.open = Some(Window {
                start,
                opened: at,
                last_failed: at,
                end: None,
                refused: 0,
                timed_out: 0,
                other: 0,
                lookups: 0,
                in_flight,
            });
            if let Some(b) = self.backoff {
                s.next_try = Some(at + b.first);
                s.step = (b.first * 2).min(self.spacing);
            }
            self.closed.store(true, Ordering::Relaxed);
        }
        let w = s.open.as_mut().expect("the gate is closed");
        w.last_failed = w.last_failed.max(at);
        w.count(how);
    }

    /// A connect to the hop, begun at `began`, succeeded at `at`: the gate opens, its
    /// window ends. One begun before the window opened proves nothing of the hop's return
    /// (the kernel may have answered it before the listener went) and leaves it open.
    pub(crate) fn reached(&self, (began, at): (Instant, Instant)) {
        if !self.reached_once.load(Ordering::Relaxed) {
            self.reached_once.store(true, Ordering::Relaxed);
        }
        if !self.closed.load(Ordering::Relaxed) {
            return;
        }
        let mut s = self.lock();
        if s.open.as_ref().is_some_and(|w| began < w.opened) {
            return;
        }
        if let Some(mut w) = s.open.take() {
            w.end = Some(at.max(w.last_failed));
            s.closed.push(w);
        }
        s.next_try = None;
        s.recent = None;
        self.closed.store(false, Ordering::Relaxed);
    }

    /// A request on a connection already open failed at `at` (reset, closed before its
    /// response, timed out): counted in the window, or kept as a possible first sign of
    /// one.
    pub(crate) fn failed_in_flight(&self, at: Instant) {
        let mut s = self.lock();
        s.burst(at, self.burst_least).failed += 1;
        if let Some(w) = s.open.as_mut() {
            w.in_flight += 1;
            return;
        }
        s.recent = match s.recent {
            Some((first, last, n)) if at.saturating_duration_since(last) <= FIRST_SIGN => {
                Some((first, at, n + 1))
            }
            _ => Some((at, at, 1)),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(workers: usize) -> Gates {
        Gates::new(vec!["127.0.0.1:1".into()], Some(Backoff::DEFAULT), workers)
    }

    #[test]
    fn a_closed_gate_lets_one_try_through_at_a_time_and_a_connect_opens_it() {
        let g = gates(10);
        let gate = g.of(0).unwrap();
        let t0 = Instant::now();
        gate.reached((t0, t0));
        assert_eq!(gate.turn(t0), Ok(()));
        gate.failed_in_flight(t0);
        gate.unreachable(
            (t0 + Duration::from_millis(1), t0 + Duration::from_millis(1)),
            Unreachable::Refused,
        );
        // The first try waits 10 ms; one goes then, the next waits again.
        let next = gate.turn(t0 + Duration::from_millis(2)).unwrap_err();
        assert_eq!(next, t0 + Duration::from_millis(11));
        assert_eq!(gate.turn(next), Ok(()));
        assert!(gate.turn(next).is_err());
        // The tries never wait longer than 500 ms / 10 workers.
        let mut at = next;
        for _ in 0..20 {
            gate.unreachable((at, at), Unreachable::Refused);
            let n = gate.turn(at).unwrap_err();
            assert!(n - at <= Duration::from_millis(50), "{:?}", n - at);
            at = n;
            assert_eq!(gate.turn(at), Ok(()));
        }
        gate.reached((at, at + Duration::from_millis(3)));
        assert_eq!(gate.turn(at + Duration::from_millis(4)), Ok(()));
        let o = g.outages(
            (t0, std::time::SystemTime::now()),
            at + Duration::from_secs(1),
        );
        assert_eq!(o.len(), 1);
        // Its first sign: the request in flight that failed 1 ms before the connect.
        assert_eq!(o[0].start_s, 0.0);
        assert_eq!(o[0].failed_in_flight, 1);
        assert_eq!(o[0].connects_refused, 21);
        let end = o[0].end_s.unwrap();
        assert!((end - (at - t0 + Duration::from_millis(3)).as_secs_f64()).abs() < 1e-9);
    }

    /// A crash seen by a refused connect while another connect, begun before it, is
    /// still being read: that one's success (the kernel answered it before the listener
    /// went) does not end the window; a connect begun after the refusal does.
    #[test]
    fn a_connect_begun_before_the_window_does_not_end_it() {
        let g = gates(10);
        let gate = g.of(0).unwrap();
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        gate.reached((t0, t0));
        gate.unreachable((ms(10), ms(10)), Unreachable::Refused);
        gate.reached((ms(9), ms(11)));
        gate.unreachable((ms(12), ms(12)), Unreachable::Refused);
        gate.reached((ms(500), ms(501)));
        let o = g.outages((t0, std::time::SystemTime::now()), ms(1000));
        assert_eq!(o.len(), 1, "{o:?}");
        assert_eq!(o[0].connects_refused, 2);
        assert!((o[0].end_s.unwrap() - 0.501).abs() < 1e-9);
    }

    #[test]
    fn a_hop_never_reached_is_not_waited_for() {
        let g = gates(10);
        let gate = g.of(0).unwrap();
        let t0 = Instant::now();
        gate.unreachable((t0, t0), Unreachable::Refused);
        assert_eq!(gate.turn(t0), Ok(()));
        assert_eq!(gate.turn(t0), Ok(()));
        assert_eq!(g.outages((t0, std::time::SystemTime::now()), t0).len(), 1);
    }

    #[test]
    fn a_burst_is_a_restart_and_scattered_ends_are_not_kept() {
        let g = gates(10);
        let gate = g.of(0).unwrap();
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        // Ends a third of a second apart, for a minute: none a restart, one kept at most.
        for k in 0..180 {
            gate.retried(ms(k * 330));
        }
        assert!(gate.lock().ends.len() <= 1);
        // The steady state, then three ends within 20 ms, then the steady state: a
        // restart, graceful.
        gate.steady(ms(60_000));
        for k in 0..3 {
            gate.retried(ms(70_000 + k * 10));
        }
        gate.steady(ms(75_000));
        gate.failed_in_flight(ms(80_000));
        let wall = std::time::SystemTime::now();
        let r = g.restarts((t0, wall), ms(90_000));
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!((r[0].retried, r[0].failed_in_flight), (3, 0));
        assert_eq!(r[0].verdict, "graceful");
        assert!((r[0].at_s - 70.0).abs() < 1e-9);
    }

    /// Ends from the run's start, with no steady state before them (every connection
    /// ended after its first answer), are the server's policy, not a restart; so are ends
    /// after which the steady state never came back and the server stayed reachable.
    #[test]
    fn a_burst_without_a_steady_state_around_it_is_no_restart() {
        let g = gates(10);
        let gate = g.of(0).unwrap();
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        for k in 0..20 {
            gate.retried(ms(k * 10));
        }
        let wall = std::time::SystemTime::now();
        assert_eq!(g.restarts((t0, wall), ms(1_000)), Vec::new());
        // Steady for a second, then a burst, then nothing reused again.
        let g = gates(10);
        let gate = g.of(0).unwrap();
        gate.steady(ms(0));
        gate.steady(ms(1_000));
        for k in 0..3 {
            gate.retried(ms(1_500 + k * 10));
        }
        assert_eq!(g.restarts((t0, wall), ms(3_000)), Vec::new());
    }

    #[test]
    fn without_backoff_the_window_is_still_kept() {
        let g = Gates::new(vec!["h:1".into()], None, 4);
        let gate = g.of(0).unwrap();
        let t0 = Instant::now();
        gate.unreachable((t0, t0), Unreachable::TimedOut);
        assert_eq!(gate.turn(t0), Ok(()));
        gate.unreachable((t0, t0), Unreachable::Other);
        let o = g.outages(
            (t0, std::time::SystemTime::now()),
            t0 + Duration::from_secs(2),
        );
        assert_eq!(o[0].end_s, None);
        assert_eq!(o[0].duration_s, 2.0);
        assert_eq!((o[0].connects_timed_out, o[0].connects_other), (1, 1));
    }
}
