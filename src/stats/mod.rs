//! Recording and summarising: per-thread `Recorder`s (histograms and counters, merged
//! with `+=`), and the pure `summary` that turns a merged recorder into report numbers.

pub(crate) mod diagnose;
pub(crate) mod event;
pub(crate) mod paired;
pub(crate) mod raw;
pub(crate) mod recorder;
pub(crate) mod summary;
pub(crate) mod timeline;

pub(crate) use recorder::Recorder;
