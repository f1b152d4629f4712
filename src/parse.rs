//! The user's values and the error for bad ones: durations, shares, sizes, and
//! `UsageError` (printed as is, exit status 2). A leaf: it knows nothing of the rest.

use std::time::Duration;

/// Bad input from the user: printed as is, exit status 2.
#[derive(Debug)]
pub(crate) struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub(crate) fn usage<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// Parse `10s`, `1.5s`, `500ms`, `2m`, `1h`, or a plain number of seconds.
pub(crate) fn parse_duration(flag: &str, s: &str) -> Result<Duration, UsageError> {
    let t = s.trim();
    let (num, mult) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix("us").or_else(|| t.strip_suffix("µs")) {
        (n, 1e-6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = t.strip_suffix('h') {
        (n, 3600.0)
    } else {
        // A bare number has no unit: 5 could be 5 ms or 5 s. Only 0 needs none.
        if t.parse::<f64>().is_ok_and(|v| v != 0.0) {
            return usage(format!(
                "{flag}: {s:?} has no unit: write {t}ms or {t}s (units: us, ms, s, m, h)"
            ));
        }
        (t, 1.0)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 && v * mult < 1e9 => {
            Ok(Duration::from_secs_f64(v * mult))
        }
        _ => usage(format!(
            "{flag}: invalid duration {s:?} (examples: 10s, 500ms, 2m)"
        )),
    }
}

/// A share below 1: a percentage (`5%`) or a fraction (`0.05`); returns the fraction. A
/// bare number above 1 is neither and is refused, naming both spellings.
pub(crate) fn parse_percent(flag: &str, s: &str) -> Result<f64, UsageError> {
    let t = s.trim();
    let (num, percent) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let v = match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => v,
        _ => {
            return usage(format!(
                "{flag}: expected a percentage like 5% or a fraction like 0.05, not {s:?}"
            ))
        }
    };
    let fraction = if percent { v / 100.0 } else { v };
    if !percent && v > 1.0 {
        return usage(format!(
            "{flag}: {s:?} is above 1: write {v}% for a percentage, or {} as a fraction",
            v / 100.0
        ));
    }
    if fraction >= 1.0 {
        return usage(format!("{flag}: {s:?} must be below 100% (1)"));
    }
    Ok(fraction)
}

/// A duration that must be more than zero (a timeout, a run length, a window).
pub(crate) fn parse_positive_duration(flag: &str, s: &str) -> Result<Duration, UsageError> {
    let d = parse_duration(flag, s)?;
    if d.is_zero() {
        return usage(format!("{flag} must be more than zero"));
    }
    Ok(d)
}

/// A size in bytes: `4096`, `64KiB`, `32MiB`, `1GiB` (K, KB, M, MB, G, GB are taken as
/// the same powers of 1024); more than zero.
pub(crate) fn parse_bytes(flag: &str, s: &str) -> Result<u64, UsageError> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => 0,
    };
    match num.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)) {
        Some(v) if v > 0 => Ok(v),
        _ => usage(format!(
            "{flag}: expected a size more than zero, like 4096, 64KiB or 32MiB, not {s:?}"
        )),
    }
}

/// `10mbit`, `500kbit`, `1gbit`, `64000bit` (tc's units: SI, bits per second).
pub(crate) fn parse_bandwidth(s: &str) -> Result<u64, UsageError> {
    let t = s.trim().to_ascii_lowercase();
    let (num, mult) = if let Some(n) = t.strip_suffix("gbit") {
        (n, 1e9)
    } else if let Some(n) = t.strip_suffix("mbit") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix("kbit") {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("bit") {
        (n, 1.0)
    } else {
        (t.as_str(), f64::NAN)
    };
    match num.trim().parse::<f64>() {
        Ok(v) if mult.is_finite() && v.is_finite() && v * mult >= 8000.0 && v * mult <= 1e11 => {
            Ok((v * mult) as u64)
        }
        _ => Err(UsageError(format!(
            "--bandwidth: expected a rate from 8kbit to 100gbit like 10mbit, 500kbit or 1gbit, not {s:?}"
        ))),
    }
}

/// `on`/`off` (or true/false, yes/no, 1/0).
pub(crate) fn on_off(flag: &str, s: &str) -> Result<bool, UsageError> {
    match s.to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        _ => Err(UsageError(format!("{flag}: expected on or off, not {s:?}"))),
    }
}

