//! Validation and defaults: command-line values become a `Scenario`. Every error
//! names the flag or value that was wrong (and leads to exit status 2).

pub(crate) mod audit;
pub(crate) mod bench;
pub(crate) mod compare;
pub(crate) mod metrics;
mod request;
pub(crate) mod single;
pub(crate) mod target;
pub(crate) mod watch;

pub(crate) use request::request_config;
use std::net::IpAddr;
use std::time::Duration;

use crate::cli::{LinkArgs, LoadArgs, RequestArgs};
use crate::lab::{Emulator, LinkSpec};
use crate::net::tls::{self};
use crate::plan::{Choice, LoadShape, MinSpeed, PhaseLimits, StopWhen, Strategy};

use crate::parse::usage;
pub(crate) use crate::parse::{
    parse_bandwidth, parse_duration, parse_percent, parse_positive_duration, UsageError,
};
pub(crate) use crate::plan::build::{connections, parse_url, scenario, LoadConfig, RequestConfig};

/// How the report of `subject` (bench's, merge's or compare's) is written and judged:
/// `--fail-if` and `--ok-status` read before the run, so a mistake in them costs no run.
pub(crate) fn output(
    a: &crate::cli::OutputArgs,
    subject: crate::report::thresholds::Subject,
    verbose: bool,
) -> anyhow::Result<crate::report::Output> {
    Ok(crate::report::Output {
        json: a.json,
        html: a.html.clone(),
        verbose,
        thresholds: crate::report::thresholds::parse_all(&a.fail_if, subject)?,
        accepted: target::ok_statuses(a.ok_status.as_deref())?,
    })
}

/// Defaults of a command's load: requests when neither `-n` nor `-d` is given, and `-c`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoadDefaults {
    pub requests: u64,
    pub concurrency: usize,
}

/// `bench`: 10000 requests over 10 workers.
pub(crate) const BENCH_DEFAULTS: LoadDefaults = LoadDefaults {
    requests: 10_000,
    concurrency: 10,
};
/// `compare`: the field reports' experiment, 500 sequential requests.
pub(crate) const COMPARE_DEFAULTS: LoadDefaults = LoadDefaults {
    requests: 500,
    concurrency: 1,
};

/// `compare --rtt`: every request pays round trips, so fewer per round, ten at a time
/// (each worker still sends one after another: time per request is one worker's view).
pub(crate) const COMPARE_LAB_DEFAULTS: LoadDefaults = LoadDefaults {
    requests: 100,
    concurrency: 10,
};

pub(crate) fn load_config(a: &LoadArgs, defaults: LoadDefaults) -> Result<LoadConfig, UsageError> {
    let concurrency = match a.concurrency.as_deref() {
        None => defaults.concurrency,
        Some([c]) => *c,
        Some(_) => {
            return usage(
                "-c takes one number here: a list (-c 1,10,50,200) is compare's, which runs each step and finds the knee",
            )
        }
    };
    load_config_at(a, defaults, concurrency)
}

/// With no `-t`, a persistent strategy (keep-alive, h2, h3) against a server on this
/// machine (a loopback address, or a name `--resolve` pins to one) takes half the cores,
/// at least one: the server needs the rest, and its requests are cheap enough that a
/// second client thread costs more in hand-offs than it adds (bench/peers.py, 2 cores,
/// nginx: keep-alive 5.6 against 6.4 µs per request at 175,000 against 135,000
/// requests/s). A new connection per request keeps every core: there the kernel's work
/// per connection spreads over them.
pub(crate) fn share_the_machine(
    load: &mut LoadConfig,
    threads_given: bool,
    strategy: Strategy,
    req: &RequestConfig,
) {
    if threads_given || !strategy.persistent() {
        return;
    }
    let local = |u: &crate::plan::build::ParsedUrl| {
        let host = u.host.trim_start_matches('[').trim_end_matches(']');
        host == "localhost"
            || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
            || req
                .resolve
                .iter()
                .any(|(h, p, ip)| h == host && *p == u.port && ip.is_loopback())
    };
    if !req.urls.is_empty() && req.urls.iter().all(|(_, u)| local(u)) {
        load.threads = (crate::procs::cores() / 2).max(1).min(load.concurrency);
    }
}

