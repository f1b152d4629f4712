//! HTTP/1 over plain TCP in a closed loop, driven by readiness: one loop per client
//! thread over all its workers' connections (epoll through `mio`, as wrk's own loop),
//! instead of a tokio task per worker, whose wake, poll and hand-over to the collector
//! cost more user time per request than the request's own work.
//!
//! The same parser (`proto::h1::reading`), the same decisions about a connection after a
//! response (`h1::ending`, `h1::fin_here`), the same connect (`net::dial::start_connect`)
//! and the same records and events as the task way (`h1`, `open`, `worker`), handed to
//! the thread's collector directly: the collector stays the recorder's one writer. It
//! runs where nothing else is asked of a run: plain `http://` to an address (no name to
//! look up, no proxy, no Unix socket, no TLS), one origin, a closed loop, no redirects
//! to follow and no read limits; everything else goes the task way.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::time::Instant;

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::collect::Collector;
use super::h1::{ending, fin_here, CLOSE_GRACE};
use super::open::{connect_deadline, SYN_CHECK_NS};
use super::worker::{attempt_deadline, ns, Fail};
use crate::net::{classify_connect_error, classify_io_failure, kernel};
use crate::plan::{LoadShape, Scenario};
use crate::proto::h1::conn::{give_buf, make_room, take_buf};
use crate::proto::h1::reading::{ReadFail, Reading};
use crate::record::{CloseReason, ErrorDetail, ErrorKind, Outcome, Phases, RequestRecord, Stage};
use crate::stats::event::{ConnEvent, Note};

