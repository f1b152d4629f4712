//! The kernel's view of each TCP connection (`TCP_INFO`): its least RTT, and the
//! connects whose SYN was sent again, checked against a packet capture (tcpdump) of
//! the SYNs the client's side really sent across a lossy lab link, and against the link.
//!
//! Needs root (network namespaces and TUN devices); skipped with a message otherwise.

use std::collections::BTreeMap;
use std::process::Command;

use crate::common::*;
use serde_json::Value;

/// From tcpdump's reading of a capture of SYN segments: per connection (the client's
/// port and the initial sequence number of its SYN), the SYNs it sent, and whether a
/// SYN-ACK came back (the connect completed). The port alone does not name a
/// connection: when the server closes first, the TIME_WAIT is the server's and the
/// client's kernel may give a later connect the same port.
fn syns(capture: &str) -> BTreeMap<(u16, u32), (u64, bool)> {
    let out = Command::new("tcpdump")
        .args(["-r", capture, "-n", "-S"])
        .output()
        .expect("tcpdump reads its capture");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut by_conn: BTreeMap<(u16, u32), (u64, bool)> = BTreeMap::new();
    let port = |addr: &str| {
        addr.rsplit('.')
            .next()
            .and_then(|p| p.trim_end_matches(':').parse::<u16>().ok())
    };
    // The number after `name` ("seq 123," or "ack 124,").
    let field = |f: &[&str], name: &str| {
        f.windows(2)
            .find(|w| w[0] == name)
            .and_then(|w| w[1].trim_end_matches(',').parse::<u32>().ok())
    };
    for line in text.lines() {
        // "... IP 10.200.0.1.41234 > 10.200.0.2.8080: Flags [S], seq 123, win ..."
        // "... IP 10.200.0.2.8080 > 10.200.0.1.41234: Flags [S.], seq 456, ack 124, ..."
        let Some(at) = line.find(" IP ") else {
            continue;
        };
        let f: Vec<&str> = line[at + 4..].split_whitespace().collect();
        if f.len() < 5 || f[1] != ">" {
            continue;
        }
        match f[4] {
            "[S]," => {
                let p = port(f[0]).expect("a source port");
                let isn = field(&f, "seq").expect("a SYN's sequence number");
                by_conn.entry((p, isn)).or_default().0 += 1;
            }
            "[S.]," => {
                let p = port(f[2]).expect("a destination port");
                let ack = field(&f, "ack").expect("a SYN-ACK's acknowledgement");
                by_conn.entry((p, ack.wrapping_sub(1))).or_default().1 = true;
            }
            _ => {}
        }
    }
    by_conn
}

#[test]
fn connects_whose_syn_was_lost_equal_the_syns_a_capture_saw_twice() {
    let _serial = serial();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: the lab needs root to create network namespaces");
        return;
    }
    let dir = Dir::new("kernel-syn");
    let (cap, log, pid, json) = (
        dir.path("syn.pcap"),
        dir.path("tcpdump.log"),
        dir.path("tcpdump.pid"),
        dir.path("bench.json"),
    );
    // On the client's side of the link, before the line loses anything: every SYN the
    // client's kernel sent to the server (port 80: not the lab's own probes of the link,
    // which connect to a listener of its own during the run), and every SYN-ACK that
    // reached it. 8 % loss per direction
    // loses a SYN or its answer on ~15 % of connects (1 in 10^7 runs sees none of 100).
    let script = format!(
        "tcpdump -i any -n -U --immediate-mode -w {cap} 'tcp port 80 and tcp[tcpflags] & tcp-syn != 0' 2> {log} & echo $! > {pid}; \
         for i in $(seq 200); do grep -q listening {log} && break; sleep 0.05; done; \
         {} bench {{url}} -s close -n 100 -c 5 --timeout 20s --json --no-progress > {json}; \
         code=$?; sleep 0.5; kill -INT $(cat {pid}); wait; exit $code",
        bin()
    );
    let out = Command::new(bin())
        .args([
            "lab", "--rtt", "20ms", "--loss", "8%", "--", "sh", "-c", &script,
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap())
        .unwrap_or_else(|e| panic!("{e}\n{err}"));
    assert_eq!(
        schema_violations("report.schema.json", &v),
        Vec::<String>::new()
    );
    let s = scenario(&v);
    let k = &s["connections"]["kernel"];
    let seen = syns(&cap);
    // The connects that completed: a SYN-ACK came back.
    let done: Vec<(u64, bool)> = seen.values().copied().filter(|(_, acked)| *acked).collect();
    assert_eq!(done.len() as u64, u(&k["connects"]), "{k}\n{seen:?}");
    assert_eq!(u(&k["connects"]), u(&s["connections"]["opened"]), "{k}");
    let again = done.iter().filter(|(n, _)| *n > 1).count() as u64;
    let extra: u64 = done.iter().map(|(n, _)| n - 1).sum();
    assert!(again > 0, "8 % loss and not one SYN sent again: {seen:?}");
    assert_eq!(u(&k["syn_retransmitted"]), again, "{k}\n{seen:?}");
    assert_eq!(u(&k["syn_retransmits"]), extra, "{k}\n{seen:?}");
    // Each of them waited the kernel's first retransmission timeout, 1 s, at least.
    let slow = &k["syn_retransmitted_connect_ms"];
    assert!(slow["min"].as_f64().unwrap() >= 1000.0, "{k}");
    assert_eq!(u(&slow["count"]), again, "{k}");
    // Every connection was read at its close, and its least RTT is the link's 20 ms. A
    // connection can have no sample that clean: when the server answered a SYN sent
    // again by echoing the first one's timestamp, and its response (with the FIN, in one
    // segment) was lost too, the only samples carry a retransmission timeout. So the
    // link's RTT is the least of all, and the bulk's.
    assert_eq!(u(&k["closed"]), u(&s["connections"]["opened"]), "{k}");
    let min = &k["min_rtt_ms"];
    assert_eq!(u(&min["count"]), u(&k["closed"]), "{k}");
    for q in ["min", "p50", "p90"] {
        let ms = min[q].as_f64().unwrap();
        assert!((19.5..=21.5).contains(&ms), "least RTT {q} {ms} ms: {k}");
    }
    assert!(u(&k["retransmits"]) >= extra, "{k}");
    // The diagnosis says so.
    let diag: Vec<&str> = s["diagnosis"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["text"].as_str())
        .collect();
    let want = format!("{again} of {} connects took ~", u(&k["connects"]));
    assert!(
        diag.iter().any(|d| d.starts_with(&want)
            && d.contains("their SYN or its answer was lost and the SYN sent again after the kernel's retransmission timeout")
            && d.contains(&format!("{extra} SYN"))),
        "{want}: {diag:?}"
    );
}

