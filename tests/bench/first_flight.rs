//! The server's first flight against the round trips: a certificate chain above TCP's
//! initial congestion window (~10 segments) costs a full handshake one more round trip,
//! and one above QUIC's anti-amplification limit (3 times what the client sent) makes
//! h3-close's handshake take 2 round trips instead of 1. Shown across a 40 ms lab link
//! against the embedded server with `--cert-chain-bytes`.
//!
//! Needs root (network namespaces and TUN devices); skipped with a message otherwise.

use crate::common::accuracy::{check, ensure, link_claims, within, Try};
use crate::common::*;
use serde_json::Value;

/// Root, and one lab at a time (its timings are read).
fn lab_serial() -> Option<Alone> {
    root().then(serial)
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("SKIPPED: the lab needs root to create network namespaces");
    }
    root
}

fn tls(s: &Value) -> &Value {
    &s["connections"]["tls_handshakes"]
}

/// The median TLS handshake of six new connections on loopback (its own CPU, no round
/// trip), with the certificate chain padded to `chain` bytes.
fn loopback_tls(chain: Option<&str>) -> f64 {
    let mut args = vec!["-s", "close", "--embedded-tls", "-n", "6", "-c", "1"];
    if let Some(c) = chain {
        args.extend(["--cert-chain-bytes", c]);
    }
    scenario(&bench_json(&args))["phases_ms"]["new"]["tls"]["p50"]
        .as_f64()
        .unwrap()
}

#[test]
fn a_chain_above_the_initial_window_costs_a_tcp_handshake_one_round_trip() {
    let Some(_serial) = lab_serial() else { return };
    let run = |chain: Option<&str>| {
        let mut args = vec![
            "--rtt",
            "40ms",
            "-s",
            "close",
            "--embedded-tls",
            "-n",
            "6",
            "-c",
            "1",
        ];
        if let Some(c) = chain {
            args.extend(["--cert-chain-bytes", c]);
        }
        let v = bench_json(&args);
        assert_eq!(
            schema_violations("report.schema.json", &v),
            Vec::<String>::new()
        );
        v
    };
    let (cpu_long, cpu_short) = (loopback_tls(Some("16000")), loopback_tls(None));
    let p50 = |v: &Value| v["phases_ms"]["new"]["tls"]["p50"].as_f64().unwrap();
    let min = |v: &Value| v["phases_ms"]["new"]["tls"]["min"].as_f64().unwrap();
    let link = |v: &Value| v["link"]["rtt_measured_ms"].as_f64().unwrap();
    let test = "a 16 KB first flight at 40 ms";
    let Some(long) = check(test, || {
        let long = run(Some("16000"));
        let l = scenario(&long);
        // 16,000 bytes do not fit 10 segments of 1,448: one round trip more on each of
        // the six full handshakes.
        first_flight_counted(l, |bytes| bytes > 16000.0, 6);
        assert_eq!(long["link"]["tcp_congestion_control"], "cubic");
        ensure(min(l) >= 80.0 * 0.99, || {
            format!("faster than 2 round trips: {l}")
        })?;
        // Set against what the same run measured: the link's round trip (its probes'
        // median) and the same handshake's CPU on loopback, with the same chain; never
        // below the set round trips (CI read 84.8 ms against 80 ± 4.5 from the set RTT
        // alone, when the machine's BBR paced the first flight: the lab now runs cubic).
        link_claims(test, &long["link"]).judge(|| {
            within(
                "TLS handshake with the long chain",
                p50(l),
                80.0,
                2.0 * link(&long) + cpu_long,
                5.0,
            )
        })?;
        Ok(long.clone())
    }) else {
        return;
    };
    let test = "the default first flight at 40 ms";
    check(test, || {
        let short = run(None);
        let s = scenario(&short);
        // The default chain (about 2 KB) fits.
        first_flight_counted(s, |bytes| bytes < 14480.0, 0);
        ensure(min(s) >= 40.0 * 0.99, || {
            format!("faster than a round trip: {s}")
        })?;
        link_claims(test, &short["link"]).judge(|| {
            within(
                "TLS handshake with the default chain",
                p50(s),
                40.0,
                link(&short) + cpu_short,
                5.0,
            )
        })
    });
    // The embedded server's own count of connections: the six.
    assert_eq!(
        u(&long["server"]["connections_accepted"]),
        6,
        "{}",
        long["server"]
    );
    // The text says so.
    let out = run_text(&[
        "bench",
        "--rtt",
        "40ms",
        "-s",
        "close",
        "--embedded-tls",
        "-n",
        "2",
        "-c",
        "1",
        "--cert-chain-bytes",
        "16000",
        "--no-progress",
    ]);
    assert!(
        out.contains("it waited 2 round trips in all: above the initial congestion window"),
        "{out}"
    );
}

