//! `handshake merge`: the JSON reports of several agents become the report of one run
//! (how, in [`crate::merge`]).

use super::emit_checked;
use crate::cli::MergeArgs;
use crate::config::UsageError;
use crate::merge::{merge, read};
use crate::progress::Steps;
use crate::report::thresholds;

pub(crate) fn run(a: MergeArgs) -> anyhow::Result<i32> {
    let output = crate::config::output(&a.output, thresholds::Subject::Bench, false)?;
    // Reading and merging many large reports takes a while: a bar on a terminal.
    let steps = Steps::on_terminal("merge", !a.output.no_progress);
    steps.set_total(a.files.len() as u64, true);
    let mut inputs = Vec::new();
    for f in &a.files {
        steps.show(&format!("reading {f}"));
        inputs.extend(read(f)?);
        steps.advance();
    }
    if inputs.is_empty() {
        return Err(UsageError("merge: no reports in the input".into()).into());
    }
    let started_at = crate::host::now_rfc3339();
    steps.show(&format!("merging {} reports", inputs.len()));
    let mut rep = merge(
        inputs,
        a.allow_mismatch,
        (!output.accepted.is_empty()).then_some(output.accepted.as_slice()),
    )?;
    steps.finish();
    rep.run = Some(crate::host::run_info("merge", started_at));
    let code = emit_checked(&mut rep, &output)?;
    // The merged run is judged as one run is: nothing measured, or no success, fails.
    Ok(code.max(super::no_success(&rep, &output.accepted)))
}
