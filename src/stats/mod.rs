//! Recording and summarising: per-thread `Recorder`s (histograms and counters, merged
//! with `+=`), and the pure `summary` that turns a merged recorder into report numbers.

pub mod diagnose;
pub mod event;
pub mod paired;
pub mod raw;
pub mod recorder;
pub mod summary;
pub mod timeline;

pub use recorder::{PhaseStat, Recorder};
