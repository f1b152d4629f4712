//! `doctor`'s text report.

use std::fmt::Write as _;

use crate::report::doctor::DoctorReport;

/// The policy line, what the server does and the verdict, fitted to `width`.
pub fn render(d: &DoctorReport, width: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{}\n", d.policy);
    let _ = writeln!(out, "doctor {}", d.url);
    if let Some(l) = &d.link {
        let _ = writeln!(out, "link: {}", l.describe());
    }
    let _ = writeln!(out, "\nWhat the server does");
    for f in &d.findings {
        let _ = writeln!(out, "  - {f}");
    }
    let _ = writeln!(out, "\nVerdict");
    if d.problems.is_empty() {
        let _ = writeln!(out, "  No problem found: connections can be reused.");
    }
    for p in &d.problems {
        let _ = writeln!(out, "  ! {p}");
    }
    crate::fmt::fit(&out, width)
}