/// The steps of `-c 1,10,50,200` (more than one, rising), or `None` for one number.
pub(crate) fn concurrency_steps(a: &LoadArgs) -> Result<Option<Vec<usize>>, UsageError> {
    match a.concurrency.as_deref() {
        Some(steps) if steps.len() > 1 => {
            if steps.windows(2).any(|w| w[1] <= w[0]) {
                return usage(format!(
                    "-c {}: the steps of a concurrency sweep must rise (e.g. 1,10,50,200)",
                    steps
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(",")
                ));
            }
            if steps.len() > 12 {
                return usage("-c: at most 12 steps in a concurrency sweep");
            }
            Ok(Some(steps.to_vec()))
        }
        _ => Ok(None),
    }
}

/// The load at concurrency `concurrency` (one step of a sweep, or the only one).
pub(crate) fn load_config_at(
    a: &LoadArgs,
    defaults: LoadDefaults,
    concurrency: usize,
) -> Result<LoadConfig, UsageError> {
    let default_requests = defaults.requests;
    if concurrency == 0 {
        return usage("-c/--concurrency must be at least 1");
    }
    if concurrency > 100_000 {
        return usage("-c/--concurrency must be at most 100000");
    }
    if a.requests == Some(0) {
        return usage("-n/--requests must be at least 1");
    }
    let duration = a
        .duration
        .as_deref()
        .map(|d| parse_positive_duration("-d/--duration", d).map_err(|e| body_hint(e, d)))
        .transpose()?;
    let requests = match (a.requests, duration) {
        (None, None) => Some(default_requests),
        (n, _) => n,
    };
    let load = match a.rate {
        None => LoadShape::Closed,
        Some(r) if r.is_finite() && r > 0.0 => LoadShape::Open { rate: r },
        Some(r) => {
            return usage(format!(
                "--rate must be a positive number of requests per second, not {r}"
            ))
        }
    };
    let timeout = parse_positive_duration("--timeout", &a.timeout)?;
    let limits = phase_limits(a)?;
    let cpus = crate::procs::cores();
    let threads = match a.threads {
        Some(0) => return usage("-t/--threads must be at least 1"),
        Some(t) => t,
        None => cpus,
    };
    Ok(LoadConfig {
        concurrency,
        threads: threads.min(concurrency),
        load,
        stop: StopWhen { requests, duration },
        timeout,
        limits,
        redirects: redirects(a)?,
        task_per_worker: std::env::var_os("HANDSHAKE_H1_TASKS").is_some(),
    })
}

/// `-L`/`--location` with `--max-redirs` (10 by default, as curl's; -1 for no limit).
fn redirects(a: &LoadArgs) -> Result<Option<u32>, UsageError> {
    match (a.location, a.max_redirs) {
        (false, None) => Ok(None),
        (false, Some(_)) => usage("--max-redirs applies with -L/--location"),
        (true, None) => Ok(Some(10)),
        (true, Some(-1)) => Ok(Some(u32::MAX)),
        (true, Some(n)) if n >= 0 => Ok(Some(n as u32)),
        (true, Some(n)) => usage(format!(
            "--max-redirs must be 0 or more (or -1 for no limit), not {n}"
        )),
    }
}

/// Workers never exceed the work: with `-n` smaller than `-c` (and no `-d`), `-n`
/// workers, each with one request (more would only hold connections open idle).
pub(crate) fn cap_workers(load: &mut LoadConfig) {
    if let (Some(n), None) = (load.stop.requests, load.stop.duration) {
        let n = usize::try_from(n).unwrap_or(usize::MAX).max(1);
        load.concurrency = load.concurrency.min(n);
        load.threads = load.threads.min(load.concurrency);
    }
}

