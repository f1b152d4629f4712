//! `handshake merge`: the JSON reports of several agents become the report of one run
//! (how, in [`crate::merge`]).

use super::emit_checked;
use crate::cli::MergeArgs;
use crate::config::UsageError;
use crate::merge::{merge, read};
use crate::report::thresholds;

pub fn run(a: MergeArgs) -> anyhow::Result<i32> {
    let thresholds = thresholds::parse_all(&a.output.fail_if, thresholds::Subject::Bench)?;
    let mut inputs = Vec::new();
    for f in &a.files {
        inputs.extend(read(f)?);
    }
    if inputs.is_empty() {
        return Err(UsageError("merge: no reports in the input".into()).into());
    }
    let started_at = crate::host::now_rfc3339();
    let mut rep = merge(inputs, a.allow_mismatch)?;
    rep.run = Some(crate::host::run_info("merge", started_at));
    emit_checked(&mut rep, &a.output, &thresholds, false)
}
