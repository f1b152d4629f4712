//! Command-line definitions (clap derive) only; validation lives in `config`.

use std::path::PathBuf;

use clap::{Args, CommandFactory as _, FromArgMatches as _, Parser, Subcommand};

mod observe;
mod shared;

pub(crate) use observe::{AuditArgs, WatchArgs};
pub(crate) use shared::{
    ClientCaArgs, ClientCertMode, LimitArgs, LinkArgs, LoadArgs, MetricsArgs, OutputArgs,
    RequestArgs,
};

/// The exit statuses of every command, shown by `--help` (and the README's "Exit status").
pub const EXIT_STATUS: &str = "Exit status:
  0  the run measured what it set out to, and no --fail-if expression held
  1  a run or a check failed: no request succeeded, or no response was a
     success (no 2xx or 3xx; --ok-status counts others) (bench, merge,
     trace; compare: a row without any), a --fail-if expression held,
     doctor found a problem or its first request failed, or the report
     could not be written (a full disk; the message names the file)
  2  usage or setup error: a bad flag or value (the message names it), a
     server or link that could not be set up
  130  interrupted by SIGINT (Ctrl-C), 143 by SIGTERM (bench, compare,
     doctor, audit, watch, lab, serve): the report of what completed was
     printed, marked as interrupted by which signal; a second signal gives
     up what is in flight at once and still prints, a third exits at once
  audit -- COMMAND and watch -- COMMAND pass on the command's own non-zero
  status";

/// Flags other load tools and curl take that this one does not, with what to use here:
/// `handshake: --vus is k6's: here it is -c/--concurrency`. A flag of theirs that means
/// the same here (-c, -n, -H, -k, --timeout) needs no entry.
const FOREIGN_FLAGS: &[(&[&str], &str, &str)] = &[
    (&["--vus"], "k6's virtual users", "-c/--concurrency"),
    (
        &["-u"],
        "k6's virtual users (curl's credentials)",
        "-c/--concurrency (credentials: -H 'Authorization: …')",
    ),
    (&["--iterations"], "k6's iterations", "-n/--requests"),
    (
        &["-i"],
        "k6's iterations (ab's HEAD requests)",
        "-n/--requests (HEAD: -X HEAD)",
    ),
    (
        &["-q", "--qps", "-R"],
        "a rate (oha, hey, wrk2)",
        "-r/--rate, requests per second in total",
    ),
    (
        &["--latency"],
        "wrk's latency table",
        "nothing: the percentiles are always in the report",
    ),
    (
        &["-w", "--write-out"],
        "curl's timings",
        "`handshake trace URL`, which shows every phase",
    ),
    (
        &["-o", "--output"],
        "an output file",
        "--json (the report as JSON) or --html FILE",
    ),
    (
        &["-A", "--user-agent"],
        "a User-Agent",
        "-H 'User-Agent: NAME'",
    ),
    (
        &["--user"],
        "curl's credentials",
        "-H 'Authorization: Basic …'",
    ),
    (&["-b", "--cookie"], "a cookie", "-H 'Cookie: NAME=VALUE'"),
    (
        &["-p", "--post-file"],
        "a POST body file (ab)",
        "--data @FILE, with -T for its type",
    ),
    (&["--http1.1"], "HTTP/1.1", "-s keepalive (or -s close)"),
    (
        &["--http1.0", "-0"],
        "HTTP/1.0",
        "-s http10 (or -s http10-keepalive)",
    ),
    (
        &["--http2", "--h2"],
        "HTTP/2",
        "-s h2 (bench) or --http2 (trace)",
    ),
    (
        &["--http3", "--h3"],
        "HTTP/3",
        "-s h3 (bench) or --http3 (trace)",
    ),
    (
        &["--no-keepalive", "--disable-keep-alive"],
        "closing every connection",
        "-s close",
    ),
    (
        &["-L", "--location"],
        "following redirects",
        "nothing: handshake measures the URL given, so give the final one",
    ),
];

/// The command line parsed, `--help` wrapped to the output's width (`fmt::width`: 80
/// columns when stdout is not a terminal).
pub(crate) fn parse() -> Result<Cli, clap::Error> {
    let cmd = Cli::command().term_width(crate::fmt::width());
    let mut matches = cmd.try_get_matches()?;
    Cli::from_arg_matches_mut(&mut matches)
}

