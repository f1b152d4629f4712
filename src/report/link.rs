//! What a run reports about the emulated link it crossed (`--rtt` and the other link
//! flags): as set, as measured, and what the delay line moved. Filled by `lab`.

use serde::Serialize;

use crate::fmt;

/// What the run reports about its link.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LinkReport {
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
    /// Test-only: the one-way delay the delay line added to every packet but its probes'
    /// (`HANDSHAKE_TEST_LINK_SKEW_MS`), which its check does not see; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_skew_ms: Option<f64>,
    /// Median of the TCP connects timed across the link before the run.
    pub rtt_measured_ms: Option<f64>,
    pub probe_connects_ms: Vec<f64>,
    /// The probes over the whole run: before it, and one every half second during it.
    pub probes: ProbeSummary,
    /// Both sides' TCP congestion control (the kernel's default, cubic, whatever this
    /// machine's own is).
    pub tcp_congestion_control: String,
    /// The CPUs were held out of deep idle states while the lab ran
    /// (/dev/cpu_dma_latency); without, each wake-up of an idle CPU may add 0.05-1 ms.
    pub cpus_held_awake: bool,
    /// CPU time the hypervisor took from this virtual machine while the lab ran (steal,
    /// over all CPUs, ms; 10 ms grain): a thread can be held up then whatever its
    /// priority. Null where the kernel does not say.
    pub steal_ms: Option<f64>,
    /// That steal as a share of the CPU time the machine had while the lab ran (its CPUs
    /// times the lab's wall time), 0..1: the chance that any one moment of the run was
    /// held up by it.
    pub steal_share: Option<f64>,
    /// Whether the link held its round trip and the machine kept out of the way.
    pub check: Option<LinkCheck>,
    pub client_addr: String,
    pub server_addr: String,
    /// What the delay line moved and dropped, and its CPU (at the end of the run); null
    /// with netem.
    pub delay_line: Option<LineStats>,
}

impl LinkReport {
    /// "handshake's delay line: RTT set 40 ms, measured 40.4 ms (median of 5 TCP
    /// connects); loss 1 %; 10 Mbit/s".
    pub(crate) fn describe(&self) -> String {
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
        if let Some(skew) = self.test_skew_ms {
            s += &format!(
                "; {} ms more each way for every packet but the probes' (HANDSHAKE_TEST_LINK_SKEW_MS, for tests)",
                fmt::num(skew)
            );
        }
        let held = self.describe_held();
        if !held.is_empty() {
            s += "; ";
            s += &held;
        }
        s
    }

    /// The delay line's own error with its spread (once it has stopped) and whether the
    /// link held: "packets left the delay line 0 µs after their due times at the median,
    /// 31 µs at the 99th percentile, 1.10 ms at most; held within 1.10 ms of the set 40 ms
    /// (...)".
    pub(crate) fn describe_held(&self) -> String {
        let mut parts = Vec::new();
        if let Some(l) = self.delay_line.and_then(|d| d.lateness) {
            parts.push(format!(
                "packets left the delay line {} after their due times at the median, {} at the 99th percentile, {} at most",
                fmt_us(l.p50_us),
                fmt_us(l.p99_us),
                fmt_us(l.max_us)
            ));
        }
        if let Some(c) = &self.check {
            parts.push(c.sentence.clone());
        }
        parts.join("; ")
    }

