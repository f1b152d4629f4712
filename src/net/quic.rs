//! QUIC's TLS, watched: quinn keeps each connection's rustls session to itself, so
//! whether a handshake was full or resumed is read off the handshake messages the
//! server sends. A full TLS 1.3 handshake carries the server's Certificate (or
//! CompressedCertificate); a resumed one (a PSK) never does. Only the messages' 4-byte
//! headers are read; rustls parses and checks everything.
//!
//! The verifier cannot say it instead: rustls resumes a session only under the very
//! verifier that made it, so every connection must share one.

use std::any::Any;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use quinn::crypto::rustls::QuicClientConfig;
use quinn::crypto::{self, ExportKeyingMaterialError, KeyPair, Keys, PacketKey, Session};
use quinn::{ConnectError, ConnectionId, Side};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::TransportError;

/// Socket buffers asked for on QUIC's UDP sockets (the kernel caps them at
/// `net.core.rmem_max` / `wmem_max`): one socket carries every connection of a client
/// thread or of the server, and a burst of new connections' Initials overflows the
/// default (~208 KiB here), each drop costing a loss timeout (1 s for an Initial).
const UDP_BUFFER: usize = 4 << 20;

/// A UDP socket bound to `addr` with large buffers (best effort), for a quinn endpoint;
/// `dual_stack` (a client's wildcard IPv6 socket) takes IPv4 too.
fn udp_socket(addr: SocketAddr, dual_stack: bool) -> std::io::Result<std::net::UdpSocket> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6() && dual_stack {
        let _ = socket.set_only_v6(false);
    }
    let _ = socket.set_recv_buffer_size(UDP_BUFFER);
    let _ = socket.set_send_buffer_size(UDP_BUFFER);
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// A quinn endpoint on such a socket: a client's (`server` None) or a server's.
pub(crate) fn endpoint(
    addr: SocketAddr,
    server: Option<quinn::ServerConfig>,
) -> std::io::Result<quinn::Endpoint> {
    let runtime = quinn::default_runtime()
        .ok_or_else(|| std::io::Error::other("no async runtime for QUIC"))?;
    let socket = udp_socket(addr, server.is_none())?;
    quinn::Endpoint::new(quinn::EndpointConfig::default(), server, socket, runtime)
}

/// TLS handshake message types (RFC 8446 4, RFC 8879).
const NEW_SESSION_TICKET: u8 = 4;
const CERTIFICATE: u8 = 11;
const COMPRESSED_CERTIFICATE: u8 = 25;

/// The QUIC client crypto of a scenario: one rustls configuration (one session store,
/// one verifier), watched per connection.
pub(crate) struct QuicTls {
    inner: Arc<QuicClientConfig>,
}

impl std::fmt::Debug for QuicTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuicTls").finish_non_exhaustive()
    }
}

impl QuicTls {
    pub(crate) fn new(config: Arc<rustls::ClientConfig>) -> anyhow::Result<QuicTls> {
        let inner = QuicClientConfig::try_from(config)
            .map_err(|e| anyhow::anyhow!("QUIC needs TLS 1.3 with an AES-128-GCM suite: {e}"))?;
        Ok(QuicTls {
            inner: Arc::new(inner),
        })
    }

    /// The crypto for one new connection, and what it will see.
    pub(crate) fn for_connection(&self) -> (Arc<dyn crypto::ClientConfig>, Arc<Seen>) {
        let seen = Arc::new(Seen::default());
        let cfg = Watching {
            inner: self.inner.clone(),
            seen: seen.clone(),
        };
        (Arc::new(cfg), seen)
    }
}

/// What one connection's server sent in its handshake messages.
#[derive(Default)]
pub(crate) struct Seen {
    /// Its certificate: the handshake is a full one.
    pub full: AtomicBool,
    /// A session ticket (for the next connection to resume).
    pub ticket: AtomicBool,
    /// Woken when a ticket comes.
    pub ticket_came: tokio::sync::Notify,
    /// (Server side) the handshake has completed: set the moment rustls says so, as
    /// quinn reads the client's Finished, before any 1-RTT packet is read.
    pub handshaken: AtomicBool,
    /// (Server side) packets read under the 0-RTT keys.
    pub early_packets: AtomicU64,
}

