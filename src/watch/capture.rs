//! The packet capture: one AF_PACKET socket (SOCK_DGRAM: every packet starts at its IP
//! header, whatever the interface) on all interfaces, with a classic BPF filter that
//! keeps IPv4 and IPv6 TCP and drops loopback's outgoing copy of each packet (loopback
//! delivers every packet twice). The kernel's drop count is read with PACKET_STATISTICS.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime};

use etherparse::{LaxNetSlice, LaxSlicedPacket, TransportSlice};
use socket2::{Domain, Protocol, SockFilter, Socket, Type};

use crate::track::Segment;

/// The largest packet kept: loopback's MTU is 64 KiB and offloaded segments reach it.
const SNAPLEN: u32 = 65_535;

/// IPv4 or IPv6 TCP, not the outgoing copy on loopback; each accepted packet cut to
/// `snaplen`. Offsets count from the IP header (SOCK_DGRAM).
fn tcp_filter(lo_ifindex: u32, snaplen: u32) -> Vec<SockFilter> {
    use libc::{
        BPF_ABS, BPF_B, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W, ETH_P_IP, ETH_P_IPV6,
        IPPROTO_TCP, PACKET_OUTGOING, SKF_AD_IFINDEX, SKF_AD_OFF, SKF_AD_PKTTYPE, SKF_AD_PROTOCOL,
    };
    let ancillary = |off: i32| (SKF_AD_OFF + off) as u32;
    let load_word = (BPF_LD | BPF_W | BPF_ABS) as u16;
    let load_byte = (BPF_LD | BPF_B | BPF_ABS) as u16;
    let jump_eq = (BPF_JMP | BPF_JEQ | BPF_K) as u16;
    let ret = (BPF_RET | BPF_K) as u16;
    // Jumps are relative: the target is the next instruction plus jt (true) or jf.
    vec![
        SockFilter::new(load_word, 0, 0, ancillary(SKF_AD_PKTTYPE)), // 0
        SockFilter::new(jump_eq, 0, 2, PACKET_OUTGOING as u32),      // 1: outgoing? 2 : 4
        SockFilter::new(load_word, 0, 0, ancillary(SKF_AD_IFINDEX)), // 2
        SockFilter::new(jump_eq, 8, 0, lo_ifindex),                  // 3: on lo? drop : 4
        SockFilter::new(load_word, 0, 0, ancillary(SKF_AD_PROTOCOL)), // 4: ethertype
        SockFilter::new(jump_eq, 0, 2, ETH_P_IP as u32),             // 5: IPv4? 6 : 8
        SockFilter::new(load_byte, 0, 0, 9),                         // 6: its protocol
        SockFilter::new(jump_eq, 3, 4, IPPROTO_TCP as u32),          // 7: TCP? accept : drop
        SockFilter::new(jump_eq, 0, 3, ETH_P_IPV6 as u32),           // 8: IPv6? 9 : drop
        SockFilter::new(load_byte, 0, 0, 6),                         // 9: next header
        SockFilter::new(jump_eq, 0, 1, IPPROTO_TCP as u32),          // 10: TCP? accept : drop
        SockFilter::new(ret, 0, 0, snaplen),                         // 11: accept
        SockFilter::new(ret, 0, 0, 0),                               // 12: drop
    ]
}

pub(super) struct Capture {
    sock: Socket,
    buf: Vec<u8>,
    /// PACKET_STATISTICS resets on each read: the sums so far.
    pub packets: u64,
    pub drops: u64,
}

/// Whether an error means the process lacks the privilege (CAP_NET_RAW / CAP_NET_ADMIN).
pub(super) fn is_permission(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
}

impl Capture {
    /// `buffer`: the socket's receive buffer in bytes (the kernel holds packets there
    /// until they are read).
    pub(super) fn open(buffer: u64) -> io::Result<Capture> {
        // Protocol 0 receives nothing until bind: no packet gets in before the filter.
        let sock = Socket::new(Domain::PACKET, Type::DGRAM, Some(Protocol::from(0)))?;
        let lo = rustix::net::netdevice::name_to_index(&sock, "lo").unwrap_or(0);
        sock.attach_filter(&tcp_filter(lo, SNAPLEN))?;
        // As large a buffer as asked (SO_RCVBUFFORCE passes rmem_max, for root).
        let size = libc::c_int::try_from(buffer).unwrap_or(libc::c_int::MAX);
        if crate::sys::socket::set_recv_buffer_force(&sock, size).is_err() {
            let _ = sock.set_recv_buffer_size(size as usize);
        }
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        // Each packet's time is its arrival, however long it waited to be read.
        crate::sys::socket::set_timestamps(&sock)?;
        let addr = crate::sys::socket::packet_any()?;
        sock.bind(&addr)?;
        Ok(Capture {
            sock,
            buf: vec![0; SNAPLEN as usize + 1],
            packets: 0,
            drops: 0,
        })
    }

    /// The next packet's TCP segment (None after the read timeout, or for a packet that
    /// is not a parsable TCP segment).
    pub(super) fn next(&mut self, f: &mut dyn FnMut(&Segment)) -> io::Result<bool> {
        let (n, stamp) = match crate::sys::socket::recv_stamped(&self.sock, &mut self.buf) {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                return Ok(false)
            }
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        // The arrival, from the kernel's stamp (realtime) moved onto the monotonic clock;
        // the read's time when there is none. A waiting packet is not one read late.
        let waited = stamp.and_then(|t| SystemTime::now().duration_since(t).ok());
        let at = waited
            .filter(|w| *w < Duration::from_secs(1))
            .and_then(|w| now.checked_sub(w))
            .unwrap_or(now);
        let data = &self.buf[..n];
        let Ok(p) = LaxSlicedPacket::from_ip(data) else {
            return Ok(true);
        };
        let (src, dst): (IpAddr, IpAddr) = match &p.net {
            Some(LaxNetSlice::Ipv4(v4)) => (
                v4.header().source_addr().into(),
                v4.header().destination_addr().into(),
            ),
            Some(LaxNetSlice::Ipv6(v6)) => (
                v6.header().source_addr().into(),
                v6.header().destination_addr().into(),
            ),
            _ => return Ok(true),
        };
        if let Some(TransportSlice::Tcp(t)) = &p.transport {
            f(&Segment {
                src: SocketAddr::new(src, t.source_port()),
                dst: SocketAddr::new(dst, t.destination_port()),
                seq: t.sequence_number(),
                syn: t.syn(),
                ack: t.ack(),
                fin: t.fin(),
                rst: t.rst(),
                payload: t.payload(),
                at,
            });
        }
        Ok(true)
    }

    /// Add the kernel's counts since the last read (packets it passed the filter, and of
    /// them those dropped for want of buffer room).
    pub(super) fn read_stats(&mut self) {
        if let Some((packets, drops)) = crate::sys::socket::packet_statistics(&self.sock) {
            self.packets += u64::from(packets);
            self.drops += u64::from(drops);
        }
    }
}
