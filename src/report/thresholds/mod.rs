//! `--fail-if EXPR`: thresholds a CI job can act on. An expression names a figure of
//! the report, a comparison and a value: `error_rate>1%`, `p99>200ms`,
//! `reuse_ratio<0.9`, `connections>10`, `tls_full>1`, `stale_retries>0`. The figure is a
//! short name (see `aliases::ALIASES`) or a dotted path into the report's JSON
//! (`connections.close_reasons.server_idle_close`, `phases_ms.new.tls.mean`); the value
//! takes a unit where the figure has one (`%` or a fraction up to 1 for a ratio or a
//! rate; `ms`, `s` or `us` for a time, which needs its unit). The run fails (exit 1) when an
//! expression holds. `compare` checks each expression on every strategy, or on those
//! named before a colon: `keepalive:reuse_ratio<0.9`, `https h3:p99>5ms`.

use serde::Serialize;
use serde_json::Value;

use crate::parse::UsageError;
use aliases::{Kind, ALIASES};

mod aliases;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

impl Op {
    fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Eq => a == b,
            Op::Ne => a != b,
        }
    }
}

/// Which report the expressions are checked on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Subject {
    Bench,
    Compare,
    Audit,
}

/// One parsed `--fail-if`.
#[derive(Debug, Clone)]
pub(crate) struct Threshold {
    text: String,
    /// `compare`: the scenarios it applies to (a row's name or a strategy).
    scope: Option<String>,
    /// The figure's dotted path (or `=error_rate`, `=errors`).
    path: String,
    /// The path ends in a key of a map (status codes, close reasons, error kinds and
    /// details, GOAWAY codes): a key that did not occur is 0.
    in_map: bool,
    kind: Kind,
    op: Op,
    value: f64,
}

/// One expression checked on one scenario (or the audit).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ThresholdResult {
    /// The expression as given.
    pub expr: String,
    /// The scenario it was checked on (absent for audit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    /// The figure's place in the report's JSON.
    pub figure: String,
    /// Its value (ratios as fractions, times in ms).
    pub value: f64,
    /// The expression held: the run fails.
    pub failed: bool,
}

fn usage(text: &str, why: impl std::fmt::Display) -> anyhow::Error {
    UsageError(format!("--fail-if '{text}': {why}")).into()
}

/// Parse every `--fail-if` for `subject`; a malformed one is a usage error naming what
/// could not be read.
pub(crate) fn parse_all(exprs: &[String], subject: Subject) -> anyhow::Result<Vec<Threshold>> {
    exprs.iter().map(|e| parse(e, subject)).collect()
}

