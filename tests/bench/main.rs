//! `handshake bench`: see tests/README.md.

#[path = "../common/mod.rs"]
mod common;

mod client_certs;
mod connections;
mod dns;
mod early_data;
mod fail_if;
mod failed_runs;
mod faults;
mod first_flight;
mod first_hour;
mod h1loop;
mod hostile;
mod hostile_h2;
mod http2;
mod http3;
mod kernel;
mod metrics;
mod paths;
mod ports;
mod proxy;
mod redirects;
mod robustness;
mod scale;
mod selfsigned;
mod timeline;
mod tls_groups;
