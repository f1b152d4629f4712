//! One worker: a closed-loop (or paced) sequence of requests, whatever the protocol.
//! Hands out tickets (so `-n` is exact), paces an open loop, stops at the run's end and
//! records each attempt; the protocol's `Driver` carries the request.

pub(super) use crate::record::ns;
use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::collect::Notes;
use crate::net::dns::{DnsCache, Resolution, Resolver};
use crate::plan::{LoadShape, Scenario, Target};
use crate::record::{ErrorDetail, ErrorKind, Failure, Outcome, Phase, Phases, RequestRecord};
use crate::timer::Pacer;

/// Open loop: a send that starts this much later than intended counts as late.
pub(super) const LATE_AFTER: Duration = Duration::from_millis(2);

/// What a try that got a response got.
pub(super) struct Answer {
    pub status: u16,
    pub retry_after_s: Option<u32>,
    /// When the response was complete.
    pub end: Instant,
    /// Bytes read (head and body where the protocol counts them), and body bytes.
    pub bytes: u64,
    pub body_bytes: u64,
    /// A redirect's `Location`, kept when redirects are followed.
    pub location: Option<Box<str>>,
    /// What a 3xx to 5xx response said, where the worker took it as its example.
    pub said: Option<Box<str>>,
}

/// One try of a request: whether it went on a reused connection, and what it got.
pub(super) struct Try {
    pub reused: bool,
    pub result: Result<Answer, Fail>,
    /// A failed try's bytes received and body bytes (counted in its record).
    pub got_before_failing: (u64, u64),
}

/// The retry a protocol makes after a try that failed with `Fail::retry`: at most one
/// per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Retry {
    /// HTTP/1: a reused connection the server had closed while idle; idempotent
    /// requests only (the server may have seen it).
    Stale,
    /// HTTP/2: a stream the server refused (it processed nothing): any request.
    Refused,
    /// HTTP/3: a refused stream; idempotent requests only.
    RefusedIdempotent,
}

/// The most times a stream the server refused (RST_STREAM REFUSED_STREAM) is sent again:
/// each is safe (RFC 9113 8.7), and a server that refuses every stream still ends it.
const REFUSED_RETRIES: u32 = 3;
/// The most times a stream above a GOAWAY's last stream id is sent again. Each GOAWAY
/// comes from a server that processed the streams below it (nginx's
/// `keepalive_requests`), and a stream sent again may meet the next connection's GOAWAY
/// too: the client cannot know the server's limit, so its streams go to the least busy
/// connection, which may be near its end. Against nginx with `keepalive_requests 5`,
/// eight workers on two connections had 127 streams of 200 above a GOAWAY, and 10 tries
/// were not enough for 2 of them; 50 bound a server that never processes anything.
const GOAWAY_RETRIES: u32 = 50;

/// How often a failed try `f` may go again: a stale connection is met once; a stream the
/// server did not process, as above.
fn most_retries<D: Driver>(f: &Fail) -> u32 {
    match (D::RETRY, f.failure.detail) {
        (Retry::Stale, _) => 1,
        (_, Some(ErrorDetail::GoawayUnprocessed)) => GOAWAY_RETRIES,
        _ => REFUSED_RETRIES,
    }
}

/// How a protocol carries one try of a request for a worker; `request` retries and
/// makes the record.
pub(super) trait Driver {
    /// The retry this protocol makes.
    const RETRY: Retry;

    /// A request begins; its tries end by `deadline`.
    fn begin(&mut self, deadline: Instant);

    /// One try, its phases into `phases`.
    async fn try_once(&mut self, sc: &Scenario, target: &Target, phases: &mut Phases) -> Try;

    /// The run is over: account for what is still open.
    fn finish(&mut self);

    /// Whether its next request to origin `origin` can go on a connection it holds,
    /// without opening one (then a closed gate does not hold it back).
    fn holds_connection(&self, _origin: usize) -> bool {
        false
    }
}

