//! The flag groups several commands share (flattened into each): the request, the load,
//! the emulated link, the output and the read limits.

use std::path::PathBuf;

use clap::Args;

/// The emulated link to the embedded server (`bench`, `compare`, `trace`, `doctor`
/// without a URL, and `lab`). Needs root (CAP_NET_ADMIN).
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct LinkArgs {
    /// Run against the embedded server across an emulated link of this round-trip time
    /// (split evenly per direction), between two network namespaces; compare takes a
    /// list (0,10ms,40ms,100ms) and adds a table and chart against RTT
    #[arg(long, value_name = "DUR")]
    pub rtt: Option<String>,

    /// With the link: vary each packet's delay uniformly by up to this much (packets stay in order)
    #[arg(long, value_name = "DUR")]
    pub jitter: Option<String>,

    /// With the link: lose this share of packets, per direction, independently (1% or 1)
    #[arg(long, value_name = "PERCENT")]
    pub loss: Option<String>,

    /// With the link: serialize packets at this rate per direction (10mbit, 500kbit, 1gbit)
    #[arg(long, value_name = "RATE")]
    pub bandwidth: Option<String>,

    /// With the link: auto (the kernel's netem where it has it, else handshake's delay
    /// line), netem, or delay-line
    #[arg(long, value_name = "auto|netem|delay-line")]
    pub emulator: Option<String>,

    /// The embedded server: pad its certificate chain to about N bytes (as a long chain
    /// or an RSA-4096 key would), to see what a server's first flight above the initial
    /// window (TCP) or the anti-amplification limit (QUIC) costs
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub cert_chain_bytes: Option<u32>,
}

#[derive(Debug, Args)]
pub(crate) struct LoadArgs {
    /// Concurrent workers, each with its own connection(s) (closed loop; with --rate, the
    /// most it may hire; default: bench 10,
    /// compare 1, compare over a link 10, with --rtt or another link option). compare
    /// takes a rising list (-c 1,10,50,200): each step's requests/s, latency and CPU, and
    /// the knee where requests/s stops growing, with who is at its limit there (a step's
    /// round sends 25 requests per worker, at least 500, unless -n or -d says)
    #[arg(long, short = 'c', value_delimiter = ',', value_name = "N")]
    pub concurrency: Option<Vec<usize>>,

    /// Total requests (default when no --duration is given: bench 10000, compare 500,
    /// compare over a link 100)
    #[arg(long, short = 'n')]
    pub requests: Option<u64>,

    /// Run for this long (e.g. 10s, 500ms, 2m)
    #[arg(long, short = 'd', visible_short_alias = 'z')]
    pub duration: Option<String>,

    /// Open loop: send this many requests per second in total, latency measured from the
    /// intended send time. Workers (and their connections) are hired as the schedule
    /// needs them, at most -c: a send finding every worker busy waits (its blocked phase)
    #[arg(long, short = 'r')]
    pub rate: Option<f64>,

    /// Open new TCP connections at most this many a second in all (over the threads), so
    /// that a burst of connects does not overflow the server's listen queue and the
    /// backlog is not what the run measures; a request whose connect waits for its turn
    /// counts the wait in its blocked phase
    #[arg(long, value_name = "PER_S")]
    pub connect_rate: Option<f64>,

    /// While the target (or its proxy, or its resolver) cannot be reached, wait between
    /// connect tries: the first after MIN, each failed one doubling the wait up to MAX a
    /// worker (the workers together try every MAX/c), with jitter; `off` tries again at
    /// once. The windows in which it could not be reached are reported either way
    #[arg(long, value_name = "MIN..MAX|MAX|off", default_value = "10ms..500ms")]
    pub retry_backoff: String,

    /// OS threads for the workers (default: the number of CPUs, at most -c; bench with a
    /// persistent strategy against this machine: half of them, the server needs the rest)
    #[arg(long, short = 't')]
    pub threads: Option<usize>,

    /// Per-request time limit, covering all its phases (e.g. 30s)
    #[arg(long, default_value = "30s")]
    pub timeout: String,

    /// Time limit for opening a connection: dns, connect and TLS together (e.g. 2s)
    #[arg(long, value_name = "DUR")]
    pub connect_timeout: Option<String>,

    /// Time limit from the end of the send to the first response byte (e.g. 5s)
    #[arg(long, value_name = "DUR")]
    pub wait_timeout: Option<String>,

    /// After the first byte, fail a response that arrives slower than this many bytes
    /// per second over a --min-speed-window (suffixes k, M: 1k = 1000)
    #[arg(long, value_name = "BYTES_PER_S")]
    pub min_speed: Option<String>,

    /// The window over which --min-speed is measured
    #[arg(long, value_name = "DUR", default_value = "1s")]
    pub min_speed_window: String,

