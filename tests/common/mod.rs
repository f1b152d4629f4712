//! Shared test helpers: the embedded server in-process, the `handshake` binary as a
//! subprocess, scripted raw-TCP servers, and the accounting checks every test applies.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use handshake::api::server::{self, RunningServer, ServerConfig};

pub mod accuracy;
pub mod apache;
pub mod first_hour;
pub mod mtls;
pub mod proxies;
#[allow(unused_imports)] // Not every test binary starts Apache.
pub use apache::Apache;
#[allow(unused_imports)] // Not every test binary starts a proxy.
pub use proxies::{shared_dir, squid, squid_with, tinyproxy, wait_listening, ProxyServer};

/// The machine, shared by the tests that may run side by side and held alone by those
/// that must not share it: those that read times or CPU (one test's load is another's
/// noise), capture packets, or stop a server whose port another test's server could take
/// meanwhile. Every test takes one or the other first (`tests/architecture.rs` checks):
/// a test that only runs a command is still load for one that times.
static MACHINE: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// The machine held alone, for as long as the guard lives.
pub type Alone = std::sync::RwLockWriteGuard<'static, ()>;

/// Hold the machine alone (no other test runs meanwhile).
pub fn serial() -> Alone {
    MACHINE
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Share the machine with the other tests that share it (none that holds it alone runs
/// meanwhile).
pub fn shared() -> std::sync::RwLockReadGuard<'static, ()> {
    MACHINE
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_handshake")
}

/// Start the embedded server on 127.0.0.1 port 0 with HTTP and HTTPS listeners.
pub fn start(cfg: ServerConfig) -> RunningServer {
    server::start(ServerConfig {
        listen: Some(([127, 0, 0, 1], 0).into()),
        tls_listen: Some(([127, 0, 0, 1], 0).into()),
        ..cfg
    })
    .expect("server starts")
}

pub fn run(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("handshake runs")
}

/// Run `handshake bench ... --json` and return the parsed report. The run must exit 0,
/// or 1 when no request succeeded (a run that measured nothing has failed), saying so
/// on stderr.
pub fn bench_json(args: &[&str]) -> Value {
    bench_report(Command::new(bin()), args)
}

/// `bench_json` the HTTP/1 readiness loop's way, or with `tasks` the task per worker's
/// (`HANDSHAKE_H1_TASKS`), without the test's own proxy variables.
pub fn bench_json_way(tasks: bool, args: &[&str]) -> Value {
    let mut c = Command::new(bin());
    if tasks {
        c.env("HANDSHAKE_H1_TASKS", "1");
    } else {
        c.env_remove("HANDSHAKE_H1_TASKS");
    }
    without_proxy_env(&mut c);
    bench_report(c, args)
}

/// `c` run as `bench --json --no-progress ARGS`: its report, its exit status checked.
fn bench_report(mut c: Command, args: &[&str]) -> Value {
    let mut all = vec!["bench", "--json", "--no-progress"];
    all.extend_from_slice(args);
    let out = c.args(&all).output().expect("handshake runs");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "handshake {all:?}: no JSON report ({e}), exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    check_exit(&all, &out, &report);
    report
}

/// A bench or compare run exits 1, with a line on stderr, when a scenario had no
/// successful request or no 2xx/3xx response (unless --ok-status), and 0 otherwise (no
/// --fail-if given).
pub fn check_exit(args: &[&str], out: &Output, report: &Value) {
    let err = String::from_utf8_lossy(&out.stderr);
    let nothing = report["scenarios"].as_array().is_some_and(|s| {
        s.iter().any(|s| {
            let c = &s["requests"]["status_classes"];
            let success = c["2xx"].as_u64().unwrap_or(0) + c["3xx"].as_u64().unwrap_or(0);
            s["requests"]["answered"] == 0 || success == 0
        })
    });
    let accepted = args.contains(&"--ok-status");
    if nothing && !accepted {
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("no request succeeded") || err.contains("no response was a success"),
            "{args:?}: {err}"
        );
    } else {
        assert!(
            out.status.success(),
            "handshake {args:?} failed: {err}\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

pub fn scenario(report: &Value) -> &Value {
    &report["scenarios"][0]
}

/// Run `handshake compare ... --json` and return the parsed report; the run must succeed.
pub fn compare_json(args: &[&str]) -> Value {
    let (out, v) = compare_ran(args);
    assert!(
        out.status.success(),
        "compare {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    v
}

/// `handshake compare --json --no-progress ARGS`, whatever its exit: how it ended and
/// its report.
pub fn compare_ran(args: &[&str]) -> (Output, Value) {
    let mut all = vec!["compare", "--json", "--no-progress"];
    all.extend_from_slice(args);
    let out = run(&all);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{all:?}: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out, v)
}

/// `handshake args…` with `COLUMNS=width`, which must exit 0.
pub fn run_at_width(width: usize, args: &[&str]) -> Output {
    let out = Command::new(bin())
        .args(args)
        .env("COLUMNS", width.to_string())
        .output()
        .expect("handshake runs");
    assert!(
        out.status.success(),
        "{args:?}: exit {:?}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A short `doctor --json` (idle probes up to 1 s, 20 requests per connection) with
/// `args`; its report.
pub fn quick_doctor_json(args: &[&str]) -> Value {
    let mut all = vec![
        "doctor",
        "--json",
        "--no-progress",
        "--max-idle",
        "1s",
        "--max-requests",
        "20",
    ];
    all.extend_from_slice(args);
    let out = run(&all);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor {args:?}: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Connections opened over every scenario of a report (compare: all rows, all rounds).
pub fn opened_in_all(report: &Value) -> u64 {
    report["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .map(|s| u(&s["connections"]["opened"]))
        .sum()
}

/// The finding with `code` in a list of findings (a diagnosis, trace's or doctor's
/// findings); panics with the list where there is none.
pub fn finding<'a>(findings: &'a Value, code: &str) -> &'a Value {
    findings
        .as_array()
        .and_then(|a| a.iter().find(|f| f["code"] == code))
        .unwrap_or_else(|| panic!("no finding {code} in {findings}"))
}

/// A median set against an expectation built from other measurements of the same run
/// (a link's probes, the same work's CPU on loopback): at most `pct` % (+0.5 ms) above
/// it, and below it down to `floor`, the physics (the set round trips). A stall of this
/// virtual machine during one of those measurements inflates the expectation, not the
/// median, so below the expectation only physics is held.
pub fn median_within(what: &str, got: f64, floor: f64, expected: f64, pct: f64) {
    let tol = expected * pct / 100.0 + 0.5;
    assert!(
        got >= floor * 0.99 && got <= expected + tol,
        "{what}: {got:.3} ms, expected {floor:.1} to {:.2} ms (the run's own {expected:.2} + {tol:.2})",
        expected + tol
    );
}

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// attempted = ok + sum of errors; every connection closed has a reason; the reuse
/// figures agree with each other.
pub fn check_accounting(s: &Value) {
    let req = &s["requests"];
    let errors: u64 = req["errors"].as_object().unwrap().values().map(u).sum();
    assert_eq!(
        u(&req["attempted"]),
        u(&req["ok"]) + u(&req["error_status"]) + errors,
        "attempted = ok + error_status + errors in {req}"
    );
    assert_eq!(
        u(&req["answered"]),
        u(&req["ok"]) + u(&req["error_status"]),
        "answered = ok + error_status in {req}"
    );
    let statuses: u64 = req["status_codes"]
        .as_object()
        .unwrap()
        .values()
        .map(u)
        .sum();
    assert_eq!(
        statuses,
        u(&req["answered"]),
        "every answered request has a status"
    );
    let c = &s["connections"];
    let reasons: u64 = c["close_reasons"]
        .as_object()
        .unwrap()
        .values()
        .map(u)
        .sum();
    assert_eq!(
        reasons,
        u(&c["opened"]),
        "every opened connection has one close reason: {c}"
    );
    let new = u(&s["phases_ms"]["new"]["requests"]);
    let reused = u(&s["phases_ms"]["reused"]["requests"]);
    assert_eq!(new + reused, u(&req["answered"]));
    assert_eq!(reused, u(&c["reused_requests"]));
    check_timeline(s);
}

/// The timeline's buckets add up to the scenario's totals.
pub fn check_timeline(s: &Value) {
    let buckets = s["timeline"].as_array().expect("a timeline");
    let sum = |k: &str| buckets.iter().map(|b| u(&b[k])).sum::<u64>();
    let req = &s["requests"];
    let c = &s["connections"];
    assert_eq!(sum("requests"), u(&req["attempted"]), "timeline requests");
    assert_eq!(sum("ok"), u(&req["ok"]), "timeline ok");
    assert_eq!(
        sum("error_status"),
        u(&req["error_status"]),
        "timeline error status"
    );
    let errors: u64 = req["errors"].as_object().unwrap().values().map(u).sum();
    assert_eq!(sum("errors"), errors, "timeline errors");
    assert_eq!(
        sum("new_connections"),
        u(&c["opened"]),
        "timeline new connections"
    );
    let closed: u64 = c["close_reasons"]
        .as_object()
        .unwrap()
        .values()
        .map(u)
        .sum();
    assert_eq!(sum("closed_connections"), closed, "timeline closes");
    assert_eq!(
        sum("tls_full"),
        u(&c["tls_handshakes"]["full"]),
        "timeline TLS full"
    );
    assert_eq!(
        sum("tls_resumed"),
        u(&c["tls_handshakes"]["resumed"]),
        "timeline TLS resumed"
    );
    for (i, b) in buckets.iter().enumerate() {
        let by_kind: u64 = b["errors_by_kind"]
            .as_object()
            .unwrap()
            .values()
            .map(u)
            .sum();
        assert_eq!(by_kind, u(&b["errors"]), "bucket {i}: {b}");
        let by_reason: u64 = b["close_reasons"]
            .as_object()
            .unwrap()
            .values()
            .map(u)
            .sum();
        assert_eq!(by_reason, u(&b["closed_connections"]), "bucket {i}: {b}");
        let answered = u(&b["ok"]) + u(&b["error_status"]);
        assert_eq!(
            answered + u(&b["errors"]),
            u(&b["requests"]),
            "bucket {i}: {b}"
        );
        assert_eq!(b["p50_ms"].is_null(), answered == 0, "bucket {i}: {b}");
    }
}

pub fn close_reason(s: &Value, r: &str) -> u64 {
    u(&s["connections"]["close_reasons"][r])
}

/// A scripted server: each accepted connection is handed to `handler` on its own
/// thread. Returns the address and its count of accepted connections.
pub fn script_server<F>(handler: F) -> (SocketAddr, Arc<AtomicU64>)
where
    F: Fn(TcpStream, u64) + Send + Sync + 'static,
{
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let accepted = Arc::new(AtomicU64::new(0));
    let acc = accepted.clone();
    let handler = Arc::new(handler);
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(s) = s else { break };
            let n = acc.fetch_add(1, Ordering::SeqCst);
            let h = handler.clone();
            std::thread::spawn(move || h(s, n));
        }
    });
    (addr, accepted)
}

/// Read one request head (up to the blank line) from a scripted server's socket.
pub fn read_head(s: &mut TcpStream) -> Option<Vec<u8>> {
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    read_head_from(s)
}

/// Read one request head from any byte stream (a TLS stream, say).
pub fn read_head_from(s: &mut impl Read) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => return None,
        }
    }
    Some(head)
}

