//! Opening a connection for any protocol over TCP (or a Unix socket): dns, connect and tls, each timed into
//! the attempt's phases, and what happened told to the thread's collector.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use rustls::ClientConfig;
use tokio::time::Sleep;
use tokio_rustls::TlsConnector;

use super::collect::Notes;
use super::worker::{ns, Dns, Fail};
use crate::net::dns::{self, DnsSettings, Resolution};
use crate::net::tap::Tapped;
use crate::net::{self, classify_connect_error, classify_tls_error, Origin, Stream, Transport};
use crate::record::{CloseReason, HandshakeKind, Phase, Phases, TlsHandshake, Wire};
use crate::stats::event::ConnEvent;
use crate::timer::within;

/// The smallest initial congestion window a TCP sender may use, in bytes: RFC 3390's
/// min(4 MSS, max(2 MSS, 4380)) at the smallest MSS (536); Linux starts at 10 MSS.
const SMALLEST_INITIAL_WINDOW: u64 = 2144;

/// Where an opening is counted: the engine's collector, or nowhere (a probe's opening,
/// which has its own report).
pub(crate) trait Tally {
    /// Whether what is told is counted (the kernel's view after a slow connect is read
    /// only then).
    const COUNTED: bool = false;
    fn note(&self, _e: ConnEvent) {}
}

impl Tally for Notes {
    const COUNTED: bool = true;

    fn note(&self, e: ConnEvent) {
        self.conn(e);
    }
}

/// A connect shorter than this cannot have sent its SYN again (the kernel's first
/// retransmission timeout is 1 s); 100 ms leaves room for a lowered one.
pub(super) const SYN_CHECK_NS: u64 = 100_000_000;

/// The events of a connection just opened to the origin of index `origin`, in order:
/// that it opened; from which `--local-addr` (`source`, when given); and over TCP
/// (`tcp`: the socket and the connect's time), the connect, with the kernel's view of
/// the socket when the connect was slow enough to have sent its SYN again (a quicker
/// one is not read: a system call saved per connection). Both ways of running HTTP/1
/// (a task per worker, the readiness loop) hand these.
pub(super) fn opened_events(
    origin: u32,
    source: Option<usize>,
    tcp: Option<(&impl std::os::fd::AsFd, u64)>,
    mut note: impl FnMut(ConnEvent),
) {
    note(ConnEvent::Opened { origin });
    if let Some(index) = source {
        note(ConnEvent::Source {
            index: index as u32,
        });
    }
    if let Some((sock, connect_ns)) = tcp {
        let view = (connect_ns >= SYN_CHECK_NS)
            .then(|| net::kernel::tcp_view(sock))
            .flatten();
        note(ConnEvent::TcpConnected { view, connect_ns });
    }
}

/// Counted nowhere.
pub(crate) struct Untallied;

impl Tally for Untallied {}

/// What a driver needs to open connections.
pub(crate) struct Opener<T: Tally = Notes> {
    pub dns: Arc<Dns>,
    pub tally: T,
    pub run_deadline: Option<Instant>,
    /// Which `--local-addr` the next connection starts with (they are used in turn).
    pub next_local: usize,
    /// `--connect-rate`: the thread's turns to connect.
    pub turns: Option<Arc<ConnectTurns>>,
    /// The run's gates: a connect that succeeds opens its origin's.
    pub gates: Option<Arc<super::gate::Gates>>,
}

/// `--connect-rate`: a thread's turns to open a TCP connection, `interval` apart (the
/// run's rate over its threads). A turn is taken when asked for, so connections asking
/// at once get turns one after another.
pub(crate) struct ConnectTurns {
    interval: std::time::Duration,
    next: std::sync::Mutex<Instant>,
}

impl ConnectTurns {
    /// Turns at `rate` a second from `start`.
    pub(crate) fn new(rate: f64, start: Instant) -> ConnectTurns {
        ConnectTurns {
            interval: std::time::Duration::from_secs_f64(1.0 / rate),
            next: std::sync::Mutex::new(start),
        }
    }

    /// Take the next turn: when it is (now, or an interval after the last one taken).
    pub(crate) fn take(&self, now: Instant) -> Instant {
        let mut next = self
            .next
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = (*next).max(now);
        *next = at + self.interval;
        at
    }
}