/// One request from `t0` (its intended start in an open loop), with at most one retry
/// (the driver's `RETRY`): its record, and a redirect's `Location` when one is followed.
/// `None` when the run's deadline cut it.
pub(super) async fn request<D: Driver>(
    driver: &mut D,
    sc: &Scenario,
    target: &Target,
    (t0, blocked): (Instant, Option<Duration>),
    (run_deadline, gate): (Option<Instant>, Option<&super::gate::Gate>),
) -> Option<(RequestRecord, Option<Box<str>>)> {
    driver.begin(attempt_deadline(sc, t0, blocked, run_deadline));
    let may_retry = D::RETRY == Retry::Refused || target.template.is_idempotent();
    let mut retries = 0;
    loop {
        let retried = retries > 0;
        let mut phases = Phases::default();
        phases[Phase::Blocked] = blocked.map(|b| b.as_nanos() as u64);
        let t = driver.try_once(sc, target, &mut phases).await;
        let mut location = None;
        let (outcome, (bytes_received, body_bytes), end) = match t.result {
            Ok(a) => {
                phases[Phase::Total] = Some(ns(t0, a.end));
                if let (true, Some(g)) = (t.reused, gate) {
                    g.steady(a.end);
                }
                let ok = Outcome::Ok {
                    status: a.status,
                    retry_after_s: a.retry_after_s,
                    said: a.said,
                };
                location = a.location;
                (ok, (a.bytes, a.body_bytes), a.end)
            }
            Err(f) if f.at_deadline => return None,
            Err(f) if f.retry && may_retry && retries < most_retries::<D>(&f) => {
                if let Some(g) = gate {
                    g.retried(Instant::now());
                }
                retries += 1;
                continue;
            }
            // A failure after the connection opened (a timeout waiting for the
            // answer, a reset) is met at the same hop as one on the way.
            Err(f) => (
                Outcome::Error(f.failure.at(sc.origin(target).hop.as_ref())),
                t.got_before_failing,
                Instant::now(),
            ),
        };
        let record = RequestRecord {
            reused: t.reused,
            phases,
            outcome,
            bytes_received,
            body_bytes,
            stale_retry: retried && D::RETRY == Retry::Stale,
            refused_retry: retried && D::RETRY != Retry::Stale,
            late: blocked.is_some_and(|b| b >= LATE_AFTER),
            redirected: false,
            end,
        };
        return Some((record, location));
    }
}

/// Name resolution for a thread's workers: the thread's resolver and the run's cache
/// (None with `--dns-cache off`).
pub(crate) struct Dns {
    pub resolver: Resolver,
    pub cache: Option<Arc<DnsCache>>,
}

impl Dns {
    /// The addresses of `host` for a new connection: through the cache when there is
    /// one, and how they were had.
    pub(crate) async fn lookup(&self, host: &str) -> (Result<Arc<[IpAddr]>, Failure>, Resolution) {
        match &self.cache {
            Some(cache) => cache.resolve(host, &self.resolver).await,
            None => (
                self.resolver.lookup(host).await.map(|a| a.addrs),
                Resolution::Lookup,
            ),
        }
    }
}

/// What a worker shares with its thread: the queue to its collector, the clock.
pub(super) struct Seat {
    pub id: usize,
    pub notes: Notes,
    pub run_deadline: Option<Instant>,
    /// The thread's requests under way (given up, and counted so, when an interrupt's
    /// grace runs out).
    pub in_flight: Rc<std::cell::Cell<u64>>,
    /// `-L`: the targets the thread's redirects led to.
    pub hops: Rc<std::cell::RefCell<crate::plan::redirect::Hops>>,
    /// The run's gates: a failure that says a hop could not be reached closes its gate,
    /// and a worker that needs a new connection waits at a closed one.
    pub gates: Arc<super::gate::Gates>,
}

/// How a single try failed.
pub(crate) struct Fail {
    pub failure: Failure,
    /// The request may safely go again on another connection: a reused HTTP/1
    /// connection closed while idle, or an HTTP/2 stream the server refused.
    pub retry: bool,
    /// Cut by the run's deadline, not by the request's own timeout.
    pub at_deadline: bool,
}

impl Fail {
    pub(crate) fn new(failure: Failure) -> Fail {
        Fail {
            failure,
            retry: false,
            at_deadline: false,
        }
    }

    /// This failure, met on the way to `hop` (an origin's [`Origin::hop`]).
    ///
    /// [`Origin::hop`]: crate::net::Origin::hop
    #[must_use]
    pub(crate) fn at(mut self, hop: Option<&std::sync::Arc<crate::record::Hop>>) -> Fail {
        self.failure = self.failure.at(hop);
        self
    }

    /// A timeout at `phase`, or the run's deadline if it has come.
    pub(crate) fn timed_out(phase: Phase, run_deadline: Option<Instant>) -> Fail {
        Fail {
            failure: ErrorKind::timeout_at(phase).into(),
            retry: false,
            at_deadline: run_deadline.is_some_and(|d| Instant::now() >= d),
        }
    }
}

