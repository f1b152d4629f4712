//! Where a connection goes (an origin: scheme, host, port, fixed addresses) and how
//! resolution and connect errors map to the error categories.

use std::io;
use std::net::{IpAddr, SocketAddr};

use rustls::pki_types::ServerName;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::Interest;
use tokio::net::TcpStream;

use crate::record::{ErrorDetail, ErrorKind, Failure};

/// One scheme://host:port that connections are opened to.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    /// Addresses known without a lookup (an IP literal or `--resolve`); then dns is absent.
    pub fixed_addrs: Option<Vec<SocketAddr>>,
    pub server_name: ServerName<'static>,
    /// Source addresses for connections to it (`--local-addr`), used in turn.
    pub local_addrs: Vec<IpAddr>,
    /// The host looked up and the port connected to: the origin's own, or another
    /// (`--connect-to`); the origin's name still goes in Host and SNI.
    pub dial_host: String,
    pub dial_port: u16,
    /// Connect to this Unix domain socket instead (`--unix-socket`): no lookup, no TCP.
    pub unix: Option<std::path::PathBuf>,
    /// Through this forward proxy (`-x`, the environment): connections go to the proxy
    /// (`dial_host`, `dial_port` are its), and to an https:// origin through a `CONNECT`
    /// tunnel.
    pub proxy: Option<std::sync::Arc<super::proxy::Proxy>>,
    /// What the choice of its proxy has to tell the user (one the environment names is
    /// used; an upper-case `HTTP_PROXY` is not read), said once by the command.
    pub proxy_note: Option<String>,
    /// Its place in its scenario's origins (those a redirect found after the others):
    /// what its connections are counted under.
    pub index: u32,
    /// Where its connections go when that is not its URL's host and port (and not a
    /// proxy, which names itself): what a failure to open one names.
    pub hop: Option<std::sync::Arc<crate::record::Hop>>,
}

impl Origin {
    pub(crate) fn new(tls: bool, host: &str, port: u16) -> anyhow::Result<Origin> {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let server_name = ServerName::try_from(bare.to_string())
            .map_err(|_| anyhow::anyhow!("invalid host name {host:?} for TLS"))?;
        let mut o = Origin {
            tls,
            host: bare.to_string(),
            port,
            fixed_addrs: None,
            server_name,
            local_addrs: Vec::new(),
            dial_host: String::new(),
            dial_port: port,
            unix: None,
            proxy: None,
            proxy_note: None,
            index: 0,
            hop: None,
        };
        o.dial(bare, port);
        Ok(o)
    }

    /// Connect to the Unix domain socket at `path` for this origin (nothing to look up).
    pub(crate) fn via_unix_socket(&mut self, path: &std::path::Path) {
        self.unix = Some(path.to_path_buf());
        self.fixed_addrs = Some(Vec::new());
    }

    /// Connect to `host:port` (a name looked up, or an IP literal) for this origin.
    pub(crate) fn dial(&mut self, host: &str, port: u16) {
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        self.fixed_addrs = bare
            .parse::<IpAddr>()
            .ok()
            .map(|ip| vec![SocketAddr::new(ip, port)]);
        self.dial_host = bare.to_string();
        self.dial_port = port;
    }

    /// Go through `proxy`: connect to it (looked up unless an IP literal).
    pub(crate) fn via_proxy(&mut self, proxy: super::proxy::Proxy) {
        self.dial(&proxy.host.clone(), proxy.port);
        self.proxy = Some(std::sync::Arc::new(proxy));
    }

    /// Through a `CONNECT` tunnel (an https:// origin behind a proxy).
    pub(crate) fn tunneled(&self) -> bool {
        self.proxy.is_some() && self.tls
    }

    /// `host:port` as a `CONNECT` names it (an IPv6 address in brackets).
    pub(crate) fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// `scheme://host:port`, as a hop names the origin it was for.
    pub(crate) fn url_origin(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.authority())
    }

    /// The hop its connections go to when it is not its URL's host and port: its Unix
    /// socket, a `--connect-to` or `--resolve` address, or (`redirect`) any address of an
    /// origin a redirect led to. A proxy names itself: none then.
    pub(crate) fn route(&self, redirect: bool) -> Option<crate::record::Hop> {
        use crate::record::{Hop, Via};
        let hop = |via, address| {
            Some(Hop {
                via,
                address,
                origin: self.url_origin(),
            })
        };
        if let Some(path) = &self.unix {
            return hop(Via::UnixSocket, path.display().to_string());
        }
        if self.proxy.is_some() {
            return None;
        }
        let address = match self.fixed_addrs.as_deref() {
            Some([a, ..]) => a.to_string(),
            _ if self.dial_host.contains(':') => format!("[{}]:{}", self.dial_host, self.dial_port),
            _ => format!("{}:{}", self.dial_host, self.dial_port),
        };
        let literal = self.host.parse::<IpAddr>().is_ok();
        if (self.dial_host.as_str(), self.dial_port) != (self.host.as_str(), self.port) {
            hop(Via::ConnectTo, address)
        } else if self.fixed_addrs.is_some() && !literal {
            hop(Via::Resolve, address)
        } else if redirect {
            hop(Via::Redirect, address)
        } else {
            None
        }
    }

    pub(crate) fn key(&self) -> (bool, String, u16) {
        (self.tls, self.host.clone(), self.port)
    }
}