/// `--segment I/N`, or `--segments N` with the index from `$JOB_COMPLETION_INDEX`
/// (0-based, as a Kubernetes Indexed Job sets it).
pub(crate) fn parse_segment(
    segment: Option<&str>,
    segments: Option<u64>,
) -> Result<Option<crate::report::Segment>, UsageError> {
    use crate::report::Segment;
    let seg = match (segment, segments) {
        (Some(s), _) => {
            let parsed = s.split_once('/').and_then(|(i, n)| {
                Some((i.trim().parse::<u64>().ok()?, n.trim().parse::<u64>().ok()?))
            });
            match parsed {
                Some((index, count)) => Segment { index, count },
                None => return usage(format!("--segment {s:?}: expected I/N, like 2/4")),
            }
        }
        (None, Some(count)) => {
            let Ok(v) = std::env::var("JOB_COMPLETION_INDEX") else {
                return usage("--segments N takes this agent's index from $JOB_COMPLETION_INDEX (0..N-1), which is not set; use --segment I/N elsewhere");
            };
            let Ok(i) = v.trim().parse::<u64>() else {
                return usage(format!("$JOB_COMPLETION_INDEX {v:?} is not a number"));
            };
            Segment {
                index: i + 1,
                count,
            }
        }
        (None, None) => return Ok(None),
    };
    if seg.count == 0 || seg.index == 0 || seg.index > seg.count {
        return usage(format!(
            "segment {seg}: needs 1 <= I <= N (with --segments N, $JOB_COMPLETION_INDEX in 0..N-1)"
        ));
    }
    Ok(Some(seg))
}

/// Share `seg` of `total`: `total / N`, plus one for the first `total % N` segments.
fn segment_share(total: u64, seg: crate::report::Segment) -> u64 {
    total / seg.count + u64::from(seg.index - 1 < total % seg.count)
}

/// This agent's share of the load: -n, -c and --rate split, -d unchanged.
pub(crate) fn apply_segment(
    load: &mut LoadConfig,
    seg: crate::report::Segment,
) -> Result<(), UsageError> {
    if let Some(n) = load.stop.requests {
        let share = segment_share(n, seg);
        if share == 0 {
            return usage(format!(
                "-n {n} over {} segments leaves segment {seg} no requests",
                seg.count
            ));
        }
        load.stop.requests = Some(share);
    }
    let c = segment_share(load.concurrency as u64, seg);
    if c == 0 {
        return usage(format!(
            "-c {} over {} segments leaves segment {seg} no workers: give at least one worker per segment",
            load.concurrency, seg.count
        ));
    }
    load.concurrency = c as usize;
    load.threads = load.threads.min(load.concurrency);
    if let LoadShape::Open { rate } = &mut load.load {
        *rate /= seg.count as f64;
    }
    if let Some(rate) = &mut load.limits.connect_rate {
        *rate /= seg.count as f64;
    }
    Ok(())
}

/// `--start-at`: RFC 3339, at most a day ahead. Returns how long to wait (zero when the
/// time has passed; the caller says so).
pub(crate) fn parse_start_at(s: &str) -> Result<(time::OffsetDateTime, Duration), UsageError> {
    let at = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|e| {
            UsageError(format!(
                "--start-at {s:?}: expected an RFC 3339 time like 2026-11-24T10:00:00Z ({e})"
            ))
        })?;
    let ahead = at - time::OffsetDateTime::now_utc();
    if ahead > time::Duration::days(1) {
        return usage(format!("--start-at {s:?} is more than a day ahead"));
    }
    Ok((at, Duration::try_from(ahead).unwrap_or(Duration::ZERO)))
}

/// `-d` is the duration here (as in wrk and k6); curl, hey and oha take a body with it.
/// A value that looks like a body gets that said.
fn body_hint(e: UsageError, value: &str) -> UsageError {
    let t = value.trim_start();
    let body = t.starts_with(['{', '[', '@', '<']) || t.contains(['=', '&', '"']);
    if body {
        UsageError(format!(
            "{}; -d is the duration here, as in wrk and k6: to send a request body, use --data",
            e.0
        ))
    } else {
        e
    }
}

