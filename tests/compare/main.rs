//! `handshake compare`: see tests/README.md.

#[path = "../common/mod.rs"]
mod common;

mod knee;
mod strategies;
