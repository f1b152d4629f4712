//! `handshake audit`: see tests/README.md.

#[path = "../common/mod.rs"]
mod common;

mod client_certs;
mod clients;
mod first_hour;
mod http2;
mod proxy_mode;
