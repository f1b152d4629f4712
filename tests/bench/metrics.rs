//! Live metrics against the real thing: Debian's Prometheus (2.42) scrapes handshake's
//! `/metrics` every second (or receives its remote write), and the figures queried from
//! its HTTP API are set against the JSON report and against the server's own count
//! (nginx's access log: one line per request with its connection's serial).

use crate::common;
use std::collections::BTreeSet;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{
    bin, by_agent, free_port, nginx_by_agent, stop_child, write_certs, Dir, Nginx,
};
use serde_json::Value;

/// Prometheus with its own configuration and storage, stopped by its PID on drop.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: Dir,
    /// Queries are evaluated at this moment (seconds since the epoch) once set: a
    /// target that has exited gets staleness markers at the next scrape, and its last
    /// values are read as of when it was still up.
    at: std::cell::Cell<Option<f64>>,
}

impl Prometheus {
    /// Scraping `targets` every second; with `receiver`, also a remote-write receiver.
    fn start(name: &str, targets: &[u16], receiver: bool) -> Prometheus {
        let bin = ["/usr/bin/prometheus", "/usr/sbin/prometheus"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("prometheus is needed (Debian package prometheus; scripts/test installs it)");
        let dir = Dir::new(&format!("prometheus-{name}"));
        let port = free_port();
        let list: Vec<String> = targets.iter().map(|p| format!("'127.0.0.1:{p}'")).collect();
        let conf = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: handshake\n    static_configs:\n      - targets: [{}]\n",
            list.join(", ")
        );
        std::fs::write(dir.path("prometheus.yml"), conf).unwrap();
        let mut args = vec![
            format!("--config.file={}", dir.path("prometheus.yml")),
            format!("--storage.tsdb.path={}", dir.path("data")),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--log.level=warn".into(),
        ];
        if receiver {
            args.push("--web.enable-remote-write-receiver".into());
        }
        let child = Command::new(bin)
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let p = Prometheus {
            child,
            port,
            _dir: dir,
            at: std::cell::Cell::new(None),
        };
        let t = Instant::now();
        while curl(&format!("http://127.0.0.1:{port}/-/ready")).is_none() {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "prometheus did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // Its scrapes begin a few seconds after it is ready (targets are applied every
        // 5 s): wait for the first attempt (`up`, 0 while nothing serves).
        while !targets.is_empty() && p.query("up").is_empty() {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "prometheus did not scrape"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        p
    }

    /// From now on, evaluate queries as of now (call it when the scraped processes have
    /// just ended).
    fn pin(&self) {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        self.at.set(Some(now));
    }

    /// An instant query's result vector.
    fn query(&self, q: &str) -> Vec<Value> {
        let mut args = vec![
            "-sfG".to_string(),
            format!("http://127.0.0.1:{}/api/v1/query", self.port),
            "--data-urlencode".into(),
            format!("query={q}"),
        ];
        if let Some(t) = self.at.get() {
            args.extend(["--data-urlencode".into(), format!("time={t:.3}")]);
        }
        let out = Command::new("curl").args(&args).output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("query {q}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(v["status"], "success", "{q}: {v}");
        v["data"]["result"].as_array().unwrap().clone()
    }

    /// The one value of an instant query (summed), or None when it has no series.
    fn value(&self, q: &str) -> Option<f64> {
        let r = self.query(q);
        (!r.is_empty()).then(|| {
            r.iter()
                .map(|s| s["value"][1].as_str().unwrap().parse::<f64>().unwrap())
                .sum()
        })
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        stop_child(&mut self.child, "-TERM");
    }
}

fn curl(url: &str) -> Option<String> {
    let out = Command::new("curl").args(["-sf", url]).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).to_string())
}

/// nginx's access log: (connection serial, requests on it, status, TLS resumed).
const LOG_FORMAT: &str =
    "log_format m '$connection $connection_requests $status $ssl_session_reused';";

fn nginx() -> Nginx {
    Nginx::start_servers(LOG_FORMAT, 2, |ports, d| {
        write_certs(d, &["localhost"]);
        format!(
            "server {{ listen 127.0.0.1:{p0}; access_log {d}/access.log m; location / {{ return 200 \"hello\\n\"; }} }}\n\
             server {{ listen 127.0.0.1:{p1} ssl http2; ssl_certificate {d}/cert.pem; ssl_certificate_key {d}/key.pem; \
             access_log {d}/access.log m; location / {{ return 200 \"hello\\n\"; }} }}",
            p0 = ports[0],
            p1 = ports[1],
            d = d.display()
        )
    })
    .expect("nginx")
}

/// What nginx logged: requests, distinct connections, resumed TLS sessions (one per
/// connection), and the log cleared for the next run.
fn nginx_counts(n: &Nginx) -> (u64, u64, u64) {
    std::thread::sleep(Duration::from_millis(300));
    let path = n.dir.join("access.log");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let mut conns = BTreeSet::new();
    let mut resumed = BTreeSet::new();
    let mut requests = 0;
    for l in text.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        requests += 1;
        conns.insert(f[0].to_string());
        if f.get(3) == Some(&"r") {
            resumed.insert(f[0].to_string());
        }
    }
    // nginx reopens its log on USR1; truncating keeps the same file open.
    std::fs::write(&path, "").unwrap();
    (requests, conns.len() as u64, resumed.len() as u64)
}

