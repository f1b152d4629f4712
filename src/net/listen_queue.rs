//! The kernel's count of listen-queue overflows in this network namespace
//! (`TcpExtListenOverflows` in /proc/net/netstat, as `nstat` shows it): connects a
//! server's full accept queue turned away (their SYN or final ACK dropped, or answered
//! with a reset where `tcp_abort_on_overflow` is set). Read before and after a run: the
//! difference is an upper bound for the run's own (other programs of the namespace count
//! too).

/// `TcpExtListenOverflows` now, if the kernel says.
pub(crate) fn overflows() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/netstat").ok()?;
    counter(&text, "TcpExt:", "ListenOverflows")
}

/// The value named `name` in the `prefix` lines of a /proc/net/netstat text (a line of
/// names, then a line of values).
fn counter(text: &str, prefix: &str, name: &str) -> Option<u64> {
    let mut lines = text.lines().filter(|l| l.starts_with(prefix));
    while let (Some(names), Some(values)) = (lines.next(), lines.next()) {
        let at = names.split_whitespace().position(|n| n == name);
        if let Some(at) = at {
            return values.split_whitespace().nth(at)?.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_named_counter() {
        let t = "TcpExt: SyncookiesSent ListenOverflows ListenDrops\nTcpExt: 0 17 19\nIpExt: InNoRoutes\nIpExt: 3\n";
        assert_eq!(super::counter(t, "TcpExt:", "ListenOverflows"), Some(17));
        assert_eq!(super::counter(t, "TcpExt:", "Nope"), None);
    }
}