impl Seen {
    pub(crate) fn full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    pub(crate) fn ticket(&self) -> bool {
        self.ticket.load(Ordering::Relaxed)
    }

    pub(crate) fn handshaken(&self) -> bool {
        self.handshaken.load(Ordering::Acquire)
    }

    pub(crate) fn early_packets(&self) -> u64 {
        self.early_packets.load(Ordering::Relaxed)
    }
}

struct Watching {
    inner: Arc<QuicClientConfig>,
    seen: Arc<Seen>,
}

impl crypto::ClientConfig for Watching {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn Session>, ConnectError> {
        let inner = self
            .inner
            .clone()
            .start_session(version, server_name, params)?;
        Ok(Box::new(Watched {
            inner,
            seen: self.seen.clone(),
            scan: Scan::default(),
            server: false,
        }))
    }
}

/// The server side: the embedded server's QUIC crypto, each session watched for the
/// certificate it sends (a full handshake; none: a resumed one). A connection's
/// `handshake_data()` is then a [`ServerSeen`].
pub(crate) struct WatchingServer {
    inner: Arc<quinn::crypto::rustls::QuicServerConfig>,
}

impl WatchingServer {
    pub(crate) fn new(config: Arc<rustls::ServerConfig>) -> anyhow::Result<WatchingServer> {
        let inner = quinn::crypto::rustls::QuicServerConfig::try_from(config)
            .map_err(|e| anyhow::anyhow!("QUIC needs TLS 1.3 with an AES-128-GCM suite: {e}"))?;
        Ok(WatchingServer {
            inner: Arc::new(inner),
        })
    }
}

/// What a server connection's `handshake_data()` holds.
pub(crate) struct ServerSeen(pub Arc<Seen>);

impl crypto::ServerConfig for WatchingServer {
    fn initial_keys(
        &self,
        version: u32,
        dst_cid: &ConnectionId,
    ) -> Result<Keys, quinn::crypto::UnsupportedVersion> {
        self.inner.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.inner.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(
        self: Arc<Self>,
        version: u32,
        params: &TransportParameters,
    ) -> Box<dyn Session> {
        Box::new(Watched {
            inner: self.inner.clone().start_session(version, params),
            seen: Arc::new(Seen::default()),
            scan: Scan::default(),
            server: true,
        })
    }
}

/// Where the scan of the server's handshake stream is: inside a message's body (bytes
/// left to skip) or gathering the next header.
#[derive(Default)]
struct Scan {
    skip: usize,
    header: Vec<u8>,
}

impl Scan {
    /// Feed the next bytes of the server's handshake messages (in order, across
    /// encryption levels: messages never straddle a level change); the types of the
    /// messages that begin in them.
    fn feed(&mut self, mut buf: &[u8]) -> Vec<u8> {
        let mut types = Vec::new();
        while !buf.is_empty() {
            if self.skip > 0 {
                let n = self.skip.min(buf.len());
                self.skip -= n;
                buf = &buf[n..];
                continue;
            }
            let n = (4 - self.header.len()).min(buf.len());
            self.header.extend_from_slice(&buf[..n]);
            buf = &buf[n..];
            if self.header.len() == 4 {
                let h = &self.header;
                types.push(h[0]);
                self.skip =
                    (usize::from(h[1]) << 16) | (usize::from(h[2]) << 8) | usize::from(h[3]);
                self.header.clear();
            }
        }
        types
    }
}

/// A session whose handshake messages are watched: the server's, as read by a client
/// or as written by a server.
struct Watched {
    inner: Box<dyn Session>,
    seen: Arc<Seen>,
    scan: Scan,
    server: bool,
}

impl Watched {
    fn saw(&mut self, bytes: &[u8]) {
        for t in self.scan.feed(bytes) {
            match t {
                CERTIFICATE | COMPRESSED_CERTIFICATE => {
                    self.seen.full.store(true, Ordering::Relaxed)
                }
                NEW_SESSION_TICKET => {
                    self.seen.ticket.store(true, Ordering::Relaxed);
                    self.seen.ticket_came.notify_one();
                }
                _ => {}
            }
        }
    }
}

impl Session for Watched {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        self.inner.initial_keys(dst_cid, side)
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        if self.server {
            let _ = self.inner.handshake_data()?;
            return Some(Box::new(ServerSeen(self.seen.clone())));
        }
        self.inner.handshake_data()
    }

    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }

    fn early_crypto(&self) -> Option<(Box<dyn crypto::HeaderKey>, Box<dyn PacketKey>)> {
        let (header, packet) = self.inner.early_crypto()?;
        if !self.server {
            return Some((header, packet));
        }
        let packet = Box::new(CountingKey {
            inner: packet,
            seen: self.seen.clone(),
        });
        Some((header, packet))
    }

    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }

    fn is_handshaking(&self) -> bool {
        let handshaking = self.inner.is_handshaking();
        if self.server && !handshaking {
            self.seen.handshaken.store(true, Ordering::Release);
        }
        handshaking
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        if !self.server {
            self.saw(buf);
        }
        self.inner.read_handshake(buf)
    }

    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        let from = buf.len();
        let keys = self.inner.write_handshake(buf);
        if self.server {
            let written = buf[from..].to_vec();
            self.saw(&written);
        }
        keys
    }

    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        self.inner.next_1rtt_keys()
    }

    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }

    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