/// Runs `handshake ARGS` (bench or compare, --json), its metrics at `port`; returns the
/// report once it has exited (after the last scrape).
fn run_with_metrics(args: &[&str], port: u16) -> Value {
    let addr = format!("127.0.0.1:{port}");
    let mut all: Vec<&str> = args.to_vec();
    all.extend([
        "--json",
        "--no-progress",
        "--metrics",
        &addr,
        "--metrics-linger",
        "10s",
    ]);
    let out = Command::new(bin()).args(&all).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("metrics at http://{addr}/metrics")),
        "{args:?}: {err}"
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {err}"))
}

fn u(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// One strategy's run: Prometheus's last values against the report and nginx's
/// (requests, connections, resumed sessions).
fn check_run(prom: &Prometheus, strategy: &str, s: &Value, nginx: (u64, u64, u64)) {
    let (logged, conns, resumed) = nginx;
    let sel = format!("{{strategy=\"{strategy}\"}}");
    let q = |name: &str| {
        prom.value(&format!("{name}{sel}"))
            .unwrap_or_else(|| panic!("{strategy}: no {name} in Prometheus"))
    };
    let ok = u(&s["requests"]["ok"]);
    let opened = u(&s["connections"]["opened"]);
    assert_eq!(q("handshake_requests_total"), ok, "{strategy}: requests");
    assert_eq!(q("handshake_requests_ok_total"), ok, "{strategy}: all 200");
    // A -d run cuts what is in flight at its end (counted aborted, not ok): nginx may
    // have answered those too.
    let aborted = u(&s["requests"]["aborted_at_deadline"]);
    let logged = logged as f64;
    assert!(
        ok <= logged && logged <= ok + aborted,
        "{strategy}: nginx logged {logged}, the report has {ok} ok and {aborted} aborted"
    );
    assert_eq!(
        q("handshake_connections_opened_total"),
        opened,
        "{strategy}"
    );
    assert_eq!(
        opened, conns as f64,
        "{strategy}: nginx saw {conns} connections"
    );
    assert_eq!(
        q("handshake_requests_reused_total"),
        u(&s["connections"]["reused_requests"]),
        "{strategy}"
    );
    let tls = &s["connections"]["tls_handshakes"];
    assert_eq!(
        prom.value(&format!(
            "handshake_tls_handshakes_total{{strategy=\"{strategy}\",kind=\"resumed\"}}"
        )),
        Some(u(&tls["resumed"])),
        "{strategy}"
    );
    assert_eq!(
        u(&tls["resumed"]),
        resumed as f64,
        "{strategy}: nginx's resumed"
    );
    assert_eq!(
        prom.value(&format!(
            "handshake_tls_handshakes_total{{strategy=\"{strategy}\",kind=\"full\"}}"
        )),
        Some(u(&tls["full"])),
        "{strategy}"
    );
    for (reason, n) in s["connections"]["close_reasons"].as_object().unwrap() {
        assert_eq!(
            prom.value(&format!(
                "handshake_connections_closed_total{{strategy=\"{strategy}\",closed_by=\"{reason}\"}}"
            )),
            Some(u(n)),
            "{strategy}: closed by {reason}"
        );
    }
    for (class, n) in s["requests"]["status_classes"].as_object().unwrap() {
        assert_eq!(
            prom.value(&format!(
                "handshake_responses_total{{strategy=\"{strategy}\",status_class=\"{class}\"}}"
            )),
            Some(u(n)),
            "{strategy}: {class}"
        );
    }
    assert_eq!(
        prom.value(&format!("sum(handshake_errors_total{sel})")),
        Some(0.0),
        "{strategy}: errors"
    );
    assert_eq!(q("handshake_request_duration_seconds_count"), ok);
    assert_eq!(
        q("handshake_open_connections"),
        0.0,
        "{strategy}: all closed at the end"
    );
    let new = prom
        .value(&format!(
            "handshake_phase_seconds_count{{strategy=\"{strategy}\",phase=\"total\",connection=\"new\"}}"
        ))
        .unwrap_or(0.0);
    let reused = prom
        .value(&format!(
            "handshake_phase_seconds_count{{strategy=\"{strategy}\",phase=\"total\",connection=\"reused\"}}"
        ))
        .unwrap_or(0.0);
    assert_eq!(new + reused, ok, "{strategy}: phases new + reused");
    assert_eq!(
        prom.value(&format!(
            "handshake_requests_per_connection_sum{{strategy=\"{strategy}\"}}"
        ))
        .map(f64::round),
        Some((u(&s["connections"]["requests_per_connection"]["mean"]) * opened).round()),
        "{strategy}"
    );
}

/// Every bench strategy against nginx: the last scraped values equal the JSON report's,
/// and both equal nginx's count; while the run went, Prometheus saw the counters rise.
#[test]
fn bench_metrics_scraped_by_prometheus_equal_the_report_and_nginx() {
    let _machine = crate::common::shared();
    let n = nginx();
    let port = free_port();
    let prom = Prometheus::start("bench", &[port], false);
    let http = format!("http://127.0.0.1:{}/", n.ports[0]);
    let https = format!("https://localhost:{}/", n.ports[1]);
    let ca = n.dir.join("ca.pem");
    let ca = ca.to_str().unwrap();
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("keepalive", vec!["bench", &http, "-d", "3s", "-c", "2"]),
        (
            "close",
            vec!["bench", &http, "-n", "300", "-c", "2", "-s", "close"],
        ),
        (
            "http10",
            vec!["bench", &http, "-n", "200", "-c", "2", "-s", "http10"],
        ),
        (
            "close-resumed",
            vec![
                "bench",
                &https,
                "-n",
                "200",
                "-c",
                "2",
                "-s",
                "close-resumed",
                "--cacert",
                ca,
            ],
        ),
        (
            "h2",
            vec![
                "bench", &https, "-n", "400", "-c", "4", "-s", "h2", "--cacert", ca,
            ],
        ),
    ];
    for (strategy, args) in runs {
        let rep = run_with_metrics(&args, port);
        prom.pin();
        check_run(&prom, strategy, &rep["scenarios"][0], nginx_counts(&n));
    }
    // The 3 s keep-alive run was scraped while it went: its counter rose over several
    // scrapes before the last.
    let seen = prom.query("handshake_requests_total{strategy=\"keepalive\"}[5m]");
    let values: Vec<f64> = seen[0]["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v[1].as_str().unwrap().parse().unwrap())
        .collect();
    let rising = values.windows(2).filter(|w| w[1] > w[0]).count();
    assert!(
        rising >= 2,
        "keepalive's counter over the run: {values:?}; up: {:?}; durations: {:?}",
        prom.query("up[5m]"),
        prom.query("scrape_duration_seconds[5m]")
    );
    assert!(values.windows(2).all(|w| w[1] >= w[0]), "{values:?}");
}

/// The exposition in Prometheus text 0.0.4 passes `promtool check metrics`; the same
/// scrape in OpenMetrics ends with `# EOF`; only GET /metrics is served.
#[test]
fn promtool_accepts_the_exposition() {
    let _machine = crate::common::shared();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut child = Command::new(bin())
        .args([
            "bench",
            "/",
            "-d",
            "4s",
            "-c",
            "2",
            "--no-progress",
            "--json",
            "--metrics",
            &addr,
            "--metrics-linger",
            "0s",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("http://{addr}/metrics");
    let t = Instant::now();
    let mut text = None;
    while text.is_none() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(500));
        let out = Command::new("curl")
            .args(["-sf", "-H", "Accept: text/plain;version=0.0.4", &url])
            .output()
            .unwrap();
        if out.status.success() && !out.stdout.is_empty() {
            text = Some(out.stdout);
        }
    }
    let text = text.expect("a scrape while bench ran");
    let om = curl(&url).expect("an OpenMetrics scrape");
    let missing = curl(&format!("http://{addr}/other"));
    stop_child(&mut child, "-INT");
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(om.contains("# TYPE handshake_requests counter"), "{om}");
    assert!(missing.is_none(), "/other is not served");
    let s = String::from_utf8_lossy(&text);
    assert!(s.contains("# TYPE handshake_requests_total counter"), "{s}");
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    check.stdin.take().unwrap().write_all(&text).unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `bench` with these args and `--json --no-progress`: exit status, report, stderr.
fn bench_out(args: &[&str]) -> (i32, Value, String) {
    let mut all = vec!["bench", "--json", "--no-progress"];
    all.extend_from_slice(args);
    let out = Command::new(bin()).args(&all).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {err}"));
    (out.status.code().unwrap_or(-1), v, err)
}

/// Three agents (`--segment 1/3`, `2/3`, `3/3`) push to Prometheus's remote-write
/// receiver, each its own `instance`: in PromQL, the sum over agents equals `handshake
/// merge`'s totals of their reports, and nginx's count.
#[test]
fn segments_pushed_by_remote_write_sum_to_merge_totals() {
    let _machine = crate::common::shared();
    let n = nginx();
    let prom = Prometheus::start("remote", &[], true);
    let url = format!("http://127.0.0.1:{}/", n.ports[0]);
    let write = format!("http://127.0.0.1:{}/api/v1/write", prom.port);
    let dir = Dir::new("remote-segments");
    let mut files = Vec::new();
    for i in 1..=3 {
        let seg = format!("{i}/3");
        let inst = format!("agent-{i}");
        let (code, rep, err) = bench_out(&[
            &url,
            "-n",
            "1000",
            "-c",
            "3",
            "-s",
            "close",
            "--segment",
            &seg,
            "--remote-write",
            &write,
            "--remote-write-interval",
            "300ms",
            "--instance",
            &inst,
        ]);
        assert_eq!(code, 0, "{err}");
        assert!(!err.contains("remote write"), "no push failed: {err}");
        let f = dir.path(&format!("agent-{i}.json"));
        std::fs::write(&f, serde_json::to_vec(&rep).unwrap()).unwrap();
        files.push(f);
    }
    let out = Command::new(bin())
        .args(["merge", "--json", "--no-progress"])
        .args(&files)
        .output()
        .unwrap();
    let merged: Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &merged["scenarios"][0];
    let (logged, conns, _) = nginx_counts(&n);
    let sum = |name: &str| {
        prom.value(&format!("sum without (instance, segment) ({name})"))
            .unwrap_or_else(|| panic!("no {name} pushed"))
    };
    assert_eq!(sum("handshake_requests_total"), u(&s["requests"]["ok"]));
    assert_eq!(u(&s["requests"]["ok"]), 1000.0);
    assert_eq!(logged, 1000, "nginx's requests");
    assert_eq!(
        sum("handshake_connections_opened_total"),
        u(&s["connections"]["opened"])
    );
    assert_eq!(
        u(&s["connections"]["opened"]),
        conns as f64,
        "nginx's connections"
    );
    assert_eq!(
        sum("handshake_connections_closed_total{closed_by=\"client_policy\"}"),
        u(&s["connections"]["close_reasons"]["client_policy"])
    );
    assert_eq!(
        sum("handshake_request_duration_seconds_count"),
        u(&s["requests"]["ok"])
    );
    // Each agent is its own series, labelled as given.
    let agents = prom.query("handshake_requests_total");
    let mut instances: Vec<String> = agents
        .iter()
        .map(|a| {
            format!(
                "{} {}",
                a["metric"]["instance"].as_str().unwrap(),
                a["metric"]["segment"].as_str().unwrap()
            )
        })
        .collect();
    instances.sort();
    assert_eq!(instances, ["agent-1 1/3", "agent-2 2/3", "agent-3 3/3"]);
}

/// A receiver that accepts and answers each request head with `status` (none: never
/// answers); stops with the test.
fn receiver(status: Option<u16>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            let Ok(mut s) = s else { break };
            let Some(status) = status else {
                held.push(s);
                continue;
            };
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut buf = vec![0u8; 1 << 16];
                // Answer each request (its body read as far as one read goes).
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                        let body = "out of service\n";
                        let _ = write!(
                            s,
                            "HTTP/1.1 {status} Nope\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                    }
                }
            });
        }
    });
    port
}

