//! The HTTP/2 driver: a thread's workers share its `--connections` share of multiplexed
//! connections per origin (a `Pool`), each carrying up to the server's
//! MAX_CONCURRENT_STREAMS. A worker waits (`blocked`) when every stream slot is busy;
//! the worker that opens a connection pays its dns, connect, tls and `h2_setup`.
//! Connections end by the client's policy (`--requests-per-connection`), the server's
//! GOAWAY, the server closing an idle connection, an error, or the end of the run; a
//! request the server refused goes once more on another connection.

use std::cell::{Cell, RefCell};
use std::pin::Pin;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use h2::client::SendRequest;
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Sleep;

use super::collect::Notes;
use super::open::{connect_deadline, Opener};
use super::worker::{add_blocked, ns, Answer, Driver, Fail, Retry, Try};
use crate::net::Stream;
use crate::plan::{Scenario, Target};
use crate::proto::h2::client::{
    alpn_refused, await_settings, exchange, handshake, no_settings, Answered, Handshaken,
    NoSettings, SettingsWait, Stopped, StreamRequest,
};
use crate::proto::h2::wire::{Seen, Watched};
use crate::proto::h2::{classify, StreamFailure};
use crate::record::notes::Taken;
use crate::record::{CloseReason, ErrorDetail, ErrorKind, Failure, Phase, Phases};
use crate::stats::event::ConnEvent;
use crate::timer::within;

/// One HTTP/2 connection, shared by the workers of a thread.
struct Conn {
    /// The handle to start streams; dropped when the connection is retired, so `h2`
    /// closes it (GOAWAY) once its streams are done.
    send: RefCell<Option<SendRequest<Bytes>>>,
    seen: Rc<RefCell<Seen>>,
    st: RefCell<ConnState>,
    origin: usize,
    slot: usize,
    id: u64,
}

#[derive(Default)]
struct ConnState {
    started: u64,
    /// Streams that ended with a complete response.
    done: u64,
    in_flight: u64,
    peak: u64,
    /// No new streams: `--requests-per-connection` reached.
    draining: bool,
    /// Accounted as closed.
    ended: bool,
    /// The connection is gone (why), but streams counted in flight have yet to see
    /// their end: it is accounted when the last one has.
    gone: Option<CloseReason>,
    /// Why the connection failed, when it ended in an error.
    failure: Option<Failure>,
}

impl Conn {
    /// Whether a new stream may start here now.
    fn accepts(&self) -> bool {
        let st = self.st.borrow();
        let seen = self.seen.borrow();
        let max = seen
            .settings
            .max_concurrent_streams
            .map_or(u64::MAX, u64::from);
        !st.draining
            && !st.ended
            && st.gone.is_none()
            && seen.goaway.is_none()
            && st.in_flight < max
    }

    /// No new stream will ever start here.
    fn retired(&self) -> bool {
        let st = self.st.borrow();
        st.draining || st.ended || st.gone.is_some() || self.seen.borrow().goaway.is_some()
    }

    fn in_flight(&self) -> u64 {
        self.st.borrow().in_flight
    }

    /// How a stream (`id`, if it was opened) failed with `e` on this connection.
    fn classify(&self, e: &h2::Error, id: Option<u32>, in_body: bool) -> StreamFailure {
        if id.is_none() {
            // The connection failed before the stream opened: its own failure says why.
            if let Some(f) = self.st.borrow().failure.clone() {
                return StreamFailure {
                    failure: f,
                    refused: false,
                };
            }
        }
        classify(e, self.seen.borrow().goaway, id, in_body)
    }

