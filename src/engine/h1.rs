//! The HTTP/1.x driver: each worker owns one connection per origin and sends one
//! request at a time on it. Decides reuse and close reasons, and retries a request once
//! when a reused connection turns out to be stale.

use std::pin::Pin;
use std::time::{Duration, Instant};

use tokio::time::Sleep;

use super::collect::Notes;
use super::open::{handshake_of, Opener};
use super::worker::{ns, Answer, Driver, Fail, Retry, Try};
use crate::net::kernel::TcpView;
use crate::net::{classify_io_failure, classify_tls_error};
use crate::plan::{Scenario, Target};
use crate::proto::h1::conn::{Conn, ReadFail, Response};
use crate::proto::h1::{Framing, ResponseHead};
use crate::proto::pace::ReadLimits;
use crate::record::notes::Taken;
use crate::record::{CloseReason, ErrorDetail, ErrorKind, Phase, Phases};
use crate::stats::event::ConnEvent;
use crate::timer::within;

/// How long to wait for the server's FIN after a response that ends the connection.
pub(super) const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// One worker's HTTP/1 connections and the state of its current attempt.
pub(super) struct H1 {
    conns: Vec<Option<Conn>>,
    notes: Notes,
    sleep: Pin<Box<Sleep>>,
    /// The current attempt's deadline (its timeout, or the run's end if sooner).
    deadline: Instant,
    run_deadline: Option<Instant>,
    /// Response bytes (all, body) read before the last connection was dropped on an
    /// error: a failed attempt still reports what arrived.
    dropped_got: (u64, u64),
    opener: Opener,
    /// The statuses whose example this worker has taken.
    taken: Taken,
}

impl H1 {
    pub(super) fn new(sc: &Scenario, opener: Opener, start: Instant) -> H1 {
        H1 {
            conns: (0..sc.origins.len()).map(|_| None).collect(),
            notes: opener.tally.clone(),
            sleep: Box::pin(tokio::time::sleep_until(start.into())),
            deadline: start,
            run_deadline: opener.run_deadline,
            dropped_got: (0, 0),
            opener,
            taken: Taken::default(),
        }
    }
}

impl Driver for H1 {
    const RETRY: Retry = Retry::Stale;

    fn holds_connection(&self, origin: usize) -> bool {
        self.conns.get(origin).is_some_and(Option::is_some)
    }

    fn begin(&mut self, deadline: Instant) {
        self.deadline = deadline;
    }

    async fn try_once(&mut self, sc: &Scenario, target: &Target, phases: &mut Phases) -> Try {
        if target.origin >= self.conns.len() {
            // An origin a redirect led to.
            self.conns.resize_with(target.origin + 1, || None);
        }
        let reused = self.conns[target.origin].is_some();
        self.dropped_got = (0, 0);
        let result = self.exchange(sc, target, phases).await.map(|r| {
            self.taken.took(r.head.status, r.said.as_deref());
            Answer {
                status: r.head.status,
                retry_after_s: r.head.retry_after_s,
                end: r.end,
                bytes: r.bytes,
                body_bytes: r.body_bytes,
                location: r.location,
                said: r.said,
            }
        });
        Try {
            reused,
            result,
            got_before_failing: self.dropped_got,
        }
    }

    fn finish(&mut self) {
        // Connections still open at the end of the run.
        for conn in self.conns.iter_mut().filter_map(Option::take) {
            closed(&self.notes, &conn, CloseReason::EndOfRun);
        }
    }
}

