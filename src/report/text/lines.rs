//! What several text reports share: the layout they are fitted to, byte counts, and
//! the lines a report ends with (the embedded server's counts, the emulated link).

use std::fmt::Write as _;

/// How a text report is laid out: the width its lines fit in, and whether the long
/// explanations go in (they are always in the JSON and the HTML).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub width: usize,
    pub verbose: bool,
}

impl Layout {
    /// The width of `COLUMNS`, the terminal on stdout, or 80 (see [`crate::fmt::width`]).
    pub(crate) fn of_terminal(verbose: bool) -> Layout {
        Layout {
            width: crate::fmt::width(),
            verbose,
        }
    }
}

pub(super) fn bytes(n: u64) -> String {
    let f = n as f64;
    if f >= 1e9 {
        format!("{:.2} GB", f / 1e9)
    } else if f >= 1e6 {
        format!("{:.2} MB", f / 1e6)
    } else if f >= 1e3 {
        format!("{:.1} kB", f / 1e3)
    } else {
        format!("{n} B")
    }
}

pub(super) fn server_line(out: &mut String, srv: Option<&crate::report::server::StatsSnapshot>) {
    if let Some(srv) = srv {
        let _ = writeln!(
            out,
            "\nEmbedded server: {} connections accepted, {} requests served",
            srv.connections_accepted, srv.requests
        );
    }
}

pub(super) fn link_line(out: &mut String, link: Option<&crate::report::link::LinkReport>) {
    if let Some(l) = link {
        let _ = writeln!(out, "Link: {}", l.describe_line());
    }
}
