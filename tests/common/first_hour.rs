//! What the first-hour tests of every command share: nginx with an access log of one line
//! per request (the ground truth), the runs they make and the findings they read.

use super::{bin, run, Nginx};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::process::Command;
use std::process::Stdio;
use std::time::Duration;
use std::time::Instant;

/// nginx's access log: one line per request.
pub const LOG_FORMAT: &str =
    "log_format gt '$connection $connection_requests $status $ssl_session_reused $ssl_early_data';";

/// One request as nginx logged it.
#[derive(Debug)]
pub struct Logged {
    pub connection: u64,
    pub on_connection: u64,
    pub status: u16,
    pub resumed: bool,
    pub early: bool,
}

pub fn access_log(n: &Nginx) -> Vec<Logged> {
    // nginx writes each line as the request ends; give the last a moment.
    std::thread::sleep(Duration::from_millis(200));
    let text = std::fs::read_to_string(n.dir.join("access.log")).unwrap_or_default();
    text.lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Logged {
                connection: f[0].parse().unwrap(),
                on_connection: f[1].parse().unwrap(),
                status: f[2].parse().unwrap(),
                resumed: f.get(3) == Some(&"r"),
                early: f.get(4) == Some(&"1"),
            }
        })
        .collect()
}

/// Distinct connections in nginx's log, each with the most requests it carried.
pub fn connections(log: &[Logged]) -> BTreeMap<u64, u64> {
    let mut by = BTreeMap::new();
    for l in log {
        let e = by.entry(l.connection).or_insert(0);
        *e = (*e).max(l.on_connection);
    }
    by
}

/// nginx with a plain HTTP server (`location` in `location /`) logging to access.log.
pub fn nginx_http(http: &str, location: &str) -> Option<Nginx> {
    Nginx::start_servers(&format!("{LOG_FORMAT} {http}"), 1, |ports, d| {
        format!(
            "server {{ listen 127.0.0.1:{}; access_log {}/access.log gt; location / {{ {location} }} }}",
            ports[0],
            d.display()
        )
    })
}

/// nginx with a TLS server (certificates written by `certs` into its directory; `tls`
/// more directives in the server block).
pub fn nginx_tls(certs: impl Fn(&std::path::Path), tls: &str) -> Option<Nginx> {
    Nginx::start_servers(LOG_FORMAT, 1, |ports, d| {
        certs(d);
        format!(
            "server {{ listen 127.0.0.1:{} ssl; ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem; \
             ssl_protocols TLSv1.2 TLSv1.3; {tls} access_log {d}/access.log gt; \
             location / {{ return 200 \"hello\\n\"; }} }}",
            ports[0],
            d = d.display()
        )
    })
}

/// `handshake bench --json --no-progress ARGS`: the exit status, the report, stderr.
pub fn bench(args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["bench", "--json", "--no-progress"];
    all.extend_from_slice(args);
    let out = run(&all);
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bench {args:?}: no JSON ({e}): {err}"));
    (out.status.code().unwrap_or(-1), v, err)
}

pub fn codes(s: &Value) -> Vec<String> {
    s["diagnosis"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["code"].as_str().unwrap().to_string())
        .collect()
}

/// The evidence entry of `finding` whose figure starts with `figure`.
pub fn evidence<'a>(finding: &'a Value, figure: &str) -> &'a Value {
    finding["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["figure"].as_str().unwrap().starts_with(figure))
        .unwrap_or_else(|| panic!("no evidence {figure} in {finding}"))
}

/// A DNS server on 127.0.0.1 that answers every A query with 127.0.0.1 after `delay`,
/// counting the queries (ground truth for lookups). Stops when dropped.
pub struct SlowDns {
    pub port: u16,
    pub queries: std::sync::Arc<std::sync::atomic::AtomicU64>,
    pub stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    pub thread: Option<std::thread::JoinHandle<()>>,
}

impl SlowDns {
    pub fn start(delay: Duration) -> SlowDns {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let port = sock.local_addr().unwrap().port();
        let queries = std::sync::Arc::new(AtomicU64::new(0));
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let (q, st) = (queries.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 512];
            while !st.load(Ordering::Relaxed) {
                let Ok((len, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                if len < 12 {
                    continue;
                }
                q.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(delay);
                // The question as asked; an A record (127.0.0.1, TTL 60) for A queries,
                // no answer for others (AAAA).
                let qtype = u16::from_be_bytes([buf[len - 4], buf[len - 3]]);
                let mut r = buf[..len].to_vec();
                r[2] = 0x81;
                r[3] = 0x80;
                let answers: u16 = u16::from(qtype == 1);
                r[6..8].copy_from_slice(&answers.to_be_bytes());
                r[8..12].copy_from_slice(&[0, 0, 0, 0]);
                if qtype == 1 {
                    r.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
                }
                let _ = sock.send_to(&r, from);
            }
        });
        SlowDns {
            port,
            queries,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for SlowDns {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Send SIGINT to `child` after `after`, then wait for its output.
pub fn interrupt_after(mut cmd: Command, after: Duration) -> (Option<i32>, String, String) {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    std::thread::sleep(after);
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert!(
        t.elapsed() < after + Duration::from_secs(5),
        "took {:?}",
        t.elapsed()
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

/// `bench TARGET -d 30s -c 2 --strategy close --json` interrupted after `after`: exit
/// 130 and its JSON report.
pub fn interrupted_bench(target: &[&str], after: Duration) -> Value {
    let mut cmd = Command::new(bin());
    cmd.arg("bench").args(target).args([
        "-d",
        "30s",
        "-c",
        "2",
        "--strategy",
        "close",
        "--json",
        "--no-progress",
    ]);
    let (code, out, err) = interrupt_after(cmd, after);
    assert_eq!(code, Some(130), "{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out:?} {err}"))
}

/// The shell whose PID is in `pid_file` has ended (and was reaped).
pub fn ended(pid_file: &std::path::Path) -> bool {
    let pid = std::fs::read_to_string(pid_file).unwrap();
    !std::path::Path::new(&format!("/proc/{}", pid.trim())).exists()
}