pub fn write(s: &mut TcpStream, bytes: &[u8]) {
    let _ = s.write_all(bytes);
}

/// Close with a TCP RST (SO_LINGER with a zero timeout).
pub fn reset(s: TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: setsockopt reads `l` (of the size given) and touches nothing else.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(s);
}

/// nginx with its own config on a free loopback port, stopped by its PID on drop.
/// `http` goes into the `http` block, `location` into `location /`.
pub struct Nginx {
    child: std::process::Child,
    bin: &'static str,
    pub port: u16,
    /// All the ports its servers listen on (`port` is the first).
    pub ports: Vec<u16>,
    pub dir: std::path::PathBuf,
}

impl Nginx {
    /// None (with a message) only when nginx is missing and HANDSHAKE_SKIP_NGINX is set.
    pub fn start(http: &str, location: &str) -> Option<Nginx> {
        Nginx::start_servers(http, 1, |ports, _| {
            format!(
                "server {{ listen 127.0.0.1:{}; location / {{ {location} }} }}",
                ports[0]
            )
        })
    }

    /// nginx with `servers` (given the free ports and nginx's own directory, where
    /// files such as certificates can be put first by `prepare`) in its `http` block.
    pub fn start_servers(
        http: &str,
        n_ports: usize,
        servers: impl Fn(&[u16], &std::path::Path) -> String,
    ) -> Option<Nginx> {
        Nginx::start_workers(1, http, n_ports, servers)
    }