/// A receiver that is down, answers 500, or never answers: the run's figures are those
/// of the run without it (nginx's count), it exits 0, and one line says how many pushes
/// failed and how many samples were dropped.
#[test]
fn a_failing_receiver_never_changes_the_run() {
    let _machine = crate::common::shared();
    let n = nginx();
    let url = format!("http://127.0.0.1:{}/", n.ports[0]);
    let closed = free_port();
    for (what, port) in [
        ("down", closed),
        ("500", receiver(Some(500))),
        ("stalled", receiver(None)),
    ] {
        let write = format!("http://127.0.0.1:{port}/api/v1/write");
        let t = Instant::now();
        let (code, rep, err) = bench_out(&[
            &url,
            "-n",
            "3000",
            "-c",
            "2",
            "--remote-write",
            &write,
            "--remote-write-interval",
            "200ms",
        ]);
        let took = t.elapsed();
        assert_eq!(code, 0, "{what}: {err}");
        let s = &rep["scenarios"][0];
        let (logged, conns, _) = nginx_counts(&n);
        assert_eq!(u(&s["requests"]["ok"]), 3000.0, "{what}");
        assert_eq!(logged, 3000, "{what}: nginx's requests");
        assert_eq!(u(&s["connections"]["opened"]), conns as f64, "{what}");
        let line = err
            .lines()
            .find(|l| l.contains("remote write to"))
            .unwrap_or_else(|| panic!("{what}: no line about the failed pushes: {err}"));
        let failed: u64 = line
            .split(": ")
            .nth(2)
            .and_then(|x| x.split(' ').next())
            .and_then(|x| x.parse().ok())
            .unwrap_or_else(|| panic!("{line}"));
        assert!(failed >= 1, "{what}: {line}");
        assert!(line.contains("samples dropped"), "{line}");
        match what {
            "down" => assert!(line.contains("refused"), "{line}"),
            "500" => assert!(line.contains("500"), "{line}"),
            _ => assert!(line.contains("no answer within"), "{line}"),
        }
        // The last push waits 5 s at most.
        assert!(took < Duration::from_secs(30), "{what}: {took:?}");
    }
}