/// Connect to the first address that accepts, with `TCP_NODELAY` set. With source
/// addresses (`--local-addr`), the socket is bound to one of the target's family before
/// connecting, starting with the `turn`-th (so connections spread over all of them),
/// and the next is tried when one has no free port left. With the stream, the index in
/// `local` of the source address it went from.
pub(crate) async fn connect(
    addrs: &[SocketAddr],
    local: &[IpAddr],
    turn: usize,
) -> io::Result<(TcpStream, Option<usize>)> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address to connect to");
    for addr in addrs {
        let result = match start_connect(*addr, local, turn) {
            Ok((socket, source)) => connect_socket(socket).await.map(|s| (s, source)),
            Err(e) => Err(e),
        };
        match result {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Start a connect to `addr` without waiting for it: a nonblocking socket with
/// `TCP_NODELAY` whose connect is under way (or done). With source addresses, bound to
/// one of `addr`'s family from the `turn`-th on, the next tried when one has no free
/// port (the kernel says so at once); with the socket, that address's index in `local`.
pub(crate) fn start_connect(
    addr: SocketAddr,
    local: &[IpAddr],
    turn: usize,
) -> io::Result<(Socket, Option<usize>)> {
    if local.is_empty() {
        let socket = new_socket(addr)?;
        begin(&socket, addr)?;
        return Ok((socket, None));
    }
    let sources: Vec<usize> = (0..local.len())
        .filter(|i| local[*i].is_ipv4() == addr.is_ipv4())
        .collect();
    if sources.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("no --local-addr of the address family of {addr}"),
        ));
    }
    let mut last = None;
    for i in 0..sources.len() {
        let source = sources[(turn + i) % sources.len()];
        let socket = new_socket(addr)?;
        bind_address_no_port(&socket);
        socket.bind(&SocketAddr::new(local[source], 0).into())?;
        match begin(&socket, addr) {
            Ok(()) => return Ok((socket, Some(source))),
            Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EADDRNOTAVAIL)))
}

/// A nonblocking TCP socket for `addr`'s family, with `TCP_NODELAY` set.
fn new_socket(addr: SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(
        Domain::for_address(addr),
        Type::STREAM.nonblocking(),
        Some(Protocol::TCP),
    )?;
    // Best effort, as before: a socket without it still connects.
    let _ = socket.set_tcp_nodelay(true);
    Ok(socket)
}

/// The nonblocking connect: under way is fine.
fn begin(socket: &Socket, addr: SocketAddr) -> io::Result<()> {
    match socket.connect(&addr.into()) {
        Err(e) if e.raw_os_error() != Some(libc::EINPROGRESS) => Err(e),
        _ => Ok(()),
    }
}

/// Wait until the connect `socket` began is done.
///
/// Tokio's `connect` reads the socket's error (`getsockopt(SO_ERROR)`) after every
/// connect, a system call per connection. A connect that failed leaves the socket
/// closed, which the reactor reports as write-closed: the error is read only then.
async fn connect_socket(socket: Socket) -> io::Result<TcpStream> {
    let stream = TcpStream::from_std(std::net::TcpStream::from(socket))?;
    let ready = stream.ready(Interest::WRITABLE).await?;
    if ready.is_write_closed() {
        if let Some(e) = stream.take_error()? {
            return Err(e);
        }
    }
    Ok(stream)
}

/// `IP_BIND_ADDRESS_NO_PORT`: bind the address now but pick the port at connect time, so
/// a port is shared by connections to different destinations (Linux 4.2+).
#[cfg(target_os = "linux")]
fn bind_address_no_port(socket: &Socket) {
    // Best effort: without it, the port is picked at bind time, as before Linux 4.2.
    let _ = crate::sys::socket::set_bind_address_no_port(socket);
}

#[cfg(not(target_os = "linux"))]
fn bind_address_no_port(_socket: &Socket) {}

/// Category of a failed TCP connect: running out of local ports or files is the
/// client's own resource, not the server's fault.
pub(crate) fn classify_connect_error(e: &io::Error) -> Failure {
    connect_failure(e).said(e)
}

