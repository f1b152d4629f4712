//! `handshake merge`: see tests/README.md.

#[path = "../common/mod.rs"]
mod common;

mod kubernetes;
mod segments;
