//! Progress on stderr for commands that run for seconds or minutes (doctor's probes,
//! compare's rounds and RTT sweeps, the lab's link check, merge of many files): what runs
//! now, how long the command has run, how far along it is and what bounds the step, so
//! a long wait is never silent.
//!
//! On a terminal that is one line redrawn in place (indicatif, as bench's bar): the
//! elapsed time, `k/n` and an estimate of the time to go where the amount of work is
//! known, and what runs now; it is cleared before the report. Elsewhere (a CI log, a
//! file) a command that asks for it gets one line per step instead, and the others stay
//! quiet.

use std::future::Future;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How often a long step says it is still running, as lines.
const TICK: Duration = Duration::from_secs(15);

/// How often the bar redraws by itself (its elapsed time and spinner move on while a
/// step waits).
const REDRAW: Duration = Duration::from_millis(200);

/// The bar before the amount of work is known; after, with units of unlike lengths
/// (doctor's probes) and with units alike (compare's runs: the time to go is estimated).
const SPINNER: &str = "{prefix} [{elapsed}] {spinner} {wide_msg}";
const COUNTED: &str = "{prefix} [{elapsed}] [{bar:20}] {pos}/{len}: {wide_msg}";
const TIMED: &str = "{prefix} [{elapsed}] [{bar:20}] {pos}/{len}, ~{eta} to go: {wide_msg}";

enum Out {
    /// `--no-progress`, or not a terminal for a command that says nothing there.
    Off,
    /// One fitted line per step (stderr is not a terminal).
    Lines,
    /// One line redrawn in place (stderr is a terminal).
    Bar(ProgressBar),
}

pub(crate) struct Steps {
    name: &'static str,
    start: Instant,
    out: Out,
}

impl Steps {
    /// A bar on a terminal, else a line per step; `on`: false with `--no-progress`.
    pub(crate) fn new(name: &'static str, on: bool) -> Steps {
        Steps::with(name, on, true)
    }

    /// A bar on a terminal, else nothing (commands whose stderr carries other output:
    /// the lab's, a bench run's link check, merge); `on`: false with `--no-progress`.
    pub(crate) fn on_terminal(name: &'static str, on: bool) -> Steps {
        Steps::with(name, on, false)
    }

    fn with(name: &'static str, on: bool, lines: bool) -> Steps {
        let out = match (on, std::io::stderr().is_terminal()) {
            (false, _) => Out::Off,
            (true, true) => Out::Bar(bar(name)),
            (true, false) if lines => Out::Lines,
            (true, false) => Out::Off,
        };
        Steps {
            name,
            start: Instant::now(),
            out,
        }
    }

    /// The amount of work, in units that [`Steps::advance`] counts: the bar shows `k/n`
    /// from here on, and the time to go when the units are `alike` (each takes about as
    /// long as the others).
    pub(crate) fn set_total(&self, n: u64, alike: bool) {
        if let Out::Bar(b) = &self.out {
            if b.length() != Some(n) {
                b.set_length(n);
                let template = if alike { TIMED } else { COUNTED };
                if let Ok(s) = ProgressStyle::with_template(template) {
                    b.set_style(s.progress_chars("=> "));
                }
            }
        }
    }

    /// One unit of the work done.
    pub(crate) fn advance(&self) {
        if let Out::Bar(b) = &self.out {
            b.inc(1);
        }
    }

    /// What runs now: the bar's message, or a line "doctor [  12.3 s] what" fitted to the
    /// width (its folds indented under "what").
    pub(crate) fn say(&self, what: &str) {
        match &self.out {
            Out::Off => {}
            Out::Bar(b) => b.set_message(what.to_string()),
            Out::Lines => {
                let head = format!(
                    "{} [{:>6.1} s] ",
                    self.name,
                    self.start.elapsed().as_secs_f64()
                );
                let line = format!("{head}{what}");
                note(&crate::fmt::fit_hanging(
                    &line,
                    crate::fmt::width(),
                    head.len(),
                ));
            }
        }
    }

    /// What runs now inside the step said last, on the bar only (a line per unit would
    /// flood a log).
    pub(crate) fn show(&self, what: &str) {
        if let Out::Bar(b) = &self.out {
            b.set_message(what.to_string());
        }
    }

    /// Run `step`, saying that `what` is still running, for how long, and its `bound` (in
    /// words: what limits it): every 15 s as lines, every second on the bar.
    pub(crate) async fn ticking<F: Future>(&self, what: &str, bound: &str, step: F) -> F::Output {
        let began = Instant::now();
        let mut step = std::pin::pin!(step);
        let every = match self.out {
            Out::Off => return step.await,
            Out::Lines => TICK,
            Out::Bar(_) => Duration::from_secs(1),
        };
        let mut tick = tokio::time::interval_at((began + every).into(), every);
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

    /// The bar leaves the terminal (before the report is written there).
    pub(crate) fn finish(&self) {
        if let Out::Bar(b) = &self.out {
            b.finish_and_clear();
        }
    }
}

impl Drop for Steps {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A spinner on stderr that redraws itself.
fn bar(name: &'static str) -> ProgressBar {
    let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(s) = ProgressStyle::with_template(SPINNER) {
        b.set_style(s);
    }
    b.set_prefix(name);
    b.enable_steady_tick(REDRAW);
    b
}

/// A line on stderr that never panics: one that cannot be written (stderr closed early,
/// `2>&1 | head -1`) is lost, and the command goes on to its end (`eprintln!` would panic
/// there; `tests/architecture.rs` keeps it out of the crate).
pub(crate) fn note(line: &str) {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}