fn connect_failure(e: &io::Error) -> Failure {
    match e.raw_os_error() {
        Some(libc::EADDRNOTAVAIL) => {
            Failure::new(ErrorKind::LocalResource, ErrorDetail::PortsExhausted)
        }
        Some(libc::EMFILE) | Some(libc::ENFILE) => {
            Failure::new(ErrorKind::LocalResource, ErrorDetail::TooManyOpenFiles)
        }
        Some(libc::ENOBUFS) => Failure::new(ErrorKind::LocalResource, ErrorDetail::NoBuffers),
        Some(libc::ECONNREFUSED) => Failure::new(ErrorKind::Connect, ErrorDetail::Refused),
        Some(libc::ENETUNREACH) | Some(libc::EHOSTUNREACH) => {
            Failure::new(ErrorKind::Connect, ErrorDetail::Unreachable)
        }
        _ => ErrorKind::Connect.into(),
    }
}

/// Category of an I/O error on an established connection.
pub(crate) fn classify_io_error(e: &io::Error) -> ErrorKind {
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

/// Like [`classify_io_error`], naming where a reset happened (`reset_detail`: in the
/// send, the head or the body).
pub(crate) fn classify_io_failure(e: &io::Error, reset_detail: ErrorDetail) -> Failure {
    let f = match classify_io_error(e) {
        ErrorKind::Reset => Failure::new(ErrorKind::Reset, reset_detail),
        kind => kind.into(),
    };
    f.said(e)
}

/// Category and sub-reason of a failed TLS handshake: each certificate problem and an
/// ALPN mismatch has its own detail.
pub(crate) fn classify_tls_error(e: &io::Error) -> Failure {
    let f = tls_failure(e);
    match tls_words(e) {
        Some(words) => f.said(words),
        None => f.said(e),
    }
}

/// What a refused certificate means, in words (rustls names some reasons only by their
/// Rust names, `Other(OtherError(CaUsedAsEndEntity))`); `None` where its own message says
/// it plainly.
fn tls_words(e: &io::Error) -> Option<String> {
    use rustls::{CertificateError, Error as TlsError};
    let tls = e.get_ref()?.downcast_ref::<TlsError>()?;
    let TlsError::InvalidCertificate(c) = tls else {
        return None;
    };
    Some(match c {
        CertificateError::UnknownIssuer => {
            "invalid peer certificate: it is not signed by a certificate authority this client trusts".into()
        }
        CertificateError::Other(o) if format!("{o:?}").contains("CaUsedAsEndEntity") => {
            "invalid peer certificate: the server presents a CA certificate as its own (a self-signed certificate, as `openssl req -x509` makes), which no client trusts unless given it as a CA".into()
        }
        CertificateError::Other(o) => {
            format!("invalid peer certificate: {}", rust_name_as_words(&format!("{o:?}")))
        }
        _ => return None,
    })
}

/// `Other(OtherError(SomeReason))` as "some reason": the innermost name, its words apart.
fn rust_name_as_words(debug: &str) -> String {
    let inner = debug
        .split(['(', ')', ' ', ','])
        .rfind(|w| !w.is_empty() && *w != "Other" && *w != "OtherError")
        .unwrap_or(debug);
    let mut out = String::new();
    for (i, ch) in inner.chars().enumerate() {
        if ch.is_uppercase() && i > 0 {
            out.push(' ');
        }
        out.extend(ch.to_lowercase());
    }
    out
}

fn tls_failure(e: &io::Error) -> Failure {
    use rustls::{AlertDescription, CertificateError, Error as TlsError};
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<TlsError>()) else {
        return match e.kind() {
            io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => {
                Failure::new(ErrorKind::Reset, ErrorDetail::Handshake)
            }
            _ => Failure::new(ErrorKind::Tls, ErrorDetail::Handshake),
        };
    };
    let detail = match tls {
        TlsError::InvalidCertificate(c) => match c {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                ErrorDetail::CertExpired
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                ErrorDetail::CertNotYetValid
            }
            CertificateError::UnknownIssuer => ErrorDetail::CertUnknownIssuer,
            // A self-signed certificate (CA:TRUE) presented as the server's own: to the
            // user, a CA this client was not given.
            CertificateError::Other(o) if format!("{o:?}").contains("CaUsedAsEndEntity") => {
                ErrorDetail::CertUnknownIssuer
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                ErrorDetail::CertWrongName
            }
            _ => ErrorDetail::CertInvalid,
        },
        TlsError::NoApplicationProtocol
        | TlsError::AlertReceived(AlertDescription::NoApplicationProtocol) => {
            ErrorDetail::AlpnMismatch
        }
        TlsError::AlertReceived(_) => ErrorDetail::AlertReceived,
        TlsError::InvalidMessage(rustls::InvalidMessage::InvalidContentType) => ErrorDetail::NotTls,
        _ => ErrorDetail::Handshake,
    };
    Failure::new(ErrorKind::Tls, detail)
}
