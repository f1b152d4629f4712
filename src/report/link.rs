//! What a run reports about the emulated link it crossed (`--rtt` and the other link
//! flags): as set, as measured, and what the delay line moved. Filled by `lab`.

use serde::Serialize;

use crate::fmt;

/// What the run reports about its link.
#[derive(Debug, Clone, Serialize)]
pub struct LinkReport {
    /// `netem` (the kernel's, on a veth pair) or `delay-line` (handshake's own, between
    /// TUN devices, where the kernel has no netem).
    pub emulator: &'static str,
    /// Why netem was not used, when `auto` fell back to the delay line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netem_unavailable: Option<String>,
    pub rtt_set_ms: f64,
    pub jitter_ms: f64,
    /// Per direction, 0..1.
    pub loss: f64,
    pub bandwidth_bps: Option<u64>,
    /// Median of the TCP connects timed across the link before the run.
    pub rtt_measured_ms: Option<f64>,
    pub probe_connects_ms: Vec<f64>,
    pub client_addr: String,
    pub server_addr: String,
    /// What the delay line moved and dropped, and its CPU (at the end of the run); null
    /// with netem.
    pub delay_line: Option<LineStats>,
}

impl LinkReport {
    /// "handshake's delay line: RTT set 40 ms, measured 40.4 ms (median of 5 TCP
    /// connects); loss 1 %; 10 Mbit/s".
    pub fn describe(&self) -> String {
        let how = match (self.emulator, &self.netem_unavailable) {
            ("netem", _) => "the kernel's netem on a veth pair",
            (_, Some(_)) => "handshake's delay line (the kernel's netem is not available)",
            _ => "handshake's delay line",
        };
        let mut s = format!(
            "{how} between two network namespaces ({} -> {}): RTT set {} ms",
            self.client_addr,
            self.server_addr,
            fmt::num(self.rtt_set_ms)
        );
        match self.rtt_measured_ms {
            Some(m) => {
                s += &format!(
                    ", measured {} ms (median of {} TCP connects)",
                    fmt::num(m),
                    self.probe_connects_ms.len()
                )
            }
            None => s += ", not measured (no probe connect succeeded)",
        }
        if self.jitter_ms > 0.0 {
            s += &format!("; jitter ±{} ms", fmt::num(self.jitter_ms));
        }
        if self.loss > 0.0 {
            s += &format!("; loss {} % per direction", fmt::num(self.loss * 100.0));
        }
        if let Some(b) = self.bandwidth_bps {
            s += &format!("; bandwidth {}", fmt::rate_bps(b));
        }
        s
    }

    /// "the delay line moved 1234 packets client->server and ..., in 12 ms of CPU" (its
    /// CPU includes the kernel's receive path of every packet it writes into a side).
    pub fn describe_line(&self) -> String {
        let Some(d) = &self.delay_line else {
            return "netem: packets counted by the kernel (tc -s qdisc), not here".to_string();
        };
        let (a, b) = (&d.client_to_server, &d.server_to_client);
        format!(
            "the delay line moved {} packets client->server and {} server->client, lost {} and {}, dropped {} at the bandwidth queue, in {:.1} ms of CPU",
            a.packets,
            b.packets,
            a.lost,
            b.lost,
            a.queue_drops + b.queue_drops,
            d.cpu_s * 1000.0
        )
    }
}

/// What the delay line did in one direction.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct DirStats {
    /// Packets delivered to the other side.
    pub packets: u64,
    pub bytes: u64,
    /// Dropped by `--loss`.
    pub lost: u64,
    /// Dropped because the bandwidth queue was full.
    pub queue_drops: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Default)]
pub struct LineStats {
    pub client_to_server: DirStats,
    pub server_to_client: DirStats,
    /// CPU the delay line's thread used (user + system), seconds.
    pub cpu_s: f64,
}
