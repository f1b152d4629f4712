//! A run's timeline: per-second buckets of what happened (requests, ok, errors by
//! category, new connections, closes by reason, TLS handshakes) and a coarse latency
//! histogram per bucket for its p50 and p99. Memory is bounded whatever the run's
//! length: at most [`MAX_BUCKETS`] buckets; when a run outlasts them, neighbouring
//! buckets merge pairwise and the width doubles (1 s for the first hour, then 2 s, ...).
//!
//! Events are placed by the monotonic clock (`Instant`: `CLOCK_MONOTONIC` through the
//! vDSO, some 20 ns to read; not the coarse clock, which lags by up to a tick and more,
//! 7.8 ms seen here with a 4 ms tick, and put a request sent on a second's boundary into
//! the second before), so that an event is never put in the second before its own.

use std::ops::AddAssign;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::record::{CloseReason, ErrorKind, HandshakeKind};

/// The most buckets a timeline keeps (one hour of 1 s buckets).
const MAX_BUCKETS: usize = 3600;
/// Latency histograms per bucket: µs from 1 µs to an hour, 1 significant figure
/// (values within ~6 %), so that a bucket costs ~2 KiB and an hour of them a few MiB.
const MAX_US: u64 = 3_600_000_000;

/// One bucket's counts.
#[derive(Clone, Default)]
pub(crate) struct Bucket {
    pub requests: u64,
    /// Answered with a status counted as ok (`record::status::is_ok`).
    pub ok: u64,
    /// Answered with another status.
    pub error_status: u64,
    pub errors: [u32; ErrorKind::ALL.len()],
    pub new_connections: u64,
    pub closed: [u32; CloseReason::ALL.len()],
    pub tls_full: u64,
    pub tls_resumed: u64,
    /// Connections that ended, for a log without close reasons (audit's).
    pub ended: u64,
    /// Latency of its answered requests (µs), made on the first one.
    pub latency: Option<Box<Histogram<u32>>>,
}

impl Bucket {
    pub(crate) fn errors_total(&self) -> u64 {
        self.errors.iter().map(|&n| u64::from(n)).sum()
    }

    pub(crate) fn closed_total(&self) -> u64 {
        self.closed.iter().map(|&n| u64::from(n)).sum()
    }

    fn is_empty(&self) -> bool {
        self.requests == 0
            && self.new_connections == 0
            && self.tls_full == 0
            && self.tls_resumed == 0
            && self.ended == 0
            && self.closed_total() == 0
    }
}

impl AddAssign<&Bucket> for Bucket {
    fn add_assign(&mut self, o: &Bucket) {
        self.requests += o.requests;
        self.ok += o.ok;
        self.error_status += o.error_status;
        for (a, b) in self.errors.iter_mut().zip(o.errors.iter()) {
            *a = a.saturating_add(*b);
        }
        self.new_connections += o.new_connections;
        for (a, b) in self.closed.iter_mut().zip(o.closed.iter()) {
            *a = a.saturating_add(*b);
        }
        self.tls_full += o.tls_full;
        self.tls_resumed += o.tls_resumed;
        self.ended += o.ended;
        if let Some(h) = &o.latency {
            match &mut self.latency {
                Some(mine) => {
                    let _ = mine.add(h.as_ref());
                }
                None => self.latency = Some(h.clone()),
            }
        }
    }
}

/// The buckets of one run (or one thread's share of it).
#[derive(Clone)]
pub(crate) struct Timeline {
    /// The run's start (none: not started; events are then dropped).
    start: Option<Instant>,
    /// Bucket width in seconds: 1, doubling whenever the buckets would exceed the cap.
    width_s: u64,
    buckets: Vec<Bucket>,
    /// The cap (a test lowers it to see the merging without an hour's events).
    max: usize,
}

impl Default for Timeline {
    fn default() -> Self {
        Timeline {
            start: None,
            width_s: 1,
            buckets: Vec::new(),
            max: MAX_BUCKETS,
        }
    }
}

impl Timeline {
    /// Start the clock at the run's start.
    pub(crate) fn begin(&mut self, start: Instant) {
        self.start = Some(start);
    }

    /// A timeline of finished buckets (`merge`: an agent's, read from its report).
    pub(crate) fn from_buckets(width_s: u64, buckets: Vec<Bucket>) -> Timeline {
        Timeline {
            start: None,
            width_s,
            buckets,
            max: MAX_BUCKETS,
        }
    }

    pub(crate) fn width_s(&self) -> u64 {
        self.width_s
    }

