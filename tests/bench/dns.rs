//! DNS like a real client: lookups counted against a real DNS server's own log (dnsmasq,
//! on a loopback port, asked through `--dns-servers`): with the cache on, one lookup per
//! host per run, then again when the TTL runs out; with `--dns-cache off`, one per new
//! connection; a name that does not exist is a `dns` error with the resolver's reason.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::*;

/// dnsmasq answering `svc1.handshake.test` and `svc2.handshake.test` with 127.0.0.1,
/// `svc3.handshake.test` with 127.0.0.2 and 127.0.0.1 (TTL `ttl`), NXDOMAIN for every
/// other name, logging each query to a file.
struct Dnsmasq {
    child: Child,
    port: u16,
    log: std::path::PathBuf,
}

impl Dnsmasq {
    fn start(ttl: u32) -> Option<Dnsmasq> {
        if !std::path::Path::new("/usr/sbin/dnsmasq").exists() {
            if std::env::var_os("HANDSHAKE_SKIP_DNSMASQ").is_some() {
                eprintln!("skipping: dnsmasq is not installed (HANDSHAKE_SKIP_DNSMASQ set)");
                return None;
            }
            panic!("dnsmasq is needed (Debian package dnsmasq-base; scripts/test installs it). Set HANDSHAKE_SKIP_DNSMASQ=1 to skip.");
        }
        // dnsmasq binds the port for UDP and TCP; another process can take it between our
        // check and its bind, so a start that exits is tried again on another port.
        let mut why = String::new();
        for _ in 0..5 {
            let port = free_udp_and_tcp_port();
            let log = std::env::temp_dir().join(format!(
                "handshake-dnsmasq-{}-{port}.log",
                std::process::id()
            ));
            let child = Command::new("/usr/sbin/dnsmasq")
                .args([
                    "--keep-in-foreground",
                    "--conf-file=/dev/null",
                    "--no-resolv",
                    "--no-hosts",
                    "--bind-interfaces",
                    "--listen-address=127.0.0.1",
                    "--pid-file=",
                    "--user=root",
                    "--log-queries",
                    "--log-async=100",
                    "--address=/svc1.handshake.test/127.0.0.1",
                    "--address=/svc2.handshake.test/127.0.0.1",
                    // Two addresses, one with nothing listening: a connect goes on to
                    // the next, as curl's does.
                    "--host-record=svc3.handshake.test,127.0.0.2",
                    "--host-record=svc3.handshake.test,127.0.0.1",
                    "--address=/#/",
                ])
                .arg(format!("--port={port}"))
                .arg(format!("--local-ttl={ttl}"))
                .arg(format!("--log-facility={}", log.display()))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("dnsmasq starts");
            let mut d = Dnsmasq { child, port, log };
            // Ready when its log says so.
            for _ in 0..250 {
                if d.log_text().contains("started") {
                    return Some(d);
                }
                if d.child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            why = d.stop();
        }
        panic!("dnsmasq did not start in 5 tries: {why}");
    }

    /// Stop it and remove its log; what it said on stderr.
    fn stop(&mut self) -> String {
        let _ = self.child.kill();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
        format!("{} {err}", self.log_text())
    }

    fn server(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A (and AAAA) queries the server received for `name`, once its log (written
    /// asynchronously) has stopped growing; a log that lost lines fails the test.
    fn queries(&self, name: &str) -> u64 {
        let a = format!("query[A] {name} from");
        let aaaa = format!("query[AAAA] {name} from");
        let mut text = self.log_text();
        loop {
            std::thread::sleep(Duration::from_millis(150));
            let now = self.log_text();
            if now == text {
                break;
            }
            text = now;
        }
        assert!(!text.contains("messages lost"), "dnsmasq lost log lines");
        text.lines()
            .filter(|l| l.contains(&a) || l.contains(&aaaa))
            .count() as u64
    }
}

impl Drop for Dnsmasq {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A loopback port that is free for UDP and for TCP (dnsmasq binds both).
fn free_udp_and_tcp_port() -> u16 {
    loop {
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = udp.local_addr().unwrap().port();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

fn dns(s: &serde_json::Value) -> (u64, u64, u64) {
    let d = &s["dns"];
    (u(&d["lookups"]), u(&d["cache_hits"]), u(&d["joined"]))
}

#[test]
// One end-to-end scenario (a name server, both cache settings, each checked against
// the server's own log of queries): read top to bottom as one story.
#[allow(clippy::too_many_lines)]
fn cache_on_is_one_lookup_per_host_and_off_is_one_per_new_connection() {
    let _machine = shared();
    let Some(ns) = Dnsmasq::start(300) else {
        return;
    };
    let srv = start(ServerConfig::default());
    let port = srv.http_addr.unwrap().port();
    let url = format!("http://svc1.handshake.test:{port}/");

    // Cache on (the default): 5 workers on 2 threads open 40 connections; one lookup.
    let accepted0 = srv.snapshot().connections_accepted;
    let r = bench_json(&[
        &url,
        "--dns-servers",
        &ns.server(),
        "--strategy",
        "close",
        "-n",
        "40",
        "-c",
        "5",
        "-t",
        "2",
    ]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["requests"]["ok"]), 40, "{}", s["requests"]);
    assert_eq!(s["dns"]["cache"], "on");
    let (lookups, hits, joined) = dns(s);
    assert_eq!(lookups, 1, "{}", s["dns"]);
    assert_eq!(
        ns.queries("svc1.handshake.test"),
        1,
        "the DNS server's own count"
    );
    assert_eq!(
        lookups + hits + joined,
        40,
        "every new connection is counted once"
    );
    assert_eq!(
        u(&s["connections"]["opened"]),
        srv.snapshot().connections_accepted - accepted0
    );
    // The dns phase is there only for connections that waited for the lookup.
    assert_eq!(u(&s["phases_ms"]["new"]["dns"]["count"]), lookups + joined);

    // Two hosts in one run: one lookup each.
    // Removed when the test ends, also when it fails.
    let dir = Dir::new("dns");
    let list = dir.path("urls.txt");
    std::fs::write(
        &list,
        format!("{url}\nhttp://svc2.handshake.test:{port}/\n"),
    )
    .unwrap();
    let r = bench_json(&[
        "--urls-from-file",
        &list,
        "--dns-servers",
        &ns.server(),
        "--strategy",
        "close",
        "-n",
        "20",
        "-c",
        "2",
    ]);
    let s = scenario(&r);
    assert_eq!(u(&s["requests"]["ok"]), 20);
    assert_eq!(dns(s).0, 2, "{}", s["dns"]);
    assert_eq!(ns.queries("svc1.handshake.test"), 2);
    assert_eq!(ns.queries("svc2.handshake.test"), 1);

    // Cache off: one lookup for every new connection, none for reused ones.
    let r = bench_json(&[
        &url,
        "--dns-servers",
        &ns.server(),
        "--dns-cache",
        "off",
        "--strategy",
        "close",
        "-n",
        "30",
        "-c",
        "3",
    ]);
    let s = scenario(&r);
    assert_eq!(s["dns"]["cache"], "off");
    assert_eq!(dns(s), (30, 0, 0));
    assert_eq!(ns.queries("svc1.handshake.test"), 2 + 30);
    assert_eq!(u(&s["phases_ms"]["new"]["dns"]["count"]), 30);
    let r = bench_json(&[
        &url,
        "--dns-servers",
        &ns.server(),
        "--dns-cache",
        "off",
        "-n",
        "30",
        "-c",
        "3",
    ]);
    let s = scenario(&r);
    assert_eq!(u(&s["connections"]["opened"]), 3);
    assert_eq!(
        dns(s),
        (3, 0, 0),
        "keep-alive: a lookup per new connection only"
    );
    assert_eq!(ns.queries("svc1.handshake.test"), 32 + 3);

    // A name that does not exist: a dns error with the resolver's reason, not cached.
    let r = bench_json(&[
        &format!("http://nosuch.handshake.test:{port}/"),
        "--dns-servers",
        &ns.server(),
        "-n",
        "3",
        "-c",
        "1",
    ]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["requests"]["errors"]["dns"]), 3, "{}", s["requests"]);
    assert_eq!(
        u(&s["requests"]["error_details"]["name_not_found"]),
        3,
        "{}",
        s["requests"]
    );
    assert_eq!(dns(s).0, 3, "a failed lookup is not kept");
    assert!(ns.queries("nosuch.handshake.test") >= 3);
    assert_eq!(u(&s["connections"]["opened"]), 0);
    srv.stop();
}

#[test]
fn an_answer_is_kept_for_its_ttl_and_no_longer() {
    let _machine = shared();
    let Some(ns) = Dnsmasq::start(1) else {
        return;
    };
    let srv = start(ServerConfig::default());
    let port = srv.http_addr.unwrap().port();
    let url = format!("http://svc1.handshake.test:{port}/");
    // A new connection every ~10 ms for 2.5 s with a 1 s TTL: a lookup about every
    // second, each seen by the server.
    let r = bench_json(&[
        &url,
        "--dns-servers",
        &ns.server(),
        "--strategy",
        "close",
        "-d",
        "2500ms",
        "--rate",
        "100",
        "-c",
        "1",
    ]);
    let s = scenario(&r);
    check_accounting(s);
    let (lookups, hits, _) = dns(s);
    assert_eq!(
        lookups,
        ns.queries("svc1.handshake.test"),
        "the server's count"
    );
    assert!((2..=4).contains(&lookups), "{}", s["dns"]);
    assert!(hits > 100, "{}", s["dns"]);
    srv.stop();
}

/// A name with two addresses, the first refusing (nothing listens on 127.0.0.2): every
/// connection goes on to the next, the readiness loop's way and the tasks', and counts
/// once, as the server does; no connect error.
#[test]
fn a_refused_address_is_passed_for_the_next_both_ways() {
    let _machine = shared();
    let Some(ns) = Dnsmasq::start(300) else {
        return;
    };
    let srv = start(ServerConfig::default());
    let port = srv.http_addr.unwrap().port();
    let url = format!("http://svc3.handshake.test:{port}/");
    for tasks in [false, true] {
        let accepted0 = srv.snapshot().connections_accepted;
        let r = bench_json_way(
            tasks,
            &[
                &url,
                "--dns-servers",
                &ns.server(),
                "-n",
                "20",
                "-c",
                "2",
                "-s",
                "close",
            ],
        );
        let s = scenario(&r);
        check_accounting(s);
        assert_eq!(
            u(&s["requests"]["ok"]),
            20,
            "tasks={tasks}: {}",
            s["requests"]
        );
        assert_eq!(u(&s["requests"]["errors"]["connect"]), 0, "tasks={tasks}");
        assert_eq!(
            u(&s["connections"]["opened"]),
            srv.snapshot().connections_accepted - accepted0,
            "the server's count, tasks={tasks}"
        );
    }
}