/// Whether `sc` is a run this loop carries (see the module's notes). The environment's
/// `HANDSHAKE_H1_TASKS` sends every run the task way (to compare the two).
pub(super) fn eligible(sc: &Scenario) -> bool {
    let plain = |o: &crate::net::Origin| {
        !o.tls
            && o.proxy.is_none()
            && o.unix.is_none()
            && o.fixed_addrs.as_ref().is_some_and(|a| a.len() == 1)
    };
    std::env::var_os("HANDSHAKE_H1_TASKS").is_none()
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
    /// A new connection's connect, begun at `since`.
    Connecting {
        since: Instant,
        source: Option<usize>,
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
    addr: SocketAddr,
    run_deadline: Option<Instant>,
    /// Not after the earliest of the workers' `due`.
    next_due: Option<Instant>,
    in_flight: u64,
    live: usize,
    /// Workers: a token is `worker + generation * n`.
    n: usize,
}

/// Run thread `t` of `threads`'s workers to their quotas or the run's end; the requests
/// still in flight when an interrupt's grace ran out, if it did.
pub(super) fn run(
    sc: &Scenario,
    (t, threads): (usize, usize),
    col: &mut Collector,
    start: Instant,
    run_deadline: Option<Instant>,
) -> io::Result<Option<u64>> {
    let workers: Vec<Worker> = (t..sc.concurrency)
        .step_by(threads)
        .map(|id| Worker {
            id,
            k: 0,
            quota: sc.worker_quota(id),
            conn: None,
            gen: 0,
            turn: id,
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
        .collect();
    let addr = sc.origins[0]
        .fixed_addrs
        .as_ref()
        .and_then(|a| a.first().copied())
        .ok_or_else(|| io::Error::other("no address to connect to"))?;
    let mut l = Loop {
        sc,
        col,
        poll: Poll::new()?,
        live: workers.len(),
        workers,
        addr,
        run_deadline,
        next_due: None,
        in_flight: 0,
        n: 0,
    };
    l.n = l.workers.len().max(1);
    let mut now = Instant::now();
    for i in 0..l.workers.len() {
        l.next(i, now);
    }
    let mut events = Events::with_capacity(1024);
    let n = l.n;
    while l.live > 0 {
        if crate::interrupt::requested()
            && crate::interrupt::at().is_some_and(|at| at.elapsed() >= crate::interrupt::GRACE)
        {
            return Ok(Some(l.in_flight));
        }
        let wait = l.next_due.map_or(LOOK_EVERY, |d| {
            d.saturating_duration_since(now).min(LOOK_EVERY)
        });
        match l.poll.poll(&mut events, Some(wait)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        for ev in &events {
            let (i, gen) = (ev.token().0 % n, ev.token().0 / n);
            if l.workers[i].gen == gen {
                l.ready(i, ev);
            }
        }
        // One reading of the clock a turn, for the waits.
        now = Instant::now();
        if l.next_due.is_some_and(|d| now >= d) {
            l.sweep(now);
        }
        l.col.show();
    }
    Ok(None)
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
        let since = now;
        w.turn = w.turn.wrapping_add(1);
        w.gen += 1;
        let token = Token(i + w.gen * self.n);
        let local = &self.sc.origins[0].local_addrs;
        let registry = self.poll.registry();
        let started = crate::net::dial::start_connect(self.addr, local, w.turn).and_then(
            |(socket, source)| {
                let mut sock = TcpStream::from_std(std::net::TcpStream::from(socket));
                registry.register(&mut sock, token, Interest::READABLE | Interest::WRITABLE)?;
                Ok((sock, source))
            },
        );
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
                w.state = State::Connecting { since, source };
                let by = connect_deadline(w.deadline, self.sc.limits.connect);
                self.arm(i, by);
            }
            Err(e) => self.fail(i, Fail::new(classify_connect_error(&e)), None),
        }
    }
}

impl Loop<'_> {
    /// Worker `i`'s socket has something to say.
    fn ready(&mut self, i: usize, ev: &mio::event::Event) {
        match self.workers[i].state {
            State::Connecting { since, source } if ev.is_writable() || ev.is_error() => {
                self.connected(i, since, source, ev.is_error() || ev.is_write_closed());
            }
            State::Sending { .. } if ev.is_writable() || ev.is_error() => self.send_more(i),
            // Read also after a write that waited: bytes that came meanwhile (an early
            // response) have had their edge while the worker was sending.
            State::Reading(_) => self.read(i),
            State::Closing => self.drain(i),
            _ => {}
        }
    }

    /// The connect ended; `failed`: the socket said so (its error is read only then).
    fn connected(&mut self, i: usize, since: Instant, source: Option<usize>, failed: bool) {
        let w = &mut self.workers[i];
        let conn = w.conn.as_ref().expect("a connecting worker has its socket");
        if failed {
            let e = match conn.sock.take_error() {
                Ok(Some(e)) | Err(e) => e,
                Ok(None) => io::Error::from(io::ErrorKind::ConnectionRefused),
            };
            self.fail(i, Fail::new(classify_connect_error(&e)), None);
            return;
        }
        let now = Instant::now();
        let connect_ns = ns(since, now);
        w.phases.connect = Some(connect_ns);
        // As `open`: a connect slow enough to have sent its SYN again has the kernel's
        // view read.
        let view = (connect_ns >= SYN_CHECK_NS)
            .then(|| kernel::tcp_view(&conn.sock))
            .flatten();
        self.note(ConnEvent::Opened {
            origin: self.sc.origins[0].index,
        });
        if let Some(index) = source {
            self.note(ConnEvent::Source {
                index: index as u32,
            });
        }
        self.note(ConnEvent::TcpConnected { view, connect_ns });
        self.send(i, now);
    }

    /// Worker `i` sends its request on its connection.
    fn send(&mut self, i: usize, now: Instant) {
        let rpc = self.sc.requests_per_connection;
        let w = &mut self.workers[i];
        let requests = w.conn.as_ref().map_or(0, |c| c.requests);
        w.last = rpc.is_some_and(|n| requests + 1 >= n);
        w.t_send = now;
        w.state = State::Sending { at: 0 };
        let deadline = w.deadline;
        self.arm(i, deadline);
        self.send_more(i);
    }

    fn send_more(&mut self, i: usize) {
        let w = &mut self.workers[i];
        let State::Sending { mut at } = w.state else {
            return;
        };
        let target = &self.sc.targets[w.target];
        let bytes = if w.last {
            &target.request_last
        } else {
            &target.request
        };
        let conn = w
            .conn
            .as_ref()
            .expect("a sending worker has its connection");
        let waited = at > 0;
        while at < bytes.len() {
            match (&conn.sock).write(&bytes[at..]) {
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    w.state = State::Sending { at };
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let stale = w.reused;
                    let f = Fail {
                        failure: classify_io_failure(&e, ErrorDetail::ResetInSend),
                        retry: stale,
                        at_deadline: false,
                    };
                    let reason = if stale {
                        CloseReason::ServerIdleClose
                    } else {
                        CloseReason::Error
                    };
                    self.fail(i, f, Some(reason));
                    return;
                }
            }
        }
        w.t_sent = Instant::now();
        w.phases.send = Some(ns(w.t_send, w.t_sent));
        let head_request = target.template.is_head();
        w.state = State::Reading(Reading::new(head_request, false, false));
        if waited {
            self.read(i);
        }
    }

    /// Read what has come of worker `i`'s response.
    fn read(&mut self, i: usize) {
        match self.take_bytes(i) {
            Some(Ok(eof)) => self.complete(i, eof),
            Some(Err(rf)) => self.read_failed(i, rf),
            None => {}
        }
    }

    /// Read until the socket has no more: `Some(Ok(eof))` when the response is complete,
    /// `Some(Err)` when it failed, `None` while more is to come.
    fn take_bytes(&mut self, i: usize) -> Option<Result<bool, ReadFail>> {
        let w = &mut self.workers[i];
        let State::Reading(reading) = &mut w.state else {
            return None;
        };
        let conn = w
            .conn
            .as_mut()
            .expect("a reading worker has its connection");
        loop {
            let any_byte = w.got > 0;
            match conn.fill() {
                Ok(0) => return Some(reading.at_eof(any_byte).map(|()| true)),
                Ok(n) => {
                    w.got += n as u64;
                    if w.first_byte.is_none() {
                        w.first_byte = Some(Instant::now());
                    }
                    match reading.advance(&conn.buf[conn.start..conn.end]) {
                        Ok((used, done)) => {
                            conn.start += used;
                            if done {
                                return Some(Ok(false));
                            }
                        }
                        Err(rf) => return Some(Err(rf)),
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Some(Err(ReadFail {
                        failure: classify_io_failure(&e, reading.reset_detail()),
                        any_byte,
                    }))
                }
            }
        }
    }

    fn read_failed(&mut self, i: usize, rf: ReadFail) {
        let stale = self.workers[i].reused
            && !rf.any_byte
            && matches!(
                rf.failure.kind,
                ErrorKind::ClosedBeforeResponse | ErrorKind::Reset
            );
        let reason = if stale {
            CloseReason::ServerIdleClose
        } else {
            CloseReason::Error
        };
        let f = Fail {
            retry: stale,
            ..Fail::new(rf.failure)
        };
        self.fail(i, f, Some(reason));
    }

    /// Worker `i`'s response is complete (`eof`: the server's end of the stream ended
    /// it): its record, and its connection kept, closed or left to the server to close.
    fn complete(&mut self, i: usize, eof: bool) {
        let end = Instant::now();
        let w = &mut self.workers[i];
        let State::Reading(reading) = std::mem::replace(&mut w.state, State::Idle) else {
            return;
        };
        let mut conn = w.conn.take().expect("a reading worker has its connection");
        let leftover = conn.end > conn.start;
        (conn.start, conn.end) = (0, 0);
        give_buf(std::mem::take(&mut conn.buf));
        conn.requests += 1;
        let first_byte = w.first_byte.unwrap_or(end);
        w.phases.wait = Some(ns(w.t_sent, first_byte));
        w.phases.receive = Some(ns(first_byte, end));
        w.phases.total = Some(ns(w.t0, end));
        let body_bytes = reading.body_bytes;
        let head = reading
            .into_head()
            .expect("a complete response has its head");
        let record = RequestRecord {
            reused: w.reused,
            phases: w.phases,
            outcome: Outcome::Ok {
                status: head.status,
                retry_after_s: head.retry_after_s,
            },
            bytes_received: w.got,
            body_bytes,
            stale_retry: w.retried,
            refused_retry: false,
            late: false,
            redirected: false,
            end,
        };
        let last = w.last;
        let Some((reason, server_ends)) = ending(self.sc, &head, leftover, last, conn.requests)
        else {
            self.workers[i].conn = Some(conn);
            self.col.take(&Note::Request(record));
            self.in_flight -= 1;
            self.next(i, end);
            return;
        };
        if !server_ends && reason == CloseReason::ClientPolicy {
            // The client asked to close but the server kept the connection open.
            self.note(ConnEvent::ServerIgnoredClose);
        }
        let view = self.closed_view(&conn, reason);
        self.col.take(&Note::Request(record));
        self.in_flight -= 1;
        if server_ends && !eof && !fin_here(view, conn.read_total) {
            // Let the server close first so TIME_WAIT stays on its side.
            let w = &mut self.workers[i];
            w.conn = Some(conn);
            w.state = State::Closing;
            let until = w.deadline.min(Instant::now() + CLOSE_GRACE);
            self.arm(i, until);
            self.drain(i);
            return;
        }
        conn.recycle();
        // The close took system calls: the next request starts now.
        self.next(i, Instant::now());
    }

    /// Read worker `i`'s closing connection to its end; then the next request.
    fn drain(&mut self, i: usize) {
        let w = &mut self.workers[i];
        let conn = w
            .conn
            .as_mut()
            .expect("a closing worker has its connection");
        loop {
            (conn.start, conn.end) = (0, 0);
            match conn.fill() {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.end_closing(i);
    }

    fn end_closing(&mut self, i: usize) {
        let w = &mut self.workers[i];
        w.conn.take().into_iter().for_each(Conn::recycle);
        w.state = State::Idle;
        self.next(i, Instant::now());
    }

    /// Worker `i`'s try failed: its connection closed for `reason` (none while it was
    /// connecting: it never opened); then a retry, the failure's record, or the end of
    /// the worker when the run's deadline cut it.
    fn fail(&mut self, i: usize, f: Fail, reason: Option<CloseReason>) {
        let w = &mut self.workers[i];
        let body_bytes = match &w.state {
            State::Reading(r) => r.body_bytes,
            _ => 0,
        };
        let got = (w.got, body_bytes);
        let connecting = matches!(w.state, State::Connecting { .. });
        w.state = State::Idle;
        if let Some(conn) = w.conn.take() {
            if !connecting {
                let reason = if f.at_deadline {
                    CloseReason::EndOfRun
                } else {
                    reason.unwrap_or(CloseReason::Error)
                };
                self.closed(conn, reason);
            }
        }
        let w = &mut self.workers[i];
        if f.at_deadline {
            self.col.take(&Note::Aborted);
            self.in_flight -= 1;
            w.due = None;
            w.state = State::Done;
            self.live -= 1;
            return;
        }
        let may_retry = self.sc.targets[w.target].template.is_idempotent();
        if f.retry && may_retry && !w.retried {
            w.retried = true;
            self.try_once(i, Instant::now());
            return;
        }
        let record = RequestRecord {
            reused: w.reused,
            phases: w.phases,
            outcome: Outcome::Error(f.failure),
            bytes_received: got.0,
            body_bytes: got.1,
            stale_retry: w.retried,
            refused_retry: false,
            late: false,
            redirected: false,
            end: Instant::now(),
        };
        let end = record.end;
        self.col.take(&Note::Request(record));
        self.in_flight -= 1;
        self.next(i, end);
    }

    /// A connection ends: its events, as `h1::closed` tells them.
    fn closed(&mut self, conn: Conn, reason: CloseReason) {
        self.closed_view(&conn, reason);
        conn.recycle();
    }

    fn closed_view(&mut self, conn: &Conn, reason: CloseReason) -> Option<kernel::TcpView> {
        self.note(ConnEvent::Closed {
            reason,
            requests: conn.requests,
        });
        let view = kernel::tcp_view(&conn.sock);
        if let Some(v) = view {
            self.note(ConnEvent::TcpClosed(v));
        }
        view
    }

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
        let stage = match &self.workers[i].state {
            State::Connecting { .. } => Stage::Connect,
            State::Sending { .. } => Stage::Send,
            State::Reading(_) if self.workers[i].first_byte.is_some() => Stage::Receive,
            State::Reading(_) => Stage::Wait,
            State::Closing => {
                self.end_closing(i);
                return;
            }
            State::Idle | State::Done => return,
        };
        let reason = (stage != Stage::Connect).then_some(CloseReason::Error);
        self.fail(i, Fail::timed_out(stage, run_deadline), reason);
    }
}
