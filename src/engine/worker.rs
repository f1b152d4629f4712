//! One worker: a closed-loop (or paced) sequence of attempts over the connections it
//! owns, one per origin. Times every phase, decides reuse and close reasons, and
//! retries a request once when a reused connection turns out to be stale.

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::time::Sleep;
use tokio_rustls::TlsConnector;

use super::conn::{Conn, ReadLimits, Response};
use crate::http1::Framing;
use crate::net::dns::{self, DnsCache, Resolution, Resolver};
use crate::net::{self, classify_connect_error, classify_io_failure, classify_tls_error, Stream};
use crate::plan::{LoadShape, Scenario, Target};
use crate::record::{
    CloseReason, ErrorDetail, ErrorKind, Failure, HandshakeKind, Outcome, Phases, RequestRecord,
    Stage,
};
use crate::stats::Recorder;
use crate::timer::within;

/// Open loop: a send that starts this much later than intended counts as late.
const LATE_AFTER: Duration = Duration::from_millis(2);
/// How long to wait for the server's FIN after a response that ends the connection.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

pub struct Worker {
    sc: Arc<Scenario>,
    st: State,
}

/// The mutable part of a worker, split from the scenario so the scenario can be
/// borrowed while the state is mutated.
struct State {
    id: usize,
    conns: Vec<Option<Conn>>,
    rec: Rc<RefCell<Recorder>>,
    last_end: Rc<RefCell<Instant>>,
    sleep: Pin<Box<Sleep>>,
    /// The current attempt's deadline (its timeout, or the run's end if sooner).
    deadline: Instant,
    /// A read buffer kept from a closed connection for the next one.
    spare_buf: Option<Vec<u8>>,
    start: Instant,
    run_deadline: Option<Instant>,
    counters: Option<Arc<Vec<AtomicU64>>>,
    thread: usize,
    /// Which `--local-addr` the next connection starts with (they are used in turn).
    next_local: usize,
    /// Response bytes (all, body) read before the last connection was dropped on an
    /// error: a failed attempt still reports what arrived.
    dropped_got: (u64, u64),
    dns: Rc<Dns>,
}

/// Name resolution for a thread's workers: the thread's resolver and the run's cache
/// (None with `--dns-cache off`).
pub struct Dns {
    pub resolver: Resolver,
    pub cache: Option<Arc<DnsCache>>,
}

/// How a single try on one connection failed.
struct Fail {
    failure: Failure,
    /// The connection was reused and no response byte came: it may have been closed
    /// by the server while idle (the stale keep-alive race).
    stale: bool,
    /// Cut by the run's deadline, not by the request's own timeout.
    at_deadline: bool,
}

impl Worker {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        sc: Arc<Scenario>,
        id: usize,
        rec: Rc<RefCell<Recorder>>,
        last_end: Rc<RefCell<Instant>>,
        start: Instant,
        run_deadline: Option<Instant>,
        counters: Option<Arc<Vec<AtomicU64>>>,
        thread: usize,
        dns: Rc<Dns>,
    ) -> Worker {
        let conns = (0..sc.origins.len()).map(|_| None).collect();
        let st = State {
            id,
            conns,
            rec,
            last_end,
            sleep: Box::pin(tokio::time::sleep_until(start.into())),
            deadline: start,
            spare_buf: None,
            start,
            run_deadline,
            counters,
            thread,
            next_local: id,
            dropped_got: (0, 0),
            dns,
        };
        Worker { sc, st }
    }

    pub async fn run(self) {
        let Worker { sc, mut st } = self;
        let sc: &Scenario = &sc;
        let quota = sc.worker_quota(st.id);
        let c = sc.concurrency as u64;
        let mut k: u64 = 0;
        loop {
            if quota.is_some_and(|q| k >= q) {
                break;
            }
            let now = Instant::now();
            if st.run_deadline.is_some_and(|d| now >= d) {
                break;
            }
            let ticket = st.id as u64 + k * c;
            k += 1;
            let (t0, blocked) = match sc.load {
                LoadShape::Closed => (now, None),
                LoadShape::Open { rate } => {
                    let intended = st.start + Duration::from_secs_f64(ticket as f64 / rate);
                    if st.run_deadline.is_some_and(|d| intended >= d) {
                        break;
                    }
                    if intended > now {
                        tokio::time::sleep_until(intended.into()).await;
                    }
                    let late = Instant::now().saturating_duration_since(intended);
                    (intended, Some(late))
                }
            };
            let target = &sc.targets[(ticket % sc.targets.len() as u64) as usize];
            match st.request(sc, target, t0, blocked).await {
                Some(r) => {
                    st.rec.borrow_mut().record(&r);
                    let end = match (r.outcome, r.phases.total) {
                        (Outcome::Ok { .. }, Some(total)) => t0 + Duration::from_nanos(total),
                        _ => Instant::now(),
                    };
                    let mut last = st.last_end.borrow_mut();
                    *last = (*last).max(end);
                }
                None => {
                    st.rec.borrow_mut().aborted();
                    break;
                }
            }
            if let Some(c) = &st.counters {
                c[st.thread].fetch_add(1, Ordering::Relaxed);
            }
        }
        // Connections still open at the end of the run.
        let mut rec = st.rec.borrow_mut();
        for conn in st.conns.iter_mut().filter_map(Option::take) {
            rec.connection_closed(CloseReason::EndOfRun, conn.requests);
        }
    }
}

