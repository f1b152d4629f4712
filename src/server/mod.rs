//! The embedded target server: HTTP/1.0, 1.1 and 2 over TCP and TLS with a configurable
//! reuse policy, response size and delay, limits, and its own count of accepted
//! connections (the ground truth every connection figure is checked against).

pub(crate) mod conn;
mod early;
mod h2;
mod h3;
pub(crate) mod routes;
mod stream;
pub(crate) mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::io::unix::AsyncFd;

pub(crate) use crate::report::server::StatsSnapshot;

/// The server's reuse policy, responses and limits.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Plain HTTP listener (None: no HTTP listener).
    pub listen: Option<SocketAddr>,
    /// HTTPS listener (None: no HTTPS listener).
    pub tls_listen: Option<SocketAddr>,
    /// Plain HTTP on a Unix domain socket at this path (`--listen unix:PATH`), instead
    /// of (or beside) `listen`; the file is made at start and removed at the end.
    pub listen_unix: Option<PathBuf>,
    /// HTTPS on a Unix domain socket (`--tls-listen unix:PATH`).
    pub tls_listen_unix: Option<PathBuf>,
    /// Keep connections open between requests when the client allows it.
    pub keepalive: bool,
    /// Close a connection that has been idle this long between requests.
    pub idle_timeout: Duration,
    /// Close after this many requests on one connection (with `Connection: close`).
    pub max_requests_per_connection: Option<u64>,
    /// Answer as an HTTP/1.0 server: close unless the request asked for keep-alive.
    pub http10: bool,
    /// Default response body size.
    pub body_size: usize,
    /// Delay before every response.
    pub delay: Duration,
    /// Time allowed for a request head once its first byte arrived.
    pub header_timeout: Duration,
    pub max_header_bytes: usize,
    pub max_body_bytes: u64,
    pub max_connections: u64,
    /// Runtime worker threads.
    pub threads: usize,
    /// Offer HTTP/2 (ALPN h2 on the HTTPS listener; prior knowledge is always answered).
    pub h2: bool,
    /// HTTP/2: SETTINGS_MAX_CONCURRENT_STREAMS (nginx's default, 128).
    pub max_concurrent_streams: u32,
    /// Accept TLS 1.3 early data (0-RTT) on resumed sessions, and answer it at once.
    pub early_data: bool,
    /// Answer HTTP/3 on UDP at the HTTPS listener's port.
    pub h3: bool,
    /// Pad the certificate chain to about this many bytes (`--cert-chain-bytes`).
    pub cert_chain_bytes: Option<usize>,
    /// Ask each TLS client for a certificate (mutual TLS).
    pub client_certs: Option<tls::ClientCerts>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
            tls_listen: None,
            listen_unix: None,
            tls_listen_unix: None,
            keepalive: true,
            idle_timeout: Duration::from_secs(60),
            max_requests_per_connection: None,
            http10: false,
            body_size: 13,
            delay: Duration::ZERO,
            header_timeout: Duration::from_secs(10),
            max_header_bytes: 16 * 1024,
            max_body_bytes: 16 * 1024 * 1024,
            max_connections: 16_384,
            threads: 1,
            h2: true,
            max_concurrent_streams: 128,
            early_data: false,
            h3: true,
            cert_chain_bytes: None,
            client_certs: None,
        }
    }
}

/// Live counters, readable in-process and at `GET /__handshake/stats`.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub connections_accepted: AtomicU64,
    pub requests: AtomicU64,
    pub open_connections: AtomicU64,
    pub tls_handshakes_full: AtomicU64,
    pub tls_handshakes_resumed: AtomicU64,
    /// Full TLS handshakes in which the client presented a certificate (`--client-ca`).
    pub tls_client_certificates: AtomicU64,
    pub rejected_connections: AtomicU64,
    /// Connections that spoke HTTP/2, and their streams (also counted in `requests`).
    pub h2_connections: AtomicU64,
    pub h2_streams: AtomicU64,
    /// Requests that came in TLS 1.3 early data (0-RTT), over TCP or QUIC.
    pub early_data_requests: AtomicU64,
    /// HTTP/3: QUIC connections whose handshake completed (also counted in
    /// `connections_accepted`, their handshakes in `tls_handshakes_*`), and their
    /// requests (also in `requests`).
    pub h3_connections: AtomicU64,
    pub h3_requests: AtomicU64,
    /// QUIC connections that read 0-RTT packets (early data accepted and sent), and the
    /// requests that came in 0-RTT (also in `early_data_requests`).
    pub h3_early_data_connections: AtomicU64,
    pub h3_early_data_requests: AtomicU64,
    /// CPU clocks of the server's threads (they live as long as the server).
    threads: std::sync::Mutex<Vec<crate::cpu::ThreadClock>>,
}

