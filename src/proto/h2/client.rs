//! The HTTP/2 client connection, written once for the engine's driver and the probes
//! of `trace` and `doctor`, so that they open the same connection and read a stream
//! the same way: the builder (`client`), ALPN's answer (`alpn_refused`), the preface
//! with the server's frames watched (`handshake`), the wait for the server's SETTINGS
//! and why they did not come (`await_settings`, `no_settings`), and one stream's
//! exchange under its deadline and read limits (`exchange`). Classifying a failure is
//! the caller's (`super::classify`, with what its connection knows).

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::{Connection, SendRequest};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;
use tokio::time::Sleep;

use super::wire::{Seen, ServerSettings, Watched};
use crate::proto::pace::{MinSpeed, Pace, ReadLimits};
use crate::record::notes::{PendingExample, Taken};
use crate::record::{ns, ErrorKind, Failure, Phase, Phases};
use crate::timer::within;

/// Flow-control windows the client offers: large, so that a response is never held up
/// by the client's window across a long round trip (h2load offers 1 GiB).
const STREAM_WINDOW: u32 = 16 << 20;
const CONNECTION_WINDOW: u32 = 64 << 20;

/// The HTTP/2 client every connection is opened with (the engine's, and the probes' of
/// `trace` and `doctor`), so that they open the same connection: no server push, and
/// the large flow-control windows above.
pub fn client() -> h2::client::Builder {
    let mut b = h2::client::Builder::new();
    b.enable_push(false)
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW);
    b
}

/// Over TLS, HTTP/2 is spoken only when the server chose `h2` by ALPN: whether it did
/// not (`alpn`: the protocol it chose, if any).
pub(crate) fn alpn_refused(tls: bool, alpn: Option<&[u8]>) -> bool {
    tls && alpn != Some(b"h2".as_slice())
}

/// The client's preface sent: the connection to drive, and what its incoming frames
/// show (`seen`, and `settings_came` notified when the server's first SETTINGS has
/// come).
pub(crate) struct Handshaken<T> {
    pub send: SendRequest<Bytes>,
    pub connection: Connection<Watched<T>, Bytes>,
    pub seen: Rc<RefCell<Seen>>,
    pub settings_came: Rc<Notify>,
    /// When the preface started.
    pub started: Instant,
}

/// Start HTTP/2 on `io` with [`client`]: the preface and the client's SETTINGS.
pub(crate) async fn handshake<T>(io: T) -> Result<Handshaken<T>, h2::Error>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let watched = Watched::new(io);
    let seen = watched.seen.clone();
    let settings_came = watched.settings_came.clone();
    let started = Instant::now();
    let (send, connection) = client().handshake::<_, Bytes>(watched).await?;
    Ok(Handshaken {
        send,
        connection,
        seen,
        settings_came,
        started,
    })
}

/// How the wait for the server's SETTINGS ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum SettingsWait {
    /// They came, at this instant.
    Came(Instant, ServerSettings),
    /// The connection ended first ([`no_settings`] says what the server sent instead).
    Ended,
    /// Not by the deadline.
    TimedOut,
}

/// Wait until the server's SETTINGS come, the connection ends (`ended`, asked again
/// each time `settings_came` is notified: the task driving the connection notifies it
/// when the connection ends), or `deadline` passes.
pub(crate) async fn await_settings(
    seen: &RefCell<Seen>,
    settings_came: &Notify,
    ended: impl Fn() -> bool,
    mut sleep: Pin<&mut Sleep>,
    deadline: Instant,
) -> SettingsWait {
    loop {
        {
            let s = seen.borrow();
            if let Some(at) = s.settings_at {
                return SettingsWait::Came(at, s.settings);
            }
        }
        if ended() {
            return SettingsWait::Ended;
        }
        if within(sleep.as_mut(), deadline, settings_came.notified())
            .await
            .is_none()
        {
            return SettingsWait::TimedOut;
        }
    }
}

/// What the server sent instead of its SETTINGS, on a connection that ended without
/// them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoSettings {
    /// An HTTP/1 response to the preface: its status line.
    Http1(String),
    /// Bytes that were not HTTP/2.
    NotHttp2,
    /// Nothing at all.
    Nothing,
}

impl NoSettings {
    /// The sentence a report gives for it.
    pub(crate) fn says(&self) -> String {
        match self {
            NoSettings::Http1(line) => format!(
                "the server answered the HTTP/2 preface with `{line}`: it speaks HTTP/1 only on this port"
            ),
            NoSettings::NotHttp2 => {
                "the server answered the HTTP/2 preface with bytes that are not HTTP/2".into()
            }
            NoSettings::Nothing => {
                "the connection ended before the server's SETTINGS: it does not speak HTTP/2 here"
                    .into()
            }
        }
    }
}

/// What came instead of the server's SETTINGS.
pub(crate) fn no_settings(seen: &Seen) -> NoSettings {
    match &seen.http1_status_line {
        Some(line) => NoSettings::Http1(line.clone()),
        None if seen.bytes > 0 => NoSettings::NotHttp2,
        None => NoSettings::Nothing,
    }
}