fn parse(text: &str, subject: Subject) -> anyhow::Result<Threshold> {
    let (scope, expr) = match text.split_once(':') {
        Some((s, e)) => (Some(s.trim()), e),
        None => (None, text),
    };
    if let Some(s) = scope {
        if subject != Subject::Compare {
            return Err(usage(
                text,
                format!("'{s}:' names a strategy, which only compare has"),
            ));
        }
        if s.is_empty() {
            return Err(usage(
                text,
                "nothing before ':' (a strategy or a row's name)",
            ));
        }
    }
    const OPS: [(&str, Op); 7] = [
        (">=", Op::Ge),
        ("<=", Op::Le),
        ("==", Op::Eq),
        ("!=", Op::Ne),
        (">", Op::Gt),
        ("<", Op::Lt),
        ("=", Op::Eq),
    ];
    let Some((at, len, op)) = OPS
        .iter()
        .filter_map(|(s, op)| expr.find(s).map(|at| (at, s.len(), *op)))
        .min_by_key(|(at, len, _)| (*at, std::cmp::Reverse(*len)))
    else {
        return Err(usage(
            text,
            "no comparison: write FIGURE>VALUE (or >=, <, <=, ==, !=)",
        ));
    };
    let name = expr[..at].trim();
    let raw = expr[at + len..].trim();
    if name.is_empty() {
        return Err(usage(text, "no figure before the comparison"));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.')
    {
        return Err(usage(
            text,
            format!("'{name}' is not a figure's name (lower case, digits, _ and . only)"),
        ));
    }
    let (path, kind, in_map) = figure_of(text, name, subject)?;
    let value = parse_value(raw, kind).map_err(|why| usage(text, why))?;
    Ok(Threshold {
        text: text.to_string(),
        scope: scope.map(String::from),
        in_map,
        path,
        kind,
        op,
        value,
    })
}

/// The figure `name` stands for in `subject`'s report: its path, its kind, and whether
/// it is read in each row of a map (a scenario's or a strategy's).
fn figure_of(text: &str, name: &str, subject: Subject) -> anyhow::Result<(String, Kind, bool)> {
    match ALIASES.iter().find(|a| a.name == name) {
        Some(a) => {
            let path = match subject {
                Subject::Audit => a.audit,
                Subject::Compare => a.scenario,
                Subject::Bench => a.scenario.filter(|p| !p.starts_with("comparison.")),
            };
            let Some(path) = path else {
                return Err(usage(
                    text,
                    format!("'{name}' is not a figure of this report"),
                ));
            };
            let in_map = subject != Subject::Audit
                && !path.starts_with('=')
                && schema::lookup(path).unwrap_or(false);
            Ok((path.to_string(), a.kind, in_map))
        }
        None if name.contains('.') => {
            let in_map = match subject {
                Subject::Audit => false,
                _ => schema::lookup(name).map_err(|why| usage(text, why))?,
            };
            Ok((name.to_string(), path_kind(name), in_map))
        }
        None => {
            let known: Vec<&str> = ALIASES
                .iter()
                .filter(|a| match subject {
                    Subject::Audit => a.audit.is_some(),
                    Subject::Compare => a.scenario.is_some(),
                    Subject::Bench => a.scenario.is_some_and(|p| !p.starts_with("comparison.")),
                })
                .map(|a| a.name)
                .collect();
            Err(usage(
                text,
                format!(
                    "unknown figure '{name}': one of {}, or a dotted path into the JSON report",
                    known.join(", ")
                ),
            ))
        }
    }
}

/// A dotted path's kind: a `_ms` part is a time, a last part ending in `ratio` or
/// `rate` a fraction.
fn path_kind(path: &str) -> Kind {
    let last = path.rsplit('.').next().unwrap_or(path);
    if path.split('.').any(|p| p.ends_with("_ms")) {
        Kind::Millis
    } else if last.ends_with("ratio") || last.ends_with("rate") {
        Kind::Ratio
    } else {
        Kind::Number
    }
}

fn parse_value(raw: &str, kind: Kind) -> Result<f64, String> {
    let split = raw
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+' || c == 'e'))
        .unwrap_or(raw.len());
    let (num, unit) = raw.split_at(split);
    let n: f64 = num
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite())
        .ok_or_else(|| format!("cannot read the value '{raw}' as a number"))?;
    let unit = unit.trim();
    match (kind, unit) {
        // 1 could be 1 % or 100 %: from 1 up, only a percentage says which.
        (Kind::Ratio, "") if n >= 1.0 => Err(format!(
            "'{raw}' is ambiguous: a ratio is a fraction below 1 or a percentage: write {n}% or {}",
            n / 100.0
        )),
        (Kind::Millis, "") if n != 0.0 => {
            Err(format!("'{raw}' has no unit: write {n}ms or {n}s (or us)"))
        }
        (_, "") => Ok(n),
        (Kind::Ratio, "%") => Ok(n / 100.0),
        (Kind::Millis, "ms") => Ok(n),
        (Kind::Millis, "s") => Ok(n * 1000.0),
        (Kind::Millis, "us" | "µs") => Ok(n / 1000.0),
        (Kind::Ratio, u) => Err(format!("'{u}': a ratio takes % or a fraction (0.9)")),
        (Kind::Millis, u) => Err(format!("'{u}': a time takes ms, s or us")),
        (Kind::Number, u) => Err(format!(
            "'{u}': this figure is a plain number, without a unit"
        )),
    }
}

/// The figure at `path` in `v` (`=error_rate` and `=errors` computed from the requests).
fn figure(path: &str, v: &Value) -> Option<f64> {
    let requests = |k: &str| v["requests"][k].as_f64();
    match path {
        "=errors" => Some(requests("attempted")? - requests("ok")?),
        "=error_rate" => {
            let attempted = requests("attempted")?;
            Some(if attempted > 0.0 {
                (attempted - requests("ok")?) / attempted
            } else {
                0.0
            })
        }
        _ => path
            .split('.')
            .try_fold(v, |v, k| v.get(k))
            .and_then(Value::as_f64),
    }
}

fn display_path(path: &str) -> &str {
    path.strip_prefix('=').unwrap_or(path)
}