/// A client on a dual-stack IPv6 socket that talks IPv4 (`::ffff:127.0.0.1`), named
/// `dualstack`: two requests on one connection (the second closes it).
const DUAL_STACK: &str = "import socket,sys
open('/proc/self/comm','w').write('dualstack')
s=socket.socket(socket.AF_INET6)
s.connect(('::ffff:127.0.0.1',int(sys.argv[1])))
for last in (False,True):
    c='close' if last else 'keep-alive'
    s.sendall(('GET / HTTP/1.1\\r\\nHost: x\\r\\nUser-Agent: dualstack/1\\r\\nConnection: '+c+'\\r\\n\\r\\n').encode())
    b=b''
    while b'hello' not in b: b+=s.recv(4096)
s.close()
";

fn run_client(args: &[&str]) {
    let st = Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "{args:?}");
}

/// `watch --port --metrics` as a monitor while known clients talk to nginx (curl with and
/// without reuse, Python's requests without and with a session, ab without and with
/// -k, a dual-stack IPv6 socket talking IPv4): per client program, the connections and requests Prometheus scraped equal
/// nginx's count of that client's requests (its User-Agent), and add up to the watch's
/// own report.
#[test]
fn watch_metrics_per_program_equal_nginx() {
    let _machine = crate::common::shared();
    if !common::root("watch") {
        return;
    }
    let n = nginx_by_agent().expect("nginx");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let prom = Prometheus::start("watch", &[port], false);
    let watch = watch_endpoint(n.port, &addr);
    let url = n.url();
    let py = "import requests,sys\nu=sys.argv[1]\nfor _ in range(3): requests.get(u)\ns=requests.Session()\nfor _ in range(3): s.get(u)\n";
    run_client(&["curl", "-s", &url]);
    run_client(&["curl", "-s", &url]);
    run_client(&["curl", "-s", &url, &url, &url]);
    run_client(&["python3", "-c", py, &url]);
    run_client(&["ab", "-q", "-n", "20", "-c", "1", &url]);
    run_client(&["ab", "-q", "-k", "-n", "20", "-c", "1", &url]);
    run_client(&["python3", "-c", DUAL_STACK, &n.port.to_string()]);
    let rep = end_watch(watch, &prom);
    let programs = prom.query("sum by (program) (handshake_requests_total)");
    let names: Vec<String> = programs
        .iter()
        .map(|p| p["metric"]["program"].as_str().unwrap().to_string())
        .collect();
    let python = names
        .iter()
        .find(|p| p.starts_with("python"))
        .unwrap_or_else(|| panic!("no python program among {names:?}"))
        .clone();
    // Every connection named (the kernel's record of each connect, however short),
    // each program's figures equal nginx's count of its User-Agent.
    let mut all = (0, 0, 0);
    for (program, agent) in [
        ("curl", "curl/"),
        ("ab", "ApacheBench/"),
        (python.as_str(), "python-requests/"),
        ("dualstack", "dualstack/"),
    ] {
        let (requests, conns, reused) = by_agent(&n, agent);
        all = (all.0 + requests, all.1 + conns, all.2 + reused);
        let sel = format!("{{program=\"{program}\"}}");
        let v = |name: &str| prom.value(&format!("sum({name}{sel})")).unwrap_or(-1.0);
        assert_eq!(
            v("handshake_connections_opened_total"),
            conns as f64,
            "{program}: connections ({names:?})"
        );
        assert_eq!(
            v("handshake_requests_total"),
            requests as f64,
            "{program}: requests"
        );
        assert_eq!(
            v("handshake_requests_reused_total"),
            reused as f64,
            "{program}: reused"
        );
        assert_eq!(
            v("handshake_requests_per_connection_count"),
            conns as f64,
            "{program}: closed"
        );
        assert_eq!(v("handshake_open_connections"), 0.0, "{program}");
    }
    assert!(
        !names.iter().any(|p| p == "unknown"),
        "every client named: {names:?}"
    );
    let total = |name: &str| prom.value(&format!("sum({name})")).unwrap_or(-1.0);
    assert_eq!(
        total("handshake_requests_total"),
        all.0 as f64,
        "all requests"
    );
    assert_eq!(
        total("handshake_connections_opened_total"),
        all.1 as f64,
        "all connections"
    );
    assert_eq!(by_agent(&n, "curl/"), (5, 3, 2));
    assert_eq!(by_agent(&n, "ApacheBench/"), (40, 21, 19));
    assert_eq!(by_agent(&n, "python-requests/"), (6, 4, 2));
    assert_eq!(by_agent(&n, "dualstack/"), (2, 1, 1));
    assert_eq!(
        prom.value("sum(handshake_connections_opened_total)"),
        Some(u(&rep["total"]["connections"])),
        "the report's total"
    );
    assert_eq!(
        prom.value("sum(handshake_requests_total)"),
        Some(u(&rep["total"]["requests"]))
    );
}

