//! handshake: measure what connection setup (DNS, TCP, TLS) costs HTTP traffic and
//! prove whether connection reuse happens. See ARCHITECTURE.md and docs/timing.md.

pub mod audit;
pub mod cli;
pub mod cmd;
pub mod compare;
pub mod config;
pub mod cpu;
pub mod doctor;
pub mod embedded;
pub mod engine;
pub mod fmt;
pub mod host;
pub mod interrupt;
pub mod lab;
pub mod merge;
pub mod metrics;
pub mod net;
pub mod parse;
pub mod plan;
pub mod probe;
pub mod procs;
pub mod progress;
pub mod proto;
pub mod record;
pub mod report;
pub mod runtime_thread;
pub mod server;
pub mod stats;
pub mod strategy;
pub mod sys;
pub mod timer;
pub mod trace;
pub mod track;
pub mod watch;