    /// Why a connection that ended before the server's SETTINGS failed: it said
    /// nothing, answered HTTP/1, or sent something that was not HTTP/2.
    fn ended_before_settings(&self) -> Failure {
        let instead = no_settings(&self.seen.borrow());
        let failure = self.st.borrow().failure.clone();
        match (&instead, failure) {
            (NoSettings::Http1(_), _) => {
                Failure::new(ErrorKind::Protocol, ErrorDetail::H2cRefused).said(instead.says())
            }
            (_, Some(f)) => f,
            (NoSettings::NotHttp2, None) => {
                Failure::new(ErrorKind::Protocol, ErrorDetail::H2Protocol)
            }
            (NoSettings::Nothing, None) => Failure::new(
                ErrorKind::ClosedBeforeResponse,
                ErrorDetail::NoServerSettings,
            ),
        }
    }
}

enum Slot {
    Empty,
    Opening,
    Open(Rc<Conn>),
}

enum Pick {
    Use(Rc<Conn>),
    Open(usize),
    Wait,
}

/// A thread's HTTP/2 connections, per origin.
pub(super) struct Pool {
    slots: RefCell<Vec<Vec<Slot>>>,
    /// Connections per origin (`--connections`, this thread's share).
    per_origin: usize,
    /// Woken when a stream slot frees or a connection opens or ends.
    notify: Notify,
    workers_left: Cell<usize>,
    notes: Notes,
    /// The connections' driving tasks still running, to stop at the end of the run.
    tasks: RefCell<Vec<(u64, AbortHandle)>>,
    next_id: Cell<u64>,
}

impl Pool {
    /// `connections` per origin for this thread, shared by its workers (each counted as
    /// its driver is made).
    pub(super) fn new(sc: &Scenario, connections: usize, notes: Notes) -> Rc<Pool> {
        let per_origin = connections.max(1);
        let slots = (0..sc.origins.len())
            .map(|_| (0..per_origin).map(|_| Slot::Empty).collect())
            .collect();
        Rc::new(Pool {
            slots: RefCell::new(slots),
            per_origin,
            notify: Notify::new(),
            workers_left: Cell::new(0),
            notes,
            tasks: RefCell::new(Vec::new()),
            next_id: Cell::new(0),
        })
    }

    /// Where the next stream to `origin` goes: a free slot is opened first (so the
    /// workers spread over `--connections`), else the least busy connection with room.
    fn pick(&self, origin: usize) -> Pick {
        let mut slots = self.slots.borrow_mut();
        if origin >= slots.len() {
            // An origin a redirect led to.
            let n = self.per_origin;
            slots.resize_with(origin + 1, || (0..n).map(|_| Slot::Empty).collect());
        }
        let mut best: Option<&Rc<Conn>> = None;
        let mut empty = None;
        for (i, s) in slots[origin].iter_mut().enumerate() {
            // A retired connection finishes its streams on its own; its slot is free.
            if matches!(s, Slot::Open(c) if c.retired()) {
                *s = Slot::Empty;
            }
            match s {
                Slot::Empty => {
                    empty.get_or_insert(i);
                }
                Slot::Opening => {}
                Slot::Open(c) => {
                    if c.accepts() && best.is_none_or(|b| c.in_flight() < b.in_flight()) {
                        best = Some(c);
                    }
                }
            }
        }
        if let Some(i) = empty {
            slots[origin][i] = Slot::Opening;
            return Pick::Open(i);
        }
        match best {
            Some(c) => Pick::Use(c.clone()),
            None => Pick::Wait,
        }
    }

    fn set(&self, origin: usize, slot: usize, s: Slot) {
        self.slots.borrow_mut()[origin][slot] = s;
        self.notify.notify_waiters();
    }

    /// Account a connection as closed (once), and stop starting streams on it.
    fn end(&self, conn: &Rc<Conn>, reason: CloseReason) {
        let (done, peak) = {
            let mut st = conn.st.borrow_mut();
            if st.ended {
                return;
            }
            st.ended = true;
            (st.done, st.peak)
        };
        let code = (reason == CloseReason::ServerGoaway)
            .then(|| conn.seen.borrow().goaway.map(|g| g.error_code))
            .flatten();
        self.notes.conn(ConnEvent::Closed {
            reason,
            requests: done,
        });
        self.notes.conn(ConnEvent::StreamsEnded {
            peak,
            goaway_code: code,
        });
        conn.send.borrow_mut().take();
        {
            let mut slots = self.slots.borrow_mut();
            let s = &mut slots[conn.origin][conn.slot];
            if matches!(s, Slot::Open(c) if Rc::ptr_eq(c, conn)) {
                *s = Slot::Empty;
            }
        }
        self.notify.notify_waiters();
    }

