//! `handshake cli`: see tests/README.md.

#[path = "../common/mod.rs"]
mod common;

mod packaging;
mod progress;
mod usage;
mod width;
