//! A TLS 1.3 handshake played in memory on this machine: client and server in one thread,
//! no socket and no link. Its wall time is the handshake's own work here plus any wait
//! for a CPU; its CPU time (the thread's clock) is the work alone. Timed with each of the
//! lab's probes, it tells a machine that got in the way (the handshake waited for a CPU,
//! or its work took longer during the run than before it) from a link that did not hold.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};

use crate::net::tls::{client_config, TlsOptions};

/// How long after it is asked for a timed handshake starts.
const DUE_AFTER: Duration = Duration::from_millis(1);

/// One handshake's wall time (from when it was due to start) and CPU time, ms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timed {
    pub wall_ms: f64,
    pub cpu_ms: f64,
}

impl Timed {
    /// What waiting for a CPU added (wall over CPU time).
    pub(crate) fn waited_ms(&self) -> f64 {
        (self.wall_ms - self.cpu_ms).max(0.0)
    }
}

/// The two ends' configurations: the embedded server's (a fresh CA and leaf, ECDSA P-256)
/// and the client's defaults (every key-exchange group offered, X25519MLKEM768 first),
/// without resumption: every handshake is a full one.
pub(crate) struct Reference {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
}

impl Reference {
    pub(crate) fn new() -> anyhow::Result<Reference> {
        let certs = crate::server::tls::generate(&Default::default())?;
        let opts = TlsOptions {
            extra_roots: vec![certs.ca_der.clone()],
            only_extra_roots: true,
            ..TlsOptions::default()
        };
        Ok(Reference {
            client: client_config(&opts, false)?,
            server: certs.server_config,
        })
    }

    /// One full handshake due to start a millisecond from now, timed from then to its end
    /// (none if it failed, which with these configurations it does not). The thread sleeps
    /// until it is due, so the start is a moment the clock chose, not one at which this
    /// thread already had a CPU: a wake-up that waits for one counts, as it does for a
    /// client waking to a server's answer.
    pub(crate) fn time(&self) -> Option<Timed> {
        let due = Instant::now() + DUE_AFTER;
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let cpu0 = thread_cpu_ms();
        self.handshake().ok()?;
        Some(Timed {
            wall_ms: due.elapsed().as_secs_f64() * 1000.0,
            cpu_ms: thread_cpu_ms() - cpu0,
        })
    }

    fn handshake(&self) -> anyhow::Result<()> {
        let name = ServerName::try_from("localhost")?;
        let mut client = Connection::Client(ClientConnection::new(self.client.clone(), name)?);
        let mut server = Connection::Server(ServerConnection::new(self.server.clone())?);
        let mut bytes = Vec::with_capacity(16 * 1024);
        // A full TLS 1.3 handshake takes two flights each way; a few more turns at most.
        for _ in 0..8 {
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok(());
            }
            pass(&mut client, &mut server, &mut bytes)?;
            pass(&mut server, &mut client, &mut bytes)?;
        }
        anyhow::bail!("the in-memory handshake did not finish")
    }
}

/// What `from` has to send, read and processed by `to` (through `bytes`).
fn pass(from: &mut Connection, to: &mut Connection, bytes: &mut Vec<u8>) -> anyhow::Result<()> {
    bytes.clear();
    while from.wants_write() {
        from.write_tls(bytes)?;
    }
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        to.read_tls(&mut rest)?;
        to.process_new_packets()?;
    }
    Ok(())
}

fn thread_cpu_ms() -> f64 {
    super::delay::thread_cpu_ns() as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handshake_finishes_and_its_cpu_is_within_its_wall_time() {
        let r = Reference::new().unwrap();
        let t = r.time().expect("the handshake finished");
        assert!(t.cpu_ms > 0.0 && t.cpu_ms <= t.wall_ms + 0.01, "{t:?}");
    }
}