/// Add the time since `since` to the attempt's `blocked` phase (waiting for a stream);
/// the clock's reading, which ends it.
pub(super) fn add_blocked(phases: &mut Phases, since: Instant) -> Instant {
    let now = Instant::now();
    phases[Phase::Blocked] = Some(phases[Phase::Blocked].unwrap_or(0) + ns(since, now));
    now
}

/// The attempt's deadline: its timeout, or the run's end if sooner.
pub(super) fn attempt_deadline(
    sc: &Scenario,
    t0: Instant,
    blocked: Option<Duration>,
    run_deadline: Option<Instant>,
) -> Instant {
    let began = if blocked.is_some() {
        Instant::now()
    } else {
        t0
    };
    let deadline = began + sc.timeout;
    match run_deadline {
        Some(d) => deadline.min(d),
        None => deadline,
    }
}

/// Run worker `seat.id` to its quota or the run's end: its own tickets in a closed loop,
/// or those its thread's dispatcher hands out in an open loop (`tickets`).
// Not an async fn: that would keep its arguments (the driver, the seat) twice in every
// worker's task, once as given and once moved into the body; an async block uses them
// where they are.
#[allow(clippy::manual_async_fn)]
pub(super) fn run<D: Driver>(
    sc: Arc<Scenario>,
    seat: Seat,
    mut driver: D,
    tickets: Option<Rc<Dispatch>>,
) -> impl std::future::Future<Output = ()> {
    async move {
        let sc: &Scenario = &sc;
        match tickets {
            None => closed_loop(sc, &seat, &mut driver).await,
            Some(d) => {
                while let Some((ticket, intended)) = d.next().await {
                    if crate::interrupt::requested() {
                        break;
                    }
                    let late = Instant::now().saturating_duration_since(intended);
                    let target = &sc.targets[(ticket % sc.targets.len() as u64) as usize];
                    if !follow(&mut driver, sc, &seat, target, (intended, Some(late))).await {
                        break;
                    }
                }
            }
        }
        driver.finish();
    }
}

/// A closed loop: the worker's own tickets (`id`, `id + c`, ...), each sent when the
/// last ended, to its quota or the run's end.
async fn closed_loop<D: Driver>(sc: &Scenario, seat: &Seat, driver: &mut D) {
    let quota = sc.worker_quota(seat.id);
    let c = sc.concurrency as u64;
    let mut k: u64 = 0;
    loop {
        if quota.is_some_and(|q| k >= q) || crate::interrupt::requested() {
            break;
        }
        let now = Instant::now();
        if seat.run_deadline.is_some_and(|d| now >= d) {
            break;
        }
        let ticket = seat.id as u64 + k * c;
        let target = &sc.targets[(ticket % sc.targets.len() as u64) as usize];
        // A new connection to a hop that cannot be reached waits for its turn to try,
        // before its ticket: the wait is the server's absence, not a request's time.
        if !driver.holds_connection(target.origin) && !wait_turn(seat, target.origin).await {
            break;
        }
        k += 1;
        let now = Instant::now();
        if !follow(driver, sc, seat, target, (now, None)).await {
            break;
        }
    }
}

/// Wait until origin `origin`'s gate lets this worker try a new connection: at once
/// while the hop is reached. False when the run ended or was interrupted meanwhile.
async fn wait_turn(seat: &Seat, origin: usize) -> bool {
    let Some(gate) = seat.gates.of(origin) else {
        return true;
    };
    loop {
        let Err(at) = gate.turn(Instant::now()) else {
            return true;
        };
        let until = seat.run_deadline.map_or(at, |d| d.min(at));
        tokio::select! {
            () = tokio::time::sleep_until(until.into()) => {}
            () = crate::interrupt::stopped() => return false,
        }
        if seat.run_deadline.is_some_and(|d| Instant::now() >= d) {
            return false;
        }
    }
}

/// An open loop's tickets for one thread: its dispatcher releases each at its intended
/// time to a worker that is free, and hires one (up to the thread's share of `-c`) when
/// none is. So the workers, and their connections, are as many as the rate and the
/// latency need at once (Little's law), not `-c` whatever the rate; a ticket that finds
/// every worker busy at the limit waits, and the wait is its `blocked` phase.
#[derive(Default)]
pub(super) struct Dispatch {
    due: std::cell::RefCell<std::collections::VecDeque<(u64, Instant)>>,
    /// Workers waiting for a ticket (each has a waiter registered on `wake`).
    idle: std::cell::Cell<usize>,
    wake: tokio::sync::Notify,
    closed: std::cell::Cell<bool>,
}