fn ns(from: Instant, to: Instant) -> u64 {
    to.saturating_duration_since(from).as_nanos() as u64
}

impl State {
    /// One request, with at most one retry on a new connection after a stale reused one.
    /// `None` when the run's deadline cut it.
    async fn request(
        &mut self,
        sc: &Scenario,
        target: &Target,
        t0: Instant,
        blocked: Option<Duration>,
    ) -> Option<RequestRecord> {
        let began = if blocked.is_some() {
            Instant::now()
        } else {
            t0
        };
        let mut deadline = began + sc.timeout;
        if let Some(d) = self.run_deadline {
            deadline = deadline.min(d);
        }
        self.deadline = deadline;
        let mut stale_retry = false;
        loop {
            let mut phases = Phases {
                blocked: blocked.map(|b| b.as_nanos() as u64),
                ..Phases::default()
            };
            let reused = self.conns[target.origin].is_some();
            self.dropped_got = (0, 0);
            match self.try_once(sc, target, &mut phases).await {
                Ok(resp) => {
                    phases.total = Some(ns(t0, resp.end));
                    return Some(RequestRecord {
                        reused,
                        phases,
                        outcome: Outcome::Ok {
                            status: resp.head.status,
                        },
                        bytes_received: resp.bytes,
                        body_bytes: resp.body_bytes,
                        stale_retry,
                        late: blocked.is_some_and(|b| b >= LATE_AFTER),
                    });
                }
                Err(f) if f.at_deadline => return None,
                Err(f) => {
                    if f.stale && !stale_retry && target.template.is_idempotent() {
                        stale_retry = true;
                        continue;
                    }
                    return Some(RequestRecord {
                        reused,
                        phases,
                        outcome: Outcome::Error(f.failure),
                        bytes_received: self.dropped_got.0,
                        body_bytes: self.dropped_got.1,
                        stale_retry,
                        late: blocked.is_some_and(|b| b >= LATE_AFTER),
                    });
                }
            }
        }
    }

    fn timed_out(&self, stage: Stage) -> Fail {
        let at_deadline = self.run_deadline.is_some_and(|d| Instant::now() >= d);
        Fail {
            failure: ErrorKind::timeout_at(stage).into(),
            stale: false,
            at_deadline,
        }
    }

