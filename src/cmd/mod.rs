//! The commands, one module each: glue from parsed arguments to config, engine, server,
//! lab and report. Helpers they share (the embedded server on loopback or across a lab's
//! link, printing a report, small parsers) live here.

pub(crate) mod audit;
pub(crate) mod bench;
pub(crate) mod compare;
pub(crate) mod doctor;
pub(crate) mod lab;
pub(crate) mod merge;
mod output;
mod packaging;
pub(crate) mod serve;
pub(crate) mod trace;
pub(crate) mod watch;

use crate::cli::{Cli, Command};
use crate::config::single::SinglePlan;
use crate::embedded::Embedded;
pub(crate) use output::{emit_checked, exit_status, interrupted, no_success, print_out};

/// The binary's whole work: parse, run, and the exit status (0 ok, 1 check failed, 2
/// usage or setup error; 128 + the signal after an interrupt).
pub fn main() -> i32 {
    let cli = match crate::cli::parse() {
        Ok(cli) => cli,
        Err(e) => {
            // A flag from curl or another load tool: say which flag it is here.
            let foreign = (e.kind() == clap::error::ErrorKind::UnknownArgument)
                .then(|| e.get(clap::error::ContextKind::InvalidArg))
                .flatten()
                .and_then(|arg| crate::cli::foreign_flag(&arg.to_string()));
            match foreign {
                Some(msg) => {
                    crate::progress::note(&format!("handshake: {msg}"));
                    return 2;
                }
                None => e.exit(),
            }
        }
    };
    // Without root, a lab run gets a user namespace of its own (where the kernel allows
    // it) before any thread starts: a user namespace can only be entered single-threaded.
    if cli.command.needs_lab() {
        crate::lab::netns::try_user_namespace();
    }
    match run(cli) {
        Ok(code) => code,
        // A reader that stopped reading (`handshake man | head`) is not an error.
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            0
        }
        Err(e) => {
            crate::progress::note(&format!("handshake: {e:#}"));
            // Ctrl-C that left nothing to report is still an interrupt.
            if crate::interrupt::requested() {
                crate::interrupt::exit_status()
            } else {
                2
            }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<i32> {
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
/// Say each of `notes` not said yet: what the choice of a proxy had to tell the user,
/// once however many scenarios share the origin (and again for none a redirect found
/// after the run began).
pub(crate) fn say_new(notes: Vec<String>, said: &mut Vec<String>) {
    for n in notes {
        if !said.contains(&n) {
            crate::progress::note(&n);
            said.push(n);
        }
    }
}

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
        .map(|_| {
            let cert = plan.presents_a_certificate();
            Embedded::with_early_data(plan.link, early_data, plan.chain_bytes, cert, steps)
        })
        .transpose()
}
