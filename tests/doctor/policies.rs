//! `handshake doctor` against servers with known policies: the
//! embedded server set up with each policy, and real nginx with its own config.

use std::time::Duration;

use crate::common::*;
use serde_json::Value;

fn doctor(args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["doctor", "--json"];
    all.extend_from_slice(args);
    let out = run(&all);
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("doctor {args:?}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code(), v)
}

/// The measured idle range contains `secs` and is at most 10 % or 0.5 s wide.
fn assert_idle(v: &Value, secs: f64) {
    let i = &v["idle_timeout"];
    let lo = i["at_least_s"].as_f64().unwrap();
    let hi = i["at_most_s"].as_f64().expect("a close was seen");
    assert!(
        lo <= secs + 0.05 && secs <= hi + 0.05,
        "idle range [{lo}, {hi}] misses {secs}"
    );
    assert!(
        hi - lo <= 0.5f64.max(0.1 * hi) + 1e-9,
        "idle range [{lo}, {hi}] too wide"
    );
}

#[test]
fn doctor_finds_keepalive_off() {
    let _machine = shared();
    let srv = start(ServerConfig {
        keepalive: false,
        ..ServerConfig::default()
    });
    let (code, v) = doctor(&[&srv.http_url().unwrap()]);
    assert_eq!(code, Some(1), "a problem was found");
    assert_eq!(v["http11"]["persistent"], false);
    assert_eq!(v["http11"]["connection_header"], "close");
    assert!(
        problems(&v)[0].contains("keep-alive is off"),
        "{:?}",
        problems(&v)
    );
    assert!(v["idle_timeout"].is_null() && v["max_requests"].is_null());
    srv.stop();
}

#[test]
fn doctor_finds_idle_timeout_and_max_requests() {
    let _machine = shared();
    let srv = start(ServerConfig {
        idle_timeout: Duration::from_secs(2),
        max_requests_per_connection: Some(50),
        ..ServerConfig::default()
    });
    let (code, v) = doctor(&[&srv.http_url().unwrap(), "--max-idle", "10s"]);
    assert_eq!(code, Some(1));
    assert_eq!(v["max_requests"]["limit"], 50);
    assert_idle(&v, 2.0);
    assert_eq!(
        v["idle_timeout"]["claimed_s"], 2.0,
        "the Keep-Alive header of the HTTP/1.0 answer"
    );
    let p = problems(&v);
    assert!(p.iter().any(|x| x.contains("after 50 requests")), "{p:?}");
    assert!(
        p.iter()
            .any(|x| x.contains("closes idle connections after") && x.contains("keep it under")),
        "{p:?}"
    );
    srv.stop();
}

/// A server that claims `Keep-Alive: timeout=60` probed for only 2 s: the claim is
/// neither confirmed nor contradicted, and doctor says the bound it reached ("at least
/// 2 s"), never that the header "matches".
#[test]
fn a_claim_beyond_the_probe_is_a_bound_not_a_match() {
    let _machine = shared();
    let srv = start(ServerConfig {
        idle_timeout: Duration::from_secs(60),
        ..ServerConfig::default()
    });
    let (_, v) = doctor(&[
        &srv.http_url().unwrap(),
        "--max-idle",
        "2s",
        "--max-requests",
        "20",
    ]);
    srv.stop();
    assert_eq!(v["idle_timeout"]["claimed_s"], 60.0, "{v}");
    assert!(v["idle_timeout"]["at_most_s"].is_null(), "{v}");
    let found: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["text"].as_str().unwrap())
        .collect();
    assert!(!found.iter().any(|f| f.contains("matches")), "{found:?}");
    assert!(
        found.iter().any(
            |f| f.contains("`Keep-Alive: timeout=60` header is not contradicted")
                && f.contains("at least 2.00 s")
        ),
        "{found:?}"
    );
}

#[test]
fn doctor_on_an_http10_server() {
    let _machine = shared();
    // Honours Connection: keep-alive on HTTP/1.0 ...
    let srv = start(ServerConfig {
        http10: true,
        ..ServerConfig::default()
    });
    let (_, v) = doctor(&[&srv.http_url().unwrap(), "--max-idle", "1s"]);
    assert_eq!(v["http10_keep_alive"]["persistent"], true);
    assert_eq!(v["http10_keep_alive"]["reused"], true);
    assert_eq!(v["http10"]["persistent"], false);
    assert_eq!(v["http11"]["http_version"], "HTTP/1.0");
    srv.stop();
    // ... or ignores it.
    let srv = start(ServerConfig {
        http10: true,
        keepalive: false,
        ..ServerConfig::default()
    });
    let (code, v) = doctor(&[&srv.http_url().unwrap()]);
    assert_eq!(code, Some(1));
    assert_eq!(v["http10_keep_alive"]["persistent"], false);
    assert!(problems(&v)
        .iter()
        .any(|p| p.contains("ignores `Connection: keep-alive` on HTTP/1.0")));
    srv.stop();
}