/// A stream just opened, and what its TLS handshake agreed on.
pub(crate) struct Opened {
    pub stream: Stream,
    /// The ALPN protocol the server chose (TLS only).
    pub alpn: Option<Vec<u8>>,
    /// TLS 1.3 early data: the handshake has only begun (nothing is sent yet); what is
    /// written now goes with the ClientHello, and the first flush completes it. The
    /// `tls` phase and the handshake's kind are then the driver's to record.
    pub early: bool,
    /// When TCP was established.
    pub connected_at: Instant,
    /// What the TLS handshake put on the wire (a finished handshake over TLS only).
    pub wire: Option<Wire>,
}

impl Opener<Untallied> {
    /// An opener for one probe connection to `origin` (`trace`, `doctor`, the audit's
    /// proxy): a resolver of its own when the origin's name is to be looked up, reading
    /// the system's configuration as a new process would, without a cache (what a
    /// lookup costs is the point), no run deadline, counted nowhere.
    pub(crate) fn single(dns: &DnsSettings, origin: &Origin) -> Opener<Untallied> {
        let resolver = if origin.fixed_addrs.is_some() {
            dns::Resolver::none()
        } else {
            dns::Resolver::new(dns)
        };
        Opener {
            dns: Arc::new(Dns {
                resolver,
                cache: None,
            }),
            tally: Untallied,
            run_deadline: None,
            next_local: 0,
            turns: None,
            gates: None,
        }
    }
}

