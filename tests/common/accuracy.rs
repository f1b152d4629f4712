//! Timing tests check what the tool claims, not the machine's luck. A run across the
//! lab's link carries the lab's own judgement of it (`link.check`): whether the link held
//! its round trip and whether this machine (or the hypervisor under it) held up the run.
//!
//! - Where the lab says the link held and the machine kept out of the way, the figures
//!   must agree with physics within the test's tolerance: else the test fails.
//! - Where it says the link did not hold, or the machine was busy, its sentence must name
//!   each cause with the figures the report gives (else the test fails: the tool said
//!   nothing of a disturbance its own figures show); the measurement is then tried again,
//!   at most [`TRIES`] times within [`BUDGET`].
//! - A test whose every try was disturbed says so in one line, `ACCURACY NOT CHECKED`,
//!   with the reason and the figures, and passes. `scripts/test` counts those lines.
//!
//! Each line goes to stderr and to the notes file: `$HANDSHAKE_TEST_NOTES`, else
//! `target/tmp/test-notes.log`.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::Value;

use handshake::api::fmt::num;

/// Tries of one measurement before its accuracy is left unchecked.
pub const TRIES: u32 = 3;
/// Time one check may take over all its tries: a try that would end past it is not
/// started.
pub const BUDGET: Duration = Duration::from_secs(240);

/// Why a try did not check out.
#[derive(Debug)]
pub enum Miss {
    /// The tool said the run was disturbed, and named why with its figures: try again.
    Disturbed(String),
    /// The tool claimed a held link on an undisturbed machine, and the figures
    /// contradict physics: the test fails.
    Wrong(String),
}

/// One try of a measurement whose accuracy is checked.
pub type Try<T = ()> = Result<T, Miss>;

/// Run `attempt` until it checks out, is wrong (a panic naming `test`), or has been
/// disturbed [`TRIES`] times or for [`BUDGET`]; `None` then, with the note that says so.
pub fn check<T>(test: &str, mut attempt: impl FnMut() -> Try<T>) -> Option<T> {
    let start = Instant::now();
    let mut k = 0;
    loop {
        k += 1;
        match attempt() {
            Ok(v) => {
                if k > 1 {
                    note(&format!("ACCURACY CHECKED {test}: on try {k}"));
                }
                return Some(v);
            }
            Err(Miss::Wrong(why)) => panic!("{test} (try {k}): {why}"),
            Err(Miss::Disturbed(why)) => {
                let spent = start.elapsed();
                let next_ends = spent + spent / k;
                if k >= TRIES || next_ends > BUDGET {
                    note(&format!(
                        "ACCURACY NOT CHECKED {test}: disturbed in each of {k} tries ({:.0} s); the last: {why}",
                        spent.as_secs_f64()
                    ));
                    return None;
                }
                note(&format!(
                    "ACCURACY RETRY {test} (try {k} of {TRIES}): {why}"
                ));
            }
        }
    }
}

/// The other way round, for a test of the check itself: `attempt` must come out
/// `Wrong`; its reason then, or `None` (with the note) where every try was disturbed.
/// A try that checks out panics.
pub fn check_fails(test: &str, mut attempt: impl FnMut() -> Try) -> Option<String> {
    for k in 1..=TRIES {
        match attempt() {
            Ok(()) => panic!("{test}: the check passed (try {k})"),
            Err(Miss::Wrong(why)) => return Some(why),
            Err(Miss::Disturbed(why)) if k < TRIES => {
                note(&format!(
                    "ACCURACY RETRY {test} (try {k} of {TRIES}): {why}"
                ));
            }
            Err(Miss::Disturbed(why)) => {
                note(&format!(
                    "ACCURACY NOT CHECKED {test}: disturbed in each of {k} tries; the last: {why}"
                ));
            }
        }
    }
    None
}

/// A line for the run's summary: on stderr, and appended to the notes file.
pub fn note(line: &str) {
    eprintln!("{line}");
    let path = std::env::var_os("HANDSHAKE_TEST_NOTES")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("test-notes.log")
        });
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
    {
        // One write per line: lines of tests running side by side do not interleave.
        let _ = f.write_all(format!("{line}\n").as_bytes());
    }
}

/// `Wrong` unless `ok`.
pub fn ensure(ok: bool, why: impl FnOnce() -> String) -> Try {
    if ok {
        Ok(())
    } else {
        Err(Miss::Wrong(why()))
    }
}

/// Within 10 % (+0.5 ms) of `expected` ms: a round trip more or less would be 50 % or
/// more of any time checked, so this still counts round trips.
pub fn near(what: &str, got: f64, expected: f64) -> Try {
    near_by(what, got, expected, 10.0, 0.5)
}