/// `--connect-timeout`, `--wait-timeout`, `--min-speed` and its window.
fn phase_limits(a: &LoadArgs) -> Result<PhaseLimits, UsageError> {
    let optional = |flag: &str, v: &Option<String>| {
        v.as_deref()
            .map(|v| parse_positive_duration(flag, v))
            .transpose()
    };
    let connect = optional("--connect-timeout", &a.connect_timeout)?;
    let wait = optional("--wait-timeout", &a.wait_timeout)?;
    let window = parse_positive_duration("--min-speed-window", &a.min_speed_window)?;
    let min_speed = match &a.min_speed {
        None => None,
        Some(v) => Some(MinSpeed {
            bytes_per_s: parse_rate_bytes(v)?,
            window,
        }),
    };
    let connect_rate = match a.connect_rate {
        None => None,
        Some(r) if r.is_finite() && r > 0.0 => Some(r),
        Some(r) => {
            return usage(format!(
                "--connect-rate must be a positive number of connections per second, not {r}"
            ))
        }
    };
    Ok(PhaseLimits {
        connect,
        wait,
        min_speed,
        connect_rate,
        retry_backoff: retry_backoff(&a.retry_backoff)?,
    })
}

/// `--retry-backoff`: `MIN..MAX`, `MAX` (from 10 ms, or MAX if shorter), or `off`.
pub(crate) fn retry_backoff(v: &str) -> Result<Option<crate::plan::Backoff>, UsageError> {
    const FLAG: &str = "--retry-backoff";
    if v.trim() == "off" {
        return Ok(None);
    }
    let (first, longest) = match v.split_once("..") {
        Some((a, b)) => (
            parse_positive_duration(FLAG, a.trim())?,
            parse_positive_duration(FLAG, b.trim())?,
        ),
        None => {
            let longest = parse_positive_duration(FLAG, v.trim())?;
            (crate::plan::Backoff::DEFAULT.first.min(longest), longest)
        }
    };
    if first > longest {
        return usage(format!(
            "{FLAG} {v:?}: the first wait ({first:?}) is longer than the longest ({longest:?}); write MIN..MAX, or off"
        ));
    }
    Ok(Some(crate::plan::Backoff { first, longest }))
}

/// A byte rate such as `500`, `10k` or `2M` (decimal units).
fn parse_rate_bytes(v: &str) -> Result<u64, UsageError> {
    let t = v.trim();
    let (num, mult) = match t.as_bytes().last() {
        Some(b'k') | Some(b'K') => (&t[..t.len() - 1], 1_000),
        Some(b'm') | Some(b'M') => (&t[..t.len() - 1], 1_000_000),
        Some(b'g') | Some(b'G') => (&t[..t.len() - 1], 1_000_000_000),
        _ => (t, 1),
    };
    match num.parse::<u64>() {
        Ok(n) if n > 0 => n
            .checked_mul(mult)
            .ok_or_else(|| UsageError(format!("--min-speed {v:?} is too large"))),
        _ => usage(format!(
            "--min-speed {v:?}: expected a positive number of bytes per second, e.g. 1000 or 10k"
        )),
    }
}

pub(crate) fn parse_strategy(flag: &str, s: &str) -> Result<Strategy, UsageError> {
    Strategy::parse(s).ok_or_else(|| {
        // curl's -s is --silent: the URL after it is taken as the strategy.
        let curl = if s.contains("://") || s.starts_with('/') {
            " (curl's -s is --silent; handshake prints only its report, so drop -s)"
        } else {
            ""
        };
        UsageError(format!(
            "{flag}: unknown strategy {s:?}; known strategies: {}{curl}",
            Strategy::known_names()
        ))
    })
}

/// A list of strategies (`--strategies`), each parsed, each with the key-exchange groups
/// named after an `@` (`close@x25519`, `+` between groups); none given: `None` (the
/// default set), an empty list: an error.
pub(crate) fn parse_strategies(
    flag: &str,
    list: Option<&[String]>,
) -> Result<Option<Vec<Choice>>, UsageError> {
    let Some(list) = list else {
        return Ok(None);
    };
    let chosen: Vec<Choice> = list
        .iter()
        .map(|s| parse_choice(flag, s.trim()))
        .collect::<Result<_, _>>()?;
    if chosen.is_empty() {
        return usage(format!("{flag}: name at least one strategy"));
    }
    Ok(Some(chosen))
}

