//! The server's first flight against the round trip: over TCP the initial congestion
//! window (10 segments), over QUIC the anti-amplification limit (3 times what the client
//! sent before it is validated). A flight above either waits a round trip more on every
//! full handshake.

use crate::fmt::ms as fmt_ms;
use crate::report::doctor::TlsFindings;
use crate::report::finding::{Cause, Evidence, Finding};

/// TCP's initial congestion window (RFC 6928): 10 segments of 1,448 bytes (a 1,500-byte
/// MTU less IP, TCP and timestamp headers).
const INITIAL_WINDOW_BYTES: u64 = 10 * 1448;
/// QUIC: a client's datagram carrying an Initial is padded to 1,200 bytes, and a
/// ClientHello takes as many as its bytes need (about 1,150 of CRYPTO data each).
const QUIC_INITIAL_DATAGRAM: u64 = 1200;
const QUIC_CRYPTO_PER_DATAGRAM: u64 = 1150;

/// What a shorter flight would take.
const ADVICE: &str = "a shorter chain (send no root and no cross-signed certificate) or an ECDSA P-256 key (its key and signature are 64 bytes where RSA-4096's are 512 each) makes it smaller";

/// How many bytes the server may send over QUIC before it has validated the client: 3
/// times the client's first datagrams, for a ClientHello of `hello` bytes.
fn quic_limit(hello: u32) -> u64 {
    let datagrams = u64::from(hello).div_ceil(QUIC_CRYPTO_PER_DATAGRAM).max(1);
    3 * datagrams * QUIC_INITIAL_DATAGRAM
}

/// A problem for each limit the first flight is above (over QUIC only when the server
/// answers HTTP/3), with what it costs at the measured round trip.
pub(super) fn judge(t: &TlsFindings, quic: bool, problems: &mut Vec<Finding>) {
    let Some(flight) = t.server_flight_bytes.filter(|f| *f > 0) else {
        return;
    };
    let rtt = format!("about {} ms here, the median connect", fmt_ms(t.connect_ms));
    let flight_e = || {
        Evidence::figure(
            "tls.server_flight_bytes",
            flight as f64,
            Some("B"),
            "the server's first flight of a full handshake",
        )
    };
    let rtt_e = || {
        Evidence::figure(
            "tls.connect_ms",
            t.connect_ms,
            Some("ms"),
            "connects (median)",
        )
    };
    if flight > INITIAL_WINDOW_BYTES {
        problems.push(Finding::new("first_flight_above_initial_window", Cause::Tls, format!(
            "The server's first flight is {flight} B, above TCP's initial congestion window (10 segments, {INITIAL_WINDOW_BYTES} B): every full TLS handshake waits at least a round trip more for the client's ACKs ({rtt}); {ADVICE}."
        )).with(flight_e()).with(rtt_e()));
    }
    if let (true, Some(hello)) = (quic, t.client_hello_bytes) {
        let limit = quic_limit(hello);
        if flight > limit {
            problems.push(Finding::new("first_flight_above_quic_limit", Cause::Tls, format!(
                "Over QUIC the server may send 3 times what the client sent before it is validated: {limit} B after a {hello}-byte ClientHello; its first flight of about {flight} B waits at least a round trip more on every full HTTP/3 handshake ({rtt}); {ADVICE}."
            )).with(flight_e()).with(Evidence::figure("tls.client_hello_bytes", f64::from(hello), Some("B"), "the client's ClientHello")).with(rtt_e()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quic_limit_grows_with_the_client_hello_s_datagrams() {
        // An x25519 ClientHello fits one Initial; a post-quantum one needs two.
        assert_eq!(quic_limit(233), 3600);
        assert_eq!(quic_limit(1459), 7200);
    }
}