/// One stream's request, and the limits on its exchange.
pub(crate) struct StreamRequest<'a> {
    pub head: &'a http::Request<()>,
    pub body: Option<&'a [u8]>,
    /// Everything by then: a stream slot, the response head, the body's end.
    pub deadline: Instant,
    /// `--wait-timeout`: the response head within this of the request sent.
    pub wait: Option<Duration>,
    /// `--min-speed`, on the body.
    pub min_speed: Option<MinSpeed>,
    /// The statuses whose example the worker has: another's is taken ([`Answered::said`]).
    pub taken: Taken,
}

/// A response read to its end.
#[derive(Debug, Clone)]
pub(crate) struct Answered {
    pub stream_id: u32,
    pub status: u16,
    pub retry_after_s: Option<u32>,
    /// A redirect's `Location` (301, 302, 303, 307, 308), for `-L`.
    pub location: Option<Box<str>>,
    /// What a 3xx to 5xx response said, where the worker wanted its example.
    pub said: Option<Box<str>>,
    pub body_bytes: u64,
    pub end: Instant,
}

/// Where a stream's exchange stopped, and why.
#[derive(Debug)]
pub(crate) enum Stopped {
    /// The request's deadline passed at this phase.
    Deadline(Phase),
    /// A read limit failed it: no head within `wait`, or a body below the minimum speed.
    Limit(Failure),
    /// h2 failed the stream: its error, the stream's id once it was opened, and whether
    /// the response head had come.
    Stream(h2::Error, Option<u32>, bool),
}

/// Send `req` on a new stream of `send` and read the response to its end: a stream
/// slot and the send from `t_send` (`phases[Phase::Send]`, set once sent), the head (`wait`)
/// and the body (`receive`), set at the end. `got_body` counts the body's bytes as they
/// come.
pub(crate) async fn exchange(
    send: SendRequest<Bytes>,
    req: StreamRequest<'_>,
    mut sleep: Pin<&mut Sleep>,
    t_send: Instant,
    phases: &mut Phases,
    got_body: &mut u64,
) -> Result<Answered, Stopped> {
    let mut send = match within(sleep.as_mut(), req.deadline, send.ready()).await {
        None => return Err(Stopped::Deadline(Phase::Send)),
        Some(r) => r.map_err(|e| Stopped::Stream(e, None, false))?,
    };
    let (response, mut stream) = send
        .send_request(req.head.clone(), req.body.is_none())
        .map_err(|e| Stopped::Stream(e, None, false))?;
    if let Some(b) = req.body {
        stream
            .send_data(Bytes::copy_from_slice(b), true)
            .map_err(|e| Stopped::Stream(e, None, false))?;
    }
    let id = response.stream_id().as_u32();
    let t_sent = Instant::now();
    phases[Phase::Send] = Some(ns(t_send, t_sent));

    let first_by = req.wait.map(|w| t_sent + w);
    let wait_until = first_by.map_or(req.deadline, |f| f.min(req.deadline));
    let resp = match within(sleep.as_mut(), wait_until, response).await {
        None if Instant::now() < req.deadline => {
            return Err(Stopped::Limit(ErrorKind::TimeoutWait.into()))
        }
        None => return Err(Stopped::Deadline(Phase::Wait)),
        Some(r) => r.map_err(|e| Stopped::Stream(e, Some(id), false))?,
    };
    let first_byte = Instant::now();
    let status = resp.status().as_u16();
    let retry_after_s = resp
        .headers()
        .get(http::header::RETRY_AFTER)
        .and_then(|v| crate::proto::h1::response::retry_after_seconds(v.as_bytes()));
    let location = resp.headers().get(http::header::LOCATION);
    let follow = crate::proto::redirect_location(status, location.map(|v| v.as_bytes()));
    let mut example =
        PendingExample::new("HTTP/2", status, location.map(|v| v.as_bytes()), req.taken);
    let mut said = None;
    let mut body = resp.into_body();
    let mut pace = Pace::new(ReadLimits {
        first_byte_by: None,
        min_speed: req.min_speed,
    });
    if let Some(p) = pace.as_mut() {
        let _ = p.on_bytes(0, first_byte);
    }
    let mut body_bytes = 0u64;
    loop {
        let until = pace
            .as_ref()
            .and_then(Pace::deadline)
            .map_or(req.deadline, |d| d.min(req.deadline));
        match within(sleep.as_mut(), until, body.data()).await {
            None => {
                let now = Instant::now();
                if now >= req.deadline {
                    return Err(Stopped::Deadline(Phase::Receive));
                }
                if let Some(p) = pace.as_mut() {
                    p.expired(now).map_err(Stopped::Limit)?;
                }
            }
            Some(None) => break,
            Some(Some(Err(e))) => return Err(Stopped::Stream(e, Some(id), true)),
            Some(Some(Ok(chunk))) => {
                let n = chunk.len();
                if let Some(e) = example.take() {
                    said = Some(e.body(&chunk));
                }
                let _ = body.flow_control().release_capacity(n);
                body_bytes += n as u64;
                *got_body += n as u64;
                if let Some(p) = pace.as_mut() {
                    p.on_bytes(n, Instant::now()).map_err(Stopped::Limit)?;
                }
            }
        }
    }
    if let Some(e) = example {
        said = Some(e.body(&[]));
    }
    let end = Instant::now();
    phases[Phase::Wait] = Some(ns(t_sent, first_byte));
    phases[Phase::Receive] = Some(ns(first_byte, end));
    Ok(Answered {
        stream_id: id,
        status,
        retry_after_s,
        location: follow,
        said,
        body_bytes,
        end,
    })
}
