//! A window in which a run's target (or its proxy, or its resolver) could not be reached:
//! from the first sign (a request in flight that failed just before, or a connect that
//! failed) to the first connect begun after it that succeeded, with the tries between.
//! Kept by the engine's gate, one per origin, and added up across threads and segments by
//! overlap.

use serde::{Deserialize, Serialize};

/// How a connect that could not reach its hop failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unreachable {
    /// Refused (nothing listening: a server stopped or restarting).
    Refused,
    /// No answer within the connect timeout (or the lookup's).
    TimedOut,
    /// Failed otherwise: reset while connecting (a listener that went away with the
    /// connect in its queue), no route, a proxy that could not reach the origin.
    Other,
    /// The name's lookup failed or timed out (the resolver could not be reached, or
    /// answered with an error).
    Lookup,
}

impl Unreachable {
    /// Whether `f` says its hop could not be reached, and how: a connect refused, timed
    /// out or unreachable, a lookup that failed or timed out, a proxy's 502-504. A
    /// failure of the client's own (no local port) or of a hop that answered (TLS, HTTP)
    /// is not one.
    pub(crate) fn of(f: &super::Failure) -> Option<Unreachable> {
        use super::{ErrorDetail as D, ErrorKind as K};
        match (f.kind, f.detail) {
            (K::Connect, Some(D::Refused)) => Some(Unreachable::Refused),
            (K::Connect, _) => Some(Unreachable::Other),
            (K::Dns | K::TimeoutDns, _) => Some(Unreachable::Lookup),
            (K::TimeoutConnect, _) => Some(Unreachable::TimedOut),
            (K::Proxy, Some(D::ProxyBadGateway)) => Some(Unreachable::Other),
            _ => None,
        }
    }
}

/// Whether `f` failed a request on a connection that was open: reset, closed before its
/// response or in its body, or timed out sending, waiting or receiving. In an outage these
/// are the requests in flight when the server went away.
pub(crate) fn in_flight(f: &super::Failure) -> bool {
    use super::ErrorKind as K;
    matches!(
        f.kind,
        K::Reset
            | K::ClosedBeforeResponse
            | K::BodyIncomplete
            | K::TimeoutSend
            | K::TimeoutWait
            | K::TimeoutReceive
    )
}

/// One window in which a hop could not be reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Outage {
    /// What could not be reached: the URL's `host:port`, or `the proxy URL`.
    pub hop: String,
    /// Seconds from the run's start to the first sign: the first request in flight that
    /// failed just before (within 100 ms of) the first failed connect, else that connect.
    pub start_s: f64,
    /// Seconds from the run's start to the first connect begun after it opened that
    /// succeeded; absent when the run ended first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_s: Option<f64>,
    /// The last connect that failed before the end: the hop came back between it and
    /// `end_s` (the window's end is known to within that gap).
    pub last_failed_s: f64,
    /// `end_s - start_s`, or to the run's end when it had not ended.
    pub duration_s: f64,
    /// `start_s` and `end_s` by this machine's clock (RFC 3339, to the millisecond), to
    /// set beside a deploy's own log.
    pub start_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_at: Option<String>,
    /// Connects tried in the window that failed, by how.
    pub connects_refused: u64,
    pub connects_timed_out: u64,
    pub connects_other: u64,
    /// Lookups of the name that failed or timed out in it (the resolver's part).
    #[serde(default)]
    pub lookups_failed: u64,
    /// Requests on connections already open that failed at its start or in it (reset,
    /// closed before the response, timed out waiting).
    pub failed_in_flight: u64,
}

impl Outage {
    /// Its failed connects.
    pub(crate) fn connects_failed(&self) -> u64 {
        self.connects_refused + self.connects_timed_out + self.connects_other
    }

    /// The requests it cost: its failed connects and lookups (each a request's) and the
    /// requests in flight that failed.
    pub(crate) fn requests_lost(&self) -> u64 {
        self.connects_failed() + self.lookups_failed + self.failed_in_flight
    }

    fn end_or(&self, run_end_s: f64) -> f64 {
        self.end_s.unwrap_or(run_end_s)
    }
}

