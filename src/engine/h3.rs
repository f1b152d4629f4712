//! The HTTP/3 driver, over quinn (QUIC with rustls) and the `h3` crate. `h3-close`,
//! `h3-resumed` and `h3-0rtt` open a QUIC connection per request (full handshake,
//! resumed session, request in 0-RTT); `h3` shares a thread's `--connections` share per
//! origin among its workers, each request on its own stream.
//!
//! Phases: dns, `quic_handshake` (first Initial sent to the handshake complete; with
//! 0-RTT, to the moment the request left, which is before the handshake completes),
//! send, wait, receive. Per connection, quinn's own figures (handshake time, RTT
//! estimate, packets lost) go to the thread's collector when it ends.

use std::cell::{Cell, RefCell};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::time::Sleep;

use super::collect::Notes;
use super::open::{connect_deadline, Opener};
use super::worker::{add_blocked, ns, Answer, Driver, Fail, Retry, Try};
use crate::net::quic::Seen;
use crate::plan::{Scenario, Strategy, Target};
use crate::proto::h3::client::{exchange, race_verdict, Broke, Endpoints, Got, Live};
use crate::proto::h3::{classify_connection, classify_stream, close_reason, refused, H3_NO_ERROR};
use crate::record::notes::Taken;
use crate::record::{
    CloseReason, ErrorDetail, ErrorKind, Failure, HandshakeKind, Phase, Phases, TlsHandshake,
};
use crate::stats::event::{ConnEvent, QuicPath};
use crate::timer::within;

/// How long a retired connection waits for the server's session ticket: three of its
/// round trips and this much more, at most `TICKET_WAIT_MAX`.
const TICKET_WAIT_MIN: Duration = Duration::from_millis(10);
const TICKET_WAIT_MAX: Duration = Duration::from_secs(1);

/// quinn's figures for a connection that ended.
fn quic_ended(conn: &quinn::Connection, notes: &Notes) {
    let s = conn.stats();
    notes.conn(ConnEvent::QuicEnded(QuicPath {
        rtt_ns: s.path.rtt.as_nanos() as u64,
        packets_sent: s.path.sent_packets,
        packets_lost: s.path.lost_packets,
        bytes_lost: s.path.lost_bytes,
        congestion_events: s.path.congestion_events,
    }));
}

/// Close `live` (H3_NO_ERROR) and tell quinn's figures for it.
fn end(live: &Live, notes: &Notes) {
    live.close();
    quic_ended(&live.conn, notes);
}

/// A connection ended after `requests` responses.
fn closed(notes: &Notes, reason: CloseReason, requests: u64) {
    notes.conn(ConnEvent::Closed { reason, requests });
}

/// One connection shared by the workers of a thread (strategy `h3`).
struct Shared {
    live: Live,
    requests: Cell<u64>,
    in_flight: Cell<u64>,
    peak: Cell<u64>,
    /// No new streams (`--requests-per-connection` reached, or the server's GOAWAY).
    draining: Cell<bool>,
    ended: Cell<bool>,
}

impl Shared {
    fn usable(&self) -> bool {
        !self.draining.get() && !self.ended.get() && self.live.conn.close_reason().is_none()
    }

    /// Why it closed: the QUIC connection's own end, else this side's, in error after a
    /// failed request (`failed`).
    fn why_closed(&self, failed: bool) -> CloseReason {
        match self.live.conn.close_reason() {
            Some(e) => close_reason(&e),
            None if failed => CloseReason::Error,
            None => CloseReason::ClientPolicy,
        }
    }

    /// Account for its end once: `reason`, its requests and quinn's figures.
    fn end(&self, reason: CloseReason, notes: &Notes) {
        if self.ended.replace(true) {
            return;
        }
        end(&self.live, notes);
        closed(notes, reason, self.requests.get());
        notes.conn(ConnEvent::StreamsEnded {
            peak: self.peak.get(),
            goaway_code: None,
        });
    }
}

enum Slot {
    Empty,
    Opening,
    Open(Rc<Shared>),
}

/// A thread's shared HTTP/3 connections, per origin.
pub(super) struct Pool {
    slots: RefCell<Vec<Vec<Slot>>>,
    /// Connections per origin (this thread's share).
    per_origin: usize,
    notify: Notify,
    notes: Notes,
    workers_left: Cell<usize>,
}

impl Pool {
    /// `connections` per origin for this thread, shared by its workers (each counted as
    /// its driver is made).
    pub(super) fn new(sc: &Scenario, connections: usize, notes: Notes) -> Rc<Pool> {
        Rc::new(Pool {
            slots: RefCell::new(
                (0..sc.origins.len())
                    .map(|_| (0..connections.max(1)).map(|_| Slot::Empty).collect())
                    .collect(),
            ),
            per_origin: connections.max(1),
            notify: Notify::new(),
            notes,
            workers_left: Cell::new(0),
        })
    }
}