    /// Follow redirects (301, 302, 303, 307, 308), as curl -L does: each hop is a
    /// request of its own, on a connection to the origin its Location names
    #[arg(long, short = 'L')]
    pub location: bool,

    /// With -L: follow at most this many redirects in a row, then count the next as a
    /// `redirect` error (-1: no limit) [default: 10]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_redirs: Option<i64>,
}

#[derive(Debug, Args)]
pub(crate) struct RequestArgs {
    /// HTTP method (GET; POST with --data)
    #[arg(long, short = 'X', visible_short_alias = 'm')]
    pub method: Option<String>,

    /// Extra request header "Name: value" (repeatable)
    #[arg(long = "header", short = 'H', value_name = "HEADER")]
    pub headers: Vec<String>,

    /// Request body, as given
    #[arg(long, conflicts_with_all = ["body_file", "data"])]
    pub body: Option<String>,

    /// Request body read from a file
    #[arg(long, value_name = "FILE", conflicts_with = "data")]
    pub body_file: Option<PathBuf>,

    /// Request body as curl takes it: DATA as given, or @FILE read from FILE (@- from
    /// standard input); the method is POST unless -X says otherwise
    #[arg(long, visible_alias = "data-binary", value_name = "DATA")]
    pub data: Option<String>,

    /// Content-Type of the body (a "Content-Type: TYPE" header), as ab and hey take it
    #[arg(long, short = 'T', value_name = "TYPE")]
    pub content_type: Option<String>,

    /// Read the URLs to request (one per line) from a file: each requested once, in
    /// turn across the workers; with -n or -d the list is cycled
    #[arg(long, value_name = "FILE")]
    pub urls_from_file: Option<PathBuf>,

    /// Accept any TLS certificate
    #[arg(long, short = 'k')]
    pub insecure: bool,

    /// Trust the CA certificates in this PEM file (instead of the system roots)
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,

    /// Present this client certificate (PEM: the certificate, then its chain) when a
    /// server asks for one (mutual TLS), like curl; with its key in the same file unless
    /// --key is given
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,

    /// The client certificate's private key (PEM: PKCS#8, PKCS#1 or SEC1; not encrypted)
    #[arg(long, value_name = "FILE", requires = "cert")]
    pub key: Option<PathBuf>,

    /// Use ADDR for HOST:PORT instead of resolving it, like curl (repeatable)
    #[arg(long, value_name = "HOST:PORT:ADDR")]
    pub resolve: Vec<String>,

    /// Connect to HOST2:PORT2 for requests to HOST1:PORT1, like curl: the URL still gives
    /// the Host header and the TLS name (SNI); an empty part matches any (HOST1, PORT1)
    /// or keeps the URL's (HOST2, PORT2); the first that matches is used (repeatable)
    #[arg(long, value_name = "HOST1:PORT1:HOST2:PORT2")]
    pub connect_to: Vec<String>,

    /// Connect to this Unix domain socket instead of over TCP, like curl: the URL still
    /// gives the Host header and the scheme (TLS works over it)
    #[arg(long, value_name = "PATH")]
    pub unix_socket: Option<PathBuf>,

    /// Go through this forward proxy, like curl: [http://|https://][user:pass@]HOST[:PORT]
    /// (port 1080 by default); http:// URLs are requested from it, https:// ones through
    /// a CONNECT tunnel. Without it, http_proxy, HTTPS_PROXY and ALL_PROXY are read as curl
    /// reads them; "" means no proxy at all
    #[arg(long, short = 'x', value_name = "URL")]
    pub proxy: Option<String>,

    /// Hosts that go direct, not through the proxy (a comma-separated list of names,
    /// each with its subdomains, addresses or CIDR ranges; * for all): NO_PROXY's place
    #[arg(long, value_name = "LIST")]
    pub noproxy: Option<String>,

    /// Trust the CA certificates in this PEM file for an https:// proxy (instead of the
    /// system roots)
    #[arg(long, value_name = "FILE")]
    pub proxy_cacert: Option<PathBuf>,

    /// Accept any TLS certificate from an https:// proxy
    #[arg(long)]
    pub proxy_insecure: bool,

    /// Cache DNS answers for their TTL, shared by all connections of a run (on), or look
    /// the name up for every new connection (off)
    #[arg(long, value_name = "on|off", default_value = "on")]
    pub dns_cache: String,

    /// Ask these name servers (ADDR[:PORT][,...]) instead of those in /etc/resolv.conf;
    /// /etc/hosts is still read first
    #[arg(long, value_name = "ADDR[:PORT][,...]", value_delimiter = ',')]
    pub dns_servers: Vec<String>,

    /// Offer only this TLS version (1.2 or 1.3)
    #[arg(long, value_name = "VERSION")]
    pub tls_version: Option<String>,

