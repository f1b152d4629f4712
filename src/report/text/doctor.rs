//! `doctor`'s text report.

use std::fmt::Write as _;

use crate::report::doctor::DoctorReport;

/// The policy line, what the server does and the verdict, fitted to `width`.
pub(crate) fn render(d: &DoctorReport, width: usize) -> String {
    let mut out = String::new();
    if let Some(i) = &d.interrupted {
        let _ = writeln!(out, "{}\n", i.text);
    }
    let _ = writeln!(out, "{}\n", d.policy.text);
    let _ = writeln!(out, "doctor {}", d.url);
    if let Some(l) = &d.link {
        let _ = writeln!(out, "link: {}", l.describe());
    }
    let _ = writeln!(out, "\nWhat the server does");
    for f in &d.findings {
        let _ = writeln!(out, "  - {}", f.text);
    }
    let _ = writeln!(out, "\nVerdict");
    match (d.problems.is_empty(), d.interrupted.is_some()) {
        (true, false) => {
            let _ = writeln!(out, "  No problem found: connections can be reused.");
        }
        (true, true) => {
            let _ = writeln!(
                out,
                "  No problem found in the probes that ended (interrupted)."
            );
        }
        _ => {}
    }
    for p in &d.problems {
        let _ = writeln!(out, "  ! {}", p.text);
    }
    crate::fmt::fit(&out, width)
}