    /// A worker is done; the last one closes what is still open.
    fn worker_done(&self) {
        let left = self.workers_left.get().saturating_sub(1);
        self.workers_left.set(left);
        if left > 0 {
            return;
        }
        let open: Vec<Rc<Conn>> = self
            .slots
            .borrow()
            .iter()
            .flatten()
            .filter_map(|s| match s {
                Slot::Open(c) => Some(c.clone()),
                _ => None,
            })
            .collect();
        for c in &open {
            self.end(c, CloseReason::EndOfRun);
        }
        for (_, t) in self.tasks.borrow_mut().drain(..) {
            t.abort();
        }
    }
}

/// Drive one connection until it ends, then account why it ended (unless the client
/// already did).
async fn drive(
    connection: h2::client::Connection<Watched<Stream>, Bytes>,
    conn: Rc<Conn>,
    pool: Rc<Pool>,
    settings_came: Rc<Notify>,
) {
    let res = connection.await;
    if let Err(e) = &res {
        let f = classify(e, conn.seen.borrow().goaway, None, false).failure;
        conn.st.borrow_mut().failure = Some(f);
    }
    let reason = {
        let seen = conn.seen.borrow();
        let idle = conn.st.borrow().in_flight == 0;
        if seen.goaway.is_some() {
            CloseReason::ServerGoaway
        } else if idle && res.as_ref().map_or_else(|e| e.is_io(), |_| true) {
            CloseReason::ServerIdleClose
        } else {
            CloseReason::Error
        }
    };
    let in_flight = {
        let mut st = conn.st.borrow_mut();
        st.gone = Some(reason);
        st.in_flight
    };
    if in_flight == 0 {
        pool.end(&conn, reason);
    }
    // An opener waiting for the server's SETTINGS learns that none will come.
    settings_came.notify_one();
    pool.tasks.borrow_mut().retain(|(id, _)| *id != conn.id);
}

/// One worker's view of the thread's pool.
pub(super) struct H2 {
    pool: Rc<Pool>,
    opener: Opener,
    notes: Notes,
    sleep: Pin<Box<Sleep>>,
    deadline: Instant,
    run_deadline: Option<Instant>,
    /// Body bytes of the current try (reported also when it fails).
    got_body: u64,
    /// The statuses whose example this worker has taken.
    taken: Taken,
}

impl H2 {
    pub(super) fn new(pool: Rc<Pool>, opener: Opener, start: Instant) -> H2 {
        pool.workers_left.set(pool.workers_left.get() + 1);
        H2 {
            pool,
            notes: opener.tally.clone(),
            run_deadline: opener.run_deadline,
            opener,
            sleep: Box::pin(tokio::time::sleep_until(start.into())),
            deadline: start,
            got_body: 0,
            taken: Taken::default(),
        }
    }
}

impl Driver for H2 {
    const RETRY: Retry = Retry::Refused;