impl Pool {
    /// Slots for an origin a redirect led to.
    fn grow(&self, origin: usize) {
        let mut slots = self.slots.borrow_mut();
        if origin >= slots.len() {
            let n = self.per_origin;
            slots.resize_with(origin + 1, || (0..n).map(|_| Slot::Empty).collect());
        }
    }
}

/// One worker's HTTP/3 requests.
pub(super) struct H3 {
    endpoints: Rc<Endpoints>,
    pool: Option<Rc<Pool>>,
    /// Which of the pool's connections this worker uses.
    seat: usize,
    notes: Notes,
    sleep: Pin<Box<Sleep>>,
    deadline: Instant,
    run_deadline: Option<Instant>,
    opener: Opener,
    /// The statuses whose example this worker has taken.
    taken: Taken,
}

impl H3 {
    pub(super) fn new(
        endpoints: Rc<Endpoints>,
        pool: Option<Rc<Pool>>,
        seat: usize,
        opener: Opener,
        start: Instant,
    ) -> H3 {
        if let Some(p) = &pool {
            p.workers_left.set(p.workers_left.get() + 1);
        }
        H3 {
            endpoints,
            pool,
            seat,
            notes: opener.tally.clone(),
            sleep: Box::pin(tokio::time::sleep_until(start.into())),
            deadline: start,
            run_deadline: opener.run_deadline,
            opener,
            taken: Taken::default(),
        }
    }

    fn timed_out(&self, phase: Phase) -> Fail {
        Fail::timed_out(phase, self.run_deadline)
    }

    /// dns, then a new QUIC connection. With `early`, and a session that allows it,
    /// returns as soon as 0-RTT data may be sent, with the future that says whether the
    /// server took it.
    async fn connect(
        &mut self,
        sc: &Scenario,
        target: &Target,
        early: bool,
        phases: &mut Phases,
    ) -> Result<
        (
            quinn::Connection,
            Arc<Seen>,
            Instant,
            Option<quinn::ZeroRttAccepted>,
        ),
        Fail,
    > {
        let o = sc.origin(target);
        let by = connect_deadline(self.deadline, sc.limits.connect);
        let addrs = self
            .opener
            .resolve(o, by, self.sleep.as_mut(), phases)
            .await?;
        let Some(&addr) = addrs.first() else {
            return Err(Fail::new(Failure::new(
                ErrorKind::Dns,
                ErrorDetail::NoAddress,
            )));
        };
        let quic_tls = sc.quic_tls.as_ref().expect("h3 scenarios carry QUIC TLS");
        let (crypto, full) = quic_tls.for_connection();
        let mut cfg = quinn::ClientConfig::new(crypto);
        cfg.transport_config(self.endpoints.transport.clone());
        let endpoint = self
            .endpoints
            .get(addr, &o.local_addrs)
            .map_err(|e| Fail::new(crate::net::classify_connect_error(&e)))?;
        let started = Instant::now();
        let connecting = endpoint
            .connect_with(cfg, addr, &o.host)
            .map_err(|_| Fail::new(Failure::new(ErrorKind::Connect, ErrorDetail::Unreachable)))?;
        let connecting = if early {
            match connecting.into_0rtt() {
                Ok((conn, accepted)) => return Ok((conn, full, started, Some(accepted))),
                Err(c) => c,
            }
        } else {
            connecting
        };
        let conn = match within(self.sleep.as_mut(), by, connecting).await {
            None => return Err(self.timed_out(Phase::QuicHandshake)),
            Some(Err(e)) => return Err(Fail::new(classify_connection(&e, false))),
            Some(Ok(c)) => c,
        };
        let done = Instant::now();
        phases[Phase::QuicHandshake] = Some(ns(started, done));
        self.handshake_done(sc.origin(target).index, &full, (started, done), conn.rtt());
        Ok((conn, full, started, None))
    }

    /// A handshake completed: count the connection, its kind and its duration, and
    /// whether it took more than one round trip at quinn's RTT estimate `rtt`.
    fn handshake_done(
        &self,
        origin: u32,
        seen: &Seen,
        (started, done): (Instant, Instant),
        rtt: Duration,
    ) {
        self.notes.conn(ConnEvent::Opened { origin });
        let kind = if seen.full() {
            HandshakeKind::Full
        } else {
            HandshakeKind::Resumed
        };
        self.notes.conn(ConnEvent::Tls(TlsHandshake {
            kind,
            tls13: true,
            group: None,
            wire: None,
        }));
        self.notes.conn(ConnEvent::QuicHandshake {
            ns: ns(started, done),
            rtt_ns: rtt.as_nanos() as u64,
        });
    }

