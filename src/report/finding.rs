//! A sentence as a value: every headline, diagnosis, cause and hint the tool prints is a
//! `Finding`, a code with its sentence and the figures it was built from (each with the
//! population it covers), so text, JSON and HTML show the same entries and a test can
//! check each claim against the server's own count. Findings are offered in one order
//! of causes, and a later cause is left out while an earlier one explains the run.

use serde::Serialize;

/// The kind of cause a finding names, in the order they are offered: a run that failed
/// to connect is not diagnosed for its status codes, a run of error responses not for
/// its keep-alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Cause {
    /// Name resolution, connects, resets, timeouts, local ports and descriptors.
    Transport,
    /// TLS handshakes and certificates.
    Tls,
    /// What the status codes say (mostly 4xx/5xx, no success at all).
    Status,
    /// The protocol asked for did not happen (h2c refused, 0-RTT never accepted, ALPN,
    /// resumption never granted).
    Protocol,
    /// Reuse asked for and not obtained, and why.
    Reuse,
    /// What the run measured (the headline of a run that went as asked).
    Measured,
}

/// One figure a finding was derived from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Evidence {
    /// What was counted or measured, by its name in the report where it has one
    /// (`dns.lookups`, `connections.close_reasons.server_max_requests`).
    pub figure: String,
    /// Its value (a count, or a mean in `unit`).
    pub value: f64,
    /// The unit of `value` (`ms`); absent for counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<&'static str>,
    /// Out of how many: the size of the population (absent where the value is not a
    /// part of a whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub of: Option<u64>,
    /// Which population the figure covers ("new connections", "responses", "attempts").
    pub population: String,
    /// A figure bounded rather than measured exactly: its lowest and highest possible
    /// values (`value` is then the lower).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bounds: Option<[f64; 2]>,
}

impl Evidence {
    /// `value` of `of` in `population` (`2 of 200 new connections`).
    pub(crate) fn count(figure: &str, value: u64, of: u64, population: &str) -> Evidence {
        Evidence::mean(figure, value as f64, None, of, population)
    }

    /// A mean in milliseconds over `of` members of `population`.
    pub(crate) fn mean_ms(figure: &str, value: f64, of: u64, population: &str) -> Evidence {
        Evidence::mean(figure, value, Some("ms"), of, population)
    }

    /// A mean (in `unit`, or a count without one) over `of` members of `population`.
    pub(crate) fn mean(
        figure: &str,
        value: f64,
        unit: Option<&'static str>,
        of: u64,
        population: &str,
    ) -> Evidence {
        Evidence {
            of: Some(of),
            ..Evidence::figure(figure, value, unit, population)
        }
    }

    /// A figure of the whole `population` (a total, a rate, a percentile).
    pub(crate) fn figure(
        figure: &str,
        value: f64,
        unit: Option<&'static str>,
        population: &str,
    ) -> Evidence {
        Evidence {
            figure: figure.to_string(),
            value,
            unit,
            of: None,
            population: population.to_string(),
            bounds: None,
        }
    }
}

/// One claim: a stable code, its sentence and its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Finding {
    /// Stable across versions (`not_reused_server_max_requests`, `early_data_never_accepted`).
    pub code: &'static str,
    pub cause: Cause,
    /// Whether this finding explains the run on its own (most attempts failed so, most
    /// responses were errors, the protocol asked for never happened): findings of later
    /// causes are then not offered.
    pub explains_run: bool,
    /// The sentence, as printed.
    pub text: String,
    pub evidence: Vec<Evidence>,
}

impl Finding {
    pub(crate) fn new(code: &'static str, cause: Cause, text: String) -> Finding {
        Finding {
            code,
            cause,
            explains_run: false,
            text,
            evidence: Vec::new(),
        }
    }

    /// The same, explaining the run when `explains`.
    #[must_use]
    pub(crate) fn explaining(mut self, explains: bool) -> Finding {
        self.explains_run = explains;
        self
    }

    /// The same with `e` among its evidence.
    #[must_use]
    pub(crate) fn with(mut self, e: Evidence) -> Finding {
        self.evidence.push(e);
        self
    }

