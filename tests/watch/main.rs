//! `handshake watch`: see tests/README.md.

#[path = "../common/mod.rs"]
mod common;

mod clients;
mod first_hour;
