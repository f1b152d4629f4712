//! Progress lines on stderr for commands that run for minutes (doctor's probes,
//! compare's rounds): what runs now, how long the command has run, and what bounds the
//! step, so a long wait is never silent.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a long step says it is still running.
const TICK: Duration = Duration::from_secs(15);

pub struct Steps {
    name: &'static str,
    start: Instant,
    on: bool,
}

impl Steps {
    /// `on`: false with `--no-progress`.
    pub fn new(name: &'static str, on: bool) -> Steps {
        Steps {
            name,
            start: Instant::now(),
            on,
        }
    }

    /// One line: "doctor [  12.3 s] what", fitted to the width (its folds indented
    /// under "what").
    pub fn say(&self, what: &str) {
        if self.on {
            let head = format!(
                "{} [{:>6.1} s] ",
                self.name,
                self.start.elapsed().as_secs_f64()
            );
            let line = format!("{head}{what}");
            eprintln!(
                "{}",
                crate::fmt::fit_hanging(&line, crate::fmt::width(), head.len())
            );
        }
    }

    /// Run `step`, saying every 15 s that `what` is still running, for how long, and its
    /// `bound` (in words: what limits it).
    pub async fn ticking<F: Future>(&self, what: &str, bound: &str, step: F) -> F::Output {
        let began = Instant::now();
        let mut step = std::pin::pin!(step);
        if !self.on {
            return step.await;
        }
        let mut tick = tokio::time::interval_at((began + TICK).into(), TICK);
        loop {
            tokio::select! {
                out = &mut step => return out,
                _ = tick.tick() => self.say(&format!(
                    "{what}: {:.0} s so far ({bound})",
                    began.elapsed().as_secs_f64()
                )),
            }
        }
    }
}