    /// A failed exchange on `conn`: classified, a timeout named by its phase.
    fn broke(&self, b: Option<Broke>, phase: Phase, conn: &quinn::Connection, got: u64) -> Fail {
        match b {
            None => self.timed_out(phase),
            Some(b) => {
                let closed = conn.close_reason();
                let mut f = Fail::new(classify_stream(
                    &b.error,
                    closed.as_ref(),
                    got > 0 || b.phase == Phase::Receive,
                ));
                f.retry = closed.is_none() && refused(&b.error);
                f
            }
        }
    }

    /// One request on a connection of its own (`h3-close`, `h3-resumed`, `h3-0rtt`).
    async fn fresh(
        &mut self,
        sc: &Scenario,
        target: &Target,
        phases: &mut Phases,
    ) -> Result<Got, Fail> {
        let early = sc.strategy == Strategy::H3ZeroRtt;
        let (conn, full, started, accepted) = self
            .connect(sc, target, early, phases)
            .await
            .map_err(|f| f.at(sc.origin(target).hop.as_ref()))?;
        let phase = Cell::new(Phase::QuicHandshake);
        let got_body = Cell::new(0);
        let Some(accepted) = accepted else {
            // The handshake is done: the request goes in 1-RTT.
            return self
                .on_new(sc, target, conn, &full, phases, &phase, &got_body)
                .await;
        };
        // 0-RTT: HTTP/3's SETTINGS and the request go before the handshake completes.
        let deadline = self.deadline;
        let mut live = match within(self.sleep.as_mut(), deadline, Live::start(conn.clone())).await
        {
            None => return Err(self.timed_out(Phase::QuicHandshake)),
            Some(Err(f)) => return Err(Fail::new(f)),
            Some(Ok(l)) => l,
        };
        let left = Instant::now();
        phases[Phase::QuicHandshake] = Some(ns(started, left));
        let mut accepted = std::pin::pin!(accepted);
        let ex = exchange(
            &mut live.send,
            target.stream_request(),
            phases,
            (&phase, &got_body),
            Some(left),
            self.taken,
        );
        let raced = within(
            self.sleep.as_mut(),
            deadline,
            race_verdict(ex, &mut accepted),
        )
        .await;
        // `result` is None when the server rejected what came in 0-RTT.
        let Some((result, verdict)) = raced else {
            // Cut before the handshake was known to complete: never counted open.
            live.abandon();
            return Err(self.timed_out(phase.get()));
        };
        // The server's verdict on the early data comes with the handshake's end.
        let verdict = match verdict {
            Some(v) => Some(v),
            None => within(self.sleep.as_mut(), deadline, &mut accepted)
                .await
                .map(|a| (a, Instant::now())),
        };
        let Some((taken, done)) = verdict else {
            live.abandon();
            return Err(self.timed_out(Phase::QuicHandshake));
        };
        if !taken {
            if let Some(e) = conn.close_reason() {
                // Not a rejection: the connection failed before its handshake completed.
                live.abandon();
                return Err(Fail::new(classify_connection(&e, false)));
            }
        }
        self.handshake_done(sc.origin(target).index, &full, (started, done), conn.rtt());
        self.notes.conn(ConnEvent::EarlyData { accepted: taken });
        if taken {
            let lead = done.saturating_duration_since(left);
            self.notes.conn(ConnEvent::EarlyLead {
                ns: lead.as_nanos() as u64,
            });
            let res = match result {
                Some(Ok(g)) => Ok(g),
                Some(Err(b)) => Err(self.broke(Some(b), phase.get(), &conn, got_body.get())),
                None => unreachable!("an accepted 0-RTT exchange has a result"),
            };
            self.retire(sc, live, &full, &res);
            return res;
        }
        // Rejected: the request goes again now that the handshake is done, on a new
        // HTTP/3 session over the same connection (the first one's streams are gone).
        live.driver.abort();
        phases[Phase::QuicHandshake] = Some(ns(started, done));
        phases[Phase::Send] = None;
        phases[Phase::Wait] = None;
        phases[Phase::Receive] = None;
        self.on_new(sc, target, conn, &full, phases, &phase, &got_body)
            .await
    }

