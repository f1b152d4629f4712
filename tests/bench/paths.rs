//! The paths real traffic takes between a client and the server it measures (issue 45):
//! `--connect-to` (a named virtual host measured on another address, with its own
//! name in Host and SNI), checked against nginx's own log.

use std::collections::BTreeSet;

use crate::common::*;
use serde_json::Value;

/// nginx with TLS for `a.test` (its CA in its directory), logging each request's
/// connection, TLS name (SNI) and Host header.
fn nginx_a_test() -> Nginx {
    Nginx::start_servers(
        "log_format names '$connection $ssl_server_name $host';",
        1,
        |ports, d| {
            write_certs(d, &["a.test"]);
            let d = d.display();
            format!(
                "server {{ listen 127.0.0.1:{} ssl; ssl_certificate {d}/cert.pem; \
                 ssl_certificate_key {d}/key.pem; access_log {d}/access.log names; \
                 location / {{ return 200 \"a\\n\"; }} }}",
                ports[0]
            )
        },
    )
    .expect("nginx")
}

/// nginx's log: (requests, connections), each line's SNI and Host checked to be `a.test`.
fn log_of_a_test(n: &Nginx) -> (u64, u64) {
    let text = std::fs::read_to_string(n.dir.join("access.log")).unwrap_or_default();
    let mut conns = BTreeSet::new();
    let mut requests = 0;
    for l in text.lines() {
        let f: Vec<&str> = l.split(' ').collect();
        assert_eq!(f[1..], ["a.test", "a.test"], "SNI and Host: {l}");
        conns.insert(f[0].to_string());
        requests += 1;
    }
    (requests, conns.len() as u64)
}

