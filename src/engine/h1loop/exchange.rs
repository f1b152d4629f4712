//! A worker's exchange in the readiness loop: its connect, its request written, its
//! response read, and what follows (the connection kept, closed, or left to the server
//! to close; a retry, a record).

use std::io::{self, Write};
use std::time::Instant;

use super::{Conn, Loop, State};
use crate::engine::h1::{ending, fin_here, read_failed, send_failed, CLOSE_GRACE};
use crate::engine::open::opened_events;
use crate::engine::worker::{ns, Fail};
use crate::net::{classify_connect_error, classify_io_failure, kernel};
use crate::proto::h1::conn::give_buf;
use crate::proto::h1::reading::{ReadFail, Reading};
use crate::record::{CloseReason, Outcome, Phase, RequestRecord};
use crate::stats::event::{ConnEvent, Note};

impl Loop<'_> {
    /// Worker `i`'s socket has something to say.
    pub(super) fn ready(&mut self, i: usize, ev: &mio::event::Event) {
        match self.workers[i].state {
            State::Connecting {
                since,
                source,
                at,
                by,
            } if ev.is_writable() || ev.is_error() => {
                let failed = ev.is_error() || ev.is_write_closed();
                if failed && at + 1 < self.workers[i].addrs.len() {
                    // The next address, as `net::dial::connect` tries them.
                    self.workers[i].conn = None;
                    self.dial(i, (since, by), at + 1);
                    return;
                }
                self.connected(i, since, source, failed);
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
    pub(super) fn connected(
        &mut self,
        i: usize,
        since: Instant,
        source: Option<usize>,
        failed: bool,
    ) {
        let w = &mut self.workers[i];
        let conn = w.conn.as_ref().expect("a connecting worker has its socket");
        if failed {
            let e = match conn.sock.take_error() {
                Ok(Some(e)) | Err(e) => e,
                Ok(None) => io::Error::from(io::ErrorKind::ConnectionRefused),
            };
            let f = Fail::new(classify_connect_error(&e)).at(self.sc.origins[0].hop.as_ref());
            self.fail(i, f, None);
            return;
        }
        let now = Instant::now();
        if let Some(g) = self.gate {
            g.reached((since, now));
        }
        let w = &mut self.workers[i];
        let conn = w.conn.as_ref().expect("a connecting worker has its socket");
        let connect_ns = ns(since, now);
        w.phases[Phase::Connect] = Some(connect_ns);
        let col = &mut *self.col;
        opened_events(
            self.sc.origins[0].index,
            source,
            Some((&conn.sock, connect_ns)),
            |e| col.take(&Note::Conn(e)),
        );
        self.send(i, now);
    }

    /// Worker `i` sends its request on its connection.
    pub(super) fn send(&mut self, i: usize, now: Instant) {
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

    pub(super) fn send_more(&mut self, i: usize) {
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
                    let (f, reason) = send_failed(&e, w.reused);
                    self.fail(i, f, Some(reason));
                    return;
                }
            }
        }
        w.t_sent = Instant::now();
        w.phases[Phase::Send] = Some(ns(w.t_send, w.t_sent));
        let head_request = target.template.is_head();
        let mut reading = Reading::new(head_request, false, false);
        reading.taken = self.taken;
        w.state = State::Reading(reading);
        if waited {
            self.read(i);
        }
    }

    /// Read what has come of worker `i`'s response.
    pub(super) fn read(&mut self, i: usize) {
        match self.take_bytes(i) {
            Some(Ok(eof)) => self.complete(i, eof),
            Some(Err(rf)) => self.read_failed(i, rf),
            None => {}
        }
    }

    /// Read until the socket has no more: `Some(Ok(eof))` when the response is complete,
    /// `Some(Err)` when it failed, `None` while more is to come.
    pub(super) fn take_bytes(&mut self, i: usize) -> Option<Result<bool, ReadFail>> {
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

    pub(super) fn read_failed(&mut self, i: usize, rf: ReadFail) {
        let (f, reason) = read_failed(rf, self.workers[i].reused);
        self.fail(i, f, Some(reason));
    }

    /// Worker `i`'s response is complete (`eof`: the server's end of the stream ended
    /// it): its record, and its connection kept, closed or left to the server to close.
    pub(super) fn complete(&mut self, i: usize, eof: bool) {
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
        w.phases[Phase::Wait] = Some(ns(w.t_sent, first_byte));
        w.phases[Phase::Receive] = Some(ns(first_byte, end));
        w.phases[Phase::Total] = Some(ns(w.t0, end));
        let body_bytes = reading.body_bytes;
        let mut reading = reading;
        let said = reading.said.take();
        let head = reading
            .into_head()
            .expect("a complete response has its head");
        self.taken.took(head.status, said.as_deref());
        if let (true, Some(g)) = (w.reused, self.gate) {
            g.steady(end);
        }
        let record = RequestRecord {
            reused: w.reused,
            phases: w.phases,
            outcome: Outcome::Ok {
                status: head.status,
                retry_after_s: head.retry_after_s,
                said,
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
        if let (1, Some(h)) = (conn.requests, head.keep_alive) {
            self.note(ConnEvent::KeepAlive(h));
        }
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
            self.note(ConnEvent::ServerIgnoredClose {
                origin: self.sc.origins[0].index,
            });
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
    pub(super) fn drain(&mut self, i: usize) {
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

    pub(super) fn end_closing(&mut self, i: usize) {
        let w = &mut self.workers[i];
        w.conn.take().into_iter().for_each(Conn::recycle);
        w.state = State::Idle;
        self.next(i, Instant::now());
    }

    /// Worker `i`'s try failed: its connection closed for `reason` (none while it was
    /// connecting: it never opened); then a retry, the failure's record, or the end of
    /// the worker when the run's deadline cut it.
    pub(super) fn fail(&mut self, i: usize, f: Fail, reason: Option<CloseReason>) {
        // A failure after the connection opened (a timeout waiting for the answer, a
        // reset) is met at the same hop as one on the way.
        let f = f.at(self.sc.origins[0].hop.as_ref());
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
            if let Some(g) = self.gate {
                g.retried(Instant::now());
            }
            let w = &mut self.workers[i];
            w.retried = true;
            self.try_once(i, Instant::now());
            return;
        }
        let end = Instant::now();
        if let Some(g) = self.gate {
            g.failed(&f.failure, (w.t0, end));
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
            end,
        };
        self.col.take(&Note::Request(record));
        self.in_flight -= 1;
        self.next(i, end);
    }

    /// A connection ends: its events, as `h1::closed` tells them.
    pub(super) fn closed(&mut self, conn: Conn, reason: CloseReason) {
        self.closed_view(&conn, reason);
        conn.recycle();
    }

    pub(super) fn closed_view(
        &mut self,
        conn: &Conn,
        reason: CloseReason,
    ) -> Option<kernel::TcpView> {
        if let (CloseReason::ServerMaxRequests, Some(g)) = (reason, self.gate) {
            g.ended_by_header(conn.requests, Instant::now());
        }
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
}
