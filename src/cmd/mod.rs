//! The commands, one module each: glue from parsed arguments to config, engine, server,
//! lab and report. Helpers they share (the embedded server on loopback or across a lab's
//! link, printing a report, small parsers) live here.

pub mod audit;
pub mod bench;
pub mod compare;
pub mod doctor;
pub mod lab;
pub mod merge;
mod output;
pub mod packaging;
pub mod serve;
pub mod trace;
pub mod watch;

use crate::cli::{Cli, Command};
use crate::config::single::SinglePlan;
use crate::embedded::Embedded;
pub(crate) use output::{emit_checked, exit_status, interrupted, no_success, print_out};

pub fn run(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Bench(a) => bench::run(a),
        Command::Compare(a) => compare::run(a),
        Command::Trace(a) => trace::run(a),
        Command::Doctor(a) => doctor::run(a),
        Command::Audit(a) => audit::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Lab(a) => lab::run(a),
        Command::Merge(a) => merge::run(a),
        Command::Watch(a) => watch::run(a),
        Command::Completions(a) => packaging::completions(a),
        Command::Man(a) => packaging::man(a),
    }
}

/// Wait for a client command to end; after a Ctrl-C, once its [`ChildGrace`] is over,
/// it is killed, by its PID.
///
/// [`ChildGrace`]: crate::interrupt::ChildGrace
pub(crate) fn wait_interruptible(
    child: &mut std::process::Child,
) -> std::io::Result<std::process::ExitStatus> {
    let mut grace = crate::interrupt::ChildGrace::default();
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(st);
        }
        if grace.over(child.id()) {
            let _ = child.kill();
            return child.wait();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A command's exit status as a shell gives it: its code, or 128 + the signal that
/// ended it.
pub(crate) fn code_of(st: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// The embedded server of `trace` and `doctor`, when their target is it (on loopback
/// or across the lab's link, taking TLS early data when `early_data`); the lab's link
/// check said on `steps`.
pub(crate) fn embedded_for(
    plan: &SinglePlan,
    early_data: bool,
    steps: &crate::progress::Steps,
) -> anyhow::Result<Option<Embedded>> {
    plan.path
        .as_ref()
        .map(|_| Embedded::with_early_data(plan.link, early_data, plan.chain_bytes, steps))
        .transpose()
}