/// `--connect-to a.test:8443:127.0.0.1:PORT` (and curl's empty parts: any host, the URL's
/// port kept or replaced): bench's requests go to nginx's port with `a.test` in SNI
/// (the certificate verified against it) and Host; nginx's count of requests and
/// connections equals the report's. trace and doctor go the same way.
#[test]
fn connect_to_measures_a_named_host_on_another_address() {
    let _machine = shared();
    let n = nginx_a_test();
    let ca = n.dir.join("ca.pem");
    let ca = ca.to_str().unwrap();
    let port = n.port;
    for (i, rule) in [
        format!("a.test:8443:127.0.0.1:{port}"),
        format!("::127.0.0.1:{port}"),
        format!("a.test::localhost:{port}"),
    ]
    .iter()
    .enumerate()
    {
        let before = log_of_a_test(&n);
        let r = bench_json(&[
            "https://a.test:8443/",
            "--connect-to",
            rule,
            "--cacert",
            ca,
            "-n",
            "12",
            "-c",
            "3",
        ]);
        let s = scenario(&r);
        assert_eq!(u(&s["requests"]["ok"]), 12, "{rule}: {s}");
        let after = log_of_a_test(&n);
        assert_eq!(after.0 - before.0, 12, "{rule}: nginx's requests");
        assert_eq!(
            after.1 - before.1,
            u(&s["connections"]["opened"]),
            "{rule}: nginx's connections (round {i})"
        );
    }
    // trace: one request, through the same rule.
    let before = log_of_a_test(&n);
    let out = run(&[
        "trace",
        "https://a.test:8443/",
        "--connect-to",
        &format!("a.test:8443:127.0.0.1:{port}"),
        "--cacert",
        ca,
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(log_of_a_test(&n).0 - before.0, 1, "trace's request");
    // doctor: every probe through the rule (each request's SNI and Host are a.test).
    let before = log_of_a_test(&n);
    let rule = format!("a.test:8443:127.0.0.1:{port}");
    let d = quick_doctor_json(&[
        "https://a.test:8443/",
        "--connect-to",
        &rule,
        "--cacert",
        ca,
    ]);
    let after = log_of_a_test(&n);
    assert!(after.0 > before.0 + 1, "doctor's requests: {d}");
    // A rule that does not match leaves the URL alone: a.test does not resolve.
    let out = run(&[
        "bench",
        "https://a.test:8443/",
        "--connect-to",
        &format!("b.test:8443:127.0.0.1:{port}"),
        "-n",
        "1",
        "--no-progress",
    ]);
    assert_eq!(out.status.code(), Some(1));
}

/// A malformed `--connect-to` is a usage error naming the flag and what is wrong.
#[test]
fn a_malformed_connect_to_is_a_usage_error() {
    let _machine = shared();
    for (rule, says) in [
        ("a.test:443:127.0.0.1", "expected HOST1:PORT1:HOST2:PORT2"),
        (
            "a.test:443:127.0.0.1:1:2",
            "expected HOST1:PORT1:HOST2:PORT2",
        ),
        ("a.test:x:127.0.0.1:1", "\"x\" is not a port"),
        ("a.test:443:[::1:1", "without its closing ]"),
    ] {
        let out = run(&["bench", "http://a.test/", "--connect-to", rule, "-n", "1"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{rule}: {err}");
        assert!(
            err.contains("--connect-to") && err.contains(says),
            "{rule}: {err}"
        );
    }
}

/// nginx listening on two Unix sockets in its directory (`plain.sock`, and `tls.sock`
/// with TLS for localhost), logging each request's connection and its number on it.
fn nginx_unix() -> Nginx {
    Nginx::start_servers(
        "log_format conn '$connection $connection_requests';",
        1,
        |ports, d| {
            write_certs(d, &["localhost"]);
            let d = d.display();
            format!(
                "server {{ listen 127.0.0.1:{}; listen unix:{d}/plain.sock; \
                 listen unix:{d}/tls.sock ssl; ssl_certificate {d}/cert.pem; \
                 ssl_certificate_key {d}/key.pem; access_log {d}/access.log conn; \
                 location / {{ return 200 \"hello\\n\"; }} }}",
                ports[0]
            )
        },
    )
    .expect("nginx")
}

/// nginx's log so far: (requests, connections).
fn requests_and_connections(n: &Nginx) -> (u64, u64) {
    let text = std::fs::read_to_string(n.dir.join("access.log")).unwrap_or_default();
    let conns: BTreeSet<&str> = text.lines().filter_map(|l| l.split(' ').next()).collect();
    (text.lines().count() as u64, conns.len() as u64)
}

/// `--unix-socket PATH` as curl takes it: bench keep-alive and close, over cleartext and
/// over TLS, reach nginx on its Unix sockets; its count of requests and connections
/// equals the report's (TLS: a handshake per connection). trace and doctor go the same
/// way.
#[test]
fn unix_socket_runs_equal_nginx_counts() {
    let _machine = shared();
    let n = nginx_unix();
    let plain = n.dir.join("plain.sock");
    let tls = n.dir.join("tls.sock");
    let ca = n.dir.join("ca.pem");
    let (plain, tls, ca) = (
        plain.to_str().unwrap(),
        tls.to_str().unwrap(),
        ca.to_str().unwrap(),
    );
    for (url, sock, strategy, requests) in [
        ("http://localhost/", plain, "keepalive", 20),
        ("http://localhost/", plain, "close", 10),
        ("https://localhost/", tls, "keepalive", 20),
        ("https://localhost/", tls, "close", 6),
    ] {
        let before = requests_and_connections(&n);
        let r = bench_json(&[
            url,
            "--unix-socket",
            sock,
            "--cacert",
            ca,
            "--strategy",
            strategy,
            "-n",
            &requests.to_string(),
            "-c",
            "2",
        ]);
        let s = scenario(&r);
        let after = requests_and_connections(&n);
        let what = format!("{url} {strategy}");
        assert_eq!(u(&s["requests"]["ok"]), requests, "{what}: {s}");
        assert_eq!(after.0 - before.0, requests, "{what}: nginx's requests");
        let opened = u(&s["connections"]["opened"]);
        assert_eq!(after.1 - before.1, opened, "{what}: nginx's connections");
        if url.starts_with("https") {
            let hs = &s["connections"]["tls_handshakes"];
            let full = u(&hs["full"]) + u(&hs["resumed"]);
            assert_eq!(full, opened, "{what}: a handshake per connection: {s}");
        }
        if strategy == "close" {
            assert_eq!(opened, requests, "{what}");
        }
    }
    // trace: its one request on one connection; doctor: its probes, all through the
    // socket (nginx saw them).
    for (cmd, quick) in [
        ("trace", &[][..]),
        ("doctor", &["--max-idle", "1s", "--max-requests", "20"][..]),
    ] {
        let before = requests_and_connections(&n);
        let mut args = vec![
            cmd,
            "https://localhost/",
            "--unix-socket",
            tls,
            "--cacert",
            ca,
            "--json",
        ];
        args.extend(quick);
        let out = run(&args);
        let after = requests_and_connections(&n);
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{cmd}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if cmd == "trace" {
            assert_eq!((after.0 - before.0, after.1 - before.1), (1, 1), "trace");
        } else {
            assert!(after.0 > before.0 + 1, "doctor: nginx saw its probes");
        }
    }
}

/// A `--unix-socket` path that does not exist or is not a socket, or HTTP/3 asked over
/// one: a usage error (exit 2) naming the flag. A socket nobody listens on: the run
/// fails (exit 1), each attempt a connect error.
#[test]
fn unix_socket_errors_say_what_is_wrong() {
    let _machine = shared();
    let d = Dir::new("unix");
    let dir = &d.0;
    let file = dir.join("file");
    std::fs::write(&file, "x").unwrap();
    let dead = dir.join("dead.sock");
    drop(std::os::unix::net::UnixListener::bind(&dead).unwrap());
    let (file, dead) = (file.to_str().unwrap(), dead.to_str().unwrap());
    for (args, says) in [
        (
            vec!["--unix-socket", "/nonexistent/x.sock"],
            "--unix-socket /nonexistent/x.sock: No such file",
        ),
        (vec!["--unix-socket", file], "not a socket"),
        (
            vec!["--unix-socket", dead, "--strategy", "h3"],
            "cannot go over --unix-socket",
        ),
    ] {
        let mut all = vec!["bench", "https://localhost/", "-n", "1"];
        all.extend(args);
        let out = run(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{all:?}: {err}");
        assert!(err.contains(says), "{all:?}: {err}");
    }
    let r = bench_json(&[
        "http://localhost/",
        "--unix-socket",
        dead,
        "-n",
        "3",
        "-c",
        "1",
    ]);
    let s = scenario(&r);
    assert_eq!(u(&s["requests"]["errors"]["connect"]), 3, "{s}");
}

/// `watch -- curl --unix-socket ...`: the request went over a Unix socket, which a TCP
/// capture cannot see; the report says so plainly instead of blaming the client.
#[test]
fn watch_says_it_sees_tcp_only() {
    let _machine = shared();
    if !root("watch") {
        return;
    }
    let n = nginx_unix();
    let plain = n.dir.join("plain.sock");
    let (code, v) = json_command(
        "watch",
        &[],
        &[
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "--unix-socket",
            plain.to_str().unwrap(),
            "http://localhost/",
        ],
    );
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(
        requests_and_connections(&n),
        (1, 1),
        "curl's request reached nginx"
    );
    assert_eq!(v["headline"]["code"], "no_connection", "{v}");
    let text = v["headline"]["text"].as_str().unwrap();
    assert!(
        text.contains("watch sees TCP only: a Unix socket's traffic"),
        "{text}"
    );
}

/// A process the test started, stopped (SIGINT, then SIGKILL) when dropped unless taken.
struct Stopping(Option<std::process::Child>);

impl Drop for Stopping {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            stop_child(c, "-INT");
        }
    }
}

/// `serve --listen unix:PATH --tls-listen unix:PATH`: bench over each socket (close:
/// a connection per request) and curl (a client that is not handshake's) reach it; the
/// server's own count at its end equals theirs, and it removes its socket files.
#[test]
fn serve_listens_on_unix_sockets() {
    let _machine = shared();
    let d = Dir::new("serve-unix");
    let dir = &d.0;
    let (plain, tls, ca) = (
        dir.join("plain.sock"),
        dir.join("tls.sock"),
        dir.join("ca.pem"),
    );
    let srv = std::process::Command::new(bin())
        .args(["serve", "--listen"])
        .arg(format!("unix:{}", plain.display()))
        .arg("--tls-listen")
        .arg(format!("unix:{}", tls.display()))
        .arg("--cacert-out")
        .arg(&ca)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Stopped by its PID however the test ends.
    let mut srv = Stopping(Some(srv));
    let t = std::time::Instant::now();
    while !(plain.exists() && tls.exists() && ca.exists()) {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(10),
            "serve did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (p, s, c) = (
        plain.to_str().unwrap(),
        tls.to_str().unwrap(),
        ca.to_str().unwrap(),
    );
    let mut conns = 0;
    for (url, sock) in [("http://localhost/", p), ("https://localhost/", s)] {
        let r = bench_json(&[
            url,
            "--unix-socket",
            sock,
            "--cacert",
            c,
            "--strategy",
            "close",
            "-n",
            "5",
        ]);
        let sc = scenario(&r);
        assert_eq!(u(&sc["requests"]["ok"]), 5, "{url}: {sc}");
        conns += u(&sc["connections"]["opened"]);
    }
    assert_eq!(conns, 10);
    let curl = std::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--unix-socket",
            p,
            "http://localhost/",
            "http://localhost/",
        ])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&curl.stdout), "200200");
    let mut srv = srv.0.take().unwrap();
    stop_child(&mut srv, "-INT");
    let out = srv.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    // bench's 10 connections and curl's one (its two requests on it).
    assert!(
        err.contains("11 connections accepted") && err.contains("12 requests"),
        "{err}"
    );
    assert!(
        !plain.exists() && !tls.exists(),
        "the socket files are removed"
    );
}

