//! What a failure and a response said, kept as examples for the report: a failure's
//! message cut to size (it travels with the [`super::Failure`]), and a status's line,
//! its body's first words and a redirect's target.

/// Longest example message kept for an error (bytes; longer ones are cut).
pub const EXAMPLE_MAX_BYTES: usize = 300;

/// `m` cut at [`EXAMPLE_MAX_BYTES`] (on a character boundary, marked with an ellipsis).
pub fn cut_example(mut m: String) -> String {
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

thread_local! {
    /// The first error response of each status on this thread (status line and the first
    /// bytes of its body, as text), for the recorder to keep as that status's example:
    /// at most `STATUS_NOTES_MAX` statuses, so bounded.
    static STATUS_NOTES: std::cell::RefCell<Vec<(u16, String)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Most statuses whose example a thread keeps.
const STATUS_NOTES_MAX: usize = 16;

/// Longest part of an error response's body kept in its example (bytes).
pub const STATUS_BODY_MAX_BYTES: usize = 160;

/// Whether an example of `status` (3xx, 4xx or 5xx) is still wanted on this thread: a
/// cheap check the response readers make before they copy anything.
pub fn wants_status_example(status: u16) -> bool {
    (300..600).contains(&status)
        && STATUS_NOTES
            .with_borrow(|v| v.len() < STATUS_NOTES_MAX && !v.iter().any(|(s, _)| *s == status))
}

/// Keep what an error response said: its status line (`HTTP/1.1 400 Bad Request`) and
/// the first bytes of its body, as text with its whitespace folded ("The plain HTTP
/// request was sent to HTTPS port"; an HTML page's tags left out).
pub fn note_status(status: u16, status_line: &[u8], body: &[u8]) {
    if !wants_status_example(status) {
        return;
    }
    let line = String::from_utf8_lossy(status_line).trim().to_string();
    let text = body_words(body);
    let example = if text.is_empty() {
        line
    } else {
        format!("{line}: \"{text}\"")
    };
    STATUS_NOTES.with_borrow_mut(|v| v.push((status, example)));
}

/// An HTTP/2 or HTTP/3 error response whose example is wanted, waiting for its first
/// body bytes.
pub struct PendingStatus {
    status: u16,
    line: String,
}

impl PendingStatus {
    /// Keep the example with `body`, the response's first DATA (empty when it had none).
    pub fn body(self, body: &[u8]) {
        note_status(self.status, self.line.as_bytes(), body);
    }
}

/// The example of an HTTP/2 or HTTP/3 response (`version`: "HTTP/2", "HTTP/3"; its
/// status line as curl prints it, with no reason phrase): a redirect's `Location` is
/// kept now; an error's body words come with its first DATA, through what is returned.
pub fn status_note(version: &str, status: u16, location: Option<&[u8]>) -> Option<PendingStatus> {
    if status < 300 || !wants_status_example(status) {
        return None;
    }
    let line = format!("{version} {status}");
    if status < 400 {
        note_status(status, line.as_bytes(), location.unwrap_or_default());
        return None;
    }
    Some(PendingStatus { status, line })
}

/// Where a redirect's example (`HTTP/1.1 301 Moved Permanently: "https://…"`) points.
pub fn redirect_target(example: &str) -> Option<&str> {
    example
        .split_once(": \"")
        .map(|(_, to)| to.trim_end_matches('"'))
}

/// The example kept for `status` on this thread, if any (it stays for later recorders).
pub fn status_example(status: u16) -> Option<String> {
    STATUS_NOTES.with_borrow(|v| v.iter().find(|(s, _)| *s == status).map(|(_, m)| m.clone()))
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
