//! `handshake audit --proxy-mode`: the audit as the client's forward proxy. Real clients
//! (curl, Python `requests`, Node's fetch through undici's proxy agent, Go's `net/http`
//! with `ProxyFromEnvironment`) find it through HTTPS_PROXY and HTTP_PROXY and keep their
//! own URLs; nginx is the origin behind it, and its log (`$connection`) is the ground
//! truth for the tunnels, requests and connections the audit reports.

use std::collections::BTreeSet;

use crate::common::*;
use serde_json::Value;

/// nginx as the origin: a plain server and a TLS one (h2 offered), its certificate for
/// `localhost` and `origin.test`, each request logged with its connection's serial number.
fn origin() -> Nginx {
    Nginx::start_servers(
        "log_format conn '$connection $ssl_session_reused $server_protocol $request';",
        2,
        |ports, d| {
            write_certs(d, &["localhost", "origin.test"]);
            let d = d.display();
            format!(
                "server {{ listen 127.0.0.1:{}; access_log {d}/access.log conn; \
                 location / {{ return 200 \"ok\\n\"; }} }}\n\
                 server {{ listen 127.0.0.1:{} ssl http2; ssl_certificate {d}/cert.pem; \
                 ssl_certificate_key {d}/key.pem; ssl_session_cache shared:hs:1m; \
                 access_log {d}/access.log conn; \
                 location / {{ return 200 \"ok\\n\"; }} }}",
                ports[0], ports[1]
            )
        },
    )
    .expect("nginx")
}

/// nginx's log lines since `from`: (requests, distinct connections, the lines).
fn logged(n: &Nginx, from: usize) -> (u64, u64, Vec<String>) {
    let text = std::fs::read_to_string(n.dir.join("access.log")).unwrap_or_default();
    let lines: Vec<String> = text.lines().skip(from).map(str::to_string).collect();
    let conns: BTreeSet<&str> = lines.iter().filter_map(|l| l.split(' ').next()).collect();
    (lines.len() as u64, conns.len() as u64, lines)
}

fn lines(n: &Nginx) -> usize {
    logged(n, 0).2.len()
}

/// `handshake audit --json --proxy-mode [opts] -- command` with `env` for the command
/// (the test's own proxy variables removed: audit sets its own); (exit code, report,
/// stderr).
fn audit(opts: &[&str], env: &[(&str, &str)], command: &[&str]) -> (Option<i32>, Value, String) {
    crate::common::audit(&[&["--proxy-mode"], opts].concat(), env, command)
}

/// The proxy's figures; requests seen are answered, one ending per connection.
fn proxy(v: &Value) -> &Value {
    let t = total(v);
    assert_eq!(u(&t["requests"]), u(&t["responses"]), "{t}");
    let endings: u64 = t["endings"].as_object().unwrap().values().map(u).sum();
    assert_eq!(
        endings,
        u(&t["connections"]),
        "one ending per connection: {t}"
    );
    &t["proxy"]
}

fn codes(v: &Value) -> Vec<String> {
    v["verdict"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap().to_string())
        .collect()
}

/// nginx, its CA's path, and the URLs `a` and `b` on its TLS server.
fn tls_origin() -> (Nginx, String, String, String) {
    let n = origin();
    let ca = n.dir.join("ca.pem").display().to_string();
    let tls = format!("https://localhost:{}/", n.ports[1]);
    let (a, b) = (format!("{tls}a"), format!("{tls}b"));
    (n, ca, a, b)
}