/// Check every threshold on each `(scenario name, strategy, JSON)`; `None` for the
/// name: audit's one report. A figure found in none of the scenarios it applies to is a
/// usage error (a path absent from some, such as HTTP/2's on an HTTP/1 row, skips those).
fn check(
    thresholds: &[Threshold],
    subjects: &[(Option<String>, String, Value)],
) -> anyhow::Result<Vec<ThresholdResult>> {
    let mut out = Vec::new();
    for t in thresholds {
        let mut applied = false;
        for (name, strategy, v) in subjects {
            if let Some(scope) = &t.scope {
                if name.as_deref() != Some(scope.as_str()) && strategy != scope {
                    continue;
                }
            }
            applied = true;
            let Some(value) = figure(&t.path, v).or(t.in_map.then_some(0.0)) else {
                continue;
            };
            out.push(ThresholdResult {
                expr: t.text.clone(),
                scenario: name.clone(),
                figure: display_path(&t.path).to_string(),
                value,
                failed: t.op.holds(value, t.value),
            });
        }
        if !applied {
            let names: Vec<&str> = subjects.iter().filter_map(|s| s.0.as_deref()).collect();
            return Err(usage(
                &t.text,
                format!(
                    "'{}' names no row of this comparison ({})",
                    t.scope.as_deref().unwrap_or(""),
                    names.join(", ")
                ),
            ));
        }
        if !out.iter().any(|r| r.expr == t.text) {
            return Err(usage(
                &t.text,
                format!("'{}' is not in this report", display_path(&t.path)),
            ));
        }
    }
    Ok(out)
}

/// `--fail-if` checked against a report.
#[derive(Default)]
pub(crate) struct Checked {
    /// Some threshold failed.
    pub failed: bool,
    /// What failed, said for stderr.
    pub lines: Vec<String>,
    /// Every threshold's result (none when none was given).
    pub results: Option<Vec<ThresholdResult>>,
}

/// Check `thresholds` against `report`, a report of one subject.
pub(crate) fn check_report<T: Serialize>(
    thresholds: &[Threshold],
    report: &T,
) -> anyhow::Result<Checked> {
    if thresholds.is_empty() {
        return Ok(Checked::default());
    }
    let v = serde_json::to_value(report).expect("reports serialize");
    checked(thresholds, &[(None, String::new(), v)])
}

/// Check `thresholds` against each scenario of a bench or compare report, each with its
/// comparison row, if any, as `comparison`.
pub(crate) fn check_scenarios(
    thresholds: &[Threshold],
    rep: &super::Report,
) -> anyhow::Result<Checked> {
    if thresholds.is_empty() {
        return Ok(Checked::default());
    }
    let rows: Vec<&super::comparison::ComparisonRow> = rep
        .comparisons()
        .into_iter()
        .flat_map(|c| c.rows.iter())
        .collect();
    let subjects: Vec<(Option<String>, String, Value)> = rep
        .scenarios
        .iter()
        .map(|s| {
            let mut v = serde_json::to_value(s).expect("a scenario serializes");
            if let Some(row) = rows.iter().find(|r| r.name == s.name) {
                v["comparison"] = serde_json::to_value(row).expect("a row serializes");
            }
            (Some(s.name.clone()), s.strategy.clone(), v)
        })
        .collect();
    checked(thresholds, &subjects)
}

fn checked(
    thresholds: &[Threshold],
    subjects: &[(Option<String>, String, Value)],
) -> anyhow::Result<Checked> {
    let results = check(thresholds, subjects)?;
    Ok(Checked {
        failed: results.iter().any(|r| r.failed),
        lines: describe(&results, thresholds),
        results: Some(results),
    })
}

/// Lines for stderr: each failed threshold with its value, then how many were checked.
fn describe(results: &[ThresholdResult], thresholds: &[Threshold]) -> Vec<String> {
    let unit = |r: &ThresholdResult| {
        let kind = thresholds
            .iter()
            .find(|t| t.text == r.expr)
            .map_or(Kind::Number, |t| t.kind);
        match kind {
            Kind::Millis => format!("{} ms", fmt(r.value)),
            Kind::Ratio => format!("{} ({}%)", fmt(r.value), fmt(r.value * 100.0)),
            Kind::Number => fmt(r.value),
        }
    };
    let mut lines: Vec<String> = results
        .iter()
        .filter(|r| r.failed)
        .map(|r| {
            format!(
                "fail-if {}: failed{}: {} is {}",
                r.expr,
                r.scenario
                    .as_deref()
                    .map(|s| format!(" for {s}"))
                    .unwrap_or_default(),
                r.figure,
                unit(r)
            )
        })
        .collect();
    let failed = results.iter().filter(|r| r.failed).count();
    lines.push(format!(
        "fail-if: {} of {} checks failed ({} expression{})",
        failed,
        results.len(),
        thresholds.len(),
        if thresholds.len() == 1 { "" } else { "s" }
    ));
    lines
}

fn fmt(v: f64) -> String {
    if v == v.trunc() && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.4}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

