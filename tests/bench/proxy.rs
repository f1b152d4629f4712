//! Forward proxies (issue 45): bench, trace and the environment's proxy variables
//! through Debian's squid and tinyproxy to nginx, every count checked against the
//! proxy's own log (squid's `%>a %>p`: each request's client connection; tinyproxy's
//! `Connect` and `Request` lines) and nginx's.

use std::collections::BTreeSet;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::Value;

/// The proxy's log once it has `want` lines matching `keep` (a proxy writes a tunnel's
/// line when it closes), or what it has after 5 s.
fn log_lines(p: &ProxyServer, keep: impl Fn(&str) -> bool, want: usize) -> Vec<String> {
    let t = Instant::now();
    loop {
        let lines: Vec<String> = std::fs::read_to_string(&p.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| keep(l))
            .map(str::to_string)
            .collect();
        if lines.len() >= want || t.elapsed() > Duration::from_secs(5) {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// nginx behind the proxies: cleartext on `ports[0]`, TLS for localhost (HTTP/2 offered)
/// on `ports[1]`, logging each request's connection and protocol.
fn nginx_behind() -> Nginx {
    Nginx::start_servers(
        "log_format conn '$connection $server_protocol $request';",
        2,
        |ports, d| {
            write_certs(d, &["localhost"]);
            let d = d.display();
            format!(
                "server {{ listen 127.0.0.1:{}; access_log {d}/access.log conn; \
                 location / {{ return 200 \"ok\\n\"; }} \
                 location = /status {{ stub_status; access_log off; }} }}\n\
                 server {{ listen 127.0.0.1:{} ssl http2; ssl_certificate {d}/cert.pem; \
                 ssl_certificate_key {d}/key.pem; access_log {d}/access.log conn; \
                 location / {{ return 200 \"ok\\n\"; }} }}",
                ports[0], ports[1]
            )
        },
    )
    .expect("nginx")
}

/// nginx's log since `from` lines: (requests, connections, protocols seen).
fn nginx_since(n: &Nginx, from: usize) -> (u64, u64, BTreeSet<String>) {
    let text = std::fs::read_to_string(n.dir.join("access.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().skip(from).collect();
    let conns: BTreeSet<&str> = lines.iter().filter_map(|l| l.split(' ').next()).collect();
    let protos = lines
        .iter()
        .filter_map(|l| l.split(' ').nth(1).map(str::to_string))
        .collect();
    (lines.len() as u64, conns.len() as u64, protos)
}

/// The connections nginx has accepted (its stub_status), this read's own included.
fn nginx_accepts(n: &Nginx) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", n.ports[0])).unwrap();
    s.write_all(b"GET /status HTTP/1.0\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    // "server accepts handled requests\n 12 12 30 \n"
    let after = text.split("requests").nth(1).expect("stub_status");
    after.split_whitespace().next().unwrap().parse().unwrap()
}

fn nginx_lines(n: &Nginx) -> usize {
    std::fs::read_to_string(n.dir.join("access.log"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// `handshake ARGS --json` with `env` set and the proxy variables of the test's own
/// environment removed.
fn run_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(bin());
    without_proxy_env(c.args(args));
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn bench_env(args: &[&str], env: &[(&str, &str)]) -> (Output, Value) {
    let mut all = vec!["bench", "--json", "--no-progress"];
    all.extend_from_slice(args);
    let out = run_env(&all, env);
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out, v)
}

/// The client connections (address and port) of squid's log lines with `method`.
fn squid_clients(lines: &[String], method: &str) -> (usize, BTreeSet<String>) {
    let of: Vec<&String> = lines
        .iter()
        .filter(|l| l.split(' ').nth(2) == Some(method))
        .collect();
    let clients = of
        .iter()
        .map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(":"))
        .collect();
    (of.len(), clients)
}

/// bench through squid: http:// (absolute form, squid's log has each request and the
/// client connection it came on) and https:// (a CONNECT tunnel per connection, each in
/// squid's log; inside, nginx counts the requests and connections), keep-alive and
/// close; the report's connections, tunnels and requests equal squid's and nginx's.
#[test]
fn bench_through_squid_counts_what_squid_and_nginx_count() {
    let _machine = shared();
    let n = nginx_behind();
    let sq = squid();
    let proxy = format!("http://127.0.0.1:{}", sq.port);
    let ca = n.dir.join("ca.pem");
    let ca = ca.to_str().unwrap();
    let plain = format!("http://127.0.0.1:{}/", n.ports[0]);
    let tls = format!("https://localhost:{}/", n.ports[1]);
    let mut seen = 0;
    for strategy in ["keepalive", "close"] {
        let (out, r) = bench_env(
            &[
                &plain,
                "-x",
                &proxy,
                "-n",
                "20",
                "-c",
                "2",
                "--strategy",
                strategy,
            ],
            &[],
        );
        assert!(out.status.success(), "{strategy}: {r}");
        let s = scenario(&r);
        assert_eq!(u(&s["requests"]["ok"]), 20, "{strategy}: {s}");
        assert_eq!(s["connections"]["proxy"]["url"], proxy.as_str());
        assert_eq!(u(&s["connections"]["proxy"]["tunnels"]), 0);
        let lines = log_lines(&sq, |_| true, seen + 20);
        let (gets, clients) = squid_clients(&lines[seen..], "GET");
        seen = lines.len();
        assert_eq!(gets, 20, "{strategy}: squid's requests");
        assert_eq!(
            clients.len() as u64,
            u(&s["connections"]["opened"]),
            "{strategy}: squid's client connections"
        );
        assert!(s["phases_ms"]["new"]["proxy_connect"]["count"].as_u64() > Some(0));
    }
    for (strategy, want_conns) in [("keepalive", 2), ("close", 12)] {
        let from = nginx_lines(&n);
        let (out, r) = bench_env(
            &[
                &tls,
                "--cacert",
                ca,
                "-x",
                &proxy,
                "-n",
                "12",
                "-c",
                "2",
                "--strategy",
                strategy,
            ],
            &[],
        );
        assert!(out.status.success(), "{strategy}: {r}");
        let s = scenario(&r);
        let opened = u(&s["connections"]["opened"]);
        assert_eq!(opened, want_conns, "{strategy}: {s}");
        assert_eq!(u(&s["connections"]["proxy"]["tunnels"]), opened);
        let lines = log_lines(&sq, |_| true, seen + opened as usize);
        let (connects, clients) = squid_clients(&lines[seen..], "CONNECT");
        seen = lines.len();
        assert_eq!(connects as u64, opened, "{strategy}: squid's CONNECTs");
        assert_eq!(clients.len() as u64, opened);
        let (requests, conns, _) = nginx_since(&n, from);
        assert_eq!((requests, conns), (12, opened), "{strategy}: nginx's count");
        let tunnel = &s["phases_ms"]["new"]["tunnel"];
        assert_eq!(tunnel["count"].as_u64(), Some(opened), "{s}");
        assert!(s["phases_ms"]["new"]["connect"]["count"].as_u64() == Some(0));
    }
}

/// HTTPS_PROXY in the environment is -x; NO_PROXY (and --noproxy) naming the host goes
/// direct, and squid sees nothing; HTTP/2 goes through the tunnel (nginx logs HTTP/2.0).
#[test]
fn the_environment_names_the_proxy_and_no_proxy_goes_direct() {
    let _machine = shared();
    let n = nginx_behind();
    let sq = squid();
    let proxy = format!("http://127.0.0.1:{}", sq.port);
    let ca = n.dir.join("ca.pem");
    let ca = ca.to_str().unwrap();
    let tls = format!("https://localhost:{}/", n.ports[1]);
    let base = [tls.as_str(), "--cacert", ca, "-n", "6", "-c", "1"];
    let (out, r) = bench_env(&base, &[("HTTPS_PROXY", &proxy)]);
    assert!(out.status.success(), "{r}");
    let s = scenario(&r);
    assert_eq!(u(&s["connections"]["proxy"]["tunnels"]), 1, "{s}");
    let lines = log_lines(&sq, |_| true, 1);
    assert_eq!(squid_clients(&lines, "CONNECT").0, 1, "{lines:?}");
    // NO_PROXY naming the host, and --noproxy: direct.
    for (env, flag) in [
        (
            vec![
                ("HTTPS_PROXY", proxy.as_str()),
                ("NO_PROXY", "example.test,localhost"),
            ],
            None,
        ),
        (vec![("https_proxy", proxy.as_str())], Some("localhost")),
    ] {
        let mut args = base.to_vec();
        if let Some(f) = flag {
            args.extend(["--noproxy", f]);
        }
        let (out, r) = bench_env(&args, &env);
        assert!(out.status.success(), "{r}");
        assert!(scenario(&r)["connections"]["proxy"].is_null(), "{r}");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        log_lines(&sq, |_| true, 2).len(),
        1,
        "squid saw a direct run"
    );
    // HTTP/2 through the tunnel: one connection, one tunnel, 8 streams.
    let from = nginx_lines(&n);
    let (out, r) = bench_env(
        &[
            &tls,
            "--cacert",
            ca,
            "-x",
            &proxy,
            "--strategy",
            "h2",
            "-n",
            "8",
            "-c",
            "4",
        ],
        &[],
    );
    assert!(out.status.success(), "{r}");
    let s = scenario(&r);
    assert_eq!(u(&s["connections"]["opened"]), 1, "{s}");
    assert_eq!(u(&s["connections"]["proxy"]["tunnels"]), 1);
    let (requests, conns, protos) = nginx_since(&n, from);
    assert_eq!((requests, conns), (8, 1));
    assert_eq!(protos.into_iter().collect::<Vec<_>>(), ["HTTP/2.0"]);
}

/// tinyproxy asking for credentials: without them every CONNECT is refused (the error
/// category `proxy`, detail `proxy_auth_required`, the proxy's status line as its
/// example, exit 1); with `user:pass@` in the proxy URL the tunnels open (tinyproxy's
/// log holds them) and nginx counts the requests. The password is printed nowhere.
#[test]
fn a_proxy_that_wants_credentials_is_refused_then_passed() {
    let _machine = shared();
    let n = nginx_behind();
    let tp = tinyproxy(true);
    let ca = n.dir.join("ca.pem");
    let ca = ca.to_str().unwrap();
    let tls = format!("https://localhost:{}/", n.ports[1]);
    let bare = format!("http://127.0.0.1:{}", tp.port);
    let (out, r) = bench_env(
        &[&tls, "--cacert", ca, "-x", &bare, "-n", "3", "-c", "1"],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{r}");
    let s = scenario(&r);
    let errors = &s["requests"]["errors"];
    assert_eq!(u(&errors["proxy"]), 3, "{s}");
    assert_eq!(u(&s["requests"]["error_details"]["proxy_auth_required"]), 3);
    let example = s["requests"]["error_examples"].to_string();
    assert!(example.contains("407"), "{example}");
    let with = format!("http://user:pa55@127.0.0.1:{}", tp.port);
    let from = nginx_lines(&n);
    for args in [
        vec![
            tls.as_str(),
            "--cacert",
            ca,
            "-x",
            &with,
            "-n",
            "4",
            "-c",
            "1",
        ],
        vec![
            tls.as_str(),
            "--cacert",
            ca,
            "-n",
            "4",
            "-c",
            "1",
            "--strategy",
            "close",
        ],
    ] {
        let (out, r) = bench_env(&args, &[("HTTPS_PROXY", &with)]);
        assert!(out.status.success(), "{r}");
        for text in [&out.stdout, &out.stderr] {
            assert!(!String::from_utf8_lossy(text).contains("pa55"));
        }
    }
    let (requests, conns, _) = nginx_since(&n, from);
    assert_eq!(
        (requests, conns),
        (8, 5),
        "nginx: 1 tunnel kept alive, then 4"
    );
    let connects = log_lines(&tp, |l| l.contains("Request") && l.contains("CONNECT "), 9);
    // 3 refused, then 1 and 4 tunnels.
    assert_eq!(connects.len(), 8, "{connects:?}");
}

/// An http:// URL through tinyproxy goes in absolute form with the credentials; tinyproxy
/// ends each client connection after one request, so keep-alive is lost at the proxy:
/// the report's connections equal tinyproxy's `Connect` lines, its requests the
/// `Request` lines and nginx's log.
#[test]
fn tinyproxy_ends_each_connection_and_the_report_says_so() {
    let _machine = shared();
    let n = nginx_behind();
    let tp = tinyproxy(true);
    let plain = format!("http://127.0.0.1:{}/", n.ports[0]);
    let with = format!("http://user:pa55@127.0.0.1:{}", tp.port);
    let from = nginx_lines(&n);
    let (out, r) = bench_env(&[&plain, "-n", "10", "-c", "2"], &[("http_proxy", &with)]);
    assert!(out.status.success(), "{r}");
    let s = scenario(&r);
    assert_eq!(u(&s["requests"]["ok"]), 10);
    let opened = u(&s["connections"]["opened"]);
    let conns = log_lines(
        &tp,
        |l| l.contains("Connect (file descriptor"),
        opened as usize,
    );
    let reqs = log_lines(&tp, |l| l.contains("Request (file descriptor"), 10);
    assert_eq!(conns.len() as u64, opened, "tinyproxy's connections: {s}");
    assert_eq!(reqs.len(), 10);
    assert!(
        reqs.iter()
            .all(|l| l.contains(&format!("GET {plain} HTTP/1.1"))),
        "{reqs:?}"
    );
    assert_eq!(nginx_since(&n, from).0, 10);
    // The diagnosis names the proxy as the peer that closed, not the server behind it.
    let said = s["diagnosis"].to_string();
    let proxy = format!("http://127.0.0.1:{}", tp.port);
    assert!(said.contains("\"through_proxy\""), "{said}");
    assert!(
        said.contains(&format!("the proxy {proxy} closed")),
        "{said}"
    );
    assert!(!said.contains("The server "), "{said}");
    // In a closed loop each request followed its connection's response at once: no idle
    // timeout explains a connection found closed by it (issue 56); tinyproxy ends each
    // client connection after its response without saying so.
    assert!(
        said.contains("\"not_reused_server_silent_close\""),
        "{said}"
    );
    assert!(
        said.contains("without saying so (no `Connection: close`)"),
        "{said}"
    );
    assert!(said.contains("so no idle timeout explains it"), "{said}");
    // Without credentials the proxy answers 407 itself: the diagnosis says whose they are.
    let bare = format!("http://127.0.0.1:{}", tp.port);
    let (_, r) = bench_env(&[&plain, "-n", "2", "-c", "1"], &[("http_proxy", &bare)]);
    let said = scenario(&r)["diagnosis"].to_string();
    assert!(said.contains("a proxy wants credentials"), "{said}");
    // An upper-case HTTP_PROXY is not read (curl's rule): direct.
    let (out, r) = bench_env(&[&plain, "-n", "2"], &[("HTTP_PROXY", &with)]);
    assert!(out.status.success());
    assert!(scenario(&r)["connections"]["proxy"].is_null());
}

/// trace through squid to an https:// origin: the waterfall's hops (the proxy's
/// connect, the tunnel), in JSON and text.
#[test]
fn trace_shows_the_proxy_and_the_tunnel() {
    let _machine = shared();
    let n = nginx_behind();
    let sq = squid();
    let proxy = format!("http://127.0.0.1:{}", sq.port);
    let ca = n.dir.join("ca.pem");
    let tls = format!("https://localhost:{}/", n.ports[1]);
    let args = [
        "trace",
        &tls,
        "--cacert",
        ca.to_str().unwrap(),
        "-x",
        &proxy,
    ];
    let mut json = args.to_vec();
    json.push("--json");
    let out = run_env(&json, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let step = &v["steps"][0];
    assert!(step["proxy_connect_ms"].as_f64() > Some(0.0), "{step}");
    assert!(step["tunnel_ms"].as_f64() > Some(0.0), "{step}");
    assert!(step["connect_ms"].is_null(), "{step}");
    let out = run_env(&args, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("proxy") && text.contains("tunnel"), "{text}");
    assert_eq!(squid_clients(&log_lines(&sq, |_| true, 2), "CONNECT").0, 2);
}

/// What a proxy cannot carry, and malformed proxies, are usage errors (exit 2) that say
/// why, never echoing credentials.
#[test]
fn what_a_proxy_cannot_carry_is_a_usage_error() {
    let _machine = shared();
    for (args, says) in [
        (
            vec!["https://localhost:1/", "-x", "socks5://127.0.0.1:1"],
            "socks5:// proxy is not supported",
        ),
        (
            vec!["https://localhost:1/", "-x", "http://u:secret@127.0.0.1:x"],
            "\"x\" is not a port",
        ),
        (
            vec![
                "https://localhost:1/",
                "-x",
                "127.0.0.1:1",
                "--strategy",
                "h3",
            ],
            "QUIC, on UDP",
        ),
        (
            vec![
                "http://localhost:1/",
                "-x",
                "127.0.0.1:1",
                "--strategy",
                "h2",
            ],
            "h2c",
        ),
    ] {
        let mut all = vec!["bench", "-n", "1"];
        all.extend(args.iter().copied());
        let out = run_env(&all, &[]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("secret"), "{err}");
    }
    // A malformed proxy variable names the variable.
    let out = run_env(
        &["bench", "-n", "1", "https://localhost:1/"],
        &[("HTTPS_PROXY", "http://h:nope")],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("HTTPS_PROXY"));
}

/// compare through squid: the rows go through the proxy (each row's tunnels equal its
/// connections, and squid's CONNECTs are theirs), a direct row beside them says what the
/// proxy costs per request (squid never sees it), and HTTP/3 is left out because the
/// proxy forwards TCP.
#[test]
fn compare_through_a_proxy_has_a_direct_row_beside() {
    let _machine = shared();
    let n = nginx_behind();
    let sq = squid();
    let proxy = format!("http://127.0.0.1:{}", sq.port);
    let ca = n.dir.join("ca.pem");
    let tls = format!("https://localhost:{}/", n.ports[1]);
    let from = nginx_lines(&n);
    let mut args = vec!["compare", "--json", "--no-progress", &tls, "--cacert"];
    args.extend([
        ca.to_str().unwrap(),
        "-x",
        &proxy,
        "-n",
        "20",
        "--rounds",
        "2",
    ]);
    args.extend(["--strategies", "keepalive,close"]);
    let out = run_env(&args, &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = v["comparison"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    assert!(names.contains(&"keepalive direct"), "{names:?}");
    let (mut proxied, mut direct) = (0, 0);
    for s in v["scenarios"].as_array().unwrap() {
        let opened = u(&s["connections"]["opened"]);
        if s["name"].as_str().unwrap().ends_with("direct") {
            assert!(s["connections"]["proxy"].is_null(), "{s}");
            direct += opened;
        } else {
            assert_eq!(u(&s["connections"]["proxy"]["tunnels"]), opened, "{s}");
            proxied += opened;
        }
    }
    assert!(direct > 0 && proxied > direct, "{proxied} {direct}");
    let lines = log_lines(&sq, |_| true, proxied as usize);
    assert_eq!(
        squid_clients(&lines, "CONNECT").0 as u64,
        proxied,
        "squid's CONNECTs"
    );
    // nginx served every row's requests: 3 rows, 2 rounds, 20 each.
    assert_eq!(nginx_since(&n, from).0, 120);
    let out = run_env(
        &[
            "compare",
            "--json",
            "--no-progress",
            &tls,
            "--cacert",
            ca.to_str().unwrap(),
            "-x",
            &proxy,
            "-n",
            "4",
            "--rounds",
            "1",
        ],
        &[],
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let left = v["comparison"]["left_out"].to_string();
    assert!(
        left.contains("HTTP/3 runs over QUIC, on UDP, and the proxy"),
        "{left}"
    );
}

/// doctor through squid to an https:// origin: every probe connection is a tunnel
/// (squid's CONNECTs equal nginx's connections), the origin's policy is read through it
/// (nginx keeps connections: reused), and no HTTP/3 probe goes around the proxy.
#[test]
fn doctor_reads_the_origin_through_the_tunnel() {
    let _machine = shared();
    let n = nginx_behind();
    let sq = squid();
    let proxy = format!("http://127.0.0.1:{}", sq.port);
    let ca = n.dir.join("ca.pem");
    let tls = format!("https://localhost:{}/", n.ports[1]);
    let before = nginx_accepts(&n);
    let d = quick_doctor_json(&[&tls, "--cacert", ca.to_str().unwrap(), "-x", &proxy]);
    assert_eq!(d["http11"]["reused"], true, "{d}");
    assert_eq!(d["proxy"], proxy.as_str());
    assert!(
        d["policy"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Policy (the origin's, through the proxy's tunnel): "),
        "{}",
        d["policy"]
    );
    let through = finding(&d["findings"], "through_proxy");
    assert!(
        through["text"]
            .as_str()
            .unwrap()
            .contains("CONNECT tunnel to the origin"),
        "{through}"
    );
    assert!(
        d["h3"].is_null(),
        "no HTTP/3 probe around the proxy: {}",
        d["h3"]
    );
    // Every connection nginx accepted (but the status read) came through a tunnel.
    let conns = nginx_accepts(&n) - before - 1;
    std::thread::sleep(Duration::from_millis(500));
    let connects = squid_clients(&log_lines(&sq, |_| true, conns as usize), "CONNECT").0;
    assert_eq!(
        connects as u64, conns,
        "squid's tunnels, nginx's connections"
    );
}

/// doctor through tinyproxy to an http:// origin: the connections probed are the
/// proxy's, and tinyproxy ends each after one response while nginx behind it keeps
/// them: doctor says the proxy's policy, names it, and names no fix after nginx's
/// Server header (passed on by the proxy).
#[test]
fn doctor_through_a_proxy_to_http_reads_the_proxys_keep_alive() {
    let _machine = shared();
    let n = nginx_behind();
    let tp = tinyproxy(false);
    let proxy = format!("http://127.0.0.1:{}", tp.port);
    let plain = format!("http://127.0.0.1:{}/", n.ports[0]);
    let direct = quick_doctor_json(&[&plain, "--proxy", ""]);
    assert_eq!(direct["http11"]["reused"], true, "nginx keeps: {direct}");
    let from = log_lines(&tp, |l| l.contains("Connect (file descriptor"), 0).len();
    let d = quick_doctor_json(&[&plain, "-x", &proxy]);
    assert_eq!(d["http11"]["reused"], false, "tinyproxy closes: {d}");
    // tinyproxy's own log: one connection per probe request.
    let conns = log_lines(&tp, |l| l.contains("Connect (file descriptor"), from + 3).len() - from;
    assert!(conns >= 3, "{conns}");
    let policy = d["policy"]["text"].as_str().unwrap();
    assert!(
        policy.starts_with(&format!(
            "Policy of the proxy {proxy} towards this client: "
        )),
        "{policy}"
    );
    let all = d.to_string();
    assert!(all.contains("\"through_proxy\""), "{all}");
    assert!(
        all.contains("the proxy's towards this client, not the origin's"),
        "{all}"
    );
    assert!(
        !all.contains("keepalive_timeout"),
        "no nginx fix for the proxy's policy: {all}"
    );
    assert!(
        all.contains("The proxy closes HTTP/1.1 connections after every response"),
        "{all}"
    );
    assert!(all.contains("client_persistent_connections"), "{all}");
}

/// A proxy that answers CONNECT with garbage, closes at once, says 502 or 403, or
/// never answers: each attempt counted under `proxy` (or `timeout_tunnel`) with its
/// detail, its connection counted by the scripted proxy, no crash; the example holds the
/// proxy's status line. The CONNECT itself names the origin and carries the credentials.
#[test]
fn a_hostile_proxy_is_counted_never_a_crash() {
    let _machine = shared();
    let saw = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = saw.clone();
    let (addr, accepted) = script_server(move |mut s, n| {
        let Some(head) = read_head(&mut s) else {
            return;
        };
        seen.lock()
            .unwrap()
            .push(String::from_utf8_lossy(&head).to_string());
        match n % 5 {
            0 => write(&mut s, b"SSH-2.0-OpenSSH\r\n\r\n"),
            1 => {}
            2 => write(
                &mut s,
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n",
            ),
            3 => write(
                &mut s,
                b"HTTP/1.1 403 Forbidden by policy\r\nContent-Length: 0\r\n\r\n",
            ),
            _ => std::thread::sleep(Duration::from_secs(3)),
        }
    });
    let proxy = format!("http://u:pw@{addr}");
    let (out, r) = bench_env(
        &[
            "https://origin.test:8443/",
            "-x",
            &proxy,
            "-n",
            "5",
            "-c",
            "1",
            "--timeout",
            "1s",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{r}");
    let s = scenario(&r);
    check_accounting(s);
    let req = &s["requests"];
    assert_eq!(u(&req["errors"]["proxy"]), 4, "{req}");
    assert_eq!(u(&req["errors"]["timeout_tunnel"]), 1, "{req}");
    for d in [
        "proxy_bad_answer",
        "proxy_closed",
        "proxy_bad_gateway",
        "proxy_forbidden",
    ] {
        assert_eq!(u(&req["error_details"][d]), 1, "{d}: {req}");
    }
    let examples = req["error_examples"].to_string();
    assert!(
        examples.contains("HTTP/1.1 403 Forbidden by policy"),
        "{examples}"
    );
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 5);
    assert_eq!(u(&s["connections"]["opened"]), 5);
    let heads = saw.lock().unwrap();
    assert!(
        heads[0].starts_with("CONNECT origin.test:8443 HTTP/1.1\r\nHost: origin.test:8443\r\n"),
        "{heads:?}"
    );
    // base64("u:pw")
    assert!(
        heads[0].contains("Proxy-Authorization: Basic dTpwdw==\r\n"),
        "{heads:?}"
    );
}

/// An https:// proxy (squid's https_port): TLS to the proxy, then the origin's TLS inside
/// the tunnel; bench counts 2 connections and 2 tunnels as squid logs them, nginx 10
/// requests on 2 connections; an http:// URL goes in absolute form over the proxy's TLS.
/// Without the proxy's CA, each attempt fails as `tls` (cert_unknown_issuer), its
/// example naming the proxy.
#[test]
fn an_https_proxy_carries_the_origins_tls_inside_its_own() {
    let _machine = shared();
    let n = nginx_behind();
    let (sq, https) = squid_with(Some(()));
    let (port, proxy_ca) = https.unwrap();
    let proxy = format!("https://localhost:{port}");
    let ca = n.dir.join("ca.pem");
    let (ca, pca) = (ca.to_str().unwrap(), proxy_ca.to_str().unwrap());
    let tls = format!("https://localhost:{}/", n.ports[1]);
    let from = nginx_lines(&n);
    let (out, r) = bench_env(
        &[
            &tls,
            "--cacert",
            ca,
            "-x",
            &proxy,
            "--proxy-cacert",
            pca,
            "-n",
            "10",
            "-c",
            "2",
        ],
        &[],
    );
    assert!(out.status.success(), "{r}");
    let s = scenario(&r);
    assert_eq!(u(&s["connections"]["opened"]), 2, "{s}");
    assert_eq!(u(&s["connections"]["proxy"]["tunnels"]), 2);
    assert_eq!(s["connections"]["proxy"]["url"], proxy.as_str());
    let lines = log_lines(&sq, |_| true, 2);
    let (connects, clients) = squid_clients(&lines, "CONNECT");
    assert_eq!((connects, clients.len()), (2, 2), "{lines:?}");
    assert_eq!(nginx_since(&n, from).0, 10);
    assert_eq!(nginx_since(&n, from).1, 2);
    let said = s["diagnosis"].to_string();
    assert!(
        said.contains("each connection is a CONNECT tunnel to the origin"),
        "{said}"
    );
    let plain = format!("http://127.0.0.1:{}/", n.ports[0]);
    let (out, r) = bench_env(
        &[
            &plain,
            "-x",
            &proxy,
            "--proxy-cacert",
            pca,
            "-n",
            "6",
            "-c",
            "1",
        ],
        &[],
    );
    assert!(out.status.success(), "{r}");
    let lines = log_lines(&sq, |_| true, 8);
    assert_eq!(squid_clients(&lines, "GET").0, 6, "{lines:?}");
    let (out, r) = bench_env(&[&plain, "-x", &proxy, "-n", "2", "-c", "1"], &[]);
    assert_eq!(out.status.code(), Some(1), "{r}");
    let req = &scenario(&r)["requests"];
    assert_eq!(u(&req["error_details"]["cert_unknown_issuer"]), 2, "{req}");
    assert!(
        req["error_examples"]
            .to_string()
            .contains("TLS to the proxy"),
        "{req}"
    );
}

/// A proxy that is down, with the origin up (issue 56): bench, trace and doctor name the
/// proxy and the address tried, say the origin was not reached, and never send the user
/// to the origin ("nothing accepts connections at localhost:..."); nginx saw nothing.
#[test]
fn a_proxy_that_is_down_is_named_and_the_origin_is_not_blamed() {
    let _machine = shared();
    let n = nginx_behind();
    let ca = n.dir.join("ca.pem");
    let origin = format!("localhost:{}", n.ports[1]);
    let url = format!("https://{origin}/");
    let port = free_port();
    let proxy = format!("http://127.0.0.1:{port}");
    let says =
        format!("the proxy {proxy} refused the connection; the origin {origin} was not reached");
    let before = nginx_lines(&n);
    let tls = ["--cacert", ca.to_str().unwrap(), "-x", &proxy];
    let (out, v) = bench_env(
        &[&[url.as_str(), "-n", "2", "-c", "1"][..], &tls].concat(),
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(u(&scenario(&v)["requests"]["errors"]["connect"]), 2, "{v}");
    let diagnosis = scenario(&v)["diagnosis"].to_string();
    for (what, text) in [("stderr", err.to_string()), ("diagnosis", diagnosis)] {
        assert!(text.contains(&says), "{what}: {text}");
        assert!(
            !text.contains("nothing accepts connections at"),
            "{what}: {text}"
        );
    }
    for cmd in ["trace", "doctor"] {
        let out = run_env(&[&[cmd, url.as_str()][..], &tls].concat(), &[]);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_ne!(out.status.code(), Some(0), "{cmd}: {all}");
        let words = all.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(words.contains(&says), "{cmd}: {all}");
        assert!(
            !words.contains("nothing accepts connections at"),
            "{cmd}: {all}"
        );
    }
    assert_eq!(nginx_lines(&n), before, "the origin saw a request");
}
