//! handshake: measure what connection setup (DNS, TCP, TLS) costs HTTP traffic and
//! prove whether connection reuse happens. See ARCHITECTURE.md and docs/timing.md.

// Nothing is public but what the binary, the tests and the fuzz targets reach, so the
// compiler sees every item that is unused; `unsafe` only in `sys`, by the compiler.
#![deny(unsafe_code)]
#![warn(unreachable_pub)]

mod audit;
mod cli;
mod cmd;
mod compare;
mod config;
mod cpu;
mod doctor;
mod embedded;
mod engine;
mod fmt;
mod host;
mod interrupt;
mod lab;
mod merge;
mod metrics;
mod net;
mod parse;
mod plan;
mod probe;
mod procs;
mod progress;
mod proto;
mod record;
mod report;
mod runtime_thread;
mod server;
mod stats;
mod strategy;
// The one place `unsafe` is allowed: each block with its `SAFETY:` reason.
#[allow(unsafe_code)]
mod sys;
mod timer;
mod trace;
mod track;
mod watch;

/// The binary's whole work: parse, run, and the exit status.
pub use cmd::main;

/// What the integration tests (`tests/`), the fuzz targets (`fuzz/`) and the examples reach, and
/// nothing more: the embedded and audit servers whose own counts they hold the tool to,
/// the formatters whose words they read, and the HTTP/1 readers that are fuzzed.
pub mod api {
    /// The embedded server and its own counts.
    pub mod server {
        pub use crate::report::server::StatsSnapshot;
        pub use crate::server::tls::ClientCerts;
        pub use crate::server::{start, RunningServer, ServerConfig};
    }
    /// `handshake audit` answering itself, run in this process.
    pub mod audit {
        use crate::audit::answer::AuditConfig;
        use crate::audit::server::RunningAudit;

        /// An audit on a loopback port that answers with `server`'s responses and
        /// limits (tests/serve/limits.rs holds it and the embedded server to the same counts).
        pub struct Audit(RunningAudit);

        impl Audit {
            pub fn start(server: crate::server::ServerConfig) -> anyhow::Result<Audit> {
                let cfg = AuditConfig {
                    listen: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
                    tls: false,
                    client_certs: None,
                    upstream: None,
                    proxy: None,
                    server,
                };
                crate::audit::server::start(cfg).map(Audit)
            }

            pub fn url(&self) -> &str {
                &self.0.url
            }

            /// Client connections open now.
            pub fn open_connections(&self) -> u64 {
                self.0.open_connections()
            }

            /// Stop; the report as `--json` writes it.
            pub fn finish(self) -> serde_json::Value {
                serde_json::to_value(self.0.finish(None, None)).expect("a report serializes")
            }
        }
    }
    /// The exit statuses as `--help` and the README list them.
    pub mod cli {
        pub use crate::cli::EXIT_STATUS;
    }
    /// The connection strategies.
    pub mod strategy {
        pub use crate::strategy::Strategy;
    }
    /// How figures are written.
    pub mod fmt {
        pub use crate::fmt::{ms, num};
    }
    /// The proxy variables the tool reads (a test clears them).
    pub mod proxy {
        pub use crate::net::proxy::VARS;
    }
    /// The HTTP/2 client every connection is opened with (examples/h2_floor.rs).
    pub mod h2 {
        pub use crate::proto::h2::client::client;
    }
    /// The HTTP/1 response and chunked-body readers, for the fuzz targets.
    pub mod h1 {
        pub use crate::proto::h1::chunked::{ChunkError, ChunkedDecoder};
        pub use crate::proto::h1::conn::{Conn, WaitReadable};
        pub use crate::proto::pace::ReadLimits;
        pub use crate::record::notes::Taken;
    }
}