impl H1 {
    /// One try of the request on the worker's connection to the target's origin
    /// (opening one if there is none).
    // The hot path of an HTTP/1 attempt, one sequence: reuse or open, write, read,
    // record; each step's timing and failure in one frame (bench/before_after.py).
    #[allow(clippy::too_many_lines)]
    async fn exchange(
        &mut self,
        sc: &Scenario,
        target: &Target,
        phases: &mut Phases,
    ) -> Result<Response, Fail> {
        let slot = target.origin;
        let reused = self.conns[slot].is_some();
        // TLS early data: when TCP was established, if this request goes in it.
        let mut early_since = None;
        if !reused {
            let opened = self
                .opener
                .open(
                    sc.origin(target),
                    sc.tls.as_ref(),
                    self.deadline,
                    sc.limits.connect,
                    self.sleep.as_mut(),
                    phases,
                )
                .await?;
            early_since = opened.early.then_some(opened.connected_at);
            let mut conn = Conn::new(opened.stream);
            conn.follow = sc.redirects.is_some();
            self.conns[slot] = Some(conn);
        }
        let conn = self.conns[slot].as_mut().expect("connection present");
        conn.got_bytes = 0;
        conn.got_body_bytes = 0;
        let last = sc
            .requests_per_connection
            .is_some_and(|n| conn.requests + 1 >= n);
        let bytes = if last {
            &target.request_last
        } else {
            &target.request
        };

        let t_send = Instant::now();
        if let Some(connected_at) = early_since {
            Box::pin(self.send_early(slot, bytes, connected_at, phases)).await?;
        }
        let sent = if early_since.is_some() {
            Some(Ok(()))
        } else {
            let conn = self.conns[slot].as_mut().expect("connection present");
            within(self.sleep.as_mut(), self.deadline, conn.send(bytes)).await
        };
        let fail = match sent {
            None => Some((
                Fail::timed_out(Phase::Send, self.run_deadline),
                CloseReason::Error,
            )),
            Some(Err(e)) => Some(send_failed(&e, reused)),
            Some(Ok(())) => None,
        };
        if let Some((f, reason)) = fail {
            self.drop_conn(slot, reason, &f);
            return Err(f);
        }
        let t_sent = Instant::now();
        if early_since.is_none() {
            phases[Phase::Send] = Some(ns(t_send, t_sent));
        }

        let conn = self.conns[slot].as_mut().expect("connection present");
        let read = within(
            self.sleep.as_mut(),
            self.deadline,
            conn.read_response(
                target.template.is_head(),
                ReadLimits {
                    first_byte_by: sc.limits.wait.map(|w| t_sent + w),
                    min_speed: sc.limits.min_speed,
                },
                self.taken,
            ),
        )
        .await;
        let resp = match read {
            None => {
                let receiving = self.conns[slot].as_ref().is_some_and(|c| c.receiving);
                let f = Fail::timed_out(
                    if receiving {
                        Phase::Receive
                    } else {
                        Phase::Wait
                    },
                    self.run_deadline,
                );
                self.drop_conn(slot, CloseReason::Error, &f);
                return Err(f);
            }
            Some(Err(rf)) => {
                let (f, reason) = read_failed(rf, reused);
                self.drop_conn(slot, reason, &f);
                return Err(f);
            }
            Some(Ok(r)) => r,
        };
        phases[Phase::Wait] = Some(ns(t_sent, resp.first_byte));
        phases[Phase::Receive] = Some(ns(resp.first_byte, resp.end));

        let mut conn = self.conns[slot].take().expect("connection present");
        conn.requests += 1;
        if let (1, Some(h)) = (conn.requests, resp.head.keep_alive) {
            self.notes.conn(ConnEvent::KeepAlive(h));
        }
        let Some((reason, server_ends)) =
            ending(sc, &resp.head, resp.leftover, last, conn.requests)
        else {
            self.conns[slot] = Some(conn);
            return Ok(resp);
        };
        if !server_ends && reason == CloseReason::ClientPolicy {
            // The client asked to close but the server kept the connection open.
            self.notes.conn(ConnEvent::ServerIgnoredClose {
                origin: sc.origin(target).index,
            });
        }
        if reason == CloseReason::ServerMaxRequests {
            let gate = self.opener.gates.as_ref().and_then(|g| g.of(slot));
            if let Some(g) = gate {
                g.ended_by_header(conn.requests, Instant::now());
            }
        }
        let view = closed(&self.notes, &conn, reason);
        let fin_here = conn.stream.is_plain() && fin_here(view, conn.read_total);
        if server_ends && !resp.eof && !fin_here {
            // Let the server close first so TIME_WAIT stays on its side.
            let grace = self.deadline.min(Instant::now() + CLOSE_GRACE);
            if early_since.is_some() {
                // After 0-RTT the server ends the connection only once the client's
                // Finished has reached it, a round trip after the response: no client
                // waits for that, so the worker goes on and the wait (which also reads
                // the session tickets that come with it) happens in the background.
                tokio::task::spawn_local(async move {
                    let _ = tokio::time::timeout_at(grace.into(), conn.await_server_close()).await;
                    conn.recycle();
                });
                return Ok(resp);
            }
            // Boxed: a wait each closing connection makes once; inline, every worker's
            // task would carry the connection and the wait's state all along.
            let sleep = self.sleep.as_mut();
            Box::pin(async move {
                let _ = within(sleep, grace, conn.await_server_close()).await;
                conn.recycle();
            })
            .await;
            return Ok(resp);
        }
        conn.recycle();
        Ok(resp)
    }