impl ServerStats {
    fn register_current_thread(&self) {
        if let (Some(c), Ok(mut list)) = (crate::cpu::ThreadClock::current(), self.threads.lock()) {
            list.push(c);
        }
    }

    /// CPU time used so far by each of the server's threads.
    pub(crate) fn thread_times(&self) -> Vec<Duration> {
        self.threads
            .lock()
            .map(|l| l.iter().map(|c| c.elapsed()).collect())
            .unwrap_or_default()
    }
}

impl ServerStats {
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            connections_accepted: self.connections_accepted.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            open_connections: self.open_connections.load(Ordering::Relaxed),
            tls_handshakes_full: self.tls_handshakes_full.load(Ordering::Relaxed),
            tls_handshakes_resumed: self.tls_handshakes_resumed.load(Ordering::Relaxed),
            tls_client_certificates: self.tls_client_certificates.load(Ordering::Relaxed),
            rejected_connections: self.rejected_connections.load(Ordering::Relaxed),
            h2_connections: self.h2_connections.load(Ordering::Relaxed),
            h2_streams: self.h2_streams.load(Ordering::Relaxed),
            early_data_requests: self.early_data_requests.load(Ordering::Relaxed),
            h3_connections: self.h3_connections.load(Ordering::Relaxed),
            h3_requests: self.h3_requests.load(Ordering::Relaxed),
            h3_early_data_connections: self.h3_early_data_connections.load(Ordering::Relaxed),
            h3_early_data_requests: self.h3_early_data_requests.load(Ordering::Relaxed),
        }
    }
}

/// How the server's runtime runs: one dedicated thread with a current-thread runtime
/// (`threads == 1`: no work-stealing overhead, as a one-worker nginx), or a
/// multi-thread runtime. Either way its threads are named `handshake-server`.
enum Exec {
    Single(crate::runtime_thread::RuntimeThread),
    Multi(Option<tokio::runtime::Runtime>),
}

/// A server running on its own threads (named `handshake-server`).
pub struct RunningServer {
    pub http_addr: Option<SocketAddr>,
    pub https_addr: Option<SocketAddr>,
    /// PEM of the CA that signed the HTTPS certificate.
    pub ca_pem: String,
    pub ca_der: rustls::pki_types::CertificateDer<'static>,
    pub stats: Arc<ServerStats>,
    /// The Unix sockets' files it made (removed when it stops).
    pub unix_paths: Vec<PathBuf>,
    exec: Exec,
}

impl RunningServer {
    pub fn http_url(&self) -> Option<String> {
        self.http_addr.map(|a| format!("http://{a}/"))
    }