    #[cfg(test)]
    pub(crate) fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// The bucket for an event at `at_ns` since the start.
    fn bucket_at(&mut self, at_ns: u64) -> &mut Bucket {
        let mut i = (at_ns / 1_000_000_000 / self.width_s) as usize;
        while i >= self.max {
            self.coarsen();
            i /= 2;
        }
        if self.buckets.len() <= i {
            self.buckets.resize_with(i + 1, Bucket::default);
        }
        &mut self.buckets[i]
    }

    /// The bucket for an event now, if the clock runs.
    #[inline]
    fn now(&mut self) -> Option<&mut Bucket> {
        let at = self.start?.elapsed().as_nanos() as u64;
        Some(self.bucket_at(at))
    }

    /// Merge neighbouring buckets pairwise: the width doubles.
    fn coarsen(&mut self) {
        let old = std::mem::take(&mut self.buckets);
        let mut it = old.into_iter();
        while let Some(mut a) = it.next() {
            if let Some(b) = it.next() {
                a += &b;
            }
            self.buckets.push(a);
        }
        self.width_s *= 2;
    }

    /// A request that ended at `end`, in its bucket (the clock is not read again).
    #[inline]
    pub(crate) fn request_at(&mut self, end: Instant, how: Ended) {
        let Some(start) = self.start else {
            return;
        };
        let at = end.saturating_duration_since(start).as_nanos() as u64;
        record_request(self.bucket_at(at), how);
    }

    /// A request seen now, whose ending is not this timeline's to judge (audit's).
    #[inline]
    pub(crate) fn request(&mut self) {
        if let Some(b) = self.now() {
            record_request(b, Ended::Seen);
        }
    }

    #[inline]
    pub(crate) fn connection_opened(&mut self) {
        if let Some(b) = self.now() {
            b.new_connections += 1;
        }
    }

    #[inline]
    pub(crate) fn connection_closed(&mut self, reason: CloseReason) {
        if let Some(b) = self.now() {
            b.closed[reason.index()] = b.closed[reason.index()].saturating_add(1);
        }
    }

    /// A connection ended (audit: its ending is kept elsewhere).
    pub(crate) fn connection_ended(&mut self) {
        if let Some(b) = self.now() {
            b.ended += 1;
        }
    }

    #[inline]
    pub(crate) fn tls_handshake(&mut self, kind: HandshakeKind) {
        if let Some(b) = self.now() {
            match kind {
                HandshakeKind::Full => b.tls_full += 1,
                HandshakeKind::Resumed => b.tls_resumed += 1,
            }
        }
    }

    /// Put `o`'s buckets after this timeline's first `offset` (compare: a strategy's
    /// rounds laid end to end).
    pub(crate) fn append(&mut self, o: &Timeline, offset: Duration) {
        let base = offset.as_nanos() as u64;
        let width_ns = o.width_s * 1_000_000_000;
        for (i, b) in o.buckets.iter().enumerate() {
            if b.is_empty() {
                continue;
            }
            let at = base + i as u64 * width_ns;
            *self.bucket_at(at) += b;
        }
        if self.start.is_none() {
            self.start = o.start;
        }
    }

    /// Drop trailing empty buckets.
    pub(crate) fn trimmed(&self) -> &[Bucket] {
        let n = self
            .buckets
            .iter()
            .rposition(|b| !b.is_empty())
            .map_or(0, |i| i + 1);
        &self.buckets[..n]
    }

    #[cfg(test)]
    fn with_cap(max: usize) -> Timeline {
        Timeline {
            start: Some(Instant::now()),
            max,
            ..Timeline::default()
        }
    }
}

/// How a request in a bucket ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ended {
    /// A response came: its latency, and whether its status counts as ok.
    Answered { latency_ns: Option<u64>, ok: bool },
    /// No response: the failure's category.
    Failed(ErrorKind),
    /// Seen, with no outcome to count (audit's log).
    Seen,
}

fn record_request(b: &mut Bucket, how: Ended) {
    b.requests += 1;
    match how {
        Ended::Answered { latency_ns, ok } => {
            if ok {
                b.ok += 1;
            } else {
                b.error_status += 1;
            }
            if let Some(ns) = latency_ns {
                let h = b.latency.get_or_insert_with(|| {
                    Box::new(
                        Histogram::new_with_bounds(1, MAX_US, 1).expect("valid histogram bounds"),
                    )
                });
                let _ = h.record((ns / 1000).clamp(1, MAX_US));
            }
        }
        Ended::Failed(k) => b.errors[k.index()] = b.errors[k.index()].saturating_add(1),
        Ended::Seen => {}
    }
}