impl<T: Tally> Opener<T> {
    /// The origin's addresses: fixed (`--resolve`, an IP) or looked up by `by`, the
    /// lookup timed into `dns` (a cache hit costs nothing and is not a phase).
    pub(crate) async fn resolve<'o>(
        &mut self,
        origin: &'o Origin,
        by: Instant,
        mut sleep: Pin<&mut Sleep>,
        phases: &mut Phases,
    ) -> Result<Cow<'o, [SocketAddr]>, Fail> {
        if let Some(a) = &origin.fixed_addrs {
            return Ok(Cow::Borrowed(a));
        }
        let t = Instant::now();
        let dns = self.dns.clone();
        let lookup = async { dns.lookup(&origin.dial_host).await };
        // Boxed, as the other steps only some connections take (a proxy, TLS): opening
        // a plain connection to a fixed address carries none of their state.
        let Some((answer, how)) = within(sleep.as_mut(), by, Box::pin(lookup)).await else {
            return Err(Fail::timed_out(Phase::Dns, self.run_deadline));
        };
        self.tally.note(ConnEvent::Dns(how));
        if how != Resolution::CacheHit {
            phases[Phase::Dns] = Some(ns(t, Instant::now()));
        }
        match answer {
            Ok(ips) => Ok(Cow::Owned(dns::with_port(&ips, origin.dial_port))),
            Err(failure) => Err(Fail::new(failure)),
        }
    }

    /// Open a new connection to `origin`: dns, connect, tls, each timed, all by
    /// `deadline` (and `connect_limit` for the three together). Boxed: opening is a large
    /// state machine a connection needs once; inline, every task that may open one (each
    /// HTTP/1 and HTTP/2 worker) would carry it all along.
    pub(crate) fn open<'a>(
        &'a mut self,
        origin: &'a Origin,
        tls: Option<&'a Arc<ClientConfig>>,
        deadline: Instant,
        connect_limit: Option<std::time::Duration>,
        sleep: Pin<&'a mut Sleep>,
        phases: &'a mut Phases,
    ) -> Pin<Box<impl std::future::Future<Output = Result<Opened, Fail>> + 'a>> {
        Box::pin(async move {
            self.open_here(origin, tls, deadline, connect_limit, sleep, phases)
                .await
                .map_err(|f| f.at(origin.hop.as_ref()))
        })
    }

    async fn open_here(
        &mut self,
        origin: &Origin,
        tls: Option<&Arc<ClientConfig>>,
        deadline: Instant,
        connect_limit: Option<std::time::Duration>,
        mut sleep: Pin<&mut Sleep>,
        phases: &mut Phases,
    ) -> Result<Opened, Fail> {
        let by = connect_deadline(deadline, connect_limit);
        self.wait_turn(by, sleep.as_mut(), phases).await?;
        let addrs = self.resolve(origin, by, sleep.as_mut(), phases).await?;
        let addrs: &[SocketAddr] = &addrs;
        let t = Instant::now();
        self.next_local = self.next_local.wrapping_add(1);
        let connecting = connect(origin, addrs, self.next_local);
        let (transport, source) = match within(sleep.as_mut(), by, connecting).await {
            None => return Err(Fail::timed_out(Phase::Connect, self.run_deadline)),
            Some(Err(e)) => return Err(Fail::new(classify_connect_error(&e))),
            Some(Ok(s)) => s,
        };
        let t_connected = Instant::now();
        if origin.proxy.is_some() {
            phases[Phase::ProxyConnect] = Some(ns(t, t_connected));
        } else {
            phases[Phase::Connect] = Some(ns(t, t_connected));
        }
        let connect_ns = ns(t, t_connected);
        let tcp = transport.tcp().filter(|_| T::COUNTED);
        let tally = &mut self.tally;
        opened_events(origin.index, source, tcp.map(|s| (s, connect_ns)), |e| {
            tally.note(e);
        });
        let (transport, t_ready) = match &origin.proxy {
            None => (transport, t_connected),
            Some(p) => {
                Box::pin(self.through_proxy(p, origin, transport, (t, by), sleep.as_mut(), phases))
                    .await
                    .map_err(|f| self.closed_unopened(f))?
            }
        };
        self.reached(origin, (t, t_connected));
        let (Some(cfg), true) = (tls, origin.tls) else {
            return Ok(Opened {
                stream: Stream::Plain(transport),
                alpn: None,
                early: false,
                connected_at: t_connected,
                wire: None,
            });
        };
        let connector = TlsConnector::from(cfg.clone()).early_data(cfg.enable_early_data);
        let res = within(
            sleep.as_mut(),
            by,
            Box::pin(connector.connect(origin.server_name.clone(), Tapped::new(transport))),
        )
        .await;
        let mut tls = match res {
            None => {
                let f = Fail::timed_out(Phase::Tls, self.run_deadline);
                return Err(self.closed_unopened(f));
            }
            Some(Err(e)) => return Err(self.closed_unopened(Fail::new(classify_tls_error(&e)))),
            Some(Ok(s)) => s,
        };
        if tls.get_ref().1.is_handshaking() {
            // Early data: the handshake completes with the request's flush.
            return Ok(Opened {
                stream: Stream::Tls(Box::new(tls)),
                alpn: None,
                early: true,
                connected_at: t_connected,
                wire: None,
            });
        }
        phases[Phase::Tls] = Some(ns(t_ready, Instant::now()));
        let wire = tls.get_mut().0.take_wire();
        let session = tls.get_ref().1;
        let alpn = session.alpn_protocol().map(<[u8]>::to_vec);
        // A flight that fits the smallest initial window a sender may use never waits
        // for an acknowledgement: its spread is the server's own time (a busy CPU), not
        // a round trip.
        if let Some(w) = wire.filter(|w| w.server_flight_bytes > SMALLEST_INITIAL_WINDOW) {
            self.tally.note(ConnEvent::TlsFlight {
                spread_ns: w.server_flight_spread_ns,
                connect_ns,
            });
        }
        self.tally.note(ConnEvent::Tls(handshake_of(session, wire)));
        Ok(Opened {
            stream: Stream::Tls(Box::new(tls)),
            alpn,
            early: false,
            connected_at: t_connected,
            wire,
        })
    }
}

impl<T: Tally> Opener<T> {
    /// `--connect-rate`: wait for the thread's next turn to connect (by `by`); the wait
    /// is the request's, blocked.
    async fn wait_turn(
        &self,
        by: Instant,
        sleep: Pin<&mut Sleep>,
        phases: &mut Phases,
    ) -> Result<(), Fail> {
        let Some(turns) = &self.turns else {
            return Ok(());
        };
        let asked = Instant::now();
        let at = turns.take(asked);
        if at > asked {
            let turn = tokio::time::sleep_until(at.into());
            if within(sleep, by, turn).await.is_none() {
                return Err(Fail::timed_out(Phase::Connect, self.run_deadline));
            }
            super::worker::add_blocked(phases, asked);
        }
        Ok(())
    }

    /// The hop answered a connect begun at `began` at `at` (through the proxy, when there
    /// is one): its gate opens.
    fn reached(&self, origin: &Origin, (began, at): (Instant, Instant)) {
        if let Some(g) = self
            .gates
            .as_ref()
            .and_then(|g| g.of(origin.index as usize))
        {
            g.reached((began, at));
        }
    }

