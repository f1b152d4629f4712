//! The CPU time of a server's threads (the embedded server's, or the processes given by
//! `--server-pid` and their children) and of the whole machine, read before and after a
//! run: what share of a core the server used, on how many threads, and how busy the
//! machine was (compare's concurrency sweep says from them who is at its limit); and a
//! process's tree of descendants (also `watch`'s).

use std::collections::HashMap;
use std::time::Duration;

use crate::server::ServerStats;

/// Whose CPU time the server's is.
pub(crate) enum ServerCpu<'a> {
    /// Not known: a server elsewhere, no `--server-pid`.
    Unknown,
    Embedded(&'a ServerStats),
    /// These processes and, read at each sample, their descendants (nginx's workers
    /// under its master).
    Pids(Vec<u32>),
}

/// One reading: each server thread's CPU time so far, and the machine's busy CPU time
/// (all cores).
pub(crate) struct Sample {
    server: Option<HashMap<u64, Duration>>,
    machine: Option<Duration>,
}

/// Between two samples.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Shares {
    /// The server's CPU time, in seconds.
    pub server_cpu_s: Option<f64>,
    /// The server's CPU as a share of one core (1.0 = one core all the time).
    pub server_cores: Option<f64>,
    /// The server's threads that ran at least 5 % of the time: how many cores it
    /// could use at once.
    pub server_threads: Option<usize>,
    /// The whole machine's busy share, of all its cores (1.0 = every core busy).
    pub machine_busy: Option<f64>,
}

/// The cores this process may run on.
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Clock ticks per second: the unit of /proc's CPU times.
fn ticks_per_s() -> u64 {
    rustix::param::clock_ticks_per_second().max(1)
}

/// A thread that ran at least this share of the time between two samples was working.
const WORKING: f64 = 0.05;

impl ServerCpu<'_> {
    pub(crate) fn sample(&self) -> Sample {
        let server = match self {
            ServerCpu::Unknown => None,
            ServerCpu::Embedded(s) => Some(
                s.thread_times()
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| (i as u64, t))
                    .collect(),
            ),
            ServerCpu::Pids(pids) => Some(threads_of(&with_descendants(pids))),
        };
        Sample {
            server,
            machine: machine_busy(),
        }
    }
}

impl Sample {
    /// What happened between `self` (before) and `after`, over `wall` (the load's own
    /// time: between the samples the run also starts and stops, with little load).
    pub(crate) fn shares(&self, after: &Sample, wall: Duration) -> Shares {
        let wall = wall.as_secs_f64().max(1e-9);
        let (server_cpu_s, server_threads) = match (&self.server, &after.server) {
            (Some(a), Some(b)) => {
                let deltas: Vec<f64> = b
                    .iter()
                    .map(|(id, t)| {
                        t.saturating_sub(a.get(id).copied().unwrap_or_default())
                            .as_secs_f64()
                    })
                    .collect();
                let working = deltas.iter().filter(|d| **d / wall >= WORKING).count();
                (Some(deltas.iter().sum::<f64>()), Some(working))
            }
            _ => (None, None),
        };
        let cores = cores() as f64;
        let machine_busy = match (self.machine, after.machine) {
            (Some(a), Some(b)) => {
                Some((b.saturating_sub(a).as_secs_f64() / (wall * cores)).min(1.0))
            }
            _ => None,
        };
        Shares {
            server_cpu_s,
            server_cores: server_cpu_s.map(|s| s / wall),
            server_threads,
            machine_busy,
        }
    }
}

/// Each process that exists, or a message naming the first that does not.
pub(crate) fn check_pids(pids: &[u32]) -> Result<(), String> {
    match pids
        .iter()
        .find(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
    {
        Some(p) => Err(format!("--server-pid {p}: no such process")),
        None => Ok(()),
    }
}

/// `pids` and every process below them, each once.
fn with_descendants(pids: &[u32]) -> Vec<u32> {
    let mut all: Vec<u32> = Vec::new();
    for &p in pids {
        for q in process_tree(p as i32) {
            if !all.contains(&(q as u32)) {
                all.push(q as u32);
            }
        }
    }
    all
}

/// `root` and its descendants, from /proc/PID/task/TID/children (fast); where the
/// kernel has no such file, from every process's parent in /proc/PID/stat.
pub(crate) fn process_tree(root: i32) -> Vec<i32> {
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", tree[i])) else {
            i += 1;
            continue;
        };
        for t in tasks.flatten() {
            match std::fs::read_to_string(t.path().join("children")) {
                Ok(list) => tree.extend(
                    list.split_whitespace()
                        .filter_map(|p| p.parse::<i32>().ok()),
                ),
                Err(_) => return process_tree_by_stat(root),
            }
        }
        i += 1;
    }
    tree
}

fn process_tree_by_stat(root: i32) -> Vec<i32> {
    let mut parent: HashMap<i32, i32> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
                continue;
            };
            if let Some(ppid) = stat_field(&stat, 4) {
                parent.insert(pid, ppid as i32);
            }
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(parent.iter().filter(|(_, pp)| **pp == p).map(|(c, _)| *c));
        i += 1;
    }
    tree
}

/// Field `n` (1-based, as proc(5) numbers them) of a /proc stat line; the command name
/// in parentheses may hold spaces, so fields are counted after its closing one.
fn stat_field(stat: &str, n: usize) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

/// The CPU time of every thread of `pids`, keyed by thread id: the scheduler's run time
/// in nanoseconds (schedstat), or user + system time in clock ticks where it is missing.
fn threads_of(pids: &[u32]) -> HashMap<u64, Duration> {
    let hz = ticks_per_s();
    let mut out = HashMap::new();
    for pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u64>().ok()) else {
                continue;
            };
            let base = format!("/proc/{pid}/task/{tid}");
            let ns = std::fs::read_to_string(format!("{base}/schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
                .or_else(|| {
                    let stat = std::fs::read_to_string(format!("{base}/stat")).ok()?;
                    let ticks = stat_field(&stat, 14)? + stat_field(&stat, 15)?;
                    Some(ticks * 1_000_000_000 / hz)
                });
            if let Some(ns) = ns {
                out.insert(tid, Duration::from_nanos(ns));
            }
        }
    }
    out
}

/// The machine's busy CPU time over all cores (/proc/stat's first line, in clock ticks;
/// idle and iowait are not busy).
fn machine_busy() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some(Duration::from_nanos(
        (total - idle) * (1_000_000_000 / ticks_per_s()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let s = "42 (a (b) c) S 7 42 42 0 -1 0 0 0 0 0 120 30 0 0";
        assert_eq!(stat_field(s, 4), Some(7));
        assert_eq!(stat_field(s, 14), Some(120));
        assert_eq!(stat_field(s, 15), Some(30));
    }

    /// This process's own threads, read through /proc: a thread that spins for 200 ms
    /// counts as working and as most of a core.
    #[test]
    fn a_spinning_process_is_read_as_a_core() {
        let watch = ServerCpu::Pids(vec![std::process::id()]);
        let before = watch.sample();
        let t = Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(200) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        let s = before.shares(&watch.sample(), t.elapsed());
        assert!(s.server_cores.unwrap() > 0.3, "{s:?}");
        assert!(s.server_threads.unwrap() >= 1, "{s:?}");
        assert!(s.machine_busy.unwrap() > 0.2, "{s:?}");
    }
}