    /// Whether the link held and the machine kept out of the way, in a sentence built
    /// from the figures.
    pub(crate) fn judge(&self) -> LinkCheck {
        let set = self.rtt_set_ms;
        let tol = tolerance_ms(set);
        let n = fmt::num;
        let mut parts = Vec::new();
        // The link's own round trip: only where it should equal the set one.
        let steady = self.jitter_ms == 0.0 && self.bandwidth_bps.is_none();
        let kernel_ok = self
            .probes
            .rtt_kernel_ms
            .filter(|_| steady)
            .map(|k| (k - set).abs() <= tol);
        if let (Some(false), Some(k)) = (kernel_ok, self.probes.rtt_kernel_ms) {
            parts.push(format!(
                "the link itself measured {} ms for {} set (the kernel's timing of the probes' SYNs; tolerance {} ms)",
                n(k),
                n(set),
                n(tol)
            ));
        }
        let late = self.delay_line.and_then(|d| d.lateness);
        let mut steal_said = false;
        if let Some(l) = late.filter(|l| l.beyond_tolerance > 0) {
            let behind = l.beyond_tolerance - l.woke_late;
            let mut why = Vec::new();
            if l.woke_late > 0 {
                let by = match self.steal_ms {
                    Some(st) if st > 0.0 => {
                        steal_said = true;
                        format!(
                            "the hypervisor took {} ms of CPU from this machine while it ran, which no priority inside prevents",
                            n(st)
                        )
                    }
                    _ => "this machine held it up".to_string(),
                };
                why.push(format!(
                    "{} because its thread woke late ({by})",
                    l.woke_late
                ));
            }
            if behind > 0 {
                why.push(format!(
                    "{behind} waiting while it wrote the packets due before them (bursts: its CPU was {} ms)",
                    n(self.delay_line.map_or(0.0, |d| d.cpu_s * 1000.0))
                ));
            }
            parts.push(format!(
                "{} of {} packets left the delay line more than {} late (at most {}): {}",
                l.beyond_tolerance,
                l.packets,
                fmt_us(l.tolerance_us),
                fmt_us(l.max_us),
                why.join(", ")
            ));
        }
        let link_held = match (kernel_ok, late) {
            (None, None) => None,
            (k, l) => Some(k != Some(false) && l.is_none_or(|l| l.beyond_tolerance == 0)),
        };
        let (machine_busy, busy) = self.busy(tol, steal_said);
        if machine_busy {
            parts.push(format!(
                "this machine was busy: {}; the figures include local waits",
                busy.join("; ")
            ));
        }
        let sentence = if parts.is_empty() {
            let mut s = format!("held within {} ms of the set {} ms", n(tol), n(set));
            if let Some(k) = self.probes.rtt_kernel_ms {
                s += &format!(" (the kernel timed {} ms)", n(k));
            }
            if let (Some(st), Some(share)) =
                (self.steal_ms.filter(|st| *st > 0.0), self.steal_share)
            {
                s += &format!(
                    "; the hypervisor took {} ms of CPU from this machine while it ran, {} % of its CPU time",
                    n(st),
                    n(share * 100.0)
                );
            }
            s
        } else {
            parts.join("; ")
        };
        LinkCheck {
            tolerance_ms: tol,
            link_held,
            machine_busy,
            sentence,
        }
    }

    /// Whether this machine added waits above `tol` to what the run measured, and each
    /// way it did, in words: a client's wait for the link over the kernel's timing of it,
    /// a handshake's own work waiting for a CPU, or taking longer during the run than
    /// before it, or the hypervisor's steal (in words here unless `steal_said` already).
    fn busy(&self, tol: f64, steal_said: bool) -> (bool, Vec<String>) {
        let n = fmt::num;
        let p = &self.probes;
        let mut busy = Vec::new();
        let wait = p.local_wait_ms.unwrap_or(0.0);
        if wait > tol {
            let during = p.rtt_during_run_ms.or(self.rtt_measured_ms);
            busy.push(format!(
                "the link measured {} ms for {} set as a client waits for it, about {} ms a round trip over the kernel's timing",
                n(during.unwrap_or(self.rtt_set_ms)),
                n(self.rtt_set_ms),
                n(wait)
            ));
        }
        let hs_wait = p.handshake_wait_ms.unwrap_or(0.0);
        if let (true, Some(cpu)) = (hs_wait > tol, p.handshake_cpu_ms) {
            busy.push(format!(
                "a TLS handshake done in memory waited {} ms for a CPU over its {} ms of work",
                n(hs_wait),
                n(cpu)
            ));
        }
        // The hypervisor's steal is CPU this machine wanted and did not get: any thread,
        // the client's, the server's or the delay line's, may have waited that long
        // between two probes, where neither the local wait nor the handshake sees it.
        // Over the tolerance and 1 % of the run's CPU time, it may move a percentile;
        // less (a 10 ms tick in a minute's run) holds up a request or two of thousands.
        let steal = self
            .steal_ms
            .zip(self.steal_share)
            .filter(|(st, share)| *st > tol && *share >= STEAL_SHARE_BUSY);
        if let Some((st, _)) = steal {
            if steal_said {
                busy.push("the hypervisor's steal named above".to_string());
            } else {
                busy.push(format!(
                    "the hypervisor took {} ms of CPU from this machine while it ran, which no priority inside prevents",
                    n(st)
                ));
            }
        }
        // Moved: judged on three probes during the run at least (one or two are one
        // preemption away from a claim).
        if let (Some(before), Some(during), true) = (
            p.handshake_before_run_ms,
            p.handshake_during_run_ms,
            p.during_run >= 3,
        ) {
            if during - before > tol {
                busy.push(format!(
                    "the same handshake took {} ms during the run against {} ms before it",
                    n(during),
                    n(before)
                ));
            }
        }
        (!busy.is_empty(), busy)
    }