/// compare over a Unix socket (nginx's, TLS): every row's requests reach nginx (its
/// count equals the report's connections and requests), HTTP/3 is left out because a
/// Unix socket carries a byte stream (not for want of an answer), and no round trip is
/// claimed from the socket's connects.
#[test]
fn compare_over_a_unix_socket_says_why_http3_is_left_out() {
    let _machine = shared();
    let n = nginx_unix();
    let (tls, ca) = (n.dir.join("tls.sock"), n.dir.join("ca.pem"));
    let before = requests_and_connections(&n);
    let v = compare_json(&[
        "https://localhost/",
        "--unix-socket",
        tls.to_str().unwrap(),
        "--cacert",
        ca.to_str().unwrap(),
        "-n",
        "10",
        "--rounds",
        "1",
    ]);
    let after = requests_and_connections(&n);
    let c = &v["comparison"];
    let left: Vec<&str> = c["left_out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["text"].as_str().unwrap())
        .collect();
    assert!(
        left.iter().any(|t| t.starts_with(
            "h3-close, h3-0rtt, h3: HTTP/3 runs over QUIC, on UDP, and --unix-socket"
        )),
        "{left:?}"
    );
    for g in c["rtt_ms"].as_array().unwrap() {
        assert!(g["rtt_ms"].is_null() && g["round_trips"] == false, "{g}");
    }
    let rows = c["rows"].as_array().unwrap();
    assert!(
        rows.iter().any(|r| r["strategy"] == "keepalive"),
        "{rows:?}"
    );
    // Each row's run (probes aside) is in nginx's log: at least 10 requests a row.
    assert!(
        after.0 - before.0 >= 10 * rows.len() as u64,
        "{after:?} {before:?}"
    );
    // nginx's connections: the rows' and the offers probes' (h2 by ALPN, early data).
    let opened = opened_in_all(&v);
    let seen = after.1 - before.1;
    assert!(
        seen >= opened && seen <= opened + 4,
        "nginx {seen}, the rows {opened}"
    );
}

/// A bench that fails against `url` with `extra`: its JSON, and its stderr.
fn failing_bench(url: &str, extra: &[&str]) -> (Value, String) {
    let mut args = vec!["bench", url, "-n", "3", "-c", "1", "--json"];
    args.extend_from_slice(extra);
    let out = run(&args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a run that measured nothing fails"
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("the report, failed or not");
    let violations = schema_violations("report.schema.json", &v);
    assert!(violations.is_empty(), "{violations:?}");
    (v, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The hop the leading error's example was met at, as the JSON says.
fn hop_of(v: &Value, key: &str) -> (String, String, String) {
    let h = &scenario(v)["requests"]["error_hops"][key];
    let s = |f: &str| {
        h[f].as_str()
            .unwrap_or_else(|| panic!("{key}: {h}"))
            .to_string()
    };
    (s("via"), s("address"), s("origin"))
}

/// A failure names the hop it met and the address tried, never the URL's host when the
/// connection went elsewhere (issue 56, item 1): `--connect-to`, `--resolve`, a Unix
/// socket, and an origin a redirect led to (nginx answered the first hop itself: its
/// log has each redirect).
#[test]
fn a_failure_names_the_hop_it_met_not_the_urls_host() {
    let _machine = shared();
    let dead = free_port();
    // --connect-to: the URL's name is never dialed.
    let url = format!("http://a.test:{dead}/");
    let rule = format!("a.test:{dead}:127.0.0.1:{dead}");
    let (v, err) = failing_bench(&url, &["--connect-to", &rule]);
    assert_eq!(
        hop_of(&v, "refused"),
        (
            "connect_to".into(),
            format!("127.0.0.1:{dead}"),
            format!("http://a.test:{dead}")
        )
    );
    assert!(
        err.contains(&format!(
            "nothing accepts connections at 127.0.0.1:{dead}, where --connect-to sends a.test:{dead}"
        )),
        "{err}"
    );
    // --resolve: the address given, not the name.
    let url = format!("http://localhost:{dead}/");
    let pin = format!("localhost:{dead}:127.0.0.9");
    let (v, err) = failing_bench(&url, &["--resolve", &pin]);
    assert_eq!(hop_of(&v, "refused").1, format!("127.0.0.9:{dead}"));
    assert!(
        err.contains("the address --resolve gives localhost"),
        "{err}"
    );
    // A Unix socket whose server is gone (its file stays behind).
    let dir = Dir::new("hop-unix");
    let path = dir.0.join("gone.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let sock = path.to_str().unwrap();
    let (v, err) = failing_bench("http://localhost/", &["--unix-socket", sock]);
    assert_eq!(
        hop_of(&v, "refused"),
        (
            "unix_socket".into(),
            sock.to_string(),
            "http://localhost:80".into()
        )
    );
    assert!(
        err.contains(&format!("at the Unix socket {sock}")) && !err.contains("at localhost"),
        "{err}"
    );
    let trace = run(&[
        "trace",
        "http://localhost/",
        "--unix-socket",
        sock,
        "--json",
    ]);
    assert_eq!(trace.status.code(), Some(1));
    let t: Value = serde_json::from_slice(&trace.stdout).unwrap();
    let said = t["error"].as_str().unwrap();
    assert!(
        said.contains(&format!("at the Unix socket {sock}")),
        "{said}"
    );
    // A redirect to an origin where nothing listens: the first origin answered.
    let n = Nginx::start_servers("log_format st '$status';", 1, |ports, d| {
        format!(
            "server {{ listen 127.0.0.1:{}; access_log {}/access.log st; \
             location / {{ return 302 http://127.0.0.1:{dead}/next; }} }}",
            ports[0],
            d.display()
        )
    });
    let Some(n) = n else { return };
    let (v, err) = failing_bench(&n.url(), &["-L"]);
    let to = format!("http://127.0.0.1:{dead}");
    assert_eq!(
        hop_of(&v, "refused"),
        ("redirect".into(), format!("127.0.0.1:{dead}"), to.clone())
    );
    assert!(
        err.contains(&format!("the origin {to} a redirect led to"))
            && err.contains("the first origin answered")
            && !err.contains(&format!("connections at 127.0.0.1:{}", n.port)),
        "{err}"
    );
    let log = std::fs::read_to_string(n.dir.join("access.log")).unwrap();
    let answered: Vec<&str> = log.lines().collect();
    assert_eq!(answered, ["302"; 3], "nginx answered each first hop");
    assert_eq!(scenario(&v)["requests"]["redirects"], 3, "{v}");
}

/// A bench of 3 requests against `url` with `extra` and `--timeout 300ms` that fails
/// each with `key`: its stderr.
fn timed_out(url: &str, extra: &[&str], key: &str) -> String {
    let mut args = extra.to_vec();
    args.extend(["--timeout", "300ms"]);
    let (v, err) = failing_bench(url, &args);
    assert_eq!(u(&scenario(&v)["requests"]["errors"][key]), 3, "{v}");
    err
}

/// A server (or proxy) that takes the request and never answers: the failure is a
/// timeout at the hop that was sent the request, named with its address, its count the
/// server's own (each attempt a connection it accepted). Through a plain-HTTP proxy the
/// client cannot tell the proxy's stall from the origin's behind it: both are said, with
/// how to tell. Reached by --connect-to, the address tried is named, not the URL's host.
/// A server that never speaks TLS, or stops mid-body, is said so at its address.
#[test]
fn a_stalled_hop_is_named_with_the_timeout() {
    let _machine = shared();
    let silent = |mut c: std::net::TcpStream, _| {
        let _ = c.set_read_timeout(Some(std::time::Duration::from_secs(5)));
        while read_head(&mut c).is_some() {}
    };
    // Through a proxy that stalls: the origin is never dialed.
    let (proxy, accepted) = script_server(silent);
    let origin = format!("http://127.0.0.1:{}/", free_port());
    let err = timed_out(&origin, &["-x", &format!("http://{proxy}")], "timeout_wait");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert!(
        err.contains(&format!(
            "the proxy http://{proxy} was sent the request, but no response came in time: the proxy, or the origin"
        )) && err.contains("doctor the origin without the proxy"),
        "{err}"
    );
    // A TCP server that never speaks TLS, and one that stops mid-body: each said at
    // the URL's address, with what it did.
    let (mute, _) = script_server(silent);
    let err = timed_out(&format!("https://{mute}/"), &[], "timeout_tls");
    assert!(
        err.contains(&format!(
            "{mute} accepted the TCP connection but did not finish the TLS handshake in time"
        )),
        "{err}"
    );
    let (cut, _) = script_server(|mut c: std::net::TcpStream, _| {
        if read_head(&mut c).is_some() {
            write(&mut c, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
            std::thread::sleep(std::time::Duration::from_secs(2));
        }
    });
    let err = timed_out(&format!("http://{cut}/"), &[], "timeout_receive");
    assert!(
        err.contains(&format!(
            "{cut} began its response but did not finish it in time"
        )),
        "{err}"
    );
    // --connect-to a stalled address: it is named, and the URL's name is not.
    let (stalled, accepted) = script_server(silent);
    let url = "http://a.test:80/";
    let rule = format!("a.test:80:{stalled}");
    let err = timed_out(url, &["--connect-to", &rule], "timeout_wait");
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert!(
        err.contains(&format!(
            "{stalled}, where --connect-to sends a.test:80 accepted the connection and was sent the request, but no response came in time"
        )),
        "{err}"
    );
}