mod schema;

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Threshold {
        parse(s, Subject::Compare).unwrap()
    }

    #[test]
    fn expressions_read_with_their_units() {
        let t = p("error_rate>1%");
        assert_eq!(
            (t.path.as_str(), t.op, t.value),
            ("=error_rate", Op::Gt, 0.01)
        );
        let t = p("p99 > 0.2s");
        assert_eq!(
            (t.path.as_str(), t.op, t.value),
            ("latency_ms.p99", Op::Gt, 200.0)
        );
        assert_eq!(p("p99>200us").value, 0.2);
        assert_eq!(p("reuse_ratio<0.9").op, Op::Lt);
        assert_eq!(p("connections>=10").op, Op::Ge);
        assert_eq!(p("tls_full==1").op, Op::Eq);
        assert_eq!(p("stale_retries!=0").op, Op::Ne);
        let t = p("keepalive:reuse_ratio<90%");
        assert_eq!((t.scope.as_deref(), t.value), (Some("keepalive"), 0.9));
        let t = p("phases_ms.new.tls.mean>2ms");
        assert_eq!((t.kind, t.value), (Kind::Millis, 2.0));
        assert_eq!(p("connections.reuse_ratio<50%").value, 0.5);
    }

    #[test]
    fn malformed_expressions_say_what_is_wrong() {
        for (e, says) in [
            ("p99", "no comparison"),
            (">5", "no figure"),
            ("p99>fast", "cannot read the value"),
            ("reuse_ratio<90", "write 90% or 0.9"),
            ("error_rate>1", "write 1% or 0.01"),
            ("p99>200", "write 200ms or 200s"),
            ("reuse_ratio<0.9ms", "a ratio takes %"),
            ("connections>10%", "plain number"),
            ("p99>2x", "a time takes ms"),
            ("latency>1", "unknown figure 'latency'"),
            ("P99>1", "not a figure's name"),
        ] {
            let err = parse(e, Subject::Bench).unwrap_err().to_string();
            assert!(err.contains(says), "{e}: {err}");
        }
        let err = parse("keepalive:p99>1", Subject::Bench)
            .unwrap_err()
            .to_string();
        assert!(err.contains("only compare"), "{err}");
        let err = parse("times_slower>2", Subject::Bench)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not a figure of this report"), "{err}");
        let err = parse("p99>1", Subject::Audit).unwrap_err().to_string();
        assert!(err.contains("not a figure of this report"), "{err}");
    }

    #[test]
    fn checks_hold_or_fail_on_the_figures() {
        let v = serde_json::json!({
            "requests": {"attempted": 200, "ok": 190},
            "connections": {"opened": 200, "reuse_ratio": 0.0},
            "latency_ms": {"p99": 12.5},
        });
        let subjects = vec![(Some("https close".to_string()), "close".to_string(), v)];
        let ts = parse_all(
            &[
                "error_rate>1%".into(),
                "errors>=10".into(),
                "p99>20ms".into(),
                "reuse_ratio<0.9".into(),
            ],
            Subject::Compare,
        )
        .unwrap();
        let r = check(&ts, &subjects).unwrap();
        let failed: Vec<bool> = r.iter().map(|r| r.failed).collect();
        assert_eq!(failed, [true, true, false, true]);
        assert!((r[0].value - 0.05).abs() < 1e-12);
        let lines = describe(&r, &ts);
        assert!(
            lines[0].contains("error_rate>1%: failed for https close: error_rate is 0.05 (5%)"),
            "{lines:?}"
        );
        assert_eq!(
            lines.last().unwrap(),
            "fail-if: 3 of 4 checks failed (4 expressions)"
        );
        // A key of a map that did not occur is 0; a path that cannot exist is refused
        // when parsed; a scope naming no row is a usage error.
        let absent = parse_all(
            &[
                "connections.h2.goaway_codes.no_error>0".into(),
                "requests.status_codes.200<20".into(),
                "requests.error_details.refused>0".into(),
            ],
            Subject::Compare,
        )
        .unwrap();
        let r = check(&absent, &subjects).unwrap();
        let got: Vec<(f64, bool)> = r.iter().map(|r| (r.value, r.failed)).collect();
        assert_eq!(got, [(0.0, false), (0.0, true), (0.0, false)]);
        for (bad, says) in [
            ("requests.status_codes.abc>0", "cannot be a key"),
            ("requests.error_details.nonsense>0", "cannot be a key"),
            (
                "connections.nope>0",
                "not in the report under 'connections'",
            ),
            ("latency_ms.p99.x>1ms", "single figure"),
        ] {
            let err = parse(bad, Subject::Bench).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
        let t = p("non_2xx>0");
        assert_eq!(t.path, "requests.non_2xx");
        assert_eq!(p("status_4xx>0").path, "requests.status_classes.4xx");
        let nobody = parse_all(&["h2:p99>1ms".into()], Subject::Compare).unwrap();
        assert!(check(&nobody, &subjects)
            .unwrap_err()
            .to_string()
            .contains("names no row"));
    }
}