/// Within `pct` % (+`plus_ms`) of `expected` ms.
pub fn near_by(what: &str, got: f64, expected: f64, pct: f64, plus_ms: f64) -> Try {
    let tol = expected * pct / 100.0 + plus_ms;
    ensure((got - expected).abs() <= tol, || {
        format!("{what}: {got:.3} ms, expected {expected:.1} ms ± {tol:.2}")
    })
}

/// A median set against an expectation built from other measurements of the same run
/// (a link's probes, the same work's CPU on loopback): at most `pct` % (+0.5 ms) above
/// it, and below it down to `floor` (the physics: the set round trips).
pub fn within(what: &str, got: f64, floor: f64, expected: f64, pct: f64) -> Try {
    let tol = expected * pct / 100.0 + 0.5;
    ensure(got >= floor * 0.99 && got <= expected + tol, || {
        format!(
            "{what}: {got:.3} ms, expected {floor:.1} to {:.2} ms (the run's own {expected:.2} + {tol:.2})",
            expected + tol
        )
    })
}

/// What the lab said of a run: nothing (`None`: the link held, the machine kept out of
/// the way), or the disturbance it named, with its figures.
#[must_use]
pub struct Said(pub Option<String>);

impl Said {
    /// Whether the lab said the run was undisturbed.
    pub fn quiet(&self) -> bool {
        self.0.is_none()
    }

    /// The physics checks of a run the lab said this of: where they hold, the run checks
    /// out (a disturbance that moved nothing beyond the tolerance is no reason to run
    /// again); where they do not, the run is `Disturbed` if the lab said so, else
    /// `Wrong`: it claimed a held link that physics contradicts.
    pub fn judge<T>(self, physics: impl FnOnce() -> Try<T>) -> Try<T> {
        match (physics(), self.0) {
            (Err(Miss::Wrong(off)), Some(said)) => Err(Miss::Disturbed(format!("{off}; {said}"))),
            (r, _) => r,
        }
    }
}

/// The delay line's own count of late packets: beyond their tolerance, of all, of
/// those late because its thread woke late, and the latest (µs).
#[derive(Clone, Copy)]
struct Late {
    beyond: u64,
    packets: u64,
    woke_late: u64,
    max_us: f64,
}

/// A link's check and the figures it was judged from.
struct Judged<'a> {
    link: &'a Value,
    sentence: &'a str,
    set: f64,
    tol: f64,
    held: Option<bool>,
    steal: Option<f64>,
}