/// `--client-ca` and `--client-cert`: the CAs a server asks TLS clients for a certificate
/// of, and whether one is required; refused where the server has no TLS (`tls`), naming
/// what it `needs`.
pub(crate) fn client_certs(
    a: &crate::cli::ClientCaArgs,
    tls: bool,
    needs: &str,
) -> Result<Option<crate::server::tls::ClientCerts>, UsageError> {
    let Some(f) = a.client_ca.as_deref() else {
        return Ok(None);
    };
    if !tls {
        return Err(UsageError(format!(
            "--client-ca asks TLS clients: it needs {needs}"
        )));
    }
    let required = a.client_cert == crate::cli::ClientCertMode::Required;
    crate::server::tls::ClientCerts::load("--client-ca", f, required)
        .map(Some)
        .map_err(UsageError)
}

/// `close` or `close@x25519mlkem768+x25519`.
fn parse_choice(flag: &str, s: &str) -> Result<Choice, UsageError> {
    let (name, groups) = match s.split_once('@') {
        Some((name, groups)) => (name, Some(groups)),
        None => (s, None),
    };
    let strategy = parse_strategy(flag, name)?;
    if groups.is_some_and(|g| g.trim().eq_ignore_ascii_case(crate::plan::NO_CERT)) {
        return Ok(Choice {
            no_cert: true,
            ..Choice::of(strategy)
        });
    }
    let groups = groups
        .map(|g| {
            let text = g.trim().to_ascii_lowercase();
            tls::parse_groups(&text.replace('+', ","))
                .map(|parsed| (text, parsed))
                .map_err(|e| {
                    UsageError(format!(
                        "{flag} {s:?}: {e} (after the @: key-exchange groups, + between them, or no-cert)"
                    ))
                })
        })
        .transpose()?;
    Ok(Choice {
        groups,
        ..Choice::of(strategy)
    })
}

impl LinkArgs {
    /// `--cert-chain-bytes`.
    pub(crate) fn chain_bytes(&self) -> Option<usize> {
        self.cert_chain_bytes.map(|n| n as usize)
    }

    /// Whether any link flag was given (then the run crosses a lab's link).
    pub(crate) fn any(&self) -> bool {
        self.rtt.is_some()
            || self.jitter.is_some()
            || self.loss.is_some()
            || self.bandwidth.is_some()
            || self.emulator.is_some()
    }
}

/// Parse the link flags: one spec per RTT listed (`--rtt 0,10ms,40ms`); `many` says
/// whether a list is allowed.
pub(crate) fn parse_link(f: &LinkArgs, many: bool) -> Result<Vec<LinkSpec>, UsageError> {
    let rtts: Vec<Duration> = match &f.rtt {
        None => vec![Duration::ZERO],
        Some(s) => s
            .split(',')
            .map(|x| parse_duration("--rtt", x))
            .collect::<Result<_, _>>()?,
    };
    if rtts.is_empty() || (!many && rtts.len() > 1) {
        return Err(UsageError(format!(
            "--rtt: expected one round-trip time like 40ms, not {:?}",
            f.rtt.as_deref().unwrap_or("")
        )));
    }
    if let Some(r) = rtts.iter().find(|r| **r > Duration::from_secs(10)) {
        return Err(UsageError(format!(
            "--rtt: {r:?} is over the 10 s the link can hold"
        )));
    }
    let jitter = f
        .jitter
        .as_deref()
        .map(|j| parse_duration("--jitter", j))
        .transpose()?
        .unwrap_or_default();
    if jitter > Duration::from_secs(10) {
        return Err(UsageError("--jitter: at most 10 s".into()));
    }
    let loss = f
        .loss
        .as_deref()
        .map(|l| parse_percent("--loss", l))
        .transpose()?
        .unwrap_or(0.0);
    let bandwidth_bps = f.bandwidth.as_deref().map(parse_bandwidth).transpose()?;
    let emulator = match f.emulator.as_deref().map(str::trim) {
        None | Some("auto") => Emulator::Auto,
        Some("netem") => Emulator::Netem,
        Some("delay-line") => Emulator::DelayLine,
        Some(other) => {
            return Err(UsageError(format!(
                "--emulator: expected auto, netem or delay-line, not {other:?}"
            )))
        }
    };
    let test_skew = test_link_skew()?;
    Ok(rtts
        .into_iter()
        .map(|rtt| LinkSpec {
            rtt,
            jitter,
            loss,
            bandwidth_bps,
            emulator,
            test_skew,
        })
        .collect())
}