/// Six full handshakes whose server's first flight `fits` its size, and how many of them
/// took a round trip more for it.
fn first_flight_counted(s: &Value, fits: impl Fn(f64) -> bool, extra_round_trips: u64) {
    let t = tls(s);
    assert!(fits(t["server_flight_bytes"].as_f64().unwrap()), "{t}");
    assert_eq!(u(&t["full"]), 6, "{t}");
    assert_eq!(
        u(&t["first_flight_extra_round_trips"]),
        extra_round_trips,
        "{t}"
    );
}

fn run_text(args: &[&str]) -> String {
    String::from_utf8_lossy(&run_at_width(400, args).stdout).into_owned()
}

/// A comparison's link as it measured it (the median of its probes' connects).
fn link_rtt(v: &Value) -> f64 {
    v["link"]["rtt_measured_ms"]
        .as_f64()
        .or_else(|| v["comparison"]["link"]["rtt_measured_ms"].as_f64())
        .unwrap_or_else(|| panic!("the link's measured round trip: {v}"))
}

/// A row's time per request (one new connection each, one at a time) is its counted
/// round trips at the link's own round trip plus the request's work on both sides, its
/// client's and the server's CPU per request as the same run measured them (5.5 ms with
/// the long chain over QUIC here), within 5 % + 1 ms; never below the set round trips.
fn round_trips(row: &Value, counted: f64, link: f64) -> Try {
    let name = &row["name"];
    assert_eq!(
        row["round_trips"]["counted"].as_f64(),
        Some(counted),
        "{row}"
    );
    let ms = row["time_per_request_ms"]["median"].as_f64().unwrap();
    let cpu = (row["client_cpu_us_per_request"]["median"].as_f64().unwrap()
        + row["server_cpu_us_per_request"]["median"].as_f64().unwrap())
        / 1000.0;
    let expected = counted * link + cpu;
    ensure(
        (ms - expected).abs() <= expected * 0.05 + 1.0 && ms >= counted * 40.0 * 0.99,
        || {
            format!("{name}: {ms:.2} ms per request, expected {counted} round trips of {link:.2} ms and {cpu:.2} ms of CPU: {row}")
        },
    )
}