    /// The request on a new connection whose handshake is done; then close it.
    #[allow(clippy::too_many_arguments)]
    async fn on_new(
        &mut self,
        sc: &Scenario,
        target: &Target,
        conn: quinn::Connection,
        seen: &Arc<Seen>,
        phases: &mut Phases,
        phase: &Cell<Phase>,
        got_body: &Cell<u64>,
    ) -> Result<Got, Fail> {
        let deadline = self.deadline;
        let mut live = match within(self.sleep.as_mut(), deadline, Live::start(conn.clone())).await
        {
            None => {
                conn.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
                quic_ended(&conn, &self.notes);
                let f = self.timed_out(Phase::Send);
                closed(&self.notes, reason_of(&f), 0);
                return Err(f);
            }
            Some(Err(f)) => {
                quic_ended(&conn, &self.notes);
                closed(&self.notes, CloseReason::Error, 0);
                return Err(Fail::new(f));
            }
            Some(Ok(l)) => l,
        };
        let out = within(
            self.sleep.as_mut(),
            deadline,
            exchange(
                &mut live.send,
                target.stream_request(),
                phases,
                (phase, got_body),
                None,
                self.taken,
            ),
        )
        .await;
        let res = match out {
            Some(Ok(g)) => Ok(g),
            Some(Err(b)) => Err(self.broke(Some(b), phase.get(), &conn, got_body.get())),
            None => Err(self.broke(None, phase.get(), &conn, got_body.get())),
        };
        self.retire(sc, live, seen, &res);
        res
    }

    /// Close a connection that carried one request. With resumption, a connection whose
    /// server has not sent its session ticket yet stays open a little in the background
    /// for it (a server sends it after the handshake, which with 0-RTT is after the
    /// response), so that the next connections can resume.
    fn retire(&self, sc: &Scenario, live: Live, seen: &Arc<Seen>, res: &Result<Got, Fail>) {
        let (reason, requests) = match res {
            Ok(_) => (CloseReason::ClientPolicy, 1),
            Err(f) => (reason_of(f), 0),
        };
        let notes = self.notes.clone();
        let linger =
            sc.strategy.tls_resumption() && !seen.ticket() && live.conn.close_reason().is_none();
        if !linger {
            end(&live, &notes);
            closed(&notes, reason, requests);
            return;
        }
        let seen = seen.clone();
        let wait = (live.conn.rtt() * 3 + TICKET_WAIT_MIN).min(TICKET_WAIT_MAX);
        tokio::task::spawn_local(async move {
            let _ = tokio::time::timeout(wait, seen.ticket_came.notified()).await;
            end(&live, &notes);
            closed(&notes, reason, requests);
        });
    }

    /// Open the worker's shared connection to `target`'s origin: QUIC, then HTTP/3 on it. A
    /// connection whose HTTP/3 failed to start is counted closed in error.
    async fn open_shared(
        &mut self,
        sc: &Scenario,
        target: &Target,
        phases: &mut Phases,
    ) -> Result<Rc<Shared>, Fail> {
        let (conn, _, _, _) = self
            .connect(sc, target, false, phases)
            .await
            .map_err(|f| f.at(sc.origin(target).hop.as_ref()))?;
        let live = match Live::start(conn.clone()).await {
            Ok(live) => live,
            Err(f) => {
                // Opened (its handshake counted), then HTTP/3 failed.
                conn.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
                quic_ended(&conn, &self.notes);
                closed(&self.notes, CloseReason::Error, 0);
                return Err(Fail::new(f));
            }
        };
        Ok(Rc::new(Shared {
            live,
            requests: Cell::new(0),
            in_flight: Cell::new(0),
            peak: Cell::new(0),
            draining: Cell::new(false),
            ended: Cell::new(false),
        }))
    }