/// `watch --port PORT --json --metrics ADDR` started, once its endpoint answers and its
/// capture is open.
fn watch_endpoint(port: u16, addr: &str) -> Child {
    watch_endpoint_with(port, addr, &["--metrics-linger", "10s"])
}

/// [`watch_endpoint`] with these flags after `--metrics ADDR`.
fn watch_endpoint_with(port: u16, addr: &str, flags: &[&str]) -> Child {
    watch_with(&["--port", &port.to_string()], addr, flags)
}

/// `watch FILTER --json --metrics ADDR FLAGS`, once its endpoint answers and its capture
/// is open.
fn watch_with(filter: &[&str], addr: &str, flags: &[&str]) -> Child {
    let watch = Command::new(bin())
        .arg("watch")
        .args(filter)
        .args(["--json", "--metrics", addr])
        .args(flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while curl(&format!("http://{addr}/metrics")).is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "watch's endpoint");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The capture opens right after the endpoint.
    std::thread::sleep(Duration::from_millis(1500));
    watch
}

/// A second for the last segments, then the watch stopped (Ctrl-C) and Prometheus
/// pinned at that moment; the watch's JSON report.
fn end_watch(mut watch: Child, prom: &Prometheus) -> Value {
    std::thread::sleep(Duration::from_millis(1000));
    stop_child_keep(&mut watch);
    let out = watch.wait_with_output().unwrap();
    prom.pin();
    let err = String::from_utf8_lossy(&out.stderr);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"))
}