/// The server's 0-RTT packet key, counting the packets it opens.
struct CountingKey {
    inner: Box<dyn PacketKey>,
    seen: Arc<Seen>,
}

impl PacketKey for CountingKey {
    fn encrypt(&self, packet: u64, buf: &mut [u8], header_len: usize) {
        self.inner.encrypt(packet, buf, header_len)
    }

    fn decrypt(
        &self,
        packet: u64,
        header: &[u8],
        payload: &mut bytes::BytesMut,
    ) -> Result<(), crypto::CryptoError> {
        self.inner.decrypt(packet, header, payload)?;
        self.seen.early_packets.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn tag_len(&self) -> usize {
        self.inner.tag_len()
    }

    fn confidentiality_limit(&self) -> u64 {
        self.inner.confidentiality_limit()
    }

    fn integrity_limit(&self) -> u64 {
        self.inner.integrity_limit()
    }
}

#[cfg(test)]
mod tests {
    use super::Scan;

    #[test]
    fn finds_a_certificate_message_across_splits() {
        // ServerHello (2), EncryptedExtensions (8), Certificate (11), Finished (20).
        let mut stream = Vec::new();
        for (t, len) in [(2u8, 5usize), (8, 3), (11, 300), (20, 32)] {
            stream.extend_from_slice(&[t, 0, (len >> 8) as u8, len as u8]);
            stream.extend(std::iter::repeat_n(0xAB, len));
        }
        for split in 1..stream.len() {
            let mut s = Scan::default();
            let mut types = s.feed(&stream[..split]);
            types.extend(s.feed(&stream[split..]));
            assert_eq!(types, [2, 8, 11, 20], "split at {split}");
        }
        // A resumed handshake: no certificate, whatever bytes the bodies hold.
        let mut resumed = Vec::new();
        for (t, len) in [(2u8, 11usize), (8, 4), (20, 32), (4, 9)] {
            resumed.extend_from_slice(&[t, 0, 0, len as u8]);
            resumed.extend(std::iter::repeat_n(11u8, len));
        }
        assert_eq!(Scan::default().feed(&resumed), [2, 8, 20, 4]);
    }
}
