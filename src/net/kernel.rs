//! The kernel's view of a TCP connection (Linux `TCP_INFO`): its smoothed and least RTT
//! and the segments it sent again. Right after a connect, every retransmission is of
//! the SYN: the kernel waited its retransmission timeout (1 s, then 2 s, 4 s…) for the
//! SYN or its answer, lost on the way.

use std::os::fd::AsFd;

/// `tcpi_state` of a socket whose peer has closed and which has not (linux/tcp_states.h).
const TCP_CLOSE_WAIT: u8 = 8;

/// One reading of `TCP_INFO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TcpView {
    /// The smoothed RTT estimate (µs); right after a connect, the SYN's answer's time
    /// (none when the SYN was sent again: Karn's rule takes no sample from it).
    pub rtt_us: u32,
    /// The least RTT seen over the connection's life (µs; 0: no sample yet).
    pub min_rtt_us: u32,
    /// Segments sent again over the connection's life (the SYN's included).
    pub total_retrans: u32,
    /// The peer's FIN has arrived (the socket is in CLOSE_WAIT).
    pub peer_closed: bool,
    /// Bytes received in order over the connection's life, the peer's FIN counting one
    /// (Linux 4.1 and later; 0 before).
    pub bytes_received: u64,
}

/// Read `TCP_INFO` of a connected socket; `None` where the kernel does not say.
pub(crate) fn tcp_view(s: &impl AsFd) -> Option<TcpView> {
    // tcpi_min_rtt came with Linux 4.6; an older kernel's shorter answer leaves it 0.
    let info = crate::sys::socket::tcp_info(s)?;
    Some(TcpView {
        rtt_us: info.tcpi_rtt,
        min_rtt_us: info.tcpi_min_rtt,
        total_retrans: info.tcpi_total_retrans,
        peer_closed: info.tcpi_state == TCP_CLOSE_WAIT,
        bytes_received: info.tcpi_bytes_received,
    })
}
