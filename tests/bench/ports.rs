//! Ephemeral port exhaustion on a real link. Loopback on this machine reuses TIME_WAIT
//! ports, so the test makes its own pair of network namespaces joined by a veth link,
//! shrinks the client's port range to 50 ports, and runs `close` against a server that
//! leaves the closing to the client (so each connection leaves a client-side TIME_WAIT).
//! Needs root and `ip`; skipped with a message otherwise.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;

/// Two namespaces and a veth pair, removed on drop.
struct Link {
    client_ns: String,
    server_ns: String,
}

const SERVER_IP: &str = "10.201.0.1";
const CLIENT_IPS: [&str; 4] = ["10.201.0.2", "10.201.0.3", "10.201.0.4", "10.201.0.5"];

fn sh(args: &[&str]) -> Result<(), String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args[0]))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Link {
    fn create() -> Result<Link, String> {
        let id = std::process::id();
        let link = Link {
            client_ns: format!("hsc{id}"),
            server_ns: format!("hss{id}"),
        };
        let (c, s) = (link.client_ns.as_str(), link.server_ns.as_str());
        let (vc, vs) = (format!("hvc{id}"), format!("hvs{id}"));
        sh(&["ip", "netns", "add", c])?;
        sh(&["ip", "netns", "add", s])?;
        sh(&[
            "ip", "link", "add", &vc, "netns", c, "type", "veth", "peer", "name", &vs, "netns", s,
        ])?;
        for ip in CLIENT_IPS {
            sh(&[
                "ip",
                "-n",
                c,
                "addr",
                "add",
                &format!("{ip}/24"),
                "dev",
                &vc,
            ])?;
        }
        sh(&[
            "ip",
            "-n",
            s,
            "addr",
            "add",
            &format!("{SERVER_IP}/24"),
            "dev",
            &vs,
        ])?;
        for (ns, dev) in [(c, &vc), (s, &vs)] {
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
            sh(&["ip", "-n", ns, "link", "set", dev, "up"])?;
        }
        // 50 local ports on the client side, and no reuse of TIME_WAIT ports.
        sh(&[
            "ip",
            "netns",
            "exec",
            c,
            "sysctl",
            "-qw",
            "net.ipv4.ip_local_port_range=40000 40049",
            "net.ipv4.tcp_tw_reuse=0",
        ])?;
        Ok(link)
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = sh(&["ip", "netns", "del", &self.client_ns]);
        let _ = sh(&["ip", "netns", "del", &self.server_ns]);
    }
}

/// A server inside `ns` that answers every request and keeps the connection open even
/// when asked to close, so the client closes first. Counts accepted connections.
struct NsServer {
    addr: SocketAddr,
    accepted: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NsServer {
    fn start(ns: &str) -> NsServer {
        let path = format!("/var/run/netns/{ns}");
        let (tx, rx) = std::sync::mpsc::channel();
        let accepted = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (acc, st) = (accepted.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            // This thread (only) enters the server's namespace; its sockets stay there.
            let f = std::fs::File::open(&path).expect("open netns");
            use std::os::fd::AsRawFd;
            // SAFETY: a valid namespace file descriptor; affects this thread only.
            let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            let l = TcpListener::bind((SERVER_IP, 0)).expect("bind in the server namespace");
            l.set_nonblocking(true).unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            let mut conns = Vec::new();
            while !st.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((s, _)) => {
                        acc.fetch_add(1, Ordering::SeqCst);
                        s.set_nonblocking(false).unwrap();
                        conns.push(std::thread::spawn(move || answer_forever(s)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(10)).expect("server up");
        NsServer {
            addr,
            accepted,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for NsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answer each request on the connection with a small keep-alive response, ignoring
/// `Connection: close`, until the client closes.
fn answer_forever(mut s: TcpStream) {
    while read_head(&mut s).is_some() {
        if s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            .is_err()
        {
            return;
        }
    }
}

/// 120 sequential `close` requests to `url` from the namespace `ns`, plus `extra` flags.
fn close_run_in(ns: &str, url: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "netns",
        "exec",
        ns,
        bin(),
        "bench",
        "--json",
        "--no-progress",
        url,
        "-n",
        "120",
        "-c",
        "1",
        "--strategy",
        "close",
        "--timeout",
        "5s",
    ];
    args.extend_from_slice(extra);
    let mut cmd = Command::new("ip");
    cmd.args(&args);
    let out = cmd.output().expect("run handshake in the client namespace");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON report")
}

#[test]
fn port_exhaustion_is_explained_and_local_addrs_avoid_it() {
    let _machine = shared();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED port_exhaustion: needs root to create network namespaces");
        return;
    }
    let link = match Link::create() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("SKIPPED port_exhaustion: cannot create network namespaces: {e}");
            return;
        }
    };
    let srv = NsServer::start(&link.server_ns);
    let url = format!("http://{}/", srv.addr);

    // 120 connections from one address with 50 ports: the 51st connect fails.
    let r = close_run_in(&link.client_ns, &url, &[]);
    let s = scenario(&r);
    check_accounting(s);
    let opened = u(&s["connections"]["opened"]);
    assert_eq!(opened, srv.accepted.load(Ordering::SeqCst), "{s}");
    assert_eq!(opened, 50, "one connection per local port: {s}");
    assert_eq!(u(&s["requests"]["ok"]), 50);
    assert_eq!(u(&s["requests"]["errors"]["local_resource"]), 70, "{s}");
    assert_eq!(u(&s["requests"]["error_details"]["ports_exhausted"]), 70);
    assert_eq!(u(&s["connections"]["server_ignored_close"]), 50);
    let ports = &s["local_ports"];
    assert_eq!(
        ports["port_range"],
        serde_json::json!([40000, 40049]),
        "{s}"
    );
    assert!(u(&ports["time_wait"]) >= 50, "TIME_WAIT counted: {s}");
    let diagnosis = s["diagnosis"].to_string();
    eprintln!("diagnosis: {diagnosis}");
    for needle in [
        "EADDRNOTAVAIL",
        "TIME_WAIT",
        "40000-40049",
        "--local-addr",
        "keep connections alive",
        "ip_local_port_range",
    ] {
        assert!(diagnosis.contains(needle), "{needle:?} in {diagnosis}");
    }

    // The same run spread over three other source addresses (150 ports): no error.
    let before = srv.accepted.load(Ordering::SeqCst);
    let locals = CLIENT_IPS[1..].join(",");
    let r = close_run_in(&link.client_ns, &url, &["--local-addr", &locals]);
    let s = scenario(&r);
    check_accounting(s);
    assert_eq!(u(&s["requests"]["ok"]), 120, "{s}");
    assert_eq!(u(&s["connections"]["opened"]), 120);
    assert_eq!(srv.accepted.load(Ordering::SeqCst) - before, 120);
    assert!(s.get("local_ports").is_none());
    drop(srv);
    drop(link);
}