impl Judged<'_> {
    /// The sentence names `part`, else the tool left out a disturbance (`why`).
    fn says(&self, part: &str, why: &str) {
        assert!(
            self.sentence.contains(part),
            "the check leaves out {why} ({part:?}): {}\n{}",
            self.sentence,
            self.link
        );
    }

    /// The link's own claim (`link_held`) against the delay line's late packets and the
    /// kernel's timing of the probes' SYNs.
    fn link_itself(&self) -> Option<Late> {
        let late = self.link["delay_line"]["lateness"].as_object().map(|l| {
            let g = |k: &str| {
                l[k].as_f64()
                    .unwrap_or_else(|| panic!("{k}: {}", self.link))
            };
            Late {
                beyond: g("beyond_tolerance") as u64,
                packets: g("packets") as u64,
                woke_late: g("woke_late") as u64,
                max_us: g("max_us"),
            }
        });
        if let Some(l) = late.filter(|l| l.beyond > 0) {
            assert_eq!(
                self.held,
                Some(false),
                "late packets, a held link: {}",
                self.link
            );
            self.says(
                &format!(
                    "{} of {} packets left the delay line more than",
                    l.beyond, l.packets
                ),
                "the late packets",
            );
            if let (true, Some(st)) = (l.woke_late > 0, self.steal.filter(|s| *s > 0.0)) {
                self.says(
                    &format!("the hypervisor took {} ms of CPU", num(st)),
                    "the steal that woke the delay line late",
                );
            }
        }
        // The kernel's timing: the link itself, where steady (no jitter, no bandwidth).
        let steady =
            self.link["jitter_ms"].as_f64() == Some(0.0) && self.link["bandwidth_bps"].is_null();
        if let (true, Some(k)) = (steady, self.kernel()) {
            if (k - self.set).abs() > self.tol {
                assert_eq!(
                    self.held,
                    Some(false),
                    "the kernel's RTT off, held: {}",
                    self.link
                );
                self.says(
                    &format!("the link itself measured {} ms", num(k)),
                    "the kernel-timed round trip",
                );
            } else if late.is_none_or(|l| l.beyond == 0) {
                assert_eq!(
                    self.held,
                    Some(true),
                    "nothing off, not held: {}",
                    self.link
                );
            }
        }
        late
    }

    fn kernel(&self) -> Option<f64> {
        self.link["probes"]["rtt_kernel_ms"].as_f64()
    }

    /// The waits this machine added beyond the tolerance, each in words, checked to be
    /// named by the sentence.
    fn machine_waits(&self) -> Vec<String> {
        let probes = &self.link["probes"];
        let f = |k: &str| probes[k].as_f64();
        let tol = self.tol;
        let mut waits = Vec::new();
        if let Some(w) = f("local_wait_ms").filter(|w| *w > tol) {
            self.says(
                &format!("about {} ms a round trip over the kernel's timing", num(w)),
                "the probes' local wait",
            );
            waits.push(format!("probes waited {} ms over the kernel's RTT", num(w)));
        }
        let hs_wait = f("handshake_wait_ms").filter(|w| *w > tol);
        if let (Some(w), Some(cpu)) = (hs_wait, f("handshake_cpu_ms")) {
            self.says(
                &format!(
                    "a TLS handshake done in memory waited {} ms for a CPU over its {} ms of work",
                    num(w),
                    num(cpu)
                ),
                "the in-memory handshake's wait",
            );
            waits.push(format!("the in-memory handshake waited {} ms", num(w)));
        }
        let during = probes["during_run"].as_u64().unwrap_or(0) >= 3;
        if let (Some(b), Some(d), true) = (
            f("handshake_before_run_ms"),
            f("handshake_during_run_ms"),
            during,
        ) {
            if d - b > tol {
                self.says(
                    &format!(
                        "the same handshake took {} ms during the run against {} ms before it",
                        num(d),
                        num(b)
                    ),
                    "the handshake's move during the run",
                );
                waits.push(format!("the in-memory handshake moved {} ms", num(d - b)));
            }
        }
        let share = self.link["steal_share"].as_f64().unwrap_or(0.0);
        if let Some(st) = self.steal.filter(|s| *s > tol && share >= 0.01) {
            self.says(
                &format!("the hypervisor took {} ms of CPU", num(st)),
                "the hypervisor's steal",
            );
            waits.push(format!("steal {} ms", num(st)));
        }
        waits
    }
}

/// What the lab claims of a run's link (`link` is the report's `link` object), checked
/// against its own figures: quiet where it says the link held and the machine kept out of
/// the way, else the disturbance it names, with the figures. A sentence that leaves out
/// a disturbance its figures show panics: that is the tool's fault, whatever the machine
/// did. `test` names the run in the notes.
pub fn link_claims(test: &str, link: &Value) -> Said {
    let check = &link["check"];
    let j = Judged {
        link,
        sentence: check["sentence"]
            .as_str()
            .unwrap_or_else(|| panic!("no link check: {link}")),
        set: link["rtt_set_ms"].as_f64().expect("rtt_set_ms"),
        tol: check["tolerance_ms"].as_f64().expect("tolerance_ms"),
        held: check["link_held"].as_bool(),
        steal: link["steal_ms"].as_f64(),
    };
    assert_eq!(j.tol, j.set * 0.02 + 0.3, "the stated tolerance: {check}");
    let busy = check["machine_busy"].as_bool().expect("machine_busy");
    let late = j.link_itself();
    let waits = j.machine_waits();
    assert_eq!(
        busy,
        !waits.is_empty(),
        "machine_busy against its figures ({waits:?}): {link}"
    );
    if j.held == Some(true) && !busy {
        assert!(j.sentence.starts_with("held within "), "{}", j.sentence);
    }
    let late_words = late.map_or("netem".to_string(), |l| {
        format!(
            "{} of {} packets late (at most {} µs)",
            l.beyond,
            l.packets,
            l.max_us.round()
        )
    });
    note(&format!(
        "LINK {test}: set {} ms, kernel {}, steal {} ms, {late_words}; held {}, busy {}",
        num(j.set),
        j.kernel()
            .map_or("-".to_string(), |k| format!("{} ms", num(k))),
        j.steal.map_or("-".to_string(), num),
        j.held.map_or("not judged".to_string(), |h| h.to_string()),
        busy
    ));
    if j.held == Some(false) || busy {
        let mut why = Vec::new();
        if j.held == Some(false) {
            why.push(format!("the link did not hold ({late_words})"));
        }
        why.extend(waits);
        return Said(Some(format!("{}: \"{}\"", why.join(", "), j.sentence)));
    }
    Said(None)
}
