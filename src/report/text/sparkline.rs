//! Sparklines: one line per series over a run's seconds (audit's, watch's and the
//! timeline's), a last sliver of a second drawn with the bucket before.

use std::fmt::Write as _;

use crate::fmt::ms as fmt_ms;

/// One line of a timeline: a value per bucket. `per_second`: counts, drawn as their rate
/// over the bucket; otherwise the highest value of a group of buckets is drawn.
pub(crate) struct Series<'a> {
    pub name: &'a str,
    pub unit: &'a str,
    pub values: Vec<f64>,
    pub per_second: bool,
}

impl<'a> Series<'a> {
    /// A count per bucket, drawn as a rate ("requests/s").
    pub(crate) fn rate<B>(name: &'a str, buckets: &[B], count: impl Fn(&B) -> u64) -> Series<'a> {
        Series {
            name,
            unit: "",
            values: buckets.iter().map(|b| count(b) as f64).collect(),
            per_second: true,
        }
    }
}

/// Timelines of 3 buckets or more (widths in s): one line per series, a character per
/// bucket (at most 60, and what `width` leaves room for; more buckets are drawn in
/// groups), scaled to the series' maximum.
/// A last bucket shorter than half the one before (the run ended just past a boundary)
/// is drawn with that one: a few events over a sliver of a second are no rate (one
/// request in 0.6 ms would read 1700/s in a run at 500/s).
pub(crate) fn sparklines(out: &mut String, widths: &[f64], series: &[Series], width: usize) {
    let (widths, series) = fold_sliver(widths, series);
    if widths.len() < 3 {
        return;
    }
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    // The name's column (2 + 16 + 1), the bars, then "| max 12345 ms" (at most 16).
    let room = width.saturating_sub(35).clamp(10, 60);
    let per = widths.len().div_ceil(room);
    let span: f64 = widths.iter().sum();
    let _ = writeln!(
        out,
        "\nTimeline ({} s per character, 0 to {} s; each line scaled to its own maximum)",
        crate::fmt::num(widths[0].max(1.0) * per as f64),
        fmt_ms(span)
    );
    for s in series {
        let v: Vec<f64> = s
            .values
            .chunks(per)
            .zip(widths.chunks(per))
            .map(|(v, w)| {
                if s.per_second {
                    let w: f64 = w.iter().sum();
                    if w > 0.0 {
                        v.iter().sum::<f64>() / w
                    } else {
                        0.0
                    }
                } else {
                    v.iter().copied().fold(0.0, f64::max)
                }
            })
            .collect();
        let max = v.iter().copied().fold(0.0_f64, f64::max);
        let bars: String = v
            .iter()
            .map(|&x| {
                if x <= 0.0 || max <= 0.0 {
                    ' '
                } else {
                    BARS[((x / max * 7.0).round() as usize).min(7)]
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "  {:<16}|{bars}| max {}{}",
            s.name,
            fmt_ms(max),
            s.unit
        );
    }
}

/// The timeline with a last bucket shorter than half the one before joined to it: its
/// width added, its counts added (its highest value kept, for a series of values).
fn fold_sliver<'a>(widths: &[f64], series: &[Series<'a>]) -> (Vec<f64>, Vec<Series<'a>>) {
    let mut widths = widths.to_vec();
    let mut series: Vec<Series> = series
        .iter()
        .map(|s| Series {
            values: s.values.clone(),
            ..*s
        })
        .collect();
    if let [.., before, last] = widths[..] {
        if last < before / 2.0 {
            widths.pop();
            *widths.last_mut().expect("two widths") += last;
            for s in &mut series {
                let last = s.values.pop().unwrap_or(0.0);
                if let Some(v) = s.values.last_mut() {
                    *v = if s.per_second { *v + last } else { v.max(last) };
                }
            }
        }
    }
    (widths, series)
}

#[cfg(test)]
#[cfg(test)]
mod tests {
    use super::*;

    fn series(per_second: bool, values: &[f64]) -> Series<'static> {
        Series {
            name: if per_second { "requests/s" } else { "p99" },
            unit: if per_second { "" } else { " ms" },
            values: values.to_vec(),
            per_second,
        }
    }

    /// A last bucket of 0.6 ms holding one request is drawn with the second before (rate
    /// 501 over 1.0006 s, its p99 the higher of the two); a last bucket of 0.7 s keeps its
    /// own character and its rate over 0.7 s.
    #[test]
    fn a_last_sliver_is_drawn_with_the_bucket_before() {
        let mut out = String::new();
        sparklines(
            &mut out,
            &[1.0, 1.0, 1.0, 1.0, 0.0006],
            &[
                series(true, &[500.0, 500.0, 500.0, 500.0, 1.0]),
                series(false, &[0.1, 0.1, 0.1, 0.1, 0.3]),
            ],
            80,
        );
        assert!(out.contains("0 to 4.00 s"), "{out}");
        assert!(out.contains("requests/s      |████| max 501\n"), "{out}");
        assert!(
            out.contains("p99             |▃▃▃█| max 0.300 ms\n"),
            "{out}"
        );
        let mut out = String::new();
        sparklines(
            &mut out,
            &[1.0, 1.0, 0.7],
            &[series(true, &[500.0, 500.0, 350.0])],
            80,
        );
        assert!(out.contains("requests/s      |███| max 500\n"), "{out}");
    }
}
