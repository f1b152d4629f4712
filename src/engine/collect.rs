//! A client thread's one writer. Its workers hand each attempt's record, and its drivers
//! each connection's events, to a queue (`Notes`); the collector alone takes them into
//! the thread's recorder, in the order they came, and keeps the end of the latest
//! request and the progress line's totals. Connections end also between attempts (an
//! HTTP/2 connection's task reads the server's GOAWAY, an HTTP/3 connection waits for
//! its session ticket after its request), so their events go by the same queue rather
//! than inside an attempt's result.

use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc::{
    unbounded_channel, UnboundedReceiver, UnboundedSender, WeakUnboundedSender,
};

use crate::record::RequestRecord;
use crate::stats::event::{ConnEvent, Note};
use crate::stats::Recorder;

/// A thread's running totals, for the progress line (kept only when it is shown).
#[derive(Default)]
pub(super) struct Progress {
    pub requests: AtomicU64,
    pub new_connections: AtomicU64,
    pub errors: AtomicU64,
}

/// Where a worker or a driver hands what happened (a clone per holder). `None` on the
/// queue is the stop.
#[derive(Clone)]
pub(crate) struct Notes(UnboundedSender<Option<Note>>);

impl Notes {
    pub(crate) fn conn(&self, e: ConnEvent) {
        // The collector outlives every holder while the thread runs; after an
        // interrupt's grace it is gone, and what a dropped task said is not counted.
        let _ = self.0.send(Some(Note::Conn(e)));
    }

    pub(crate) fn request(&self, r: RequestRecord) {
        let _ = self.0.send(Some(Note::Request(r)));
    }

    pub(crate) fn aborted(&self) {
        let _ = self.0.send(Some(Note::Aborted));
    }

    /// A handle that can stop the collector without keeping it running.
    pub(super) fn stopper(&self) -> Stopper {
        Stopper(self.0.downgrade())
    }
}

/// Stops the collector when an interrupt's grace is over (if it still runs).
pub(super) struct Stopper(WeakUnboundedSender<Option<Note>>);

impl Stopper {
    pub(super) fn stop(&self) {
        if let Some(tx) = self.0.upgrade() {
            let _ = tx.send(None);
        }
    }
}

/// The thread's recorder and the one task that writes it.
pub(super) struct Collector {
    pub rec: Recorder,
    /// The end of the latest request taken.
    pub last_end: Instant,
    rx: UnboundedReceiver<Option<Note>>,
    /// The progress line's totals for this thread, when one is shown.
    progress: Option<(Arc<Vec<Progress>>, usize)>,
    /// The metrics' hand-off, with this thread's number; when `rec` was last handed
    /// over (it then holds only what came since), and the progress line's figures of
    /// what was handed over before.
    hand: Option<(super::handoff::Hand, usize)>,
    handed: Instant,
    handed_so_far: [u64; 3],
    /// What an empty recorder of this thread is given: the run's start, `--ok-status`.
    start: Instant,
    ok_status: Vec<(u16, u16)>,
}

/// How often a thread hands the metrics what its recorder took since the last time.
const HAND_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

impl Collector {
    /// A collector for a thread whose run starts at `start`, and the queue to it.
    pub(super) fn new(
        start: Instant,
        ok_status: &[(u16, u16)],
        progress: Option<(Arc<Vec<Progress>>, usize)>,
        hand: Option<(super::handoff::Hand, usize)>,
    ) -> (Collector, Notes) {
        let (tx, rx) = unbounded_channel();
        let c = Collector {
            rec: empty(start, ok_status),
            last_end: start,
            rx,
            progress,
            hand,
            handed: start,
            handed_so_far: [0; 3],
            start,
            ok_status: ok_status.to_vec(),
        };
        (c, Notes(tx))
    }

    /// The thread's whole recorder: with the metrics' hand-off, its pieces added up by
    /// the hand-off's thread.
    pub(super) fn into_recorder(self) -> Recorder {
        match self.hand {
            Some((hand, t)) => hand.last(t, self.rec),
            None => self.rec,
        }
    }

    /// Take what comes until every holder of the queue is gone, or until the stop (an
    /// interrupt's grace is over): then what is queued is taken, and the requests still
    /// in flight at that moment are counted as given up (what they say later is not
    /// counted).
    pub(super) async fn run(mut self, in_flight: Rc<Cell<u64>>) -> Collector {
        let mut batch = Vec::with_capacity(BATCH);
        let mut stopped = false;
        while !stopped && self.rx.recv_many(&mut batch, BATCH).await > 0 {
            for n in batch.drain(..) {
                match n {
                    Some(n) => self.take(&n),
                    None => stopped = true,
                }
            }
            self.show();
        }
        if stopped {
            while let Ok(n) = self.rx.try_recv() {
                if let Some(n) = n {
                    self.take(&n);
                }
            }
        }
        self.finish(stopped.then(|| in_flight.get()))
    }

    /// The end of the thread's run: with `given_up` (the stop after an interrupt's
    /// grace), the requests then in flight, counted as cut by the run's end.
    pub(super) fn finish(mut self, given_up: Option<u64>) -> Collector {
        if let Some(n) = given_up {
            self.rec.counts.aborted_at_deadline += n;
            self.show();
        }
        self
    }

    /// Take one note (the thread's readiness loop hands them over directly).
    #[inline]
    pub(super) fn take(&mut self, n: &Note) {
        if let Note::Request(r) = n {
            self.last_end = self.last_end.max(r.end);
        }
        self.rec.take(n);
    }

    /// The thread's totals for the progress line, and now and then what came since the
    /// last time for the metrics.
    pub(super) fn show(&mut self) {
        if let Some((c, t)) = &self.progress {
            let p = &c[*t];
            let [requests, connections, errors] = self.progressed();
            p.requests.store(requests, Ordering::Relaxed);
            p.new_connections.store(connections, Ordering::Relaxed);
            p.errors.store(errors, Ordering::Relaxed);
        }
        if let Some((hand, t)) = &self.hand {
            if self.handed.elapsed() >= HAND_EVERY {
                self.handed_so_far = self.progressed();
                let piece = std::mem::replace(&mut self.rec, empty(self.start, &self.ok_status));
                hand.part(*t, piece);
                self.handed = Instant::now();
            }
        }
    }

    /// The progress line's figures of the thread so far: requests (against -n: a
    /// chain of redirects, -L, is one of them), new connections, errors.
    fn progressed(&self) -> [u64; 3] {
        let c = &self.rec.counts;
        let [requests, connections, errors] = self.handed_so_far;
        [
            requests + c.attempted - c.redirects,
            connections + c.connections_opened,
            errors + self.rec.errors_total(),
        ]
    }
}

/// An empty recorder of a thread whose run started at `start`.
fn empty(start: Instant, ok_status: &[(u16, u16)]) -> Recorder {
    let mut rec = Recorder::new();
    rec.timeline.begin(start);
    rec.ok_status = ok_status.to_vec();
    rec
}

/// A queue and its far end, for a test that reads what was handed over, in order.
#[cfg(test)]
pub(super) fn queue() -> (Notes, UnboundedReceiver<Option<Note>>) {
    let (tx, rx) = unbounded_channel();
    (Notes(tx), rx)
}

/// Notes taken at a time.
const BATCH: usize = 64;
