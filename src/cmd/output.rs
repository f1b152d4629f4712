//! What every command does at its end: the report checked against `--fail-if`, printed
//! (text, JSON, HTML), a run that measured nothing or was interrupted said so, and the
//! exit status.

use std::io::Write;

use anyhow::Context;

use crate::cli::OutputArgs;
use crate::report::{self, Report};

/// Check `--fail-if` on the report's scenarios (each with its comparison row, if any),
/// print the report, then a line per failed threshold on stderr: the exit status (1
/// when one failed).
pub(crate) fn emit_checked(
    rep: &mut Report,
    output: &OutputArgs,
    thresholds: &[report::thresholds::Threshold],
    verbose: bool,
) -> anyhow::Result<i32> {
    let checked = report::thresholds::check_scenarios(thresholds, rep)?;
    rep.thresholds = checked.results;
    let urls = rep.urls();
    if let Some(run) = rep.run.as_mut() {
        run.urls = urls;
    }
    emit(rep, output, verbose)?;
    for l in checked.lines {
        eprintln!("{l}");
    }
    Ok(i32::from(checked.failed))
}

/// A run that measured nothing has failed, and so has one in which no response was a
/// success (2xx, 3xx, or a status `--ok-status` accepts): for each such scenario, one
/// line on stderr saying why; 1 when there was one, else 0.
pub(crate) fn no_success(rep: &Report, accepted: &[(u16, u16)]) -> i32 {
    let lines: Vec<String> = rep
        .scenarios
        .iter()
        .filter_map(|s| report::failure::no_success_line(s, accepted))
        .collect();
    for l in &lines {
        eprintln!("handshake: {l}");
    }
    i32::from(!lines.is_empty())
}

/// When Ctrl-C cut the work short: the mark saying what the report covers (`what`:
/// "the run", "the rounds completed").
pub(crate) fn interrupted(what: &str, rep: &Report) -> Option<report::finding::Finding> {
    crate::interrupt::requested().then(|| {
        let r = rep.scenarios.iter().map(|s| &s.requests);
        let completed = r.clone().map(|r| r.attempted).sum();
        let given_up = r.map(|r| r.aborted_at_deadline).sum();
        report::finding::interrupted(what, completed, given_up)
    })
}

/// The exit status: `code`, or 130 when Ctrl-C cut the work short.
pub(crate) fn exit_status(code: i32) -> i32 {
    if crate::interrupt::requested() {
        crate::interrupt::EXIT_STATUS
    } else {
        code
    }
}

/// Print a command's report on stdout; a reader that stopped reading (`| head`) is not
/// an error (println! would panic on the broken pipe).
pub(crate) fn print_out(out: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{out}");
}

/// Print the report (JSON, or text fitted to the terminal, with the explanations when
/// `verbose`) and write the HTML file if asked.
fn emit(rep: &Report, output: &OutputArgs, verbose: bool) -> anyhow::Result<()> {
    if let Some(path) = &output.html {
        std::fs::write(path, report::html::render(rep))
            .with_context(|| format!("--html {}", path.display()))?;
    }
    let out = if output.json {
        report::to_json(rep)
    } else {
        report::text::render(rep, &report::text::Layout::of_terminal(verbose))
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{out}");
    Ok(())
}