    /// TLS key-exchange groups to offer, most preferred first (x25519mlkem768,
    /// secp256r1mlkem768, x25519, secp256r1, secp384r1, mlkem768, mlkem1024); default:
    /// x25519mlkem768,x25519,secp256r1,secp384r1, as browsers offer them. A server that
    /// takes none of the first costs a HelloRetryRequest: one more round trip
    #[arg(long, value_name = "GROUP[,GROUP...]")]
    pub tls_groups: Option<String>,

    /// Source addresses for new connections, used in turn: addresses and ranges
    /// (127.0.0.2-127.0.0.9) of this machine. Each address has ephemeral ports of its
    /// own: a run past about 28,000 connections to one server needs more than one; the
    /// report counts the connections from each
    #[arg(long, value_name = "ADDR|FIRST-LAST[,...]", value_delimiter = ',')]
    pub local_addr: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct OutputArgs {
    /// Print the report as JSON (schema: docs/report.schema.json)
    #[arg(long)]
    pub json: bool,

    /// No progress on stderr (a bar on a terminal; compare also writes a line per round
    /// when stderr is not one)
    #[arg(long)]
    pub no_progress: bool,

    /// Also write a self-contained HTML report (charts, no network fetches) to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Fail (exit 1) when EXPR holds: 'error_rate>1%', 'p99>200ms', 'reuse_ratio<0.9',
    /// 'connections>10', 'tls_full>1', 'stale_retries>0', or any figure by its dotted path
    /// in the JSON report ('connections.close_reasons.server_idle_close>0'); compare checks
    /// every strategy, or those named first ('keepalive:reuse_ratio<0.9'); repeatable
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,

    /// Count these statuses as successes too: classes or codes, comma-separated ('4xx',
    /// '404,410'). Without it a run in which no response was 2xx or 3xx exits 1, as one
    /// with no response does
    #[arg(long = "ok-status", value_name = "STATUSES")]
    pub ok_status: Option<String>,
}

/// What a client of the embedded server or the audit may cost it.
/// Asking TLS clients for a certificate (mutual TLS): audit, serve and lab's server.
#[derive(Debug, Args)]
pub(crate) struct ClientCaArgs {
    /// Ask each TLS client for a certificate signed by a CA in this PEM file (mutual
    /// TLS); the report counts the certificates presented, full against resumed
    /// handshakes, and each certificate's subject
    #[arg(long, value_name = "FILE")]
    pub client_ca: Option<PathBuf>,

    /// With --client-ca: a client without a certificate is refused in the handshake
    /// (required) or served (optional)
    #[arg(long, value_enum, value_name = "MODE", default_value_t = ClientCertMode::Required, requires = "client_ca")]
    pub client_cert: ClientCertMode,
}

/// Whether `--client-ca` requires a client certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ClientCertMode {
    Required,
    Optional,
}

#[derive(Debug, Args)]
pub(crate) struct LimitArgs {
    /// Close connections idle this long between requests (e.g. 5s)
    #[arg(long, default_value = "60s")]
    pub idle_timeout: String,

    /// Time allowed for a request once its first byte arrived (slowloris guard; 408)
    #[arg(long, default_value = "10s")]
    pub header_timeout: String,

    /// Largest request head accepted (431 beyond)
    #[arg(long, default_value_t = 16 * 1024)]
    pub max_header_bytes: usize,

    /// Largest request body accepted (413 beyond)
    #[arg(long, default_value_t = 16 * 1024 * 1024)]
    pub max_body_bytes: u64,

    /// Most concurrent connections (503 beyond)
    #[arg(long, default_value_t = 16_384)]
    pub max_connections: u64,
}

/// Live metrics for Prometheus (`bench`, `compare`, `watch`; docs/metrics.md).
#[derive(Debug, Args, Default)]
pub(crate) struct MetricsArgs {
    /// Serve the metrics at http://ADDR/metrics while running (OpenMetrics, or
    /// Prometheus text to a scraper asking for it) [ADDR default: 127.0.0.1:9464; an
    /// address beyond loopback only when given]
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = crate::metrics::endpoint::DEFAULT_ADDR)]
    pub metrics: Option<String>,

    /// After the end, keep serving until one more scrape collects the last values, at
    /// most this long
    #[arg(long, value_name = "DUR", default_value = "15s")]
    pub metrics_linger: String,

    /// Push the metrics to this Prometheus remote-write receiver (remote write 1.0,
    /// http:// or https://) every --remote-write-interval and once at the end
    #[arg(long, value_name = "URL")]
    pub remote_write: Option<String>,

    /// How often to push to --remote-write
    #[arg(long, value_name = "DUR", default_value = "5s")]
    pub remote_write_interval: String,

    /// The `instance` label of pushed series [default: this host's name]
    #[arg(long, value_name = "NAME")]
    pub instance: Option<String>,
}