#[test]
fn doctor_on_a_healthy_tls_server_finds_no_problem() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    // Removed when the test ends, also when it fails.
    let dir = Dir::new("doctor");
    let ca = dir.0.join("ca.pem");
    std::fs::write(&ca, &srv.ca_pem).unwrap();
    let (code, v) = doctor(&[
        &srv.https_url().unwrap(),
        "--cacert",
        ca.to_str().unwrap(),
        "--max-idle",
        "2s",
    ]);
    assert!(problems(&v).is_empty(), "{:?}", problems(&v));
    assert_eq!(code, Some(0));
    assert_eq!(v["tls"]["version"], "TLSv1.3");
    assert_eq!(v["tls"]["resumption"], true);
    // The embedded server offers HTTP/2 by ALPN.
    assert_eq!(v["tls"]["alpn_selected"], "h2");
    assert_eq!(v["tls"]["offers_h2"], true);
    assert!(v["tls"]["resumed_handshake_ms"].as_f64().unwrap() > 0.0);
    assert!(
        v["idle_timeout"]["at_most_s"].is_null(),
        "open for the whole --max-idle"
    );
    assert!(v["idle_timeout"]["at_least_s"].as_f64().unwrap() >= 1.9);
    assert!(v["max_requests"]["limit"].is_null());
    assert_eq!(v["max_requests"]["probed"], 1000);
    let policy = v["policy"]["text"].as_str().unwrap();
    let said = format!(
        "Policy: HTTP/1.1 keep-alive; HTTP/1.0 keep-alive only when asked; at least 1000 requests per connection; idle connections kept at least {:.1} s; TLSv1.3 with resumption",
        v["idle_timeout"]["at_least_s"].as_f64().unwrap()
    );
    assert!(policy.starts_with(&said), "{policy}\nwanted {said}");
    let streams = &v["h2"]["settings"]["max_concurrent_streams"];
    assert!(
        policy.contains(&format!("; HTTP/2 ({streams} streams at once)")),
        "{policy}"
    );
    srv.stop();
}

#[test]
fn doctor_on_nginx_with_a_3s_timeout_and_100_requests() {
    let _machine = shared();
    let Some(ng) = Nginx::start(
        "keepalive_timeout 3s; keepalive_requests 100;",
        "return 200 \"ok\\n\";",
    ) else {
        return;
    };
    let (code, v) = doctor(&[&ng.url(), "--max-idle", "10s"]);
    assert_eq!(code, Some(1));
    assert_eq!(v["max_requests"]["limit"], 100);
    assert_idle(&v, 3.0);
    assert_eq!(v["http10_keep_alive"]["reused"], true);
    // The headline: nginx's policy, in its own figures.
    let i = &v["idle_timeout"];
    // Its evidence: the request limit nginx has, and the idle timeout as the bounds the
    // probes found (nginx's 3 s between them).
    let figure = |name: &str| {
        v["policy"]["evidence"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["figure"] == name)
            .unwrap_or_else(|| panic!("no {name}: {}", v["policy"]))
            .clone()
    };
    assert_eq!(figure("max_requests.limit")["value"], 100.0);
    let b = figure("idle_timeout (at_least_s, at_most_s)")["bounds"].clone();
    let (lo, hi) = (b[0].as_f64().unwrap(), b[1].as_f64().unwrap());
    assert!(lo <= 3.0 && 3.0 <= hi + 0.1, "{b}");
    assert_eq!(v["policy"]["code"], "policy");
    assert_eq!(
        v["policy"]["text"],
        format!(
            "Policy: HTTP/1.1 keep-alive; HTTP/1.0 keep-alive only when asked; 100 requests per connection; idle timeout {:.1}-{:.1} s.",
            i["at_least_s"].as_f64().unwrap(),
            i["at_most_s"].as_f64().unwrap()
        )
    );
}

