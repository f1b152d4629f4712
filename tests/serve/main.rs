//! `handshake serve`: see tests/README.md.

#[path = "../common/mod.rs"]
mod common;

mod limits;
