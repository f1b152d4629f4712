//! `handshake trace`: see tests/README.md.

#[path = "../common/mod.rs"]
mod common;

mod first_hour;
mod waterfall;