/// Connections a server ended at about the same time under requests not yet answered (a
/// restart, a reload, a crash): the requests that met them, retried or failed, and how
/// the server's absence followed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Restart {
    /// The hop whose connections ended.
    pub hop: String,
    /// `graceful`: every request that met an ended connection was retried on a new one
    /// and none failed; `hard`: requests in flight failed (reset, cut in their body,
    /// timed out).
    pub verdict: String,
    /// Seconds from the run's start to the first of them, and by this machine's clock.
    pub at_s: f64,
    pub at: String,
    /// Requests that met a connection the server had ended before any byte of their
    /// answer and were sent again on a new connection (idempotent methods only: the
    /// server may have read them): each once, by its retry's outcome.
    pub retried: u64,
    /// Connections it ended after their answer with `Connection: close` after fewer
    /// requests than the server's own limit (the most a connection it closed so carried).
    pub closed_after_answer: u64,
    /// Requests in flight that failed with them.
    pub failed_in_flight: u64,
    /// The window that followed, when the server refused or did not answer new
    /// connections after (its duration): absent when it kept accepting (a reload keeps
    /// its listening socket).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable_for_s: Option<f64>,
}

impl Restart {
    /// Connections it ended: one per request that met one, and those it closed after
    /// their answer.
    pub(crate) fn connections(&self) -> u64 {
        self.retried + self.failed_in_flight + self.closed_after_answer
    }
}

/// `more` added to `all`: windows of the same hop that overlap become one (from the
/// earliest start to the latest end, the tries added up; a window still open at its
/// run's end stays open). Kept in order of start.
pub(crate) fn merge(all: &mut Vec<Outage>, more: &[Outage]) {
    all.extend(more.iter().cloned());
    all.sort_by(|a, b| a.hop.cmp(&b.hop).then(a.start_s.total_cmp(&b.start_s)));
    let mut out: Vec<Outage> = Vec::with_capacity(all.len());
    for o in all.drain(..) {
        match out.last_mut() {
            Some(last) if last.hop == o.hop && o.start_s <= last.end_or(f64::INFINITY) => {
                (last.end_s, last.end_at) = match (last.end_s, o.end_s) {
                    (Some(a), Some(b)) if b > a => (Some(b), o.end_at),
                    (Some(a), Some(_)) => (Some(a), last.end_at.take()),
                    _ => (None, None),
                };
                last.last_failed_s = last.last_failed_s.max(o.last_failed_s);
                last.duration_s = last.duration_s.max(o.start_s + o.duration_s - last.start_s);
                last.connects_refused += o.connects_refused;
                last.connects_timed_out += o.connects_timed_out;
                last.connects_other += o.connects_other;
                last.lookups_failed += o.lookups_failed;
                last.failed_in_flight += o.failed_in_flight;
            }
            _ => out.push(o),
        }
    }
    out.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    *all = out;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(hop: &str, start_s: f64, end_s: Option<f64>, refused: u64) -> Outage {
        Outage {
            hop: hop.into(),
            start_s,
            end_s,
            last_failed_s: end_s.unwrap_or(start_s),
            duration_s: end_s.map_or(1.0, |e| e - start_s),
            start_at: String::new(),
            end_at: None,
            connects_refused: refused,
            connects_timed_out: 0,
            connects_other: 0,
            lookups_failed: 0,
            failed_in_flight: 1,
        }
    }

    #[test]
    fn overlapping_windows_of_a_hop_become_one() {
        let mut all = vec![window("a:1", 2.0, Some(4.0), 10)];
        merge(
            &mut all,
            &[
                window("a:1", 2.1, Some(4.2), 5),
                window("a:1", 5.0, Some(5.5), 1),
                window("b:1", 2.0, Some(3.0), 7),
            ],
        );
        assert_eq!(all.len(), 3, "{all:?}");
        assert_eq!(all[0].hop, "a:1");
        assert_eq!((all[0].start_s, all[0].end_s), (2.0, Some(4.2)));
        assert!((all[0].duration_s - 2.2).abs() < 1e-9);
        assert_eq!(all[0].connects_refused, 15);
        assert_eq!(all[0].failed_in_flight, 2);
        assert_eq!(all[1].hop, "b:1");
        assert_eq!(all[2].start_s, 5.0);
    }

    #[test]
    fn a_window_open_at_the_end_stays_open() {
        let mut all = vec![window("a:1", 2.0, None, 3)];
        merge(&mut all, &[window("a:1", 2.5, Some(3.0), 1)]);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].end_s, None);
        assert_eq!(all[0].requests_lost(), 6);
    }
}