    /// A connection that failed before it carried a request (TLS, the proxy's tunnel):
    /// counted closed, by the run's end when its deadline cut it, else by the error.
    fn closed_unopened(&self, f: Fail) -> Fail {
        let reason = if f.at_deadline {
            CloseReason::EndOfRun
        } else {
            CloseReason::Error
        };
        self.tally.note(ConnEvent::Closed {
            reason,
            requests: 0,
        });
        f
    }

    /// The proxy's part of opening a connection through it: TLS to an https:// proxy
    /// (timed into `proxy_connect` with its TCP connect from `t`), then, to an https://
    /// origin, the `CONNECT` round trip (`tunnel`). The stream to speak to the origin
    /// over, and when it was ready.
    async fn through_proxy(
        &mut self,
        p: &net::proxy::Proxy,
        origin: &Origin,
        transport: Transport,
        (t, by): (Instant, Instant),
        mut sleep: Pin<&mut Sleep>,
        phases: &mut Phases,
    ) -> Result<(Transport, Instant), Fail> {
        let mut transport = match (&p.tls_config, transport) {
            (Some(cfg), Transport::Tcp(tcp)) => {
                let connector = TlsConnector::from(cfg.clone());
                let hs = within(
                    sleep.as_mut(),
                    by,
                    connector.connect(p.server_name.clone(), tcp),
                )
                .await;
                let tls = match hs {
                    None => return Err(Fail::timed_out(Phase::Connect, self.run_deadline)),
                    Some(Err(e)) => {
                        let f = classify_tls_error(&e)
                            .said(format_args!("TLS to the proxy {}: {e}", p.display()));
                        return Err(Fail::new(f));
                    }
                    Some(Ok(s)) => s,
                };
                phases[Phase::ProxyConnect] = Some(ns(t, Instant::now()));
                Transport::ProxyTls(Box::new(tls))
            }
            (_, other) => other,
        };
        let at = Instant::now();
        if !origin.tunneled() {
            return Ok((transport, at));
        }
        let authority = origin.authority();
        let asked = crate::proto::h1::tunnel::connect_tunnel(
            &mut transport,
            &authority,
            p.authorization.as_ref(),
        );
        match within(sleep.as_mut(), by, asked).await {
            None => return Err(Fail::timed_out(Phase::Tunnel, self.run_deadline)),
            Some(Err(refusal)) => {
                return Err(Fail::new(refusal.failure.said(refusal.message)));
            }
            Some(Ok(())) => {}
        }
        let ready = Instant::now();
        phases[Phase::Tunnel] = Some(ns(at, ready));
        self.tally.note(ConnEvent::Tunnel);
        Ok((transport, ready))
    }
}

/// Connect to `origin` (its Unix socket, or the first of `addrs` that accepts, from the
/// `turn`-th of its source addresses): the transport, and the index of the source
/// address it went from.
async fn connect(
    origin: &Origin,
    addrs: &[SocketAddr],
    turn: usize,
) -> std::io::Result<(Transport, Option<usize>)> {
    Ok(match &origin.unix {
        Some(path) => (
            Transport::Unix(tokio::net::UnixStream::connect(path).await?),
            None,
        ),
        None => {
            let (tcp, source) = net::dial::connect(addrs, &origin.local_addrs, turn).await?;
            (Transport::Tcp(tcp), source)
        }
    })
}

/// A finished handshake: full or resumed, whether it was TLS 1.3, its group, and what it
/// put on the wire.
pub(crate) fn handshake_of(session: &rustls::ClientConnection, wire: Option<Wire>) -> TlsHandshake {
    let kind = match session.handshake_kind() {
        Some(rustls::HandshakeKind::Resumed) => HandshakeKind::Resumed,
        _ => HandshakeKind::Full,
    };
    TlsHandshake {
        kind,
        tls13: session.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3),
        group: session
            .negotiated_key_exchange_group()
            .map(|g| u16::from(g.name())),
        wire,
    }
}

/// Opening a connection is bounded by the attempt's deadline and by `--connect-timeout`
/// from now.
pub(super) fn connect_deadline(
    deadline: Instant,
    connect_limit: Option<std::time::Duration>,
) -> Instant {
    match connect_limit {
        Some(c) => deadline.min(Instant::now() + c),
        None => deadline,
    }
}
