//! The client's view of its ephemeral ports, read when connects fail with
//! `EADDRNOTAVAIL`: how many sockets sit in TIME_WAIT and the local port range.

/// A snapshot of the local port situation (Linux `/proc`; empty elsewhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LocalPorts {
    /// TCP sockets (IPv4 and IPv6) in TIME_WAIT in this network namespace.
    pub time_wait: Option<u64>,
    /// `net.ipv4.ip_local_port_range`, inclusive.
    pub range: Option<(u32, u32)>,
}

impl LocalPorts {
    pub(crate) fn snapshot() -> LocalPorts {
        let time_wait = ["/proc/net/tcp", "/proc/net/tcp6"]
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .map(|t| count_time_wait(&t))
            .reduce(|a, b| a + b);
        let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|t| parse_range(&t));
        LocalPorts { time_wait, range }
    }

    /// Ports in the range.
    pub(crate) fn range_size(&self) -> Option<u32> {
        self.range.map(|(lo, hi)| hi.saturating_sub(lo) + 1)
    }
}

/// Sockets in state 06 (TIME_WAIT) in a `/proc/net/tcp` table.
fn count_time_wait(table: &str) -> u64 {
    table
        .lines()
        .skip(1)
        .filter(|l| l.split_whitespace().nth(3) == Some("06"))
        .count() as u64
}

fn parse_range(t: &str) -> Option<(u32, u32)> {
    let mut it = t.split_whitespace().map(|v| v.parse::<u32>().ok());
    Some((it.next()??, it.next()??))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_tables() {
        let t = "  sl  local_address rem_address   st tx_queue rx_queue\n\
                 0: 0100007F:1F90 00000000:0000 0A 00000000:00000000\n\
                 1: 0100007F:9C40 0100007F:1F90 06 00000000:00000000\n\
                 2: 0100007F:9C41 0100007F:1F90 06 00000000:00000000\n";
        assert_eq!(count_time_wait(t), 2);
        assert_eq!(parse_range("32768\t60999\n"), Some((32768, 60999)));
        assert_eq!(parse_range("junk"), None);
    }
}