    fn begin(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    async fn try_once(&mut self, sc: &Scenario, target: &Target, phases: &mut Phases) -> Try {
        self.got_body = 0;
        let mut reused = true;
        let result = self
            .exchange(sc, target, phases, &mut reused)
            .await
            .map(|a| {
                self.taken.took(a.status, a.said.as_deref());
                Answer {
                    location: a.location,
                    said: a.said,
                    status: a.status,
                    retry_after_s: a.retry_after_s,
                    end: a.end,
                    bytes: self.got_body,
                    body_bytes: self.got_body,
                }
            });
        Try {
            reused,
            result,
            got_before_failing: (self.got_body, self.got_body),
        }
    }

    fn finish(&mut self) {
        self.pool.worker_done();
    }
}

impl H2 {
    /// One try: a stream slot (waiting or opening a connection), then the stream.
    async fn exchange(
        &mut self,
        sc: &Scenario,
        target: &Target,
        phases: &mut Phases,
        reused: &mut bool,
    ) -> Result<Answered, Fail> {
        let origin = target.origin;
        let waiting_since = Instant::now();
        let conn = loop {
            match self.pool.pick(origin) {
                Pick::Use(c) => break c,
                Pick::Open(slot) => {
                    *reused = false;
                    add_blocked(phases, waiting_since);
                    match self.open(sc, target, slot, phases).await {
                        Ok(c) => {
                            self.pool.set(origin, slot, Slot::Open(c.clone()));
                            break c;
                        }
                        Err(f) => {
                            self.pool.set(origin, slot, Slot::Empty);
                            return Err(f);
                        }
                    }
                }
                Pick::Wait => {
                    let woke = within(
                        self.sleep.as_mut(),
                        self.deadline,
                        self.pool.notify.notified(),
                    )
                    .await;
                    if woke.is_none() {
                        let mut f = Fail::timed_out(Phase::Wait, self.run_deadline);
                        f.failure.detail = Some(ErrorDetail::NoFreeStream);
                        return Err(f);
                    }
                }
            }
        };
        // A stream slot at hand: the end of `blocked` is the start of `send`.
        let t_ready = reused.then(|| add_blocked(phases, waiting_since));
        {
            let mut st = conn.st.borrow_mut();
            st.started += 1;
            st.in_flight += 1;
            st.peak = st.peak.max(st.in_flight);
            if sc.requests_per_connection.is_some_and(|n| st.started >= n) {
                st.draining = true;
            }
        }
        let res = self.stream(sc, target, &conn, phases, t_ready).await;
        let ends = {
            let mut st = conn.st.borrow_mut();
            st.in_flight -= 1;
            if res.is_ok() {
                st.done += 1;
            }
            match (st.in_flight, st.gone) {
                (0, Some(reason)) => Some(reason),
                (0, None) if st.draining => Some(CloseReason::ClientPolicy),
                _ => None,
            }
        };
        if let Some(reason) = ends {
            self.pool.end(&conn, reason);
        }
        self.pool.notify.notify_one();
        res
    }