/// `HANDSHAKE_TEST_LINK_SKEW_MS`: a delay the delay line adds, one way, to every packet
/// but the lab's own probes', so that the lab claims a link its run did not cross. Only
/// the tests set it, to show that their check of the lab's claims fails on such a lab.
fn test_link_skew() -> Result<Duration, UsageError> {
    let Ok(v) = std::env::var("HANDSHAKE_TEST_LINK_SKEW_MS") else {
        return Ok(Duration::ZERO);
    };
    match v.trim().parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms >= 0.0 => Ok(Duration::from_secs_f64(ms / 1000.0)),
        _ => Err(UsageError(format!(
            "HANDSHAKE_TEST_LINK_SKEW_MS: expected milliseconds (0 or more), not {v:?}"
        ))),
    }
}

/// `--urls-from-file` without `-n` or `-d`: each URL once (520 URLs are 520 requests);
/// with `-n` the list is cycled until it is reached.
pub(crate) fn urls_once(load: &mut LoadConfig, each_url_once: bool, req: &RequestConfig) {
    if each_url_once {
        load.stop.requests = Some(req.urls.len() as u64);
    }
}

/// Whether a run sends each URL of `--urls-from-file` once: no `-n` or `-d` says otherwise.
pub(crate) fn each_url_once(a: &LoadArgs, request: &RequestArgs) -> bool {
    request.urls_from_file.is_some() && a.requests.is_none() && a.duration.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `-c` and `-n` say the defaults each command really runs with, `compare` over a link
    /// included (it runs 10 workers, not compare's 1).
    #[test]
    fn load_help_states_the_real_defaults() {
        use clap::CommandFactory;
        let mut cmd = crate::cli::Cli::command();
        let compare = cmd.find_subcommand_mut("compare").expect("compare");
        let help = |id: &str| {
            let arg = compare
                .get_arguments()
                .find(|a| a.get_id() == id)
                .expect(id);
            arg.get_help().expect("help").to_string()
        };
        let (c, n) = (help("concurrency"), help("requests"));
        for (what, d) in [
            ("bench", BENCH_DEFAULTS),
            ("compare", COMPARE_DEFAULTS),
            ("compare over a link", COMPARE_LAB_DEFAULTS),
        ] {
            let c_says = format!("{what} {}", d.concurrency);
            assert!(c.contains(&c_says), "-c help {c:?} lacks {c_says:?}");
            let n_says = format!("{what} {}", d.requests);
            assert!(n.contains(&n_says), "-n help {n:?} lacks {n_says:?}");
        }
    }

    #[test]
    fn urls() {
        let u = parse_url("https://Example.com:8443/a/b?x=1#frag").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.target.as_str()),
            (true, "example.com", 8443, "/a/b?x=1")
        );
        let u = parse_url("http://[::1]/").unwrap();
        assert_eq!((u.host.as_str(), u.port), ("::1", 80));
        let u = parse_url("http://h?q").unwrap();
        assert_eq!(u.target, "/?q");
        assert!(parse_url("ftp://x/").is_err());
        assert!(parse_url("http://h:99999/").is_err());
        assert!(parse_url("http:///").is_err());
    }

    fn flags(rtt: Option<&str>, loss: Option<&str>, bw: Option<&str>) -> LinkArgs {
        LinkArgs {
            rtt: rtt.map(String::from),
            loss: loss.map(String::from),
            bandwidth: bw.map(String::from),
            ..LinkArgs::default()
        }
    }

    #[test]
    fn link_flags_give_one_spec_per_rtt() {
        let v = parse_link(&flags(Some("0,10ms,40ms"), Some("1%"), Some("8mbit")), true).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[2].rtt, Duration::from_millis(40));
        assert_eq!(v[2].shape().one_way, Duration::from_millis(20));
        assert!((v[0].loss - 0.01).abs() < 1e-12);
        assert_eq!(v[1].bandwidth_bps, Some(8_000_000));
        assert!(parse_link(&flags(Some("10ms,20ms"), None, None), false).is_err());
        assert!(parse_link(&flags(Some("40ms"), Some("100%"), None), false).is_err());
        let none = parse_link(&flags(None, None, None), false).unwrap();
        assert_eq!(none[0].rtt, Duration::ZERO);
    }
}