/// SIGINT to a child (its Ctrl-C), waited for at most 20 s before SIGKILL.
fn stop_child_keep(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let t = Instant::now();
    while child.try_wait().ok().flatten().is_none() && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if child.try_wait().ok().flatten().is_none() {
        let _ = child.kill();
    }
}

/// `watch --metrics -- ab` (without -k: a connection per request, each ended within a
/// millisecond, which only the watched program's own record names for sure) and `--
/// curl` with reuse: the program's connections and requests scraped equal nginx's.
#[test]
fn watch_metrics_of_a_command_equal_nginx() {
    let _machine = crate::common::shared();
    if !common::root("watch") {
        return;
    }
    let n = nginx_by_agent().expect("nginx");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let prom = Prometheus::start("watch-command", &[port], false);
    let url = n.url();
    for (program, agent, client, expect) in [
        (
            "ab",
            "ApacheBench/",
            vec!["ab", "-q", "-n", "20", "-c", "1", url.as_str()],
            (20, 20, 0),
        ),
        (
            "curl",
            "curl/",
            vec!["curl", "-s", url.as_str(), url.as_str()],
            (2, 1, 1),
        ),
    ] {
        let mut args = vec![
            "watch",
            "--json",
            "--metrics",
            &addr,
            "--metrics-linger",
            "10s",
            "--",
        ];
        args.extend(client);
        let out = Command::new(bin()).args(&args).output().unwrap();
        prom.pin();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        let got = by_agent(&n, agent);
        assert_eq!(got, expect, "nginx's count of {program}");
        let sel = format!("{{program=\"{program}\"}}");
        let v = |name: &str| prom.value(&format!("sum({name}{sel})")).unwrap_or(-1.0);
        assert_eq!(
            v("handshake_connections_opened_total"),
            got.1 as f64,
            "{program}: {err}"
        );
        assert_eq!(v("handshake_requests_total"), got.0 as f64, "{program}");
        assert_eq!(
            v("handshake_requests_reused_total"),
            got.2 as f64,
            "{program}"
        );
        assert_eq!(
            v("handshake_connections_closed_total"),
            got.1 as f64,
            "{program}: every connection closed"
        );
    }
}

/// The capabilities deploy/systemd/handshake-watch.service gives watch
/// (`AmbientCapabilities=`), as setpriv names them (`net_raw`).
fn unit_capabilities() -> Vec<String> {
    let unit = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("deploy/systemd/handshake-watch.service"),
    )
    .unwrap();
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("AmbientCapabilities="))
        .expect("the unit sets AmbientCapabilities");
    line.split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_lowercase())
        .collect()
}

/// watch as the systemd unit runs it (an unprivileged user with only the unit's
/// capabilities) names and counts a client's connections; and every PromQL expression of
/// deploy/grafana/handshake.json returns data from a Prometheus that scraped it and a
/// bench beside it.
#[test]
fn the_service_unit_and_the_dashboard_work() {
    let _machine = crate::common::shared();
    if !common::root("watch") {
        return;
    }
    let n = nginx_by_agent().expect("nginx");
    let (pb, pw) = (free_port(), free_port());
    let prom = Prometheus::start("dashboard", &[pb, pw], false);
    let caps: Vec<String> = unit_capabilities()
        .iter()
        .map(|c| format!("+{c}"))
        .collect();
    let caps = caps.join(",");
    let copy = std::env::temp_dir().join(format!("handshake-unit-bin-{}", std::process::id()));
    std::fs::copy(bin(), &copy).unwrap();
    let waddr = format!("127.0.0.1:{pw}");
    let nginx_port = n.port.to_string();
    let watch = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(format!("--inh-caps=-all,{caps}"))
        .arg(format!("--ambient-caps=-all,{caps}"))
        .arg(format!("--bounding-set=-all,{caps}"))
        .arg(&copy)
        .args([
            "watch",
            "--port",
            &nginx_port,
            "-d",
            "9s",
            "--json",
            "--metrics",
            &waddr,
        ])
        .args(["--metrics-linger", "3s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while curl(&format!("http://{waddr}/metrics")).is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "watch's endpoint");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let url = n.url();
    run_client(&["curl", "-s", &url]);
    run_client(&["curl", "-s", &url, &url]);
    let baddr = format!("127.0.0.1:{pb}");
    run_client(&[
        bin(),
        "bench",
        &url,
        "-d",
        "4s",
        "-c",
        "2",
        "--no-progress",
        "--json",
        "--metrics",
        &baddr,
        "--metrics-linger",
        "5s",
    ]);
    let out = watch.wait_with_output().unwrap();
    prom.pin();
    let _ = std::fs::remove_file(&copy);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "watch under the unit's capabilities: {err}"
    );
    let rep: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    let (requests, conns, _) = by_agent(&n, "");
    assert_eq!(u(&rep["total"]["connections"]), conns as f64, "{err}");
    assert_eq!(u(&rep["total"]["requests"]), requests as f64);
    // Named: the capabilities let it load the kernel's record of each connect.
    let curl_named = prom
        .value("sum(handshake_connections_opened_total{program=\"curl\"})")
        .unwrap_or(0.0);
    let curl_conns = by_agent(&n, "curl/").1 as f64;
    assert_eq!(
        curl_named, curl_conns,
        "curl named under the unit's capabilities"
    );
    assert_eq!(
        prom.value(&format!(
            "sum(handshake_connections_opened_total{{instance=\"{waddr}\"}})"
        )),
        Some(conns as f64),
        "every connection counted"
    );
    check_dashboard(&prom);
}

/// Every PromQL expression of deploy/grafana/handshake.json returns data from `prom`.
fn check_dashboard(prom: &Prometheus) {
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/grafana/handshake.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut checked = 0;
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            let expr = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m");
            let got = prom.query(&expr);
            assert!(
                !got.is_empty(),
                "panel {:?}: {expr} returned nothing",
                p["title"]
            );
            checked += 1;
        }
    }
    assert!(checked >= 8, "{checked} expressions");
}