/// For a flag this tool does not know, what it means elsewhere and the flag to use here.
pub(crate) fn foreign_flag(flag: &str) -> Option<String> {
    let name = flag.split('=').next().unwrap_or(flag);
    FOREIGN_FLAGS
        .iter()
        .find(|(names, _, _)| names.contains(&name))
        .map(|(_, what, here)| format!("{name} is {what} elsewhere; here use {here}"))
}

/// `lead`, then every strategy with its one line.
fn strategy_help(lead: &str) -> String {
    format!("{lead}:\n{}", crate::strategy::Strategy::help_list())
}

#[derive(Debug, Parser)]
#[command(
    name = "handshake",
    version,
    about = "Measure what connection setup (DNS, TCP, TLS) costs HTTP traffic, and prove whether connections are reused",
    after_help = EXIT_STATUS
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Load a URL (or the embedded server) with per-phase timings, split by new vs reused connections
    #[command(after_help = EXIT_STATUS)]
    Bench(BenchArgs),
    /// Run one workload under several connection strategies, side by side
    #[command(after_help = EXIT_STATUS)]
    Compare(CompareArgs),
    /// One request (or --count N on one connection) with a curl -w style phase breakdown
    #[command(after_help = EXIT_STATUS)]
    Trace(TraceArgs),
    /// Probe a server's reuse policy (keep-alive, HTTP/1.0, max requests, idle timeout, TLS)
    #[command(after_help = EXIT_STATUS)]
    Doctor(DoctorArgs),
    /// Stand where the server is and report how a client uses its connections
    #[command(after_help = EXIT_STATUS)]
    Audit(AuditArgs),
    /// Run the embedded target server (HTTP and HTTPS) with a configurable reuse policy
    #[command(after_help = EXIT_STATUS)]
    Serve(ServeArgs),
    /// A distant server on this machine: run a command against a server across an
    /// emulated link (round-trip time, jitter, loss, bandwidth) between two network namespaces
    #[command(after_help = EXIT_STATUS)]
    Lab(LabArgs),
    /// Observe how a running program (or every client of an endpoint) uses its TCP
    /// connections, from the kernel (packet capture and socket diagnostics), without
    /// touching it; needs root
    #[command(after_help = EXIT_STATUS)]
    Watch(WatchArgs),
    /// Merge the JSON reports of several agents (bench --segment I/N) into the report of
    /// one run: counts summed, percentiles from the merged histograms, a row per agent
    #[command(after_help = EXIT_STATUS)]
    Merge(MergeArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    #[command(after_help = EXIT_STATUS)]
    Completions(CompletionsArgs),
    /// Print the man page (roff), or write one per command into a directory
    #[command(after_help = EXIT_STATUS)]
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub(crate) struct MergeArgs {
    /// JSON reports of `handshake bench --json` (or of an earlier merge); `-` reads
    /// standard input; a file or the input may hold several reports one after another
    /// (as `kubectl logs` of the agents gives them)
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,

    /// Merge even runs of different targets, strategies or protocols, or overlapping
    /// segments (scenarios are then matched by name)
    #[arg(long)]
    pub allow_mismatch: bool,

    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// Write handshake.1 and handshake-COMMAND.1 for every command into DIR instead
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Write the options of every command into DIR/COMMAND.md (Markdown, the
    /// reference in docs/commands), between its generated-section markers, keeping
    /// the text around them
    #[arg(long, value_name = "DIR", conflicts_with = "out")]
    pub markdown: Option<PathBuf>,
}

impl Command {
    /// Whether the command runs across a lab's link (and needs network namespaces).
    pub(crate) fn needs_lab(&self) -> bool {
        match self {
            Command::Lab(_) => true,
            Command::Bench(a) => a.link.any(),
            Command::Compare(a) => a.link.any(),
            Command::Trace(a) => a.link.any(),
            Command::Doctor(a) => a.link.any(),
            Command::Audit(_)
            | Command::Serve(_)
            | Command::Merge(_)
            | Command::Watch(_)
            | Command::Completions(_)
            | Command::Man(_) => false,
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct LabArgs {
    #[command(flatten)]
    pub link: LinkArgs,

    /// Run this server on the server side instead of the embedded one (through sh -c;
    /// {addr} and {port} are filled in: it must listen on them)
    #[arg(long, value_name = "CMD")]
    pub server_cmd: Option<String>,

    /// The port for --server-cmd's {port}
    #[arg(long, default_value_t = 8080)]
    pub port: u16,

    /// Give the command the embedded server's HTTPS URL as {url} (its CA is in {cacert}
    /// and $HANDSHAKE_CACERT)
    #[arg(long)]
    pub https: bool,

    /// The embedded server asks each TLS client for a certificate (--client-ca FILE,
    /// --client-cert MODE), as `serve` does
    #[command(flatten)]
    pub client_ca: ClientCaArgs,

    /// Body size of the embedded server's answers
    #[arg(long, default_value_t = 13)]
    pub body_size: usize,

    /// Print the lab's summary (link, server counts) on stderr as JSON
    #[arg(long)]
    pub json: bool,

    /// No progress on stderr (the link's check, on a terminal a line redrawn in place)
    #[arg(long)]
    pub no_progress: bool,

    /// The command to run on the client side; {url}, {https_url} and {cacert} in its
    /// arguments (and $HANDSHAKE_URL, $HANDSHAKE_HTTPS_URL, $HANDSHAKE_CACERT) are filled
    /// in; {{url}} stays {url} (for a command that fills it itself, like handshake audit)
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct TraceArgs {
    /// Target URL (http:// or https://). Without one, or with a path (/bytes/1000), the
    /// embedded server is started
    pub url: Option<String>,

    #[command(flatten)]
    pub link: LinkArgs,

    /// With the embedded server: trace its HTTPS listener
    #[arg(long)]
    pub embedded_tls: bool,

    /// Requests to send in a row, reusing the connection when the server allows
    #[arg(long, default_value_t = 1)]
    pub count: u64,

    /// HTTP/2 (same as --strategy h2): the connection's setup and SETTINGS, then each
    /// request's stream
    #[arg(long, conflicts_with = "strategy")]
    pub http2: bool,

    /// HTTP/3 (same as --strategy h3; https only): one QUIC connection's setup (dns,
    /// the QUIC handshake, its TLS), then each request's stream, with quinn's RTT
    /// estimate and packet counts
    #[arg(long, conflicts_with_all = ["strategy", "http2"])]
    pub http3: bool,

    /// Connection strategy (keepalive; --help lists the 11 with a line each)
    #[arg(long, short = 's', default_value = "keepalive", long_help = strategy_help("Connection strategy"))]
    pub strategy: String,

    /// Time limit for each step (connect, TLS, response)
    #[arg(long, default_value = "10s")]
    pub timeout: String,

    #[command(flatten)]
    pub request: RequestArgs,

    /// Print the trace as JSON
    #[arg(long)]
    pub json: bool,

    /// No progress on stderr (on a terminal a line redrawn in place while the embedded
    /// server or the lab's link starts)
    #[arg(long)]
    pub no_progress: bool,

    /// Count these statuses as successes too: classes or codes, comma-separated ('4xx',
    /// '404,410'). Without it a trace in which no response was 2xx or 3xx exits 1, as
    /// one that failed does
    #[arg(long = "ok-status", value_name = "STATUSES")]
    pub ok_status: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct DoctorArgs {
    /// Target URL (http:// or https://). Without one, the embedded server is started
    pub url: Option<String>,

    #[command(flatten)]
    pub link: LinkArgs,

    /// With the embedded server: probe its HTTPS listener
    #[arg(long)]
    pub embedded_tls: bool,

    /// Most requests to send on one connection when looking for the server's limit
    #[arg(long, default_value_t = 1000)]
    pub max_requests: u64,

    /// Longest idle time to probe when looking for the server's idle timeout (e.g. 75s)
    #[arg(long, default_value = "75s")]
    pub max_idle: String,

    /// Also probe HTTP/2 by prior knowledge (h2c) on an http:// URL (over https://, h2
    /// is probed when the server offers it by ALPN)
    #[arg(long)]
    pub h2c: bool,

    /// Time limit for each step (connect, TLS, response)
    #[arg(long, default_value = "10s")]
    pub timeout: String,

    #[command(flatten)]
    pub request: RequestArgs,

    /// Print the findings as JSON
    #[arg(long)]
    pub json: bool,

    /// No progress on stderr (on a terminal a line redrawn in place: the probe, k of n,
    /// the time so far; elsewhere a line per probe with its bound)
    #[arg(long)]
    pub no_progress: bool,
}

#[derive(Debug, Args)]
pub(crate) struct CompareArgs {
    /// Target URL (http:// or https://). Without one (or with a path such as /bytes/1000),
    /// the embedded server is started with an HTTP and an HTTPS listener and both are compared
    pub url: Option<String>,

    #[command(flatten)]
    pub link: LinkArgs,

    /// Strategies to compare, comma-separated (default: those the target offers; --help
    /// lists them); 'close@x25519' offers only those key-exchange groups. A strategy
    /// listed twice is an A/A run: the spread between its rows is the machine's noise
    #[arg(long, value_delimiter = ',', long_help = strategy_help("Strategies to compare, comma-separated. By default: close, http10, http10-keepalive and keepalive; for https also close-resumed, and close-0rtt, h2, h3-close, h3-0rtt and h3 where the server offers them. After an @, the key-exchange groups that row's client offers, + between them, as --tls-groups takes them: 'close@x25519,close@x25519mlkem768' shows what post-quantum key exchange costs per request (its ClientHello, the server's flight, HelloRetryRequests, time and CPU). After an @, no-cert: that row presents no client certificate though --cert gives one: 'close,close@no-cert' shows what the certificate costs per full handshake (with --cert and no --strategies, close@no-cert is added where the server serves a request without one, and always against the embedded server, which then asks for one). A strategy listed twice is an A/A run: the spread between its rows is the machine's noise. The strategies"))]
    pub strategies: Option<Vec<String>>,

    /// Rounds: every strategy runs once per round, in a new random order each round;
    /// figures are medians over the rounds; at least 6 rounds give each "x slower" its
    /// 95 % confidence interval [default: 10; across a link (--rtt): 6]
    #[arg(long)]
    pub rounds: Option<usize>,

    /// Include h2 for http:// targets too (HTTP/2 by prior knowledge, h2c). For https://
    /// targets h2 is included when the server offers it by ALPN
    #[arg(long)]
    pub h2c: bool,

    /// Differences smaller than this (a ratio within 1 ± it) count as no difference even
    /// when the interval excludes 1 (e.g. 5%)
    #[arg(long, default_value = "5%", value_name = "PERCENT")]
    pub noise_threshold: String,

    /// Reconnect after this many requests on a persistent connection (for h2: streams)
    #[arg(long, value_name = "N")]
    pub requests_per_connection: Option<u64>,

    /// h2: HTTP/2 connections per origin that the workers (-c) share [default: 1]
    #[arg(long, value_name = "N")]
    pub connections: Option<usize>,

    /// The server's processes, comma-separated (their children are read too: nginx's
    /// master gives its workers): their CPU per request in each row and, with -c
    /// 1,10,50, their share of a core at each step. The embedded server's is read
    /// without it
    #[arg(long, value_delimiter = ',', value_name = "PID")]
    pub server_pid: Vec<u32>,

    /// Also say why each row costs what it costs, after the table (the JSON and HTML
    /// reports always carry it)
    #[arg(short, long)]
    pub verbose: bool,

    #[command(flatten)]
    pub load: LoadArgs,

    #[command(flatten)]
    pub request: RequestArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub metrics: MetricsArgs,
}

#[derive(Debug, Args)]
pub(crate) struct BenchArgs {
    /// Target URL (http:// or https://). Without one, or with a path (/bytes/1000), the
    /// embedded server is started in-process
    pub url: Option<String>,

    #[command(flatten)]
    pub link: LinkArgs,

    /// Connection strategy (keepalive; --help lists the 11 with a line each)
    #[arg(long, short = 's', default_value = "keepalive", long_help = strategy_help("Connection strategy"))]
    pub strategy: String,

    /// Same as --strategy close
    #[arg(long, conflicts_with = "strategy")]
    pub disable_keepalive: bool,

    /// Reconnect after this many requests on a persistent connection (for h2: streams)
    #[arg(long, value_name = "N")]
    pub requests_per_connection: Option<u64>,

    /// h2: HTTP/2 connections per origin that the workers (-c) share [default: 1]
    #[arg(long, value_name = "N")]
    pub connections: Option<usize>,

    #[command(flatten)]
    pub load: LoadArgs,

    #[command(flatten)]
    pub request: RequestArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub metrics: MetricsArgs,

    /// With no URL: target the embedded server's HTTPS listener instead of HTTP
    #[arg(long)]
    pub embedded_tls: bool,

    /// Run share I of N of the workload (1 <= I <= N), as one of N agents: -n, -c and
    /// --rate are split so that the shares sum to them exactly (remainders go to the lowest
    /// segments); -d is unchanged. `handshake merge` adds the agents' reports up
    #[arg(long, value_name = "I/N", conflicts_with = "segments")]
    pub segment: Option<String>,

    /// Run share JOB_COMPLETION_INDEX+1 of N (a Kubernetes Indexed Job sets
    /// JOB_COMPLETION_INDEX to 0..N-1 in its pods)
    #[arg(long, value_name = "N")]
    pub segments: Option<u64>,

    /// Start the load at this wall-clock time (RFC 3339, e.g. 2026-11-24T10:00:00Z, at
    /// most a day ahead), so that agents on several machines start together
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
}

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// HTTP listen address (ADDR:PORT), or unix:PATH for a Unix domain socket
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,

    /// HTTPS listen address (certificate generated at start), or unix:PATH
    #[arg(long, default_value = "127.0.0.1:8443")]
    pub tls_listen: String,

    /// No HTTPS listener
    #[arg(long)]
    pub no_tls: bool,

    /// Write the CA certificate (PEM) that signed the HTTPS certificate to this file
    #[arg(long, value_name = "FILE")]
    pub cacert_out: Option<PathBuf>,

    /// Keep connections open between requests: on or off
    #[arg(long, default_value = "on")]
    pub keepalive: String,

    /// Close each connection after this many requests (HTTP/2: streams, then GOAWAY)
    #[arg(long, value_name = "N")]
    pub max_requests_per_connection: Option<u64>,

    /// Offer HTTP/2 by ALPN on the HTTPS listener: on or off (prior knowledge on the
    /// plain listener is always answered)
    #[arg(long, default_value = "on")]
    pub h2: String,

    /// Answer HTTP/3 (QUIC) on UDP at the HTTPS listener's port: on or off
    #[arg(long, default_value = "on")]
    pub h3: String,

    /// HTTP/2 and HTTP/3: streams a client may have open at once on one connection
    #[arg(long, default_value_t = 128, value_name = "N")]
    pub max_concurrent_streams: u32,

    /// TLS 1.3 early data (0-RTT): on or off. On: session tickets allow 16 KiB of it,
    /// and a request in it is answered at once (before the client's Finished)
    #[arg(long, default_value = "off")]
    pub early_data: String,

    /// Pad the certificate chain to about N bytes (as a long chain or an RSA-4096 key
    /// would): a first flight above the initial window (TCP) or the anti-amplification
    /// limit (QUIC)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=60_000))]
    pub cert_chain_bytes: Option<u32>,

    #[command(flatten)]
    pub client_ca: ClientCaArgs,

    /// Answer as an HTTP/1.0 server: close unless the request asks for keep-alive
    #[arg(long)]
    pub http10: bool,

    /// Default response body size in bytes
    #[arg(long, default_value_t = 13)]
    pub body_size: usize,

    /// Delay before every response (e.g. 20ms)
    #[arg(long, default_value = "0s")]
    pub delay: String,

    /// Server worker threads
    #[arg(long, default_value_t = 1)]
    pub threads: usize,

    /// Stop after this long (default: run until Ctrl-C)
    #[arg(long, short = 'd', visible_short_alias = 'z')]
    pub duration: Option<String>,

    #[command(flatten)]
    pub limits: LimitArgs,
}

#[cfg(test)]
mod tests {
    use super::{Cli, Command};
    use clap::Parser;

    #[test]
    fn audit_binds_loopback_by_default() {
        let cli = Cli::try_parse_from(["handshake", "audit"]).unwrap();
        let Command::Audit(a) = cli.command else {
            panic!("audit parsed as another command")
        };
        let listen: std::net::SocketAddr = a.listen.parse().unwrap();
        assert!(listen.ip().is_loopback(), "audit listens on {listen}");
    }
}