    /// TLS early data: the request is written into the first flight (with the
    /// ClientHello) and the flush completes the handshake. `send` is the write; `tls`
    /// runs from TCP established to the handshake's end, the request in flight all along.
    /// A server that rejects the early data gets the request again after the handshake
    /// (tokio-rustls resends it): counted as rejected.
    async fn send_early(
        &mut self,
        slot: usize,
        bytes: &[u8],
        connected_at: Instant,
        phases: &mut Phases,
    ) -> Result<(), Fail> {
        let conn = self.conns[slot].as_mut().expect("connection present");
        let t_write = Instant::now();
        let wrote = match within(self.sleep.as_mut(), self.deadline, conn.write(bytes)).await {
            Some(Ok(())) => {
                phases[Phase::Send] = Some(ns(t_write, Instant::now()));
                let conn = self.conns[slot].as_mut().expect("connection present");
                within(self.sleep.as_mut(), self.deadline, conn.flush()).await
            }
            other => other,
        };
        let f = match wrote {
            Some(Ok(())) => {
                phases[Phase::Tls] = Some(ns(connected_at, Instant::now()));
                let conn = self.conns[slot].as_mut().expect("connection present");
                let wire = conn.stream.take_wire();
                if let Some(session) = conn.stream.tls_session() {
                    self.notes.conn(ConnEvent::Tls(handshake_of(session, wire)));
                    self.notes.conn(ConnEvent::EarlyData {
                        accepted: session.is_early_data_accepted(),
                    });
                }
                return Ok(());
            }
            None => Fail::timed_out(Phase::Tls, self.run_deadline),
            Some(Err(e)) => Fail::new(classify_tls_error(&e)),
        };
        self.drop_conn(slot, CloseReason::Error, &f);
        Err(f)
    }

    fn drop_conn(&mut self, slot: usize, reason: CloseReason, f: &Fail) {
        if let Some(conn) = self.conns[slot].take() {
            self.dropped_got = (conn.got_bytes, conn.got_body_bytes);
            let reason = if f.at_deadline {
                CloseReason::EndOfRun
            } else {
                reason
            };
            closed(&self.notes, &conn, reason);
            conn.recycle();
        }
    }
}

/// What a complete response means for its connection: `None` when it stays for the
/// next request; else why it ends, and whether the server ends it (its FIN to come).
/// `requests`: the responses it carried, this one included.
pub(super) fn ending(
    sc: &Scenario,
    head: &ResponseHead,
    leftover: bool,
    last: bool,
    requests: u64,
) -> Option<(CloseReason, bool)> {
    let server_ends = !head.persistent || head.framing == Framing::UntilClose;
    if sc.strategy.persistent() && !server_ends && !leftover && !last {
        return None;
    }
    let reason = if leftover {
        CloseReason::Error
    } else if !sc.strategy.persistent() || last {
        CloseReason::ClientPolicy
    } else if head.minor_version == 0 && !head.connection_keep_alive && !head.connection_close {
        // An HTTP/1.0 answer that says `Connection: close` (Go's server with keep-alive
        // off) says its keep-alive is off: the close header's reason, below.
        CloseReason::ServerHttp10
    } else if head.framing == Framing::UntilClose && !head.connection_close {
        CloseReason::ServerCloseDelimited
    } else if head.connection_close && requests > 1 {
        CloseReason::ServerMaxRequests
    } else {
        CloseReason::ServerCloseHeader
    };
    Some((reason, server_ends))
}

/// A send that failed: the try's failure, and why its connection ends. On a reused
/// connection the server had closed it while idle, and the request may go again.
pub(super) fn send_failed(e: &std::io::Error, reused: bool) -> (Fail, CloseReason) {
    let f = Fail {
        retry: reused,
        ..Fail::new(classify_io_failure(e, ErrorDetail::ResetInSend))
    };
    (f, stale_or_error(reused))
}

/// A response read that failed: the try's failure, and why its connection ends. A
/// reused connection that ended or reset before any byte of the response was closed by
/// the server while idle, and the request may go again.
pub(super) fn read_failed(rf: ReadFail, reused: bool) -> (Fail, CloseReason) {
    let stale = reused
        && !rf.any_byte
        && matches!(
            rf.failure.kind,
            ErrorKind::ClosedBeforeResponse | ErrorKind::Reset
        );
    let f = Fail {
        retry: stale,
        ..Fail::new(rf.failure)
    };
    (f, stale_or_error(stale))
}

fn stale_or_error(stale: bool) -> CloseReason {
    if stale {
        CloseReason::ServerIdleClose
    } else {
        CloseReason::Error
    }
}

/// Over plain TCP the kernel's view at the close says whether the server's FIN is
/// already here with nothing unread before it (the FIN counts one in the bytes
/// received): then the server has closed first and the read of its EOF (a system call
/// per connection) is not needed.
pub(super) fn fin_here(view: Option<TcpView>, read_total: u64) -> bool {
    view.is_some_and(|v| v.peer_closed && v.bytes_received == read_total + 1)
}

/// A connection ends: its close reason and requests told, and the kernel's view of it
/// read while its socket is still open (told, and returned).
fn closed(notes: &Notes, conn: &Conn, reason: CloseReason) -> Option<TcpView> {
    notes.conn(ConnEvent::Closed {
        reason,
        requests: conn.requests,
    });
    let view = conn.stream.tcp_view();
    if let Some(v) = view {
        notes.conn(ConnEvent::TcpClosed(v));
    }
    view
}