/// `--metrics-max-series 1`: the first client program has its own label set; the
/// next one's connections add to program="other", and the folded counter says how many.
#[test]
fn label_sets_past_the_bound_fold_into_other() {
    let _machine = crate::common::shared();
    if !common::root("watch") {
        return;
    }
    let n = nginx_by_agent().expect("nginx");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut watch = watch_endpoint_with(
        n.port,
        &addr,
        &["--metrics-linger", "0s", "--metrics-max-series", "1"],
    );
    let url = n.url();
    // One keep-alive connection each; the first lives long enough to be named for sure.
    let py = "import requests,sys,time\ns=requests.Session()\ns.get(sys.argv[1])\ntime.sleep(0.3)\ns.get(sys.argv[1])\n";
    run_client(&["python3", "-c", py, &url]);
    run_client(&["ab", "-q", "-k", "-n", "20", "-c", "1", &url]);
    std::thread::sleep(Duration::from_millis(500));
    let text = curl(&format!("http://{addr}/metrics")).unwrap();
    stop_child_keep(&mut watch);
    let _ = watch.wait_with_output();
    let opened: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("handshake_connections_opened_total{"))
        .collect();
    assert_eq!(opened.len(), 2, "one program's set and other's: {opened:?}");
    assert!(
        opened
            .iter()
            .any(|l| l.contains("program=\"python") && l.ends_with(" 1.0")),
        "{opened:?}"
    );
    assert!(
        opened
            .iter()
            .any(|l| l.contains("program=\"other\"") && l.ends_with(" 1.0")),
        "{opened:?}"
    );
    assert!(
        text.lines()
            .any(|l| l == "handshake_metrics_series_folded_total 1.0"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("handshake_requests_total{")
                && l.contains("program=\"other\"")
                && l.ends_with(" 20.0")),
        "ab's 20 requests under other: {text}"
    );
}

/// A client that makes one request on its own connection and then keeps it open until
/// the server closes it (at most 10 s): argv host, port, tls (0 or 1), its name.
const IDLER: &str = "import socket,ssl,sys,time
open('/proc/self/comm','w').write(sys.argv[4])
s=socket.create_connection((sys.argv[1],int(sys.argv[2])))
if sys.argv[3]=='1':
    c=ssl.create_default_context(); c.check_hostname=False; c.verify_mode=ssl.CERT_NONE
    c.maximum_version=ssl.TLSVersion.TLSv1_2
    s=c.wrap_socket(s)
close=sys.argv[4]=='closer'
s.sendall(('GET / HTTP/1.1\\r\\nHost: x\\r\\nUser-Agent: '+sys.argv[4]+'\\r\\n'+('Connection: close\\r\\n' if close else '')+'\\r\\n').encode())
s.settimeout(10)
b=b''
while True:
    d=s.recv(4096)
    if not d: break
    b+=d
assert b'hello' in b, b
";

/// curl's own measures of a request to `url`: (time_connect, time_appconnect), seconds.
fn curl_timing(url: &str) -> (f64, f64) {
    let out = Command::new("curl")
        .args([
            "-sk",
            "--tlsv1.3",
            "-o",
            "/dev/null",
            "-w",
            "%{time_connect} %{time_appconnect}",
            url,
        ])
        .output()
        .unwrap();
    let timing = String::from_utf8_lossy(&out.stdout).to_string();
    timing
        .split_once(' ')
        .map(|(a, b)| (a.parse::<f64>().unwrap(), b.parse::<f64>().unwrap()))
        .unwrap_or_else(|| panic!("curl -w: {timing:?}"))
}

/// nginx with a 2 s keep-alive timeout on 127.0.0.2 (and 127.0.0.1, where it is waited
/// for): cleartext on its first port, TLS 1.2 and 1.3 on its second.
fn nginx_keepalive_2s() -> Nginx {
    Nginx::start_servers("keepalive_timeout 2s;", 2, |ports, d| {
        write_certs(d, &["localhost"]);
        let d = d.display();
        format!(
            "server {{ listen 127.0.0.1:{a}; listen 127.0.0.2:{a}; location / {{ return 200 \"hello\\n\"; }} }}\n\
             server {{ listen 127.0.0.1:{b} ssl; listen 127.0.0.2:{b} ssl; ssl_protocols TLSv1.2 TLSv1.3; ssl_certificate {d}/cert.pem; \
             ssl_certificate_key {d}/key.pem; location / {{ return 200 \"hello\\n\"; }} }}",
            a = ports[0],
            b = ports[1]
        )
    })
    .expect("nginx")
}