#[test]
fn curl_through_the_proxy_one_tunnel_two_exchanges() {
    let _machine = shared();
    let (n, ca, a, b) = tls_origin();
    // Two URLs of one origin in one curl: one tunnel, two exchanges (HTTP/1.1 inside:
    // one turn each; HTTP/2 below).
    let from = lines(&n);
    let cmd = [
        "curl",
        "-sf",
        "--http1.1",
        "--cacert",
        &ca,
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        &a,
        &b,
    ];
    let (code, v, err) = audit(&[], &[], &cmd);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("a forward proxy on http://127.0.0.1:"),
        "{err}"
    );
    let p = proxy(&v);
    let (requests, conns, log) = logged(&n, from);
    assert_eq!((requests, conns), (2, 1), "nginx: {log:?}");
    assert_eq!(u(&p["tunnels"]), 1, "{p}");
    assert_eq!(
        u(&p["tunnels_by_origin"][format!("localhost:{}", n.ports[1])]),
        1
    );
    assert_eq!(u(&p["tunneled_requests"]), requests, "{p}");
    assert_eq!(p["requests_estimated"], true);
    assert_eq!(u(&p["plain_requests"]), 0);
    let t = total(&v);
    assert_eq!(u(&t["connections"]), conns);
    assert_eq!(u(&t["tls_handshakes"]["full"]), 1, "{t}");
    // One tunnel, one ending: curl closes once done, and which FIN the relay sees first
    // is a race (the origin answers curl's close_notify with its own and its FIN; with a
    // TLS record still coming, curl's close is a reset).
    let ended = |k: &str| t["endings"][k].as_u64().unwrap_or(0);
    assert_eq!(
        ended("client_closed") + ended("client_reset") + ended("origin_closed"),
        1,
        "{t}"
    );
    assert_eq!(
        v["headline"]["text"],
        "2 requests (estimated from TLS records) over 1 connection: reused (2.0 requests per connection)."
    );
    assert!(codes(&v).contains(&"through_proxy".to_string()));

    // HTTP/2 inside the tunnel: its connection's own frames (the preface and SETTINGS)
    // may take a turn of their own, so the estimate is the requests or one more, and
    // the verdict says so.
    let from = lines(&n);
    let cmd = [
        "curl",
        "-sf",
        "--cacert",
        &ca,
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        &a,
        &b,
    ];
    let (code, v, _) = audit(&[], &[], &cmd);
    assert_eq!(code, Some(0));
    let p = proxy(&v);
    let (requests, conns, log) = logged(&n, from);
    assert_eq!((requests, conns), (2, 1));
    assert!(log.iter().all(|l| l.contains("HTTP/2.0")), "{log:?}");
    assert_eq!(u(&p["tunnels"]), 1);
    let estimated = u(&p["tunneled_requests"]);
    assert!((requests..=requests + 1).contains(&estimated), "{p}");
    assert!(verdict(&v).contains("offered HTTP/2"), "{}", verdict(&v));
}

#[test]
fn curl_asking_to_close_inside_tls_opens_a_tunnel_per_request_and_resumes_its_session() {
    let _machine = shared();
    let (n, ca, a, b) = tls_origin();
    // `Connection: close` inside TLS: each tunnel carries one exchange; curl's second
    // handshake resumes its first session.
    let from = lines(&n);
    let cmd = [
        "curl",
        "-sf",
        "--http1.1",
        "-H",
        "Connection: close",
        "--cacert",
        &ca,
        "-o",
        "/dev/null",
        "-o",
        "/dev/null",
        &a,
        &b,
    ];
    let (code, v, err) = audit(&[], &[], &cmd);
    assert_eq!(code, Some(0), "{err}");
    let p = proxy(&v);
    let (requests, conns, log) = logged(&n, from);
    assert_eq!((requests, conns), (2, 2));
    // nginx's `$ssl_session_reused`: "r" on a resumed session's requests.
    let resumed = log
        .iter()
        .filter(|l| l.split(' ').nth(1) == Some("r"))
        .count() as u64;
    assert_eq!(resumed, 1, "curl resumes its first session: {log:?}");
    assert_eq!(u(&p["tunnels"]), conns);
    assert_eq!(u(&p["tunneled_requests"]), requests);
    let t = total(&v);
    // Each tunnel ends with one response; which side closes first is a race (curl
    // closes as soon as it has read a `Connection: close` response, with a reset when
    // the origin's close_notify is already there unread), and the cause read from the
    // endings says whose closes they were.
    let origin = t["endings"]["origin_closed"].as_u64().unwrap_or(0);
    let client = t["endings"]["client_closed"].as_u64().unwrap_or(0)
        + t["endings"]["client_reset"].as_u64().unwrap_or(0);
    assert_eq!(origin + client, 2, "{t}");
    assert_eq!(
        (
            u(&t["tls_handshakes"]["full"]),
            u(&t["tls_handshakes"]["resumed"])
        ),
        (1, 1),
        "{t}"
    );
    let cause = match (origin, client) {
        (2, 0) => "not_reused_origin_closed_tunnels",
        (0, 2) => "not_reused_client_closed_tunnels",
        _ => "not_reused_tunnels_closed_after_one",
    };
    assert_eq!(v["headline"]["code"], cause, "{}", v["headline"]);
}