impl Dispatch {
    /// The next ticket and its intended start; `None` once the run has no more.
    async fn next(&self) -> Option<(u64, Instant)> {
        loop {
            if let Some(t) = self.due.borrow_mut().pop_front() {
                return Some(t);
            }
            if self.closed.get() {
                return None;
            }
            // The dispatcher counts this worker taken when it wakes it.
            self.idle.set(self.idle.get() + 1);
            self.wake.notified().await;
        }
    }

    /// Release tickets `first`, `first + step`, ... (below `-n`, before the run's end)
    /// at `start + ticket / rate`; `hire` starts a worker, at most `limit` of them.
    pub(super) async fn run(
        &self,
        sc: &Scenario,
        (first, step): (u64, u64),
        (start, run_deadline): (Instant, Option<Instant>),
        limit: usize,
        mut hire: impl FnMut(),
    ) {
        let LoadShape::Open { rate } = sc.load else {
            return;
        };
        let pacer = Pacer::new();
        let mut hired = 0;
        let mut ticket = first;
        while sc.stop.requests.is_none_or(|n| ticket < n) && !crate::interrupt::requested() {
            let intended = start + Duration::from_secs_f64(ticket as f64 / rate);
            if run_deadline.is_some_and(|d| intended >= d) {
                break;
            }
            pacer.until(intended).await;
            self.due.borrow_mut().push_back((ticket, intended));
            if self.idle.get() > 0 {
                self.idle.set(self.idle.get() - 1);
                self.wake.notify_one();
            } else if hired < limit {
                hired += 1;
                hire();
            }
            ticket += step;
        }
        self.closed.set(true);
        self.idle.set(0);
        self.wake.notify_waiters();
    }
}

/// One ticket's request and, with `-L`, the redirects it leads to, each hop a request
/// recorded on its own; false when the run's deadline cut one.
async fn follow<D: Driver>(
    driver: &mut D,
    sc: &Scenario,
    seat: &Seat,
    first: &Target,
    (mut t0, mut blocked): (Instant, Option<Duration>),
) -> bool {
    let mut hop: Option<Rc<Target>> = None;
    let mut visited: Vec<Rc<Target>> = Vec::new();
    loop {
        let target = hop.as_deref().unwrap_or(first);
        seat.in_flight.set(seat.in_flight.get() + 1);
        let gate = seat.gates.of(target.origin);
        let done = request(driver, sc, target, (t0, blocked), (seat.run_deadline, gate)).await;
        seat.in_flight.set(seat.in_flight.get() - 1);
        let Some((mut r, location)) = done else {
            seat.notes.aborted();
            return false;
        };
        if let Outcome::Error(f) = &r.outcome {
            seat.gates.failed(target.origin, f, (t0, r.end));
        }
        let (Some(rd), Some(location), &Outcome::Ok { status, .. }) =
            (&sc.redirects, location, &r.outcome)
        else {
            seat.notes.request(r);
            return true;
        };
        let next = seat
            .hops
            .borrow_mut()
            .next(sc, target, status, &location)
            .and_then(|next| {
                let seen = next.url == first.url || visited.iter().any(|v| v.url == next.url);
                if seen {
                    Err(crate::plan::redirect::refused(
                        ErrorDetail::RedirectLoop,
                        format!(
                            "{} redirected back to {}, already visited in this chain",
                            target.url, next.url
                        ),
                    ))
                } else if visited.len() as u32 >= rd.max {
                    Err(crate::plan::redirect::refused(
                        ErrorDetail::TooManyRedirects,
                        format!(
                            "{} redirected to {} after {} redirects (--max-redirs {})",
                            target.url,
                            next.url,
                            visited.len(),
                            rd.max
                        ),
                    ))
                } else {
                    Ok(next)
                }
            });
        match next {
            Ok(next) => {
                r.redirected = true;
                seat.notes.request(r);
                visited.push(next.clone());
                hop = Some(next);
                (t0, blocked) = (Instant::now(), None);
            }
            Err((failure, why)) => {
                r.outcome = Outcome::Error(failure.said(why));
                seat.notes.request(r);
                return true;
            }
        }
    }
}