    /// Open a new connection to `target`'s origin: dns, connect, tls, each timed.
    async fn open(
        &mut self,
        sc: &Scenario,
        target: &Target,
        phases: &mut Phases,
    ) -> Result<Conn, Fail> {
        let origin = &sc.origins[target.origin];
        // Opening is bounded by the attempt's deadline and by --connect-timeout.
        let by = match sc.limits.connect {
            Some(c) => self.deadline.min(Instant::now() + c),
            None => self.deadline,
        };
        let resolved;
        let addrs: &[std::net::SocketAddr] = match &origin.fixed_addrs {
            Some(a) => a,
            None => {
                let t = Instant::now();
                let dns = self.dns.clone();
                let lookup = async {
                    match &dns.cache {
                        Some(cache) => cache.resolve(&origin.host, &dns.resolver).await,
                        None => (
                            dns.resolver.lookup(&origin.host).await.map(|a| a.addrs),
                            Resolution::Lookup,
                        ),
                    }
                };
                let Some((answer, how)) = within(self.sleep.as_mut(), by, lookup).await else {
                    return Err(self.timed_out(Stage::Dns));
                };
                self.rec.borrow_mut().dns(how);
                if how != Resolution::CacheHit {
                    phases.dns = Some(ns(t, Instant::now()));
                }
                match answer {
                    Ok(ips) => resolved = dns::with_port(&ips, origin.port),
                    Err(failure) => {
                        return Err(Fail {
                            failure,
                            stale: false,
                            at_deadline: false,
                        })
                    }
                }
                &resolved
            }
        };
        let t = Instant::now();
        self.next_local = self.next_local.wrapping_add(1);
        let tcp = match within(
            self.sleep.as_mut(),
            by,
            net::dial::connect(addrs, &origin.local_addrs, self.next_local),
        )
        .await
        {
            None => return Err(self.timed_out(Stage::Connect)),
            Some(Err(e)) => {
                return Err(Fail {
                    failure: classify_connect_error(&e),
                    stale: false,
                    at_deadline: false,
                })
            }
            Some(Ok(s)) => s,
        };
        let t_connected = Instant::now();
        phases.connect = Some(ns(t, t_connected));
        self.rec.borrow_mut().connection_opened();
        let stream = match (&sc.tls, origin.tls) {
            (Some(cfg), true) => {
                let connector = TlsConnector::from(cfg.clone());
                let res = within(
                    self.sleep.as_mut(),
                    by,
                    connector.connect(origin.server_name.clone(), tcp),
                )
                .await;
                let tls = match res {
                    None => {
                        let f = self.timed_out(Stage::Tls);
                        let reason = if f.at_deadline {
                            CloseReason::EndOfRun
                        } else {
                            CloseReason::Error
                        };
                        self.rec.borrow_mut().connection_closed(reason, 0);
                        return Err(f);
                    }
                    Some(Err(e)) => {
                        self.rec
                            .borrow_mut()
                            .connection_closed(CloseReason::Error, 0);
                        return Err(Fail {
                            failure: classify_tls_error(&e),
                            stale: false,
                            at_deadline: false,
                        });
                    }
                    Some(Ok(s)) => s,
                };
                phases.tls = Some(ns(t_connected, Instant::now()));
                let kind = match tls.get_ref().1.handshake_kind() {
                    Some(rustls::HandshakeKind::Resumed) => HandshakeKind::Resumed,
                    _ => HandshakeKind::Full,
                };
                let tls13 =
                    tls.get_ref().1.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3);
                self.rec.borrow_mut().tls_handshake(kind, tls13);
                Stream::Tls(Box::new(tls))
            }
            _ => Stream::Tcp(tcp),
        };
        Ok(Conn::new(stream, self.spare_buf.take()))
    }

    /// One try of the request on the worker's connection to the target's origin
    /// (opening one if there is none).
    async fn try_once(
        &mut self,
        sc: &Scenario,
        target: &Target,
        phases: &mut Phases,
    ) -> Result<Response, Fail> {
        let slot = target.origin;
        let reused = self.conns[slot].is_some();
        if !reused {
            let conn = self.open(sc, target, phases).await?;
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
        let sent = within(self.sleep.as_mut(), self.deadline, conn.send(bytes)).await;
        let fail = match sent {
            None => Some((self.timed_out(Stage::Send), CloseReason::Error)),
            Some(Err(e)) => {
                let stale = reused;
                let reason = if stale {
                    CloseReason::ServerIdleClose
                } else {
                    CloseReason::Error
                };
                Some((
                    Fail {
                        failure: classify_io_failure(&e, ErrorDetail::ResetInSend),
                        stale,
                        at_deadline: false,
                    },
                    reason,
                ))
            }
            Some(Ok(())) => None,
        };
        if let Some((f, reason)) = fail {
            self.drop_conn(slot, reason, &f);
            return Err(f);
        }
        let t_sent = Instant::now();
        phases.send = Some(ns(t_send, t_sent));

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
            ),
        )
        .await;
        let resp = match read {
            None => {
                let receiving = self.conns[slot].as_ref().is_some_and(|c| c.receiving);
                let f = self.timed_out(if receiving {
                    Stage::Receive
                } else {
                    Stage::Wait
                });
                self.drop_conn(slot, CloseReason::Error, &f);
                return Err(f);
            }
            Some(Err(rf)) => {
                let stale = reused
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
                    failure: rf.failure,
                    stale,
                    at_deadline: false,
                };
                self.drop_conn(slot, reason, &f);
                return Err(f);
            }
            Some(Ok(r)) => r,
        };
        phases.wait = Some(ns(t_sent, resp.first_byte));
        phases.receive = Some(ns(resp.first_byte, resp.end));

        let mut conn = self.conns[slot].take().expect("connection present");
        conn.requests += 1;
        let head = &resp.head;
        let server_ends = !head.persistent || head.framing == Framing::UntilClose;
        let keep = sc.strategy.persistent() && !server_ends && !resp.leftover && !last;
        if keep {
            self.conns[slot] = Some(conn);
            return Ok(resp);
        }
        let reason = if resp.leftover {
            CloseReason::Error
        } else if !sc.strategy.persistent() || last {
            CloseReason::ClientPolicy
        } else if head.minor_version == 0 && !head.connection_keep_alive {
            CloseReason::ServerHttp10
        } else if head.connection_close && conn.requests > 1 {
            CloseReason::ServerMaxRequests
        } else {
            CloseReason::ServerCloseHeader
        };
        if server_ends {
            // Let the server close first so TIME_WAIT stays on its side.
            if !resp.eof {
                let grace = self.deadline.min(Instant::now() + CLOSE_GRACE);
                let _ = within(self.sleep.as_mut(), grace, conn.await_server_close()).await;
            }
        } else if reason == CloseReason::ClientPolicy {
            // The client asked to close but the server kept the connection open.
            self.rec.borrow_mut().server_ignored_close += 1;
        }
        self.rec
            .borrow_mut()
            .connection_closed(reason, conn.requests);
        self.spare_buf = Some(conn.into_buf());
        Ok(resp)
    }

    fn drop_conn(&mut self, slot: usize, reason: CloseReason, f: &Fail) {
        if let Some(conn) = self.conns[slot].take() {
            self.dropped_got = (conn.got_bytes, conn.got_body_bytes);
            let reason = if f.at_deadline {
                CloseReason::EndOfRun
            } else {
                reason
            };
            self.rec
                .borrow_mut()
                .connection_closed(reason, conn.requests);
            self.spare_buf = Some(conn.into_buf());
        }
    }
}