    /// Open connection `slot` to `origin`: dns, connect, tls (ALPN h2), then the
    /// preface and the server's SETTINGS (`h2_setup`).
    async fn open(
        &mut self,
        sc: &Scenario,
        target: &Target,
        slot: usize,
        phases: &mut Phases,
    ) -> Result<Rc<Conn>, Fail> {
        let (origin, o) = (target.origin, sc.origin(target));
        let opened = self
            .opener
            .open(
                o,
                sc.tls.as_ref(),
                self.deadline,
                sc.limits.connect,
                self.sleep.as_mut(),
                phases,
            )
            .await?;
        let closed_early = |notes: &Notes| {
            notes.conn(ConnEvent::Closed {
                reason: CloseReason::Error,
                requests: 0,
            });
        };
        if alpn_refused(o.tls, opened.alpn.as_deref()) {
            closed_early(&self.notes);
            return Err(Fail::new(Failure::new(
                ErrorKind::Tls,
                ErrorDetail::AlpnMismatch,
            )));
        }
        let by = connect_deadline(self.deadline, sc.limits.connect);
        let started = match within(self.sleep.as_mut(), by, handshake(opened.stream)).await {
            None => {
                let f = Fail::timed_out(Phase::H2Setup, self.run_deadline);
                closed_early(&self.notes);
                return Err(f);
            }
            Some(Err(e)) => {
                closed_early(&self.notes);
                return Err(Fail::new(classify(&e, None, None, false).failure));
            }
            Some(Ok(x)) => x,
        };
        let Handshaken {
            send,
            connection,
            seen,
            settings_came,
            started: t,
        } = started;
        let id = self.pool.next_id.get();
        self.pool.next_id.set(id + 1);
        let conn = Rc::new(Conn {
            send: RefCell::new(Some(send)),
            seen: seen.clone(),
            st: RefCell::new(ConnState::default()),
            origin,
            slot,
            id,
        });
        let task = tokio::task::spawn_local(drive(
            connection,
            conn.clone(),
            self.pool.clone(),
            settings_came.clone(),
        ));
        self.pool.tasks.borrow_mut().push((id, task.abort_handle()));
        // The server's SETTINGS: its limits apply from the first stream.
        let ended = || conn.st.borrow().ended;
        let came = await_settings(&seen, &settings_came, ended, self.sleep.as_mut(), by).await;
        let (settings_at, settings) = match came {
            SettingsWait::TimedOut => {
                let f = Fail::timed_out(Phase::H2Setup, self.run_deadline);
                let reason = if f.at_deadline {
                    CloseReason::EndOfRun
                } else {
                    CloseReason::Error
                };
                self.pool.end(&conn, reason);
                return Err(f);
            }
            SettingsWait::Ended => return Err(Fail::new(conn.ended_before_settings())),
            SettingsWait::Came(at, settings) => (at, settings),
        };
        let gone = conn.st.borrow().gone.is_some() || conn.st.borrow().ended;
        if gone {
            // SETTINGS came, and then the connection failed at once.
            let failure = conn.st.borrow().failure.clone().unwrap_or(Failure::new(
                ErrorKind::ClosedBeforeResponse,
                ErrorDetail::NoServerSettings,
            ));
            return Err(Fail::new(failure));
        }
        phases[Phase::H2Setup] = Some(ns(t, settings_at));
        self.notes.conn(ConnEvent::ServerSettings(settings));
        if settings.max_concurrent_streams == Some(0) {
            self.pool.end(&conn, CloseReason::Error);
            return Err(Fail::new(Failure::new(
                ErrorKind::Protocol,
                ErrorDetail::ZeroConcurrentStreams,
            )));
        }
        Ok(conn)
    }

    /// One stream: send the request (from `t_ready`, when the clock was just read), wait
    /// for the head, read the body.
    async fn stream(
        &mut self,
        sc: &Scenario,
        target: &Target,
        conn: &Rc<Conn>,
        phases: &mut Phases,
        t_ready: Option<Instant>,
    ) -> Result<Answered, Fail> {
        let t_send = t_ready.unwrap_or_else(Instant::now);
        let Some(send) = conn.send.borrow().clone() else {
            // Picked, but the connection is gone: it never opened a stream.
            let failure = conn.st.borrow().failure.clone().unwrap_or(Failure::new(
                ErrorKind::ClosedBeforeResponse,
                ErrorDetail::EofInHead,
            ));
            return Err(Fail::new(failure));
        };
        let (head, body) = target.stream_request();
        let req = StreamRequest {
            head,
            body,
            deadline: self.deadline,
            wait: sc.limits.wait,
            min_speed: sc.limits.min_speed,
            taken: self.taken,
        };
        let answered = exchange(
            send,
            req,
            self.sleep.as_mut(),
            t_send,
            phases,
            &mut self.got_body,
        )
        .await;
        match answered {
            Ok(a) => Ok(a),
            Err(Stopped::Deadline(phase)) => Err(Fail::timed_out(phase, self.run_deadline)),
            Err(Stopped::Limit(f)) => Err(Fail::new(f)),
            Err(Stopped::Stream(e, id, in_body)) => {
                let sf = conn.classify(&e, id, in_body);
                Err(Fail {
                    failure: sf.failure,
                    retry: sf.refused,
                    at_deadline: false,
                })
            }
        }
    }
}
