//! Per-protocol connection drivers: how a request is written and a response read on one
//! connection. `h1` is HTTP/1.x, `h2` HTTP/2; the limits on a response read are shared in `pace`.

pub(crate) mod h1;
pub(crate) mod h2;
pub(crate) mod h3;
pub(crate) mod pace;

/// A status that sends the client on to its `Location` (RFC 9110 15.4: 301, 302, 303,
/// 307, 308; not 300, 304, 305).
pub(crate) fn is_redirect(status: u16) -> bool {
    matches!(status, 301 | 302 | 303 | 307 | 308)
}

/// The `Location` (its bytes, as the response carried them) of a response that
/// redirects, kept for `-L`; none for another status.
pub(crate) fn redirect_location(status: u16, location: Option<&[u8]>) -> Option<Box<str>> {
    location
        .filter(|_| is_redirect(status))
        .map(|l| String::from_utf8_lossy(l).into())
}
