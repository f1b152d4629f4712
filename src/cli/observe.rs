//! The flags of the commands that look at another program's connections: `audit` (as
//! its server or its proxy) and `watch` (from the packets).

use std::path::PathBuf;

use clap::Args;

use super::shared::{ClientCaArgs, LimitArgs, MetricsArgs};

#[derive(Debug, Args)]
pub(crate) struct AuditArgs {
    /// Forward requests to this upstream (http:// or https://) over persistent connections,
    /// instead of answering them here
    #[arg(long, value_name = "URL")]
    pub upstream: Option<String>,

    /// Be the client's forward proxy instead of its server: the command runs with
    /// HTTP_PROXY and HTTPS_PROXY naming the audit (NO_PROXY cleared) and keeps its own
    /// URLs; plain requests are forwarded, CONNECT tunnels relayed byte for byte (their
    /// requests estimated from TLS records)
    #[arg(long, conflicts_with_all = ["upstream", "tls"])]
    pub proxy_mode: bool,

    /// With --proxy-mode: connect to ADDR for HOST:PORT instead of looking HOST up
    /// (curl's --resolve); repeatable
    #[arg(long, value_name = "HOST:PORT:ADDR", requires = "proxy_mode")]
    pub resolve: Vec<String>,

    /// Listen address
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,

    /// Listen with HTTPS (certificate generated at start)
    #[arg(long)]
    pub tls: bool,

    #[command(flatten)]
    pub client_ca: ClientCaArgs,

    /// Write the CA (PEM) that signed the HTTPS certificate, for the client to trust
    #[arg(long, value_name = "FILE")]
    pub cacert_out: Option<PathBuf>,

    /// Without a command: stop after this long (default: at Ctrl-C)
    #[arg(long, short = 'd', visible_short_alias = 'z')]
    pub duration: Option<String>,

    /// Answers' body size when answering here
    #[arg(long, default_value_t = 13)]
    pub body_size: usize,

    #[command(flatten)]
    pub limits: LimitArgs,

    /// Trust the upstream's certificate if signed by the CA in this PEM file
    #[arg(long, value_name = "FILE")]
    pub upstream_cacert: Option<PathBuf>,

    /// Accept any upstream certificate
    #[arg(long)]
    pub upstream_insecure: bool,

    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,

    /// No progress on stderr: not the line that says where the audit listens (the report
    /// names its URL)
    #[arg(long)]
    pub no_progress: bool,

    /// Also write the report as one self-contained HTML file (charts and tables, works
    /// offline)
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Fail (exit 1, unless the command failed: then its status) when EXPR holds:
    /// 'reuse_ratio<0.9', 'connections>10', 'tls_full>1', 'requests_per_connection<2',
    /// or any figure by its dotted path in the JSON report; repeatable
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,

    /// The client to audit, with {url} standing for the audit's URL (also in $HANDSHAKE_URL)
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// Watch this running process and its children
    #[arg(long, conflicts_with = "command")]
    pub pid: Option<i32>,

    /// Only connections to a server on this port
    #[arg(long)]
    pub port: Option<u16>,

    /// Only connections to a server at this address
    #[arg(long, value_name = "ADDR")]
    pub host: Option<String>,

    /// Stop after this long (default: when the command or process ends, or at Ctrl-C;
    /// a command still running then is stopped)
    #[arg(long, short = 'd', visible_short_alias = 'z')]
    pub duration: Option<String>,

    /// The capture's buffer in the kernel (like tcpdump -B): packets that arrive while
    /// it is full are dropped, and counted in the report [default: 32MiB]
    #[arg(long, value_name = "SIZE")]
    pub buffer: Option<String>,

    /// Print the report as JSON
    #[arg(long)]
    pub json: bool,

    /// Fail (exit 1, unless the command failed: then its status) when EXPR holds, as for
    /// audit: 'reuse_ratio<0.9', 'connections>10', 'tls_full>1', or a dotted path
    #[arg(long = "fail-if", value_name = "EXPR")]
    pub fail_if: Vec<String>,

    #[command(flatten)]
    pub metrics: MetricsArgs,

    /// With --metrics or --remote-write: at most this many label sets (endpoint,
    /// program) per metric; the rest add to program="other", and
    /// handshake_metrics_series_folded_total counts their connections
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    pub metrics_max_series: u64,

    /// The command to start and watch (its process tree's connections only)
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}