/// lighttpd with `server.max-keep-alive-idle = 2`: its timer ticks once a second, so an
/// idle connection closes anywhere from 2 to 3-odd seconds after it went idle, by when
/// in the tick it did. The test's own connections, going idle at moments spread over a
/// second, time each close (the server's FIN); doctor's bound (the idle time every one
/// of its probes supports) is no longer than the earliest of them, and no shorter than
/// the setting, so a pool that keeps under it meets no closed connection.
#[test]
fn doctor_on_lighttpd_keeps_under_the_earliest_close_of_its_coarse_timer() {
    let _machine = serial();
    let Some(bin) = ["/usr/sbin/lighttpd", "/usr/bin/lighttpd"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
    else {
        assert!(
            std::env::var_os("HANDSHAKE_SKIP_LIGHTTPD").is_some(),
            "lighttpd is needed (Debian package lighttpd; scripts/test installs it), or HANDSHAKE_SKIP_LIGHTTPD=1"
        );
        return;
    };
    let dir = Dir::new("lighttpd");
    let port = free_port();
    std::fs::write(dir.0.join("index.html"), "hello\n").unwrap();
    let d = dir.0.display();
    std::fs::write(
        dir.0.join("lighttpd.conf"),
        format!(
            "server.document-root = \"{d}\"\nserver.bind = \"127.0.0.1\"\nserver.port = {port}\n\
             server.max-keep-alive-idle = 2\nserver.pid-file = \"{d}/pid\"\n\
             server.errorlog = \"{d}/error.log\"\nindex-file.names = ( \"index.html\" )\n"
        ),
    )
    .unwrap();
    let mut child = std::process::Command::new(bin)
        .args(["-D", "-f", &dir.path("lighttpd.conf")])
        .spawn()
        .unwrap();
    struct Stop<'a>(&'a mut std::process::Child);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _stop = Stop(&mut child);
    wait_listening(port, "lighttpd", &dir.0.join("error.log"));
    // The server's own closes: eight connections going idle 125 ms apart.
    let closes: Vec<f64> = (0..8)
        .map(|k| {
            std::thread::sleep(Duration::from_millis(if k == 0 { 0 } else { 125 }));
            std::thread::spawn(move || {
                use std::io::{Read, Write};
                let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
                s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
                let mut buf = [0u8; 4096];
                let mut got = Vec::new();
                while !got.ends_with(b"hello\n") {
                    let n = s.read(&mut buf).unwrap();
                    assert!(n > 0, "closed before the answer");
                    got.extend_from_slice(&buf[..n]);
                }
                let idle = std::time::Instant::now();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "an idle close");
                idle.elapsed().as_secs_f64()
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|t| t.join().unwrap())
        .collect();
    let earliest = closes.iter().copied().fold(f64::INFINITY, f64::min);
    let latest = closes.iter().copied().fold(0.0, f64::max);
    eprintln!("lighttpd's closes: {closes:.2?}");
    assert!(earliest >= 1.9 && latest <= 4.5, "{closes:?}");
    let (code, v) = doctor(&[&format!("http://127.0.0.1:{port}/"), "--max-idle", "5s"]);
    assert_eq!(code, Some(1), "{v}");
    let i = &v["idle_timeout"];
    let lo = i["at_least_s"].as_f64().unwrap();
    let hi = i["at_most_s"].as_f64().expect("a close was seen");
    // The bound every probe supports, and a tick (lighttpd's second) under it: a
    // connection may close a tick before any probe saw.
    let seen = lo.min(hi);
    let bound = (seen - 1.0).max(0.0);
    assert!(
        bound <= earliest + 0.05 && seen >= 1.9,
        "doctor's bound {bound} s against lighttpd's closes {closes:?}: {i}"
    );
    let problem = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["code"] == "idle_timeout_short")
        .unwrap_or_else(|| panic!("{}", v["problems"]));
    let text = problem["text"].as_str().unwrap();
    assert!(
        text.contains(&format!(
            "keep it under {} s",
            handshake::api::fmt::ms(bound)
        )),
        "{text}"
    );
    // Identified by its Server header, it is given its own setting, and no other's.
    assert!(
        text.contains("(lighttpd: server.max-keep-alive-idle, default 5;")
            && text.contains("its timer ticks every 1.00 s")
            && !text.contains("nginx:"),
        "{text}"
    );
    // Where its probes saw the close move, it says so, not one timeout between two.
    if i["varies"] == true {
        assert!(text.contains("by when each connection went idle"), "{text}");
        assert!(lo > hi, "{i}");
    }
}

#[test]
fn doctor_on_nginx_with_keepalive_off() {
    let _machine = shared();
    let Some(ng) = Nginx::start("keepalive_timeout 0;", "return 200 \"ok\\n\";") else {
        return;
    };
    let (code, v) = doctor(&[&ng.url()]);
    assert_eq!(code, Some(1));
    assert_eq!(v["http11"]["persistent"], false);
    assert!(problems(&v)[0].contains("keep-alive is off"));
    assert_eq!(
        v["policy"]["text"],
        "Policy: HTTP/1.1 closes after each response; HTTP/1.0 closes."
    );
}

/// Apache with a short request limit and idle timeout: doctor recognises it by its
/// `Server` header and names Apache's own directives in its fixes (it named nginx's
/// `keepalive_requests` before); the limit it finds is the one Apache's own log shows
/// (the most requests on one connection).
#[test]
fn doctor_names_apaches_own_settings() {
    let _machine = shared();
    let Some(ap) = Apache::start("KeepAlive On\nMaxKeepAliveRequests 5\nKeepAliveTimeout 2") else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/index.html", ap.port);
    let (code, v) = doctor(&[&url, "--max-idle", "4s", "--max-requests", "50"]);
    assert_eq!(code, Some(1), "{v}");
    assert!(v["server"].as_str().unwrap().starts_with("Apache/"), "{v}");
    assert_eq!(v["server_kind"], "apache");
    let limit = u(&v["max_requests"]["limit"]);
    assert_eq!(limit, ap.most_keepalives_logged() + 1, "{v}");
    assert_idle(&v, 2.0);
    let p = problems(&v);
    assert!(
        p.iter()
            .any(|x| x.contains(&format!("after {limit} requests"))
                && x.ends_with("(Apache: MaxKeepAliveRequests, default 100).")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|x| x.contains("(Apache: KeepAliveTimeout, default 5; if a proxy in front passes on Apache's `Server` header, it may be the proxy's: HAProxy: timeout http-keep-alive;")),
        "{p:?}"
    );
    assert!(!p.iter().any(|x| x.contains("nginx")), "{p:?}");
}

/// doctor says each probe on stderr, with the time so far and what bounds the probe
/// (each wait at most --timeout; the idle probe's rounds of waits up to --max-idle); a
/// probe still running after 15 s says so with its bound; `--no-progress` silences it.
/// (The server's idle timeout is 60 s: the 16 s idle probe runs to its limit.)
#[test]
fn doctor_says_what_it_probes_and_for_how_long() {
    let _machine = shared();
    let srv = start(ServerConfig {
        idle_timeout: Duration::from_secs(60),
        ..ServerConfig::default()
    });
    let url = srv.http_url().unwrap();
    let out = run(&[
        "doctor",
        &url,
        "--max-idle",
        "16s",
        "--max-requests",
        "20",
        "--json",
    ]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("the report on stdout");
    assert!(v["idle_timeout"]["at_most_s"].is_null(), "{v}");
    // Lines longer than the width (80 here) go on under their text: joined back.
    let err = String::from_utf8_lossy(&out.stderr).replace(&format!("\n{}", " ".repeat(18)), " ");
    for says in [
        "does HTTP/1.1 and HTTP/1.0 keep the connection? (3 connections; each wait at most 10.0 s, --timeout)",
        "requests per connection: up to 20 on one connection (--max-requests)",
        "idle timeout: connections held idle, then narrowed: at most 5 rounds of idle waits up to 16.0 s (--max-idle)",
        "idle timeout: 15 s so far (at most 5 rounds of idle waits up to 16.0 s (--max-idle))",
    ] {
        assert!(err.contains(says), "{says:?} in\n{err}");
    }
    let times: Vec<f64> = err
        .lines()
        .map(|l| {
            let t = l.strip_prefix("doctor [").unwrap_or_else(|| panic!("{l}"));
            t.split(" s]").next().unwrap().trim().parse().unwrap()
        })
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{err}");
    assert!(times.iter().any(|t| *t >= 15.0), "{err}");
    let quiet = run(&[
        "doctor",
        &url,
        "--max-idle",
        "1s",
        "--max-requests",
        "5",
        "--json",
        "--no-progress",
    ]);
    assert!(
        quiet.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    srv.stop();
}