/// The server's idle close and the handshakes' durations as watch sees them: nginx on
/// 127.0.0.2 with a 2 s keep-alive timeout, clients that make one request and wait
/// (cleartext and TLS, named idler), one asking `Connection: close` (named closer,
/// closed by nginx at once) and curl over TLS. Each idler's connection ends as
/// `server_idle` in the report and `closed_by="idle"` in the metrics, the closer's as
/// `server_fin`; the headline blames the server's keep-alive
/// timeout. the `connect` and `tls` phases are counted once per connection (per TLS
/// connection, TLS 1.2 and 1.3), and curl's, seen on the wire, are within what curl
/// measured itself.
#[test]
fn watch_sees_idle_closes_and_handshake_durations() {
    let _machine = crate::common::shared();
    if !common::root("watch") {
        return;
    }
    let n = nginx_keepalive_2s();
    let (http, https) = (n.ports[0].to_string(), n.ports[1].to_string());
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let prom = Prometheus::start("watch-idle", &[port], false);
    let watch = watch_with(
        &["--host", "127.0.0.2"],
        &addr,
        &["--metrics-linger", "10s"],
    );
    let clients: Vec<_> = [
        (&http, "0", "idler"),
        (&http, "0", "idler"),
        (&https, "1", "idler"),
    ]
    .into_iter()
    .chain([(&http, "0", "closer")])
    .map(|(p, tls, name)| {
        Command::new("python3")
            .args(["-c", IDLER, "127.0.0.2", p, tls, name])
            .spawn()
            .unwrap()
    })
    .collect();
    let (connect, appconnect) = curl_timing(&format!("https://127.0.0.2:{https}/"));
    for mut c in clients {
        assert!(c.wait().unwrap().success(), "a client failed");
    }
    let rep = end_watch(watch, &prom);
    let t = &rep["total"];
    assert_eq!(u(&t["connections"]), 5.0, "{rep}");
    assert_eq!(u(&t["endings"]["server_idle"]), 3.0, "{rep}");
    // The closer's, and curl's (whose close_notify nginx may answer with its FIN first).
    let ending = |e: &str| t["endings"][e].as_f64().unwrap_or(0.0);
    let fins = ending("server_fin") + ending("client_fin");
    assert_eq!(fins, 2.0, "{rep}");
    // Three programs: each judged on its own, the idler's connections closed by the
    // server when idle (all 3 of its own, not "3 of 5" of a blend).
    assert_eq!(rep["headline"]["code"], "by_program", "{rep}");
    let text = rep["headline"]["text"].as_str().unwrap();
    assert!(
        text.contains("idler: 3 requests")
            && text.contains("because the server closed them when idle (each after 1 s or more without a request: its keep-alive timeout), on 3 of 3 connections"),
        "{text}"
    );
    let v = |q: &str| prom.value(q).unwrap_or(-1.0);
    let closed = |program: &str, by: &str| {
        v(&format!(
            "sum(handshake_connections_closed_total{{program=\"{program}\",closed_by=\"{by}\"}})"
        ))
    };
    assert_eq!(closed("idler", "idle"), 3.0);
    assert_eq!(closed("idler", "server_fin"), 0.0);
    assert_eq!(closed("closer", "server_fin"), 1.0);
    assert_eq!(closed("closer", "idle"), 0.0);
    assert_eq!(closed("curl", "idle"), 0.0);
    let phase = |program: &str, phase: &str, what: &str| {
        v(&format!(
            "sum(handshake_phase_seconds_{what}{{program=\"{program}\",phase=\"{phase}\"}})"
        ))
    };
    assert_eq!(phase("idler", "connect", "count"), 3.0);
    assert_eq!(phase("idler", "tls", "count"), 1.0);
    assert_eq!(phase("closer", "tls", "count"), 0.0);
    assert_eq!(phase("curl", "connect", "count"), 1.0);
    assert_eq!(phase("curl", "tls", "count"), 1.0);
    let versions = |p: &str| {
        prom.query(&format!(
            "sum by (version) (handshake_tls_handshakes_total{{program=\"{p}\"}}) > 0"
        ))
    };
    // The idler's handshake is TLS 1.2's (ended by the two ChangeCipherSpecs), curl's
    // TLS 1.3's (ended by the client's Finished).
    assert_eq!(versions("idler")[0]["metric"]["version"], "1.2");
    assert_eq!(versions("curl")[0]["metric"]["version"], "1.3");
    // curl's own measures contain the wire's intervals (its clock starts before the SYN
    // and stops after the client's last handshake packet); 0.5 ms for the two clocks.
    let (tcp, tls) = (phase("curl", "connect", "sum"), phase("curl", "tls", "sum"));
    assert!(
        tcp > 0.0 && tcp <= connect + 0.0005,
        "tcp {tcp} vs curl {connect}"
    );
    assert!(
        tls > 0.0 && tls <= appconnect - connect + 0.0005,
        "tls {tls} vs curl {}",
        appconnect - connect
    );
}