    pub fn https_url(&self) -> Option<String> {
        // The certificate names localhost and 127.0.0.1; use the address as bound.
        self.https_addr.map(|a| format!("https://{a}/"))
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Stop accepting and drop every connection.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        for p in self.unix_paths.drain(..) {
            let _ = std::fs::remove_file(p);
        }
        match &mut self.exec {
            Exec::Single(t) => t.stop(),
            Exec::Multi(rt) => {
                if let Some(rt) = rt.take() {
                    rt.shutdown_timeout(Duration::from_millis(200));
                }
            }
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Everything a connection task needs, shared.
pub(crate) struct Shared {
    pub cfg: ServerConfig,
    pub stats: Arc<ServerStats>,
    /// The default route's responses, built once (see `routes::default_responses`).
    pub default_responses: [Vec<u8>; 3],
    /// HTTP/3's advertisement (`h3=":PORT"; ma=86400`) for responses over TLS, once
    /// HTTP/3 is bound, and the default responses over TLS that carry it.
    pub alt_svc: std::sync::OnceLock<String>,
    pub tls_default_responses: std::sync::OnceLock<[Vec<u8>; 3]>,
}

impl Shared {
    /// The `Alt-Svc` value for a response over TLS (`tls`), if HTTP/3 is served.
    pub(crate) fn alt_svc(&self, tls: bool) -> Option<&str> {
        self.alt_svc.get().filter(|_| tls).map(String::as_str)
    }
}

type Bound = (Option<SocketAddr>, Option<SocketAddr>);

/// Accept queue length asked of the kernel (capped by `net.core.somaxconn`). The
/// standard library's 128 overflows when a load test opens a few hundred connections
/// at once, and the dropped SYNs come back a second later.
const LISTEN_BACKLOG: u32 = 4096;

/// A listening socket, watched by the runtime's reactor (see `accept`).
type Listener = AsyncFd<std::net::TcpListener>;

fn listen(addr: SocketAddr) -> std::io::Result<Listener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(LISTEN_BACKLOG as i32)?;
    let l: std::net::TcpListener = sock.into();
    crate::sys::async_fd(l, tokio::io::Interest::READABLE)
}

/// Bind the listeners and spawn their accept loops on the current runtime.
async fn bind_all(
    shared: Arc<Shared>,
    tls_config: Arc<rustls::ServerConfig>,
    quic_config: Arc<rustls::ServerConfig>,
) -> anyhow::Result<Bound> {
    let cfg = &shared.cfg;
    // Connections arm their idle timeouts seconds ahead: with this tick they do so
    // without waking the reactor (see `keep_timer_awake`).
    tokio::spawn(crate::timer::keep_timer_awake(Duration::from_secs(1)));
    let mut http_addr = None;
    let mut https_addr = None;
    if let Some(addr) = cfg.listen {
        let l = listen(addr).with_context(|| format!("binding {addr}"))?;
        http_addr = Some(l.get_ref().local_addr()?);
        tokio::spawn(accept_loop(l, shared.clone(), None));
    }
    if let Some(addr) = cfg.tls_listen {
        let l = listen(addr).with_context(|| format!("binding {addr}"))?;
        let bound = l.get_ref().local_addr()?;
        https_addr = Some(bound);
        if cfg.h3 {
            h3::bind(bound, quic_config, shared.clone())?;
            let v = format!("h3=\":{}\"; ma=86400", bound.port());
            let _ = shared
                .tls_default_responses
                .set(routes::default_responses(cfg, Some(&v)));
            let _ = shared.alt_svc.set(v);
        }
        tokio::spawn(accept_loop(l, shared.clone(), Some(tls_config.clone())));
    }
    for (path, tls) in [
        (&cfg.listen_unix, None),
        (&cfg.tls_listen_unix, Some(&tls_config)),
    ] {
        if let Some(path) = path {
            let l =
                listen_unix(path).with_context(|| format!("binding unix:{}", path.display()))?;
            tokio::spawn(accept_loop(l, shared.clone(), tls.cloned()));
        }
    }
    Ok((http_addr, https_addr))
}

/// A listener on a Unix domain socket at `path`: a stale socket file (no server
/// answers on it) is replaced, a live one or another file is an error. It is served
/// through the same `std::net` types as TCP's (socket2 converts the descriptor): the
/// calls made on them (accept4, read, send, shutdown) are any stream socket's, and
/// TCP_NODELAY, which a Unix socket has not, is set best-effort.
fn listen_unix(path: &std::path::Path) -> anyhow::Result<Listener> {
    use socket2::{Domain, SockAddr, Socket, Type};
    use std::os::unix::fs::FileTypeExt;
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_socket() {
            anyhow::bail!("{} exists and is not a socket", path.display());
        }
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            anyhow::bail!("a server is listening on {} already", path.display());
        }
        std::fs::remove_file(path)?;
    }
    let sock = Socket::new(Domain::UNIX, Type::STREAM, None)?;
    sock.set_nonblocking(true)?;
    sock.bind(&SockAddr::unix(path)?)?;
    sock.listen(LISTEN_BACKLOG as i32)?;
    let l: std::net::TcpListener = sock.into();
    Ok(crate::sys::async_fd(l, tokio::io::Interest::READABLE)?)
}