impl AddAssign<&Timeline> for Timeline {
    /// Threads of one run: bucket by bucket (a coarser side sets the width).
    fn add_assign(&mut self, o: &Timeline) {
        if self.start.is_none() {
            self.start = o.start;
        }
        let mut o = o.clone();
        while o.width_s < self.width_s {
            o.coarsen();
        }
        while self.width_s < o.width_s {
            self.coarsen();
        }
        if self.buckets.len() < o.buckets.len() {
            self.buckets.resize_with(o.buckets.len(), Bucket::default);
        }
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn answered(ns: u64) -> Ended {
        Ended::Answered {
            latency_ns: Some(ns),
            ok: true,
        }
    }

    #[test]
    fn events_land_in_their_second() {
        let mut t = Timeline::with_cap(MAX_BUCKETS);
        record_request(t.bucket_at(100_000), answered(2_000_000));
        record_request(
            t.bucket_at(200_000),
            Ended::Answered {
                latency_ns: Some(2_000_000),
                ok: false,
            },
        );
        record_request(t.bucket_at(S + 1), Ended::Failed(ErrorKind::Reset));
        t.bucket_at(3 * S + 5).new_connections += 1;
        let b = t.buckets();
        assert_eq!(b.len(), 4);
        assert_eq!((b[0].requests, b[0].ok, b[0].error_status), (2, 1, 1));
        assert_eq!((b[1].requests, b[1].errors_total()), (1, 1));
        assert_eq!(b[2].requests, 0);
        assert_eq!(b[3].new_connections, 1);
        let p50 = b[0].latency.as_ref().unwrap().value_at_quantile(0.5);
        assert!((1875..=2125).contains(&p50), "{p50} µs for 2 ms");
    }

    /// An event one second after the start (or a little later) is in the bucket of
    /// second 1, never second 0 (the coarse clock, once used, put some there).
    #[test]
    fn an_event_on_a_second_boundary_is_not_put_before_it() {
        for _ in 0..2000 {
            let start = Instant::now()
                .checked_sub(Duration::from_secs(1))
                .expect("up for more than a second");
            let mut t = Timeline::with_cap(MAX_BUCKETS);
            t.begin(start);
            t.connection_opened();
            let b = t.buckets();
            assert_eq!(b.len(), 2, "an event at 1 s went to second {}", b.len() - 1);
            assert_eq!(b[1].new_connections, 1);
        }
    }

    /// Two hours of events at one a second: the buckets stay under the cap, the width
    /// doubles, and nothing is lost.
    #[test]
    fn memory_stays_flat_over_two_hours() {
        let mut t = Timeline::with_cap(MAX_BUCKETS);
        for s in 0..7200u64 {
            record_request(t.bucket_at(s * S), answered(1_000_000));
            t.bucket_at(s * S).new_connections += 1;
            assert!(t.buckets().len() <= MAX_BUCKETS);
        }
        assert_eq!(t.width_s(), 2);
        assert_eq!(t.buckets().len(), 3600);
        let total: u64 = t.buckets().iter().map(|b| b.requests).sum();
        assert_eq!(total, 7200);
        assert!(t
            .buckets()
            .iter()
            .all(|b| b.requests == 2 && b.new_connections == 2));
        // A small cap shows the same merging again and again.
        let mut t = Timeline::with_cap(8);
        for s in 0..100u64 {
            record_request(t.bucket_at(s * S), Ended::Failed(ErrorKind::TimeoutWait));
        }
        assert!(t.buckets().len() <= 8);
        assert_eq!(t.width_s(), 16);
        assert_eq!(
            t.buckets().iter().map(|b| b.errors_total()).sum::<u64>(),
            100
        );
    }

    #[test]
    fn threads_merge_by_bucket_and_rounds_append() {
        let mut a = Timeline::with_cap(4);
        let mut b = Timeline::with_cap(4);
        for s in 0..8u64 {
            record_request(a.bucket_at(s * S), answered(S / 1000));
        }
        record_request(b.bucket_at(S), answered(S / 1000));
        assert_eq!((a.width_s(), b.width_s()), (2, 1));
        a += &b;
        assert_eq!(a.width_s(), 2);
        assert_eq!(a.buckets()[0].requests, 3);
        let mut c = Timeline::with_cap(MAX_BUCKETS);
        c.append(&b, Duration::from_secs(5));
        assert_eq!(c.trimmed().len(), 7);
        assert_eq!(c.buckets()[6].requests, 1);
    }
}
