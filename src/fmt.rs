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
pub(crate) fn rate_bps(bps: u64) -> String {
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
pub(crate) fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// [`plural`] for a noun whose plural adds an s: "1 request", "2 requests".
pub(crate) fn plural_s(n: u64, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// The width text output is written to: `COLUMNS` when set, else the terminal's when
/// stdout is one, else 80 (a CI log, a pipe). At least 40.
pub(crate) fn width() -> usize {
    let from_env = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok());
    let w = from_env.or_else(terminal_columns).unwrap_or(80);
    w.max(40)
}

/// `text` with every line longer than `width` characters folded at spaces: the rest of
/// a folded line goes on lines indented under its value (where a label of the line ends
/// in two spaces or more, as in "  TLS         TLSv1.3 …"), else two more than the
/// line. A word longer than the room (a URL) is cut.
pub(crate) fn fit(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        fold(&mut out, line, width, None);
    }
    out
}

/// One line fitted to `width` as [`fit`] does, its folds indented by `hang`.
pub(crate) fn fit_hanging(line: &str, width: usize, hang: usize) -> String {
    let mut out = String::with_capacity(line.len() + 16);
    fold(&mut out, line, width, Some(hang.min(width / 2)));
    out
}

/// Where the lines a long line folds into start: under its value when a short label
/// ends in a run of spaces, else two past its own indent.
fn hanging_indent(chars: &[char], width: usize) -> usize {
    let indent = chars.iter().take_while(|c| **c == ' ').count();
    let label_end = (indent..chars.len().saturating_sub(2))
        .find(|&i| chars[i] == ' ' && chars[i + 1] == ' ')
        .filter(|&i| i < 24);
    let value = label_end.map(|i| i + chars[i..].iter().take_while(|c| **c == ' ').count());
    value.unwrap_or(indent + 2).min(width / 2)
}

/// One line folded to `width` (see [`fit`]): its spacing kept, save at the folds.
fn fold(out: &mut String, line: &str, width: usize, hang: Option<usize>) {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() <= width {
        out.push_str(line);
        return;
    }
    let hang = hang.unwrap_or_else(|| hanging_indent(&chars, width));
    // Words with the spaces before each.
    let mut words: Vec<(usize, &[char])> = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let gap = chars[i..].iter().take_while(|c| **c == ' ').count();
        let len = chars[i + gap..].iter().take_while(|c| **c != ' ').count();
        words.push((gap, &chars[i + gap..i + gap + len]));
        i += gap + len;
    }
    let mut col = 0;
    for (k, (gap, word)) in words.into_iter().enumerate() {
        let mut word = word;
        if k > 0 && col + gap + word.len() > width {
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', hang));
            col = hang;
        } else {
            out.extend(std::iter::repeat_n(' ', gap));
            col += gap;
        }
        // Longer than the room: cut.
        while col + word.len() > width && width > col {
            let room = width - col;
            out.extend(word[..room].iter());
            word = &word[room..];
            out.push('\n');
            out.extend(std::iter::repeat_n(' ', hang));
            col = hang;
        }
        out.extend(word.iter());
        col += word.len();
    }
}

/// The columns of the terminal on stdout, if it is one.
fn terminal_columns() -> Option<usize> {
    let ws = rustix::termios::tcgetwinsize(std::io::stdout()).ok()?;
    (ws.ws_col > 0).then_some(usize::from(ws.ws_col))
}

/// `s` with its first letter capitalised: a clause made the start of a sentence.
pub(crate) fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
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
    fn long_lines_fold_at_spaces_under_their_indent() {
        let line = "  Why this row costs more: it opens a new connection for every request";
        let folded = fit(line, 30);
        for l in folded.lines() {
            assert!(l.chars().count() <= 30, "{l:?}");
        }
        assert_eq!(
            folded,
            "  Why this row costs more: it\n    opens a new connection for\n    every request"
        );
        assert_eq!(
            fit("  TLS         TLSv1.3, ALPN h2, resumed", 30),
            "  TLS         TLSv1.3, ALPN\n              h2, resumed"
        );
        assert_eq!(fit("short\n\nlines", 30), "short\n\nlines");
        let url = fit(
            "x https://127.0.0.1:41613/a/very/long/path/that/does/not/fit",
            20,
        );
        assert!(url.lines().all(|l| l.chars().count() <= 20), "{url}");
        assert_eq!(
            url.replace(['\n', ' '], ""),
            "xhttps://127.0.0.1:41613/a/very/long/path/that/does/not/fit"
        );
        assert_eq!(fit("█".repeat(50).as_str(), 40).lines().count(), 2);
    }

    #[test]
    fn counted_nouns() {
        assert_eq!(plural(1, "child", "children"), "1 child");
        assert_eq!(plural(2, "child", "children"), "2 children");
        assert_eq!(plural_s(0, "request"), "0 requests");
        assert_eq!(plural_s(1, "request"), "1 request");
    }
}
