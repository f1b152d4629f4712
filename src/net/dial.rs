//! Where a connection goes (an origin: scheme, host, port, fixed addresses) and how
//! resolution and connect errors map to the error categories.

use std::io;
use std::net::{IpAddr, SocketAddr};

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use crate::record::ErrorKind;

/// One scheme://host:port that connections are opened to.
#[derive(Debug, Clone)]
pub struct Origin {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Addresses known without a lookup (an IP literal or `--resolve`); then dns is absent.
    pub fixed_addrs: Option<Vec<SocketAddr>>,
    pub server_name: ServerName<'static>,
}

impl Origin {
    pub fn new(tls: bool, host: &str, port: u16) -> anyhow::Result<Origin> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let fixed_addrs = bare
            .parse::<IpAddr>()
            .ok()
            .map(|ip| vec![SocketAddr::new(ip, port)]);
        let server_name = ServerName::try_from(bare.to_string())
            .map_err(|_| anyhow::anyhow!("invalid host name {host:?} for TLS"))?;
        Ok(Origin {
            tls,
            host: bare.to_string(),
            port,
            fixed_addrs,
            server_name,
        })
    }

    pub fn key(&self) -> (bool, String, u16) {
        (self.tls, self.host.clone(), self.port)
    }

    /// Resolve through the system resolver (getaddrinfo).
    pub async fn resolve(&self) -> io::Result<Vec<SocketAddr>> {
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((self.host.as_str(), self.port))
            .await?
            .collect();
        if addrs.is_empty() {
            return Err(io::Error::new(io::ErrorKind::NotFound, "no address"));
        }
        Ok(addrs)
    }
}

/// Connect to the first address that accepts, with `TCP_NODELAY` set.
pub async fn connect(addrs: &[SocketAddr]) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Category of a failed TCP connect: running out of local ports or files is the
/// client's own resource, not the server's fault.
pub fn classify_connect_error(e: &io::Error) -> ErrorKind {
    match e.raw_os_error() {
        Some(libc::EADDRNOTAVAIL)
        | Some(libc::EMFILE)
        | Some(libc::ENFILE)
        | Some(libc::ENOBUFS) => ErrorKind::LocalResource,
        _ => ErrorKind::Connect,
    }
}

/// Category of an I/O error on an established connection.
pub fn classify_io_error(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => ErrorKind::Reset,
        io::ErrorKind::UnexpectedEof => ErrorKind::ClosedBeforeResponse,
        io::ErrorKind::InvalidData => ErrorKind::Tls,
        _ => match e.raw_os_error() {
            Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) => {
                ErrorKind::LocalResource
            }
            _ => ErrorKind::Reset,
        },
    }
}