#[test]
fn a_chain_above_the_anti_amplification_limit_makes_h3_close_take_two_round_trips() {
    let Some(_serial) = lab_serial() else { return };
    let compare = |chain: Option<&str>| {
        let mut args = vec![
            "--rtt",
            "40ms",
            "--strategies",
            "close,h3-close",
            "--rounds",
            "6",
            "-n",
            "2",
            "-c",
            "1",
        ];
        if let Some(c) = chain {
            args.extend(["--cert-chain-bytes", c]);
        }
        compare_json(&args)
    };
    let row = |v: &Value, name: &str| -> (Value, Value) {
        let rows = v["comparison"]["rows"].as_array().unwrap();
        let i = rows
            .iter()
            .position(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("{name}: {v}"));
        (rows[i].clone(), v["scenarios"][i].clone())
    };
    // The handshake's CPU, measured on loopback with the same chain.
    let on_loopback = bench_json(&[
        "--embedded-tls",
        "-s",
        "h3-close",
        "-n",
        "6",
        "-c",
        "1",
        "--cert-chain-bytes",
        "9000",
    ]);
    let cpu = scenario(&on_loopback)["connections"]["quic"]["handshake_ms"]["mean"]
        .as_f64()
        .unwrap();
    // 9,000 bytes: above 3 times the client's two 1,200-byte Initials (its post-quantum
    // ClientHello needs two), within TCP's initial window.
    let test = "h3-close with a 9 KB first flight at 40 ms";
    check(test, || {
        let long = compare(Some("9000"));
        let (h3, h3s) = row(&long, "https h3-close");
        let (tcp, tcps) = row(&long, "https close");
        let q = &h3s["connections"]["quic"];
        assert_eq!(
            u(&q["handshake_extra_round_trips"]),
            u(&h3s["connections"]["opened"]),
            "{q}"
        );
        assert_eq!(
            u(&tls(&tcps)["first_flight_extra_round_trips"]),
            0,
            "{}",
            tls(&tcps)
        );
        // Counted: the request 1, the QUIC handshake 1 and its wait 1; TCP: 1 + 1 + 1.
        assert_eq!(h3["round_trips"]["counted"].as_f64(), Some(3.0), "{h3}");
        assert_eq!(tcp["round_trips"]["counted"].as_f64(), Some(3.0), "{tcp}");
        let mean = q["handshake_ms"]["mean"].as_f64().unwrap();
        ensure(mean >= 80.0, || {
            format!("QUIC handshake with the long chain: {mean:.2} ms")
        })?;
        // Two of the link's own round trips (the delay line adds its time to the set
        // one) and the handshake's CPU; never below two set round trips. (A CI run read
        // 84.73 ms against 80 ± 4.5 from the set RTT alone.)
        let link = link_rtt(&long);
        eprintln!("QUIC handshake {mean:.2} ms; link {link:.2} ms, CPU on loopback {cpu:.2} ms");
        link_claims(test, &long["link"]).judge(|| {
            within(
                "QUIC handshake with the long chain",
                mean,
                80.0,
                2.0 * link + cpu,
                5.0,
            )?;
            round_trips(&h3, 3.0, link)
        })
    });
    // The default chain: h3-close's handshake takes its one round trip.
    let test = "h3-close with the default first flight at 40 ms";
    check(test, || {
        let short = compare(None);
        let (h3, h3s) = row(&short, "https h3-close");
        assert_eq!(
            u(&h3s["connections"]["quic"]["handshake_extra_round_trips"]),
            0
        );
        assert_eq!(h3["round_trips"]["counted"].as_f64(), Some(2.0), "{h3}");
        link_claims(test, &short["link"]).judge(|| round_trips(&h3, 2.0, link_rtt(&short)))
    });
}

#[test]
fn cert_chain_bytes_needs_the_embedded_server() {
    let _machine = shared();
    let out = run(&["bench", "http://127.0.0.1:1/", "--cert-chain-bytes", "9000"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--cert-chain-bytes pads the embedded server's certificate chain"),
        "{err}"
    );
    let out = run(&["bench", "--cert-chain-bytes", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

/// doctor warns when the first flight is above TCP's initial window and QUIC's
/// anti-amplification limit, with what a shorter chain or an ECDSA key would do.
#[test]
fn doctor_warns_of_a_first_flight_above_the_initial_window_and_the_quic_limit() {
    let _machine = shared();
    let doctor = |args: &[&str]| -> Value {
        let mut all = vec!["--embedded-tls"];
        all.extend_from_slice(args);
        quick_doctor_json(&all)
    };
    let v = doctor(&["--cert-chain-bytes", "16000"]);
    let flight = u(&v["tls"]["server_flight_bytes"]);
    assert!(flight > 16000, "{}", v["tls"]);
    let problems = v["problems"].to_string();
    assert!(
        problems.contains(&format!("The server's first flight is {flight} B, above TCP's initial congestion window (10 segments, 14480 B): every full TLS handshake waits at least a round trip more"))
            && problems.contains("an ECDSA P-256 key"),
        "{problems}"
    );
    let hello = u(&v["tls"]["client_hello_bytes"]);
    assert!(
        problems.contains(&format!("Over QUIC the server may send 3 times what the client sent before it is validated: 7200 B after a {hello}-byte ClientHello")),
        "{problems}"
    );
    // The default chain fits both.
    let v = doctor(&[]);
    assert!(u(&v["tls"]["server_flight_bytes"]) < 7200, "{}", v["tls"]);
    let problems = v["problems"].to_string();
    assert!(!problems.contains("first flight"), "{problems}");
}