/// A socket address (`127.0.0.1:8080`, `[::1]:8443`).
pub(crate) fn parse_addr(flag: &str, s: &str) -> Result<std::net::SocketAddr, UsageError> {
    s.parse().map_err(|_| {
        UsageError(format!(
            "{flag}: {s:?} is not an address like 127.0.0.1:8080"
        ))
    })
}

/// Statuses a user counts as successes beside 2xx and 3xx (`--ok-status 4xx`,
/// `--ok-status 404,410`, `--ok-status 4xx,503`): inclusive ranges of codes.
pub(crate) fn parse_ok_status(flag: &str, s: &str) -> Result<Vec<(u16, u16)>, UsageError> {
    let bad = |p: &str| {
        UsageError(format!(
            "{flag}: {p:?} is not a status (100-599) or a class like 4xx; give a comma-separated list such as 4xx or 404,410"
        ))
    };
    let mut out = Vec::new();
    for p in s.split(',').map(str::trim) {
        let range = match p.as_bytes() {
            [c @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] => {
                let lo = u16::from(c - b'0') * 100;
                (lo, lo + 99)
            }
            _ => match p.parse::<u16>() {
                Ok(c) if (100..600).contains(&c) => (c, c),
                _ => return Err(bad(p)),
            },
        };
        out.push(range);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ok_statuses() {
        assert_eq!(parse_ok_status("x", "4xx").unwrap(), [(400, 499)]);
        assert_eq!(
            parse_ok_status("x", "404, 5XX").unwrap(),
            [(404, 404), (500, 599)]
        );
        for bad in ["", "6xx", "99", "600", "4x", "ok", "404,"] {
            let e = parse_ok_status("--ok-status", bad).unwrap_err().0;
            assert!(e.contains("--ok-status"), "{bad}: {e}");
        }
    }

    #[test]
    fn sizes() {
        for (s, v) in [
            ("4096", 4096),
            ("64KiB", 64 << 10),
            ("64k", 64 << 10),
            ("32 MiB", 32 << 20),
            ("1G", 1 << 30),
        ] {
            assert_eq!(parse_bytes("--buffer", s).unwrap(), v, "{s}");
        }
        for s in [
            "",
            "0",
            "-1",
            "4 KiBs",
            "1.5M",
            "MiB",
            "99999999999999999999G",
        ] {
            let e = parse_bytes("--buffer", s).unwrap_err().0;
            assert!(e.contains("--buffer"), "{s}: {e}");
        }
    }

    #[test]
    fn durations() {
        assert_eq!(
            parse_duration("x", "500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(parse_duration("x", "2m").unwrap(), Duration::from_secs(120));
        // A bare number has no unit (only 0 needs none).
        let err = parse_duration("--rtt", "5").unwrap_err().to_string();
        assert!(err.contains("5ms or 5s"), "{err}");
        assert_eq!(parse_duration("x", "0").unwrap(), Duration::ZERO);
        assert_eq!(
            parse_duration("x", "1.5s").unwrap(),
            Duration::from_millis(1500)
        );
        // A share: a percentage or a fraction; a bare number above 1 is neither.
        assert_eq!(parse_percent("x", "5%").unwrap(), 0.05);
        assert_eq!(parse_percent("x", "0.05").unwrap(), 0.05);
        let err = parse_percent("--loss", "5").unwrap_err().to_string();
        assert!(err.contains("5%") && err.contains("0.05"), "{err}");
        assert!(parse_percent("x", "100%").is_err());
        assert!(parse_duration("x", "soon").is_err());
        assert!(parse_duration("x", "-1s").is_err());
    }

    #[test]
    fn bandwidth_in_tc_units() {
        assert_eq!(parse_bandwidth("10mbit").unwrap(), 10_000_000);
        assert_eq!(parse_bandwidth("500kbit").unwrap(), 500_000);
        assert_eq!(parse_bandwidth("1Gbit").unwrap(), 1_000_000_000);
        assert_eq!(parse_bandwidth("64000bit").unwrap(), 64_000);
        for bad in ["10mbps", "10", "fast", "1bit", "-5mbit"] {
            assert!(parse_bandwidth(bad).is_err(), "{bad}");
        }
    }
}