    /// The same with each of `all` among its evidence.
    #[must_use]
    pub(crate) fn with_all(mut self, all: impl IntoIterator<Item = Evidence>) -> Finding {
        self.evidence.extend(all);
        self
    }
}

/// The signal's figure in an interrupted report: its number, with its name.
fn signal(by: crate::interrupt::By) -> Evidence {
    Evidence::figure("signal", f64::from(by.number()), None, by.words())
}

/// The mark of a report cut short by the signal `by`: what it covers. `completed`
/// attempts ended (ok or failed) and `given_up` were still in flight when the grace ran
/// out (a second, or at once at a second signal).
pub(crate) fn interrupted(
    by: crate::interrupt::By,
    what: &str,
    completed: u64,
    given_up: u64,
) -> Finding {
    let gave_up = if given_up > 0 {
        format!(
            "; {given_up} still in flight at its grace's end {} given up",
            if given_up == 1 { "was" } else { "were" }
        )
    } else {
        String::new()
    };
    Finding::new(
        "interrupted",
        Cause::Measured,
        format!(
            "Interrupted by {}: this report covers {what} before it: {completed} attempts that ended{gave_up}.",
            by.words()
        ),
    )
    .with(signal(by))
    .with(Evidence::figure(
        "requests.attempted",
        completed as f64,
        None,
        "attempts that ended",
    ))
    .with(Evidence::figure(
        "requests.aborted_at_deadline",
        given_up as f64,
        None,
        "attempts in flight at the interrupt's end",
    ))
}

/// The mark of a watch, audit or lab ended by the signal `by` after `after_s` seconds:
/// the report covers `what` until then (exit status 128 + its number).
pub(crate) fn ended_by_interrupt(by: crate::interrupt::By, what: &str, after_s: f64) -> Finding {
    Finding::new(
        "interrupted",
        Cause::Measured,
        format!(
            "Interrupted by {} after {after_s:.1} s: this report covers {what} until then.",
            by.words()
        ),
    )
    .with(signal(by))
    .with(Evidence::figure(
        "duration_s",
        after_s,
        Some("s"),
        "the run until the interrupt",
    ))
}

/// The mark of a doctor cut short by the signal `by`: its report holds the probes that
/// ended.
pub(crate) fn probes_interrupted(by: crate::interrupt::By) -> Finding {
    Finding::new(
        "interrupted",
        Cause::Measured,
        format!("Interrupted by {}: this report holds the probes that ended before it; the one under way and those after it did not run, so their parts of the policy are missing, not fine.", by.words()),
    )
    .with(signal(by))
}

/// `findings` in the order of their causes (stable within a cause), without those of a
/// cause later than the first one that explains the run.
pub(crate) fn ordered(mut findings: Vec<Finding>) -> Vec<Finding> {
    findings.sort_by_key(|f| f.cause);
    if let Some(first) = findings.iter().find(|f| f.explains_run).map(|f| f.cause) {
        findings.retain(|f| f.cause <= first);
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(code: &'static str, cause: Cause, explains: bool) -> Finding {
        Finding::new(code, cause, code.to_string()).explaining(explains)
    }

    #[test]
    fn causes_come_in_order_and_an_explaining_one_hides_later_causes() {
        let out = ordered(vec![
            f("reuse", Cause::Reuse, false),
            f("status", Cause::Status, true),
            f("syn", Cause::Transport, false),
            f("h2c", Cause::Protocol, false),
        ]);
        let codes: Vec<&str> = out.iter().map(|f| f.code).collect();
        assert_eq!(codes, ["syn", "status"]);
    }

    #[test]
    fn without_an_explaining_finding_every_cause_is_offered() {
        let out = ordered(vec![
            f("reuse", Cause::Reuse, false),
            f("h2c", Cause::Protocol, false),
        ]);
        let codes: Vec<&str> = out.iter().map(|f| f.code).collect();
        assert_eq!(codes, ["h2c", "reuse"]);
    }
}