    /// "the delay line moved 1234 packets client->server and ..., in 12 ms of CPU" (its
    /// CPU includes the kernel's receive path of every packet it writes into a side).
    pub(crate) fn describe_line(&self) -> String {
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

/// The hypervisor's steal, as a share of the run's CPU time, from which the machine is
/// said to have been busy.
const STEAL_SHARE_BUSY: f64 = 0.01;

/// What a delay set on the link (a round trip, or one way) may be off by and still be
/// the link's: 2 % of it and 0.3 ms.
pub(crate) fn tolerance_ms(delay_ms: f64) -> f64 {
    delay_ms * 0.02 + 0.3
}

/// A short time: in µs below a millisecond ("12 µs", "0.70 ms").
fn fmt_us(us: f64) -> String {
    if us < 1000.0 {
        format!("{} µs", us.round())
    } else {
        format!("{} ms", fmt::num(us / 1000.0))
    }
}

/// The link's TCP probes (to a listener of the lab's own) over the whole run.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub(crate) struct ProbeSummary {
    /// Probes during the run (one every half second).
    pub during_run: usize,
    /// Median connect of the probes during the run, as the client timed it.
    pub rtt_during_run_ms: Option<f64>,
    /// Median round trip of every probe as the kernel timed its SYN's answer
    /// (`TCP_INFO`): the link and the delay line alone, without the client's wake-up.
    pub rtt_kernel_ms: Option<f64>,
    /// Median of each probe's connect over its kernel-timed round trip: what waiting for
    /// a CPU added on this machine (the client's wake-up).
    pub local_wait_ms: Option<f64>,
    /// A full TLS 1.3 handshake played in memory beside each probe (client and server in
    /// one thread, no link): its CPU time, median of all probes.
    pub handshake_cpu_ms: Option<f64>,
    /// Its wall time, median of the probes before the run.
    pub handshake_before_run_ms: Option<f64>,
    /// Its wall time, median of the probes during the run.
    pub handshake_during_run_ms: Option<f64>,
    /// Median of each one's wall time over its CPU time: what waiting for a CPU added to
    /// a handshake's own work.
    pub handshake_wait_ms: Option<f64>,
}

/// Whether the run's figures are the link's: its round trip held within 2 % + 0.3 ms of
/// what was set, and the machine added no more than that.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LinkCheck {
    /// 2 % of the set RTT and 0.3 ms.
    pub tolerance_ms: f64,
    /// The link held: the kernel-timed round trip within the tolerance of the set one
    /// (null where the settings make it vary: jitter, bandwidth), and no packet of the
    /// delay line's left later than its one-way tolerance (null with netem).
    pub link_held: Option<bool>,
    /// This machine added waits above the tolerance (the probes' connects over the
    /// kernel's round trip, the in-memory handshake's wall time over its CPU time, its
    /// move during the run, or the hypervisor's steal): the run's figures include them.
    pub machine_busy: bool,
    pub sentence: String,
}

/// What the delay line did in one direction.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub(crate) struct DirStats {
    /// Packets delivered to the other side.
    pub packets: u64,
    pub bytes: u64,
    /// Dropped by `--loss`.
    pub lost: u64,
    /// Dropped because the bandwidth queue was full.
    pub queue_drops: u64,
}

#[derive(Debug, Clone, Copy, Serialize, Default)]
pub(crate) struct LineStats {
    pub client_to_server: DirStats,
    pub server_to_client: DirStats,
    /// CPU the delay line's thread used (user + system), seconds.
    pub cpu_s: f64,
    /// How late packets left against their due times (the line's own error), over the
    /// whole run; null until the line has stopped.
    pub lateness: Option<LateStats>,
}

/// The delay line's own error: each packet's departure against its due time.
#[derive(Debug, Clone, Copy, Serialize, Default)]
pub(crate) struct LateStats {
    /// Packets timed (every packet written into a side).
    pub packets: u64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// What a packet may be late by: 2 % of the one-way delay and 0.3 ms.
    pub tolerance_us: f64,
    /// Packets that left later than that.
    pub beyond_tolerance: u64,
    /// Of those, the ones already past their tolerance when the thread woke to write
    /// them: late because the thread itself woke late (the machine held it up); the
    /// others waited while it wrote the packets due before them (a burst).
    pub woke_late: u64,
    /// How long before a due time the thread woke at the end (the timer's lateness on
    /// this machine, learned as it ran).
    pub timer_lead_us: f64,
}