#[test]
fn plain_requests_go_in_absolute_form_and_are_forwarded_each_counted() {
    let _machine = shared();
    let n = origin();
    let plain = format!("http://localhost:{}/", n.ports[0]);
    let from = lines(&n);
    let urls: Vec<String> = (0..3).map(|i| format!("{plain}p{i}")).collect();
    let mut cmd = vec!["curl", "-sf"];
    for u in &urls {
        cmd.extend(["-o", "/dev/null", u.as_str()]);
    }
    let (code, v, _) = audit(&[], &[], &cmd);
    assert_eq!(code, Some(0));
    let p = proxy(&v);
    let (requests, _, log) = logged(&n, from);
    assert_eq!(requests, 3);
    assert!(
        log.iter().any(|l| l.ends_with("GET /p1 HTTP/1.1")),
        "{log:?}"
    );
    assert_eq!(u(&p["plain_requests"]), 3);
    assert_eq!(u(&p["tunnels"]), 0);
    assert_eq!(p["requests_estimated"], false);
    assert_eq!(
        u(&p["plain_by_origin"][format!("localhost:{}", n.ports[0])]),
        3
    );
    let t = total(&v);
    assert_eq!((u(&t["connections"]), u(&t["requests"])), (1, 3), "{t}");
    assert_eq!(u(&t["http_versions"]["HTTP/1.1"]), 3);
}

#[test]
fn python_requests_without_a_session_opens_a_tunnel_per_request_and_with_one_reuses_it() {
    let _machine = shared();
    let n = origin();
    let ca = n.dir.join("ca.pem").display().to_string();
    let url = format!("https://localhost:{}/x", n.ports[1]);
    let script = |session: bool| {
        let get = if session { "s.get" } else { "requests.get" };
        format!(
            "import sys, requests\ns = requests.Session()\nfor i in range(3):\n    r = {get}(sys.argv[1], verify=sys.argv[2])\n    assert r.status_code == 200\n"
        )
    };
    for (session, tunnels) in [(false, 3), (true, 1)] {
        let from = lines(&n);
        let s = script(session);
        let (code, v, err) = audit(&[], &[], &["python3", "-c", &s, &url, &ca]);
        assert_eq!(code, Some(0), "{err}");
        let p = proxy(&v);
        let (requests, conns, _) = logged(&n, from);
        assert_eq!((requests, conns), (3, tunnels), "session {session}");
        assert_eq!(u(&p["tunnels"]), conns, "session {session}: {p}");
        assert_eq!(
            u(&p["tunneled_requests"]),
            requests,
            "session {session}: {p}"
        );
        if !session {
            assert_eq!(
                v["headline"]["code"], "not_reused_client_closed_tunnels",
                "{}",
                v["headline"]
            );
        }
    }
}

#[test]
fn go_proxy_from_environment_and_node_fetch_with_undicis_proxy_agent() {
    let _machine = shared();
    let n = origin();
    let ca = n.dir.join("ca.pem").display().to_string();
    let port = n.ports[1];
    // Go leaves loopback names out of ProxyFromEnvironment: the client asks for
    // origin.test, which only the audit resolves (to nginx on loopback). A Transport of
    // its own with no TLSNextProto speaks HTTP/1.1: one exchange per request inside
    // TLS, so the estimate can be held to nginx's count exactly.
    let tmp = Dir::new("audit-proxy-go");
    let go = go_build(
        &tmp.0,
        "get",
        "package main\n\nimport (\n\t\"crypto/tls\"\n\t\"io\"\n\t\"net/http\"\n\t\"os\"\n)\n\nfunc main() {\n\tc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}}\n\tfor i := 0; i < 4; i++ {\n\t\tresp, err := c.Get(os.Args[1])\n\t\tif err != nil {\n\t\t\tpanic(err)\n\t\t}\n\t\tio.Copy(io.Discard, resp.Body)\n\t\tresp.Body.Close()\n\t}\n}\n",
    );
    let from = lines(&n);
    let resolve = format!("origin.test:{port}:127.0.0.1");
    let url = format!("https://origin.test:{port}/g");
    let (code, v, err) = audit(
        &["--resolve", &resolve],
        &[("SSL_CERT_FILE", &ca)],
        &[&go, &url],
    );
    assert_eq!(code, Some(0), "{err}");
    let p = proxy(&v);
    let (requests, conns, _) = logged(&n, from);
    assert_eq!((requests, conns), (4, 1));
    assert_eq!(u(&p["tunnels"]), 1, "{p}");
    assert_eq!(u(&p["tunnels_by_origin"][format!("origin.test:{port}")]), 1);
    assert_eq!(u(&p["tunneled_requests"]), 4, "{p}");

    // Node 20's fetch reads no proxy variable; undici's EnvHttpProxyAgent does.
    let modules =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/node_modules");
    assert!(
        modules.join("undici").exists(),
        "scripts/test installs undici (npm ci in tests/browser)"
    );
    let script = "const fs = require('fs');\nconst { EnvHttpProxyAgent, fetch } = require('undici');\nconst ca = fs.readFileSync(process.argv[2]);\nconst dispatcher = new EnvHttpProxyAgent({ requestTls: { ca } });\n(async () => {\n  for (let i = 0; i < 3; i++) {\n    const r = await fetch(process.argv[1], { dispatcher });\n    await r.text();\n    if (r.status !== 200) process.exit(1);\n  }\n  await dispatcher.close();\n})();\n";
    let from = lines(&n);
    let url = format!("https://localhost:{port}/n");
    let (code, v, err) = audit(
        &[],
        &[("NODE_PATH", modules.to_str().unwrap())],
        &["node", "-e", script, &url, &ca],
    );
    assert_eq!(code, Some(0), "{err}");
    let p = proxy(&v);
    let (requests, conns, log) = logged(&n, from);
    // undici may open a second connection while the first is being given back.
    assert_eq!(requests, 3, "{log:?}");
    assert_eq!(u(&p["tunnels"]), conns, "{p}");
    assert_eq!(u(&p["tunneled_requests"]), requests, "{p}");
}