    /// [`Nginx::start_servers`] with `workers` worker processes.
    pub fn start_workers(
        workers: usize,
        http: &str,
        n_ports: usize,
        servers: impl Fn(&[u16], &std::path::Path) -> String,
    ) -> Option<Nginx> {
        let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists());
        let Some(bin) = bin else {
            if std::env::var_os("HANDSHAKE_SKIP_NGINX").is_some() {
                eprintln!("skipping: nginx is not installed (HANDSHAKE_SKIP_NGINX set)");
                return None;
            }
            panic!("nginx is needed (Debian package nginx; .ci/run installs it). Set HANDSHAKE_SKIP_NGINX=1 to skip.");
        };
        let held: Vec<TcpListener> = (0..n_ports.max(1))
            .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
            .collect();
        let ports: Vec<u16> = held
            .iter()
            .map(|l| l.local_addr().unwrap().port())
            .collect();
        drop(held);
        let port = ports[0];
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("handshake-nginx-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.display();
        let servers = servers(&ports, &dir);
        let conf = format!(
            "worker_processes {workers};\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
             events {{ worker_connections 1024; }}\nhttp {{\n access_log off;\n\
             client_body_temp_path {d}/body; proxy_temp_path {d}/proxy; fastcgi_temp_path {d}/fastcgi;\n\
             uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n {http}\n\
             {servers}\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), conf).unwrap();
        let mut n = Nginx {
            child: nginx_process(bin, &dir),
            bin,
            port,
            ports,
            dir,
        };
        n.wait_listening();
        Some(n)
    }

    /// Until each of its ports accepts (at most 10 s).
    fn wait_listening(&mut self) {
        let t = std::time::Instant::now();
        for p in &self.ports {
            while TcpStream::connect(("127.0.0.1", *p)).is_err() {
                assert!(
                    t.elapsed() < Duration::from_secs(10),
                    "nginx did not start: {}",
                    std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Kill nginx at once, as a crash would: SIGKILL to its workers and its master, by
    /// their PIDs; its listening sockets close with them.
    pub fn kill(&mut self) {
        let workers = std::fs::read_to_string(format!(
            "/proc/{}/task/{}/children",
            self.child.id(),
            self.child.id()
        ))
        .unwrap_or_default();
        // The master first (it would start a new worker for one killed before it), then
        // its workers at once.
        let _ = self.child.kill();
        for w in workers.split_whitespace() {
            let pid = w.parse().ok().and_then(rustix::process::Pid::from_raw);
            if let Some(pid) = pid {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
            }
        }
        let _ = self.child.wait();
        // Dead once a zombie (its sockets closed), whoever reaps it.
        let alive = |w: &str| {
            std::fs::read_to_string(format!("/proc/{w}/stat")).is_ok_and(|st| {
                st.rsplit(')')
                    .next()
                    .is_some_and(|r| !r.trim_start().starts_with('Z'))
            })
        };
        for w in workers.split_whitespace() {
            while alive(w) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Start it again with the same configuration, after [`Nginx::kill`]; returns once
    /// it accepts.
    pub fn start_again(&mut self) {
        self.child = nginx_process(self.bin, &self.dir);
        self.wait_listening();
    }

    /// Send its master `signal` (`-HUP`: reload, `-QUIT`: graceful stop).
    pub fn signal(&self, signal: &str) {
        let _ = std::process::Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status();
    }

    /// nginx answering `200 ok` on one port and logging each request in the `fields`
    /// given (nginx's variables, as a `log_format`), `http` added to its `http` block; with
    /// the log's path.
    pub fn logging(fields: &str, http: &str) -> Option<(Nginx, String)> {
        let nginx = Nginx::start_servers(
            &format!("log_format fields '{fields}'; {http}"),
            1,
            |ports, d| {
                format!(
                    "server {{ listen 127.0.0.1:{}; access_log {}/access.log fields; \
                     location / {{ return 200 \"ok\\n\"; }} }}",
                    ports[0],
                    d.display()
                )
            },
        )?;
        let log = nginx.dir.join("access.log").display().to_string();
        Some((nginx, log))
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// The master's PID (its workers are its children).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        stop_child(&mut self.child, "-QUIT");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// nginx with the configuration in `dir`, in the foreground (its master is the child).
fn nginx_process(bin: &str, dir: &std::path::Path) -> std::process::Child {
    std::process::Command::new(bin)
        .args([
            "-c",
            dir.join("nginx.conf").to_str().unwrap(),
            "-p",
            dir.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Stop a process the test started, by its PID: `signal` first (its orderly stop), then
/// SIGKILL if it has not ended within 5 s.
pub fn stop_child(child: &mut std::process::Child, signal: &str) {
    let _ = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status();
    let t = std::time::Instant::now();
    while child.try_wait().ok().flatten().is_none() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Where the browser check lives, and whether it can run here.
pub fn browser_check() -> Option<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/browser"));
    let ready = dir.join("node_modules/playwright-core").exists()
        && std::path::Path::new(&std::env::var("CHROMIUM").unwrap_or("/usr/bin/chromium".into()))
            .exists();
    if ready {
        return Some(dir);
    }
    if std::env::var_os("HANDSHAKE_SKIP_BROWSER").is_some() {
        eprintln!("skipping the browser check (HANDSHAKE_SKIP_BROWSER set)");
        return None;
    }
    panic!(
        "the HTML check needs Chromium (Debian package chromium) and playwright-core \
         (cd tests/browser && npm ci); .ci/run installs both. Set HANDSHAKE_SKIP_BROWSER=1 to skip."
    );
}

/// Run handshake with `args` plus --json and --html (before a `--` and the command it
/// runs, if any), then open the HTML in headless Chromium and check it against the JSON
/// (tests/browser/check_report.mjs). Returns the JSON report (`None` when the browser
/// check is skipped). The run must exit 0.
pub fn check_html(args: &[&str], tag: &str) -> Option<Value> {
    let dir = browser_check()?;
    // Removed when dropped, also when a check fails.
    let tmp_dir = Dir::new(&format!("html-{tag}"));
    let tmp = tmp_dir.0.clone();
    let html = tmp.join("report.html");
    let json = tmp.join("report.json");
    let split = args.iter().position(|a| *a == "--").unwrap_or(args.len());
    let mut all: Vec<String> = args[..split].iter().map(|s| s.to_string()).collect();
    all.extend([
        "--json".into(),
        "--html".into(),
        html.to_str().unwrap().into(),
    ]);
    if args[0] != "audit" {
        all.push("--no-progress".into());
    }
    all.extend(args[split..].iter().map(|s| s.to_string()));
    let out = Command::new(bin()).args(&all).output().unwrap();
    assert!(
        out.status.success() || out.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    if args[0] == "bench" || args[0] == "compare" {
        let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        check_exit(&all, &out, &report);
    } else {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::write(&json, &out.stdout).unwrap();
    let shot = tmp.join("report.png");
    let check = Command::new("node")
        .arg(dir.join("check_report.mjs"))
        .args([&html, &json, &shot])
        .output()
        .expect("node runs");
    assert!(
        check.status.success(),
        "browser check failed:\n{}\n{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert!(
        std::fs::metadata(&shot).unwrap().len() > 10_000,
        "a real screenshot was taken"
    );
    Some(serde_json::from_slice(&out.stdout).unwrap())
}

/// A file in the temp dir with the given contents, removed on drop.
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(name: &str, contents: &[u8]) -> TempFile {
        static N: AtomicU64 = AtomicU64::new(0);
        let n = N.fetch_add(1, Ordering::SeqCst);
        let p =
            std::env::temp_dir().join(format!("handshake-test-{}-{n}-{name}", std::process::id()));
        std::fs::write(&p, contents).unwrap();
        TempFile(p)
    }

    pub fn s(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// An audit report's figures over all clients.
pub fn total(v: &Value) -> &Value {
    &v["total"]
}

/// An audit report's verdict sentences, joined.
pub fn verdict(v: &Value) -> String {
    v["verdict"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["text"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A doctor report's problems.
pub fn problems(v: &Value) -> Vec<String> {
    v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["text"].as_str().unwrap().to_string())
        .collect()
}

/// Whether a tool runs here (`TOOL --version` starts).
pub fn have(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok()
}

/// A CA and a certificate for `names` signed by it, as `ca.pem`, `cert.pem` and
/// `key.pem` in `dir` (for nginx and other servers started by the tests).
pub fn write_certs(dir: &std::path::Path, names: &[&str]) {
    write_certs_valid(dir, names, None);
}

/// The same, with the leaf valid only from January 1st of the first year to January 1st
/// of the second (an expired certificate: years in the past).
pub fn write_certs_valid(dir: &std::path::Path, names: &[&str], years: Option<(i32, i32)>) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // Names of their own: with rcgen's default name on both, OpenSSL (curl, Python)
    // takes the certificate for a self-signed one.
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "handshake tests CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let mut leaf = CertificateParams::new(names.clone()).unwrap();
    leaf.distinguished_name.push(
        rcgen::DnType::CommonName,
        names.first().cloned().unwrap_or_default(),
    );
    if let Some((from, to)) = years {
        leaf.not_before = rcgen::date_time_ymd(from, 1, 1);
        leaf.not_after = rcgen::date_time_ymd(to, 1, 1);
    }
    let leaf = leaf.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), leaf.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
}

/// Build a one-file Go program (standard library only) into `dir/name`, so that a test
/// measures the client and not the compiler. Panics when Go is missing: the tests that
/// call it need a real Go client.
pub fn go_build(dir: &std::path::Path, name: &str, src: &str) -> String {
    let go = if have("go") {
        "go".to_string()
    } else if std::path::Path::new("/usr/local/go/bin/go").exists() {
        "/usr/local/go/bin/go".to_string()
    } else {
        panic!("go is needed for this test");
    };
    let source = dir.join(format!("{name}.go"));
    let out = dir.join(name);
    std::fs::write(&source, src).unwrap();
    let mut cmd = Command::new(go);
    cmd.arg("build")
        .arg("-o")
        .arg(&out)
        .arg(&source)
        .env("GO111MODULE", "off");
    if std::env::var_os("HOME").is_none() {
        // Go needs a build cache and a GOPATH; without HOME, give it ours.
        cmd.env("GOCACHE", dir.join("cache"))
            .env("GOPATH", dir.join("gopath"));
    }
    assert!(cmd.status().unwrap().success(), "go build {name}");
    out.to_str().unwrap().to_string()
}

/// Leave out of `c`'s environment every variable that names a forward proxy (as curl
/// reads them), so that the test's own environment does not decide the path.
pub fn without_proxy_env(c: &mut Command) -> &mut Command {
    for v in handshake::api::proxy::VARS {
        c.env_remove(v);
    }
    c
}

/// A directory for one test's files, removed when the test ends, also when it fails.
pub struct Dir(pub std::path::PathBuf);

impl Dir {
    pub fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("handshake-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    pub fn path(&self, f: &str) -> String {
        self.0.join(f).to_str().unwrap().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where `v` breaks the JSON schema `docs/NAME` (each violation with its path); empty
/// when it conforms.
pub fn schema_violations(name: &str, v: &Value) -> Vec<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs")
        .join(name);
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    validator
        .iter_errors(v)
        .map(|e| format!("{e} at {}", e.instance_path))
        .collect()
}

/// `handshake SUBCOMMAND --json [opts] [-- command...]` (audit, watch): the exit code and
/// the report it printed.
pub fn json_command(sub: &str, opts: &[&str], command: &[&str]) -> (Option<i32>, Value) {
    let mut args = vec![sub, "--json"];
    args.extend_from_slice(opts);
    if !command.is_empty() {
        args.push("--");
        args.extend_from_slice(command);
    }
    let out = run(&args);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "{sub} {command:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), v)
}

/// `handshake audit --json [opts] -- command...` with `env` added to the command's
/// environment and the test's own proxy variables removed: the exit code, the report,
/// and standard error (audit sends the client's standard output there; its own lines
/// start with "handshake audit"). The one runner of the audit's tests.
pub fn audit(
    opts: &[&str],
    env: &[(&str, &str)],
    command: &[&str],
) -> (Option<i32>, Value, String) {
    let mut c = Command::new(bin());
    without_proxy_env(c.args(["audit", "--json"]).args(opts));
    c.arg("--").args(command);
    c.envs(env.iter().copied());
    let out = c.output().expect("handshake runs");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("audit {opts:?} -- {command:?}: {e}\n{err}"));
    (out.status.code(), v, err)
}

/// The sockets in TIME_WAIT on 127.0.0.1:`port`'s side (`side` "src") or towards it
/// ("dst"), as `ss` lists them (a line each).
pub fn time_wait_sockets(side: &str, port: u16) -> Vec<String> {
    let out = Command::new("ss")
        .args([
            "-Htan",
            "state",
            "time-wait",
            side,
            &format!("127.0.0.1:{port}"),
        ])
        .output()
        .expect("ss runs (Debian package iproute2)");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(String::from)
        .collect()
}

/// Whether the test runs as root (network namespaces, packet capture); if not, it says
/// that `what` is skipped.
pub fn root(what: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("SKIPPED {what}: needs root");
    }
    root
}

/// A loopback port with nothing listening (bound, then released): a dead server's or
/// proxy's port, or one for a listener the test starts.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// nginx answering `hello` and logging each request's connection, its number on it and
/// its User-Agent, for counts by client.
pub fn nginx_by_agent() -> Option<Nginx> {
    Nginx::start_servers(
        "log_format ua '$connection $connection_requests \"$http_user_agent\"';",
        1,
        |ports, d| {
            format!(
                "server {{ listen 127.0.0.1:{}; access_log {}/access.log ua; location / {{ return 200 \"hello\\n\"; }} }}",
                ports[0],
                d.display()
            )
        },
    )
}

/// nginx's count for the clients whose User-Agent starts with `agent`: (requests,
/// connections, requests on a reused connection).
pub fn by_agent(n: &Nginx, agent: &str) -> (u64, u64, u64) {
    let text = std::fs::read_to_string(n.dir.join("access.log")).unwrap_or_default();
    let mut conns = std::collections::BTreeSet::new();
    let (mut requests, mut reused) = (0, 0);
    for l in text.lines() {
        let f: Vec<&str> = l.splitn(3, ' ').collect();
        if !f[2].trim_matches('"').starts_with(agent) {
            continue;
        }
        requests += 1;
        conns.insert(f[0].to_string());
        if f[1] != "1" {
            reused += 1;
        }
    }
    (requests, conns.len() as u64, reused)
}
