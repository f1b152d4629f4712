//! The metrics' live values, added up off the measuring threads. With `--metrics` or
//! `--remote-write`, a client thread's collector hands over the recorder it has filled
//! since its last hand-off, every `HAND_EVERY` (moved, not copied), and goes on with an
//! empty one. One thread of the run's own (`handshake-metrics`) adds each client
//! thread's pieces up and gives the metrics (`Live`) that thread's total so far. At its
//! end a client thread hands over its last piece and gets its whole recorder back: its
//! pieces added in the order they were filled, what it would have kept alone.

use std::sync::mpsc;
use std::thread::JoinHandle;

use super::Live;
use crate::stats::Recorder;

/// What a client thread hands over: a piece, or its last with where to send its total.
enum Piece {
    Part(usize, Box<Recorder>),
    Last(usize, Box<Recorder>, mpsc::SyncSender<Recorder>),
}

/// The adding thread of one run.
pub(crate) struct Adder {
    tx: mpsc::Sender<Piece>,
    thread: JoinHandle<()>,
}

/// A client thread's end of the hand-off.
#[derive(Clone)]
pub(crate) struct Hand {
    tx: mpsc::Sender<Piece>,
}

impl Adder {
    /// Start the thread that adds the pieces up and gives `live` each new total.
    pub(crate) fn start(live: Live) -> std::io::Result<Adder> {
        let (tx, rx) = mpsc::channel::<Piece>();
        let thread = std::thread::Builder::new()
            .name("handshake-metrics".into())
            .spawn(move || {
                let mut totals: Vec<Option<Recorder>> = Vec::new();
                for piece in rx {
                    let (t, part, back) = match piece {
                        Piece::Part(t, r) => (t, r, None),
                        Piece::Last(t, r, back) => (t, r, Some(back)),
                    };
                    if totals.len() <= t {
                        totals.resize_with(t + 1, || None);
                    }
                    let total = add(totals[t].take(), *part);
                    live(t, &total);
                    match back {
                        Some(back) => {
                            let _ = back.send(total);
                        }
                        None => totals[t] = Some(total),
                    }
                }
            })?;
        Ok(Adder { tx, thread })
    }

    /// A client thread's end.
    pub(crate) fn hand(&self) -> Hand {
        Hand {
            tx: self.tx.clone(),
        }
    }

    /// Wait for the pieces handed so far to be added, once every `Hand` is gone (the
    /// client threads have ended).
    pub(crate) fn stop(self) {
        drop(self.tx);
        let _ = self.thread.join();
    }
}

/// `part` added to what thread's pieces came before it: as one recorder would have kept
/// them, so the last `Retry-After` is the later piece's when it saw one (`+=` between
/// threads keeps the longest).
fn add(before: Option<Recorder>, part: Recorder) -> Recorder {
    let Some(mut total) = before else {
        return part;
    };
    let last_retry_after = part.retry_after_s.or(total.retry_after_s);
    total += &part;
    total.retry_after_s = last_retry_after;
    total
}

impl Hand {
    /// Thread `t`'s recorder filled since its last hand-off.
    pub(crate) fn part(&self, t: usize, piece: Recorder) {
        let _ = self.tx.send(Piece::Part(t, Box::new(piece)));
    }

    /// Thread `t`'s last piece; its whole recorder back. Should the adding thread be
    /// gone (it panicked), what it held is lost: the last piece alone when it could not
    /// be handed over, else an empty recorder; the report then counts less than ran.
    pub(crate) fn last(&self, t: usize, piece: Recorder) -> Recorder {
        let (back, total) = mpsc::sync_channel(1);
        match self.tx.send(Piece::Last(t, Box::new(piece), back)) {
            Ok(()) => total.recv().unwrap_or_default(),
            Err(mpsc::SendError(Piece::Last(_, piece, _) | Piece::Part(_, piece))) => *piece,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    fn piece(attempted: u64, retry_after_s: Option<u32>) -> Recorder {
        let mut r = Recorder::new();
        r.counts.attempted = attempted;
        r.retry_after_s = retry_after_s;
        r
    }

    /// Two threads' pieces: the metrics see each thread's running total in order, and
    /// each thread gets back the sum of its own, the last `Retry-After` kept.
    #[test]
    fn pieces_are_added_per_thread_in_order() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let live: Live = Arc::new(move |t, r: &Recorder| {
            log.lock().unwrap().push((t, r.counts.attempted));
        });
        let adder = Adder::start(live).unwrap();
        let (a, b) = (adder.hand(), adder.hand());
        a.part(0, piece(3, Some(5)));
        b.part(1, piece(10, None));
        a.part(0, piece(4, Some(2)));
        let one = a.last(0, piece(5, None));
        let two = b.last(1, piece(1, None));
        drop((a, b));
        adder.stop();
        assert_eq!((one.counts.attempted, one.retry_after_s), (12, Some(2)));
        assert_eq!(two.counts.attempted, 11);
        let seen = seen.lock().unwrap();
        let of = |t: usize| -> Vec<u64> {
            seen.iter()
                .filter(|(u, _)| *u == t)
                .map(|(_, n)| *n)
                .collect()
        };
        assert_eq!(of(0), [3, 7, 12]);
        assert_eq!(of(1), [10, 11]);
    }
}