    /// One request on the worker's shared connection (strategy `h3`), opening it when
    /// there is none. Returns whether the request went on a connection it did not open.
    async fn shared(
        &mut self,
        sc: &Scenario,
        target: &Target,
        phases: &mut Phases,
    ) -> (bool, Result<Got, Fail>) {
        let pool = self.pool.clone().expect("strategy h3 has a pool");
        let o = target.origin;
        pool.grow(o);
        let seat = self.seat % pool.slots.borrow()[o].len();
        // When this attempt began waiting (for another worker's open), if it did.
        let mut t_blocked: Option<Instant> = None;
        let (conn, reused) = loop {
            let slot = std::mem::replace(&mut pool.slots.borrow_mut()[o][seat], Slot::Opening);
            match slot {
                Slot::Open(c) if c.usable() => {
                    pool.slots.borrow_mut()[o][seat] = Slot::Open(c.clone());
                    break (c, true);
                }
                Slot::Open(c) => {
                    // Found ended: say why once its streams are done.
                    if c.in_flight.get() == 0 {
                        c.end(c.why_closed(false), &self.notes);
                    }
                    pool.slots.borrow_mut()[o][seat] = Slot::Empty;
                }
                Slot::Opening => {
                    // Another worker is opening it: wait.
                    t_blocked.get_or_insert_with(Instant::now);
                    let notified = pool.notify.notified();
                    if within(self.sleep.as_mut(), self.deadline, notified)
                        .await
                        .is_none()
                    {
                        return (false, Err(self.timed_out(Phase::QuicHandshake)));
                    }
                }
                Slot::Empty => {
                    // This worker opens it (the slot says Opening meanwhile).
                    let opened = self.open_shared(sc, target, phases).await;
                    match opened {
                        Ok(c) => {
                            pool.slots.borrow_mut()[o][seat] = Slot::Open(c.clone());
                            pool.notify.notify_waiters();
                            break (c, false);
                        }
                        Err(f) => {
                            pool.slots.borrow_mut()[o][seat] = Slot::Empty;
                            pool.notify.notify_waiters();
                            return (false, Err(f));
                        }
                    }
                }
            }
        };
        // The reading that ends `blocked` starts `send`.
        let t_ready = t_blocked.map(|since| add_blocked(phases, since));
        let n = conn.in_flight.get() + 1;
        conn.in_flight.set(n);
        conn.peak.set(conn.peak.get().max(n));
        conn.requests.set(conn.requests.get() + 1);
        if sc
            .requests_per_connection
            .is_some_and(|max| conn.requests.get() >= max)
        {
            conn.draining.set(true);
        }
        let phase = Cell::new(Phase::Send);
        let got_body = Cell::new(0);
        let mut send = conn.live.send.clone();
        let out = within(
            self.sleep.as_mut(),
            self.deadline,
            exchange(
                &mut send,
                target.stream_request(),
                phases,
                (&phase, &got_body),
                t_ready,
                self.taken,
            ),
        )
        .await;
        conn.in_flight.set(conn.in_flight.get() - 1);
        let res = match out {
            Some(Ok(g)) => Ok(g),
            Some(Err(b)) => {
                if matches!(b.error, h3::error::StreamError::RemoteClosing { .. }) {
                    conn.draining.set(true);
                }
                Err(self.broke(Some(b), phase.get(), &conn.live.conn, got_body.get()))
            }
            None => Err(self.broke(None, phase.get(), &conn.live.conn, got_body.get())),
        };
        if res.is_err() {
            conn.requests.set(conn.requests.get() - 1);
        }
        if conn.in_flight.get() == 0 && !conn.usable() {
            conn.end(conn.why_closed(res.is_err()), &self.notes);
            let mut slots = pool.slots.borrow_mut();
            if matches!(&slots[o][seat], Slot::Open(c) if Rc::ptr_eq(c, &conn)) {
                slots[o][seat] = Slot::Empty;
            }
        }
        (reused, res)
    }
}

/// A failed per-request connection's close reason.
fn reason_of(f: &Fail) -> CloseReason {
    if f.at_deadline {
        CloseReason::EndOfRun
    } else {
        CloseReason::Error
    }
}

impl Driver for H3 {
    const RETRY: Retry = Retry::RefusedIdempotent;

    fn begin(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    async fn try_once(&mut self, sc: &Scenario, target: &Target, phases: &mut Phases) -> Try {
        let (reused, res) = if self.pool.is_some() {
            self.shared(sc, target, phases).await
        } else {
            (false, self.fresh(sc, target, phases).await)
        };
        if let Ok(g) = &res {
            self.taken.took(g.status, g.said.as_deref());
        }
        Try {
            reused,
            result: res.map(|g| Answer {
                location: g.location,
                said: g.said,
                status: g.status,
                retry_after_s: g.retry_after_s,
                end: g.end,
                bytes: g.bytes,
                body_bytes: g.body_bytes,
            }),
            got_before_failing: (0, 0),
        }
    }

    fn finish(&mut self) {
        let Some(pool) = &self.pool else {
            return;
        };
        let left = pool.workers_left.get().saturating_sub(1);
        pool.workers_left.set(left);
        if left > 0 {
            return;
        }
        for slots in pool.slots.borrow_mut().iter_mut() {
            for slot in slots.iter_mut() {
                if let Slot::Open(c) = std::mem::replace(slot, Slot::Empty) {
                    let reason = match c.live.conn.close_reason() {
                        Some(e) => close_reason(&e),
                        None => CloseReason::EndOfRun,
                    };
                    c.end(reason, &pool.notes);
                }
            }
        }
    }
}