#[test]
fn on_loopback_no_syn_is_sent_again_and_the_kernel_s_rtt_is_tiny() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let url = srv.http_url().unwrap();
    let v = bench_json(&[&url, "-s", "close", "-n", "50", "-c", "2"]);
    assert_eq!(
        schema_violations("report.schema.json", &v),
        Vec::<String>::new()
    );
    let k = &scenario(&v)["connections"]["kernel"];
    assert_eq!(u(&k["connects"]), 50, "{k}");
    assert_eq!(u(&k["syn_retransmitted"]), 0, "{k}");
    assert!(k.get("syn_retransmitted_connect_ms").is_none(), "{k}");
    assert_eq!(u(&k["closed"]), 50, "{k}");
    assert!(k["min_rtt_ms"]["p50"].as_f64().unwrap() < 1.0, "{k}");
    // Merged and re-read, the figures stay.
    let f = TempFile::new("kernel-merge.json", v.to_string().as_bytes());
    let out = run(&["merge", f.s(), f.s(), "--json", "--allow-mismatch"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mk = &scenario(&m)["connections"]["kernel"];
    assert_eq!(u(&mk["connects"]), 100, "{mk}");
    assert_eq!(u(&mk["min_rtt_ms"]["count"]), 100, "{mk}");
}

/// A new connection per request over plain TCP: the client closes only after the
/// server's FIN (read from the socket, or seen in `TCP_INFO` with nothing unread before
/// it), so every TIME_WAIT is the server's and none the client's, against nginx (which
/// closes after its response) and the embedded server (whose FIN rides the response).
#[test]
fn a_new_connection_per_request_leaves_time_wait_on_the_server() {
    let _machine = shared();
    let Some(nginx) = Nginx::start("", "return 200 \"Hello\\n\";") else {
        return;
    };
    let srv = start(ServerConfig::default());
    for (name, url, port) in [
        ("nginx", nginx.url(), nginx.port),
        (
            "serve",
            srv.http_url().unwrap(),
            srv.http_addr.unwrap().port(),
        ),
    ] {
        let time_wait = |side| time_wait_sockets(side, port).len();
        let (server_before, client_before) = (time_wait("src"), time_wait("dst"));
        let v = bench_json(&[&url, "-s", "close", "-n", "400", "-c", "4"]);
        let s = scenario(&v);
        assert_eq!(u(&s["connections"]["opened"]), 400, "{name}");
        assert_eq!(close_reason(s, "client_policy"), 400, "{name}");
        let server = time_wait("src").saturating_sub(server_before);
        let client = time_wait("dst").saturating_sub(client_before);
        assert_eq!(
            client, 0,
            "{name}: the client's side holds {client} TIME_WAITs"
        );
        // A port the kernel gives a later connect again ends its TIME_WAIT early (5-8 %
        // of them here): most remain.
        assert!(
            server >= 300,
            "{name}: the server's side holds {server} of 400"
        );
    }
    assert_eq!(
        srv.snapshot().connections_accepted,
        400,
        "the server's own count"
    );
    srv.stop();
}