/// Start the server; returns once the listeners are bound.
pub fn start(cfg: ServerConfig) -> anyhow::Result<RunningServer> {
    let cfg_unix = (cfg.listen_unix.clone(), cfg.tls_listen_unix.clone());
    if cfg.listen.is_none()
        && cfg.tls_listen.is_none()
        && cfg_unix.0.is_none()
        && cfg_unix.1.is_none()
    {
        anyhow::bail!("the server needs at least one listener");
    }
    // The certificate names loopback, and the address the TLS listener is bound to
    // when it is another one (the lab's server side).
    let bound = cfg
        .tls_listen
        .map(|a| a.ip())
        .filter(|ip| !ip.is_unspecified());
    let certs = tls::generate(&tls::Offer {
        h2: cfg.h2,
        early_data: cfg.early_data,
        also: bound,
        chain_bytes: cfg.cert_chain_bytes,
        client_certs: cfg.client_certs.clone(),
    })
    .context("generating the server certificate")?;
    let stats = Arc::new(ServerStats::default());
    let shared = Arc::new(Shared {
        cfg: cfg.clone(),
        stats: stats.clone(),
        default_responses: routes::default_responses(&cfg, None),
        alt_svc: std::sync::OnceLock::new(),
        tls_default_responses: std::sync::OnceLock::new(),
    });
    let tls_config = certs.server_config.clone();
    let quic_config = certs.quic_config.clone();
    let ((http_addr, https_addr), exec) = if cfg.threads <= 1 {
        let st = stats.clone();
        let (bound, thread) = crate::runtime_thread::RuntimeThread::spawn(
            "handshake-server",
            move || st.register_current_thread(),
            move || bind_all(shared, tls_config, quic_config),
        )?;
        (bound, Exec::Single(thread))
    } else {
        let st = stats.clone();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.threads)
            .thread_name("handshake-server")
            .on_thread_start(move || st.register_current_thread())
            .enable_all()
            .build()
            .context("starting the server runtime")?;
        let bound = rt.block_on(bind_all(shared, tls_config, quic_config))?;
        (bound, Exec::Multi(Some(rt)))
    };
    let unix_paths = [&cfg_unix.0, &cfg_unix.1]
        .into_iter()
        .flatten()
        .cloned()
        .collect();
    Ok(RunningServer {
        http_addr,
        https_addr,
        unix_paths,
        ca_pem: certs.ca_pem,
        ca_der: certs.ca_der,
        stats,
        exec,
    })
}

/// Accept one connection, to be read when the kernel says it is readable.
///
/// Tokio's own `accept` marks a new stream readable at once, so its first read is tried
/// straight away. Under load the client has not sent its request by then (on loopback
/// the accept runs as soon as the client's ACK lands), and that read is one `EAGAIN`
/// per connection. Waiting for the first readiness event, as nginx does, saves it.
async fn accept(l: &Listener) -> std::io::Result<stream::ServerStream> {
    let (sock, _peer) = l
        .async_io(tokio::io::Interest::READABLE, |l| {
            socket2::SockRef::from(l).accept4(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
        })
        .await?;
    stream::ServerStream::new(sock.into())
}

async fn accept_loop(l: Listener, shared: Arc<Shared>, tls: Option<Arc<rustls::ServerConfig>>) {
    loop {
        let sock = match accept(&l).await {
            Ok(x) => x,
            Err(_) => {
                // Out of file descriptors or similar: back off instead of spinning.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let st = &shared.stats;
        st.connections_accepted.fetch_add(1, Ordering::Relaxed);
        let open = st.open_connections.fetch_add(1, Ordering::Relaxed) + 1;
        let shared = shared.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let over_limit = open > shared.cfg.max_connections;
            conn::handle(sock, &shared, tls, over_limit).await;
            shared
                .stats
                .open_connections
                .fetch_sub(1, Ordering::Relaxed);
        });
    }
}
