//! How figures are written in text: milliseconds, plain numbers, bit rates and counted
//! nouns. One place, so the same figure reads the same in every command's output.

/// A millisecond figure (or any figure read at millisecond scale) with a precision that
/// suits its size: `473`, `40.3`, `1.25`, `0.047`. Negative figures (differences) take
/// the precision of their size.
pub fn ms(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Nanoseconds as milliseconds.
pub fn ns_to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// A setting's number as the user would write it: whole numbers without decimals, else
/// one decimal from 10 up and two below (`40`, `12.5`, `0.25`).
pub fn num(v: f64) -> String {
    if v == v.round() && v.abs() < 1e9 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A bit rate: `10 Mbit/s`, `500 kbit/s`, `1 Gbit/s`.
pub fn rate_bps(bps: u64) -> String {
    let b = bps as f64;
    if b >= 1e9 {
        format!("{} Gbit/s", num(b / 1e9))
    } else if b >= 1e6 {
        format!("{} Mbit/s", num(b / 1e6))
    } else {
        format!("{} kbit/s", num(b / 1e3))
    }
}

/// "1 connection", "3 connections": `n` and the noun in its number.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// [`plural`] for a noun whose plural adds an s: "1 request", "2 requests".
pub fn plural_s(n: u64, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// The "s" a noun takes after `n`: `format!("{n} worker{}", s(n))`.
pub fn s(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The width text output is written to: `COLUMNS` when set, else the terminal's when
/// stdout is one, else 80 (a CI log, a pipe). At least 40.
pub fn width() -> usize {
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok());
    let w = from_env.or_else(terminal_columns).unwrap_or(80);
    w.max(40)
}

/// The columns of the terminal on stdout, if it is one.
fn terminal_columns() -> Option<usize> {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into the struct passed; fd 1 may be anything,
    // and a failure leaves it untouched.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut ws) };
    (rc == 0 && ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_by_size() {
        assert_eq!(ms(473.2), "473");
        assert_eq!(ms(40.34), "40.3");
        assert_eq!(ms(1.254), "1.25");
        assert_eq!(ms(0.0474), "0.047");
        assert_eq!(ms(-0.0474), "-0.047");
        assert_eq!(ms(-12.34), "-12.3");
    }

    #[test]
    fn numbers_and_rates() {
        assert_eq!(num(40.0), "40");
        assert_eq!(num(12.54), "12.5");
        assert_eq!(num(0.254), "0.25");
        assert_eq!(rate_bps(10_000_000), "10 Mbit/s");
        assert_eq!(rate_bps(500_000), "500 kbit/s");
        assert_eq!(rate_bps(1_500_000_000), "1.50 Gbit/s");
    }

    #[test]
    fn counted_nouns() {
        assert_eq!(plural(1, "child", "children"), "1 child");
        assert_eq!(plural(2, "child", "children"), "2 children");
        assert_eq!(plural_s(0, "request"), "0 requests");
        assert_eq!(plural_s(1, "request"), "1 request");
        assert_eq!(format!("{} worker{}", 3, s(3)), "3 workers");
    }
}
