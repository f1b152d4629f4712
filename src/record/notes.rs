//! What a failure and a response said, kept as examples for the report: a failure's
//! message cut to size (it travels with the [`super::Failure`]), and a status's line,
//! its body's first words and a redirect's target (it travels with the response's
//! record). Values both: nothing here is kept beside the event queue.

/// Longest example message kept for an error (bytes; longer ones are cut).
pub(crate) const EXAMPLE_MAX_BYTES: usize = 300;

/// `m` cut at [`EXAMPLE_MAX_BYTES`] (on a character boundary, marked with an ellipsis).
pub(crate) fn cut_example(mut m: String) -> String {
    if m.len() > EXAMPLE_MAX_BYTES {
        let mut cut = EXAMPLE_MAX_BYTES;
        while !m.is_char_boundary(cut) {
            cut -= 1;
        }
        m.truncate(cut);
        m.push('…');
    }
    m
}

/// The statuses (3xx to 5xx) whose example a worker already has: it takes the first
/// response of each, so what is copied is bounded (one example per status per worker),
/// and a response of a status it has costs one bit test. The example itself travels with
/// the response's record ([`super::Outcome::Ok`]), as a failure's message travels with
/// its failure.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Taken([u64; 5]);

impl Taken {
    /// Whether an example of `status` is still wanted: a cheap check the response readers
    /// make before they copy anything.
    pub(crate) fn wants(&self, status: u16) -> bool {
        (300..600).contains(&status) && {
            let i = usize::from(status - 300);
            self.0[i / 64] & (1 << (i % 64)) == 0
        }
    }

    /// What a response of `status` said (`said`) is on its way to the recorder: its
    /// status is taken.
    pub(crate) fn took(&mut self, status: u16, said: Option<&str>) {
        if said.is_some() {
            self.mark(status);
        }
    }

    /// `status`'s example is taken.
    fn mark(&mut self, status: u16) {
        if (300..600).contains(&status) {
            let i = usize::from(status - 300);
            self.0[i / 64] |= 1 << (i % 64);
        }
    }
}

/// Longest part of an error response's body kept in its example (bytes).
const STATUS_BODY_MAX_BYTES: usize = 160;

/// What a response said: its status line (`HTTP/1.1 400 Bad Request`) and a redirect's
/// target or the first bytes of an error's body, as text with its whitespace folded
/// ("The plain HTTP request was sent to HTTPS port"; an HTML page's tags left out).
pub(crate) fn status_example(status_line: &[u8], said: &[u8]) -> Box<str> {
    let line = String::from_utf8_lossy(status_line).trim().to_string();
    let text = body_words(said);
    if text.is_empty() {
        line.into()
    } else {
        format!("{line}: \"{text}\"").into()
    }
}

/// An HTTP/2 or HTTP/3 response's example, waiting for its body's first bytes (an
/// error's words; a redirect's target is kept at once).
pub(crate) struct PendingExample {
    line: String,
    location: Option<Vec<u8>>,
}

impl PendingExample {
    /// The example of a response of `status` (`version`: "HTTP/2", "HTTP/3"; its
    /// status line as curl prints it, with no reason phrase), where `taken` wants one.
    pub(crate) fn new(
        version: &str,
        status: u16,
        location: Option<&[u8]>,
        taken: Taken,
    ) -> Option<PendingExample> {
        taken.wants(status).then(|| PendingExample {
            line: format!("{version} {status}"),
            location: (status < 400).then(|| location.unwrap_or_default().to_vec()),
        })
    }

    /// The example, with `body`, the response's first DATA (empty when it had none).
    pub(crate) fn body(self, body: &[u8]) -> Box<str> {
        status_example(
            self.line.as_bytes(),
            self.location.as_deref().unwrap_or(body),
        )
    }
}

/// Where a redirect's example (`HTTP/1.1 301 Moved Permanently: "https://…"`) points.
pub(crate) fn redirect_target(example: &str) -> Option<&str> {
    example
        .split_once(": \"")
        .map(|(_, to)| to.trim_end_matches('"'))
}

/// The words of a body's first bytes: markup left out, whitespace folded, cut at
/// `STATUS_BODY_MAX_BYTES` (on a character boundary, marked with an ellipsis).
fn body_words(body: &[u8]) -> String {
    let raw = String::from_utf8_lossy(&body[..body.len().min(4096)]);
    let mut text = String::new();
    let mut in_tag = false;
    for c in raw.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                text.push(' ');
            }
            _ if in_tag => {}
            c if c.is_whitespace() || c.is_control() => text.push(' '),
            c => text.push(c),
        }
    }
    let mut words: Vec<&str> = Vec::new();
    for w in text.split_whitespace() {
        // A page's title is often its first heading again: say it once.
        if words.len() >= 3 && words.ends_with(&[w]) {
            continue;
        }
        words.push(w);
    }
    let mut out = dedup_title(&words);
    if out.len() > STATUS_BODY_MAX_BYTES {
        let mut cut = STATUS_BODY_MAX_BYTES;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

/// `words` joined, with a leading phrase said twice in a row ("400 Bad Request 400 Bad
/// Request ...", an HTML page's title then its heading) said once.
fn dedup_title(words: &[&str]) -> String {
    for n in (1..=words.len() / 2).rev() {
        if words[..n] == words[n..2 * n] {
            return words[n..].join(" ");
        }
    }
    words.join(" ")
}