#[test]
fn a_dead_origin_a_request_not_meant_for_a_proxy_and_bad_flags() {
    let _machine = shared();
    // A CONNECT to a port nobody listens on: the client gets 502 and fails; the tunnel is
    // counted and ends as the origin's.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let url = format!("https://localhost:{port}/");
    let (code, v, said) = audit(
        &[],
        &[],
        &[
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "curl got %{http_connect} to its CONNECT\n",
            &url,
        ],
    );
    assert_ne!(code, Some(0), "curl fails through a 502 and audit says so");
    let t = total(&v);
    assert_eq!(u(&t["proxy"]["tunnels"]), 1, "{t}");
    assert_eq!(u(&t["endings"]["origin_closed"]), 1, "{t}");
    // The 502 is the audit's own, said so with its reason: curl's count of it is the
    // truth (issue 56, item 1).
    assert!(said.contains("curl got 502 to its CONNECT"), "{said}");
    let own = &t["answered_by_audit"]["502"];
    assert_eq!(u(&own["count"]), 1, "{t}");
    let reason = own["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!(
            "could not reach the origin localhost:{port}: connect"
        )),
        "{reason}"
    );
    assert_eq!(v["verdict"][0]["code"], "answered_by_audit", "{v}");
    let text = v["verdict"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("The audit itself answered 1 connection with 502")
            && text.contains("not a server's")
            && !text.contains("credentials"),
        "{text}"
    );
    // Asked directly (no proxy form): answered 400, saying what a proxy takes.
    let (code, v, _) = audit(
        &[],
        &[],
        &[
            "curl",
            "-s",
            "--noproxy",
            "*",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "{url}x",
        ],
    );
    assert_eq!(code, Some(0));
    let t = total(&v);
    assert_eq!(u(&t["status_codes"]["400"]), 1, "{t}");
    // The 400 is the audit's own: the request was in origin form.
    assert_eq!(u(&t["answered_by_audit"]["400"]["count"]), 1, "{t}");
    let headline = v["headline"]["text"].as_str().unwrap();
    assert!(
        headline.ends_with("The audit itself answered 1 of 1 request with 400."),
        "{headline}"
    );
    let text = v["verdict"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("it is not using the audit as its forward proxy"),
        "{text}"
    );
    for (args, says) in [
        (
            vec!["audit", "--proxy-mode", "--upstream", "http://127.0.0.1:1/"],
            "--upstream",
        ),
        (vec!["audit", "--proxy-mode", "--tls"], "--tls"),
        (vec!["audit", "--resolve", "a:1:127.0.0.1"], "--proxy-mode"),
        (
            vec!["audit", "--proxy-mode", "--resolve", "a:1"],
            "HOST:PORT:ADDR",
        ),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
