//! What every command does at its end: the report checked against `--fail-if`, printed
//! (text, JSON, HTML), a run that measured nothing or was interrupted said so, and the
//! exit status.

use std::io::Write;

use crate::report::{self, Output, Report};

/// Check `--fail-if` on the report's scenarios (each with its comparison row, if any),
/// print the report, then a line per failed threshold on stderr: the exit status (1
/// when one failed).
pub(crate) fn emit_checked(rep: &mut Report, output: &Output) -> anyhow::Result<i32> {
    let checked = report::thresholds::check_scenarios(&output.thresholds, rep)?;
    rep.thresholds = checked.results;
    let urls = rep.urls();
    if let Some(run) = rep.run.as_mut() {
        run.urls = urls;
    }
    let unwritten = emit(rep, output);
    for l in checked.lines {
        crate::progress::note(&l);
    }
    Ok(i32::from(checked.failed).max(unwritten))
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
        crate::progress::note(&format!("handshake: {l}"));
    }
    i32::from(!lines.is_empty())
}

/// When a signal cut the work short: the mark saying what the report covers (`what`:
/// "the run", "the rounds completed").
pub(crate) fn interrupted(what: &str, rep: &Report) -> Option<report::finding::Finding> {
    crate::interrupt::by().map(|by| {
        let r = rep.scenarios.iter().map(|s| &s.requests);
        let completed = r.clone().map(|r| r.attempted).sum();
        let given_up = r.map(|r| r.aborted_at_deadline).sum();
        report::finding::interrupted(by, what, completed, given_up)
    })
}

/// The mark of a watch, audit or lab that a signal ended, `started` being its start.
pub(crate) fn ended_by_interrupt(
    what: &str,
    started: std::time::Instant,
) -> Option<report::finding::Finding> {
    crate::interrupt::by()
        .map(|by| report::finding::ended_by_interrupt(by, what, started.elapsed().as_secs_f64()))
}

/// The exit status: `code`, or 128 + the signal's number when one cut the work short
/// (130 for SIGINT, 143 for SIGTERM).
pub(crate) fn exit_status(code: i32) -> i32 {
    if crate::interrupt::requested() {
        crate::interrupt::exit_status()
    } else {
        code
    }
}

/// Print a command's report on stdout: 0, or 1 when it could not be written (a full
/// disk behind `> FILE`), said on stderr naming stdout. A reader that stopped reading
/// (`| head`) is not an error: the rest is dropped quietly (`println!` would panic on the
/// broken pipe).
pub(crate) fn print_out(out: &str) -> i32 {
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{out}").and_then(|()| stdout.flush()) {
        Ok(()) => 0,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            crate::progress::note(&format!(
                "handshake: the report could not be written to standard output: {e}"
            ));
            1
        }
    }
}

/// Write a report's file (`--html FILE`): 0, or 1 when it could not be written (a full
/// disk, a folder that does not exist), said on stderr naming the flag and the file. The
/// report on stdout is printed first, so nothing measured is lost.
pub(crate) fn write_file(flag: &str, path: &std::path::Path, content: &str) -> i32 {
    match std::fs::write(path, content) {
        Ok(()) => 0,
        Err(e) => {
            crate::progress::note(&format!(
                "handshake: {flag} {}: the report could not be written there: {e}",
                path.display()
            ));
            1
        }
    }
}

/// Print the report (JSON, or text fitted to the terminal, with the explanations when
/// `verbose`) and write the HTML file if asked: 0, or 1 when either could not be
/// written.
fn emit(rep: &Report, output: &Output) -> i32 {
    let out = if output.json {
        report::to_json(rep)
    } else {
        report::text::render(rep, &report::text::Layout::of_terminal(output.verbose))
    };
    let printed = print_out(&out);
    let written = output.html.as_ref().map_or(0, |path| {
        write_file("--html", path, &report::html::render(rep))
    });
    printed.max(written)
}
