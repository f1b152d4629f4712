//! `handshake lab`: see tests/README.md.

#[path = "../common/mod.rs"]
mod common;

mod client_certs;
mod first_hour;
mod link;
