//! What counts as ok: a response whose status is 2xx or 3xx, or one that `--ok-status`
//! accepts. Every count called `ok` (the summary, the headline, the timeline's buckets,
//! the metrics, `--fail-if ok`) is of these; the other answers are counted as answered
//! with an error status, apart from the requests that failed without an answer.

/// Whether a response of status `code` is ok: 2xx, 3xx, or within one of the inclusive
/// ranges `--ok-status` gave (`extra`).
#[inline]
pub(crate) fn is_ok(code: u16, extra: &[(u16, u16)]) -> bool {
    (200..400).contains(&code) || extra.iter().any(|(lo, hi)| (*lo..=*hi).contains(&code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_and_three_hundreds_are_ok_and_the_rest_only_when_accepted() {
        assert!(is_ok(200, &[]) && is_ok(304, &[]) && is_ok(399, &[]));
        assert!(!is_ok(199, &[]) && !is_ok(404, &[]) && !is_ok(503, &[]));
        assert!(is_ok(404, &[(400, 499)]) && !is_ok(503, &[(400, 499)]));
        assert!(is_ok(503, &[(404, 404), (503, 503)]) && !is_ok(502, &[(503, 503)]));
    }
}
