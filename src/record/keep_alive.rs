//! The server's `Keep-Alive` response header, as HTTP/1 servers announce their idle
//! timeout and the requests a connection still takes.

use serde::{Deserialize, Serialize};

/// What an HTTP/1 server announced in its `Keep-Alive` response header (`timeout=5,
/// max=100`): how long it keeps an idle connection (s) and how many more requests it
/// takes on it; `None` where the header left one out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeepAliveHeader {
    pub timeout_s: Option<u32>,
    pub max: Option<u32>,
}

impl KeepAliveHeader {
    /// From the header's value: comma-separated `name=value` parameters, names in any
    /// case, unknown ones ignored; `None` when it names neither.
    pub(crate) fn parse(value: &[u8]) -> Option<KeepAliveHeader> {
        let mut h = KeepAliveHeader::default();
        for part in value.split(|b| *b == b',') {
            let Some(eq) = part.iter().position(|b| *b == b'=') else {
                continue;
            };
            let (name, v) = (part[..eq].trim_ascii(), part[eq + 1..].trim_ascii());
            let v = v
                .strip_prefix(b"\"")
                .and_then(|v| v.strip_suffix(b"\""))
                .unwrap_or(v);
            let n = std::str::from_utf8(v)
                .ok()
                .and_then(|v| v.parse::<u32>().ok());
            if name.eq_ignore_ascii_case(b"timeout") {
                h.timeout_s = n.or(h.timeout_s);
            } else if name.eq_ignore_ascii_case(b"max") {
                h.max = n.or(h.max);
            }
        }
        (h.timeout_s.is_some() || h.max.is_some()).then_some(h)
    }

    /// `Keep-Alive: timeout=5, max=100` as the server sent it (the parts it sent).
    pub(crate) fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.timeout_s {
            parts.push(format!("timeout={t}"));
        }
        if let Some(m) = self.max {
            parts.push(format!("max={m}"));
        }
        format!("`Keep-Alive: {}`", parts.join(", "))
    }
}
