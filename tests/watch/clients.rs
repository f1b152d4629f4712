//! `handshake watch`: real clients (curl, Node, Python) watched from the kernel while they
//! talk to a server that is not handshake's own (tests/count_server.py: Python's
//! http.server, and OpenSSL through Python's ssl for TLS), which counts its connections,
//! requests and full/resumed handshakes. The watched figures equal the server's counts;
//! a second process talking to the same server at the same time is left out; `watch --
//! CMD` and `audit -- CMD` agree; without privileges watch says so and exits 2.

use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::*;
use serde_json::Value;

/// tests/count_server.py on a free loopback port; stopped by its PID on drop.
struct CountServer {
    child: Child,
    port: u16,
    host: &'static str,
    dir: Dir,
}

impl CountServer {
    fn start(tag: &str, tls: bool) -> CountServer {
        CountServer::start_on(tag, tls, "127.0.0.1")
    }

    fn start_on(tag: &str, tls: bool, host: &'static str) -> CountServer {
        let dir = Dir::new(&format!("watch-{tag}"));
        let mut cmd = Command::new("python3");
        cmd.arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/count_server.py"
        ))
        .args(["--host", host, "--stats", &dir.path("stats.json")]);
        if tls {
            // A self-signed certificate for localhost, by OpenSSL's own tool, which Python's
            // ssl (OpenSSL) takes as its own CA.
            let st = Command::new("openssl")
                .args([
                    "req",
                    "-x509",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:P-256",
                    "-nodes",
                    "-days",
                    "1",
                    "-subj",
                    "/CN=localhost",
                    "-addext",
                    "subjectAltName=DNS:localhost",
                ])
                .args([
                    "-keyout",
                    &dir.path("key.pem"),
                    "-out",
                    &dir.path("cert.pem"),
                ])
                .stderr(Stdio::null())
                .status()
                .expect("openssl runs");
            assert!(st.success());
            std::fs::copy(dir.path("cert.pem"), dir.path("ca.pem")).unwrap();
            cmd.args([
                "--cert",
                &dir.path("cert.pem"),
                "--key",
                &dir.path("key.pem"),
            ]);
        }
        let mut child = cmd.stdout(Stdio::piped()).spawn().expect("python3 runs");
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("PORT ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("count_server.py said {line:?}"));
        CountServer {
            child,
            port,
            host,
            dir,
        }
    }

    fn url(&self) -> String {
        if self.host.contains(':') {
            format!("http://[{}]:{}/", self.host, self.port)
        } else {
            format!("http://{}:{}/", self.host, self.port)
        }
    }

    fn ca(&self) -> String {
        self.dir.path("ca.pem")
    }

    /// Everything the server has counted so far.
    fn stats(&self) -> Value {
        serde_json::from_str(&std::fs::read_to_string(self.dir.path("stats.json")).unwrap())
            .unwrap()
    }

    /// (connections, requests, tls_full, tls_resumed) so far.
    fn counts(&self) -> [u64; 4] {
        let v = self.stats();
        ["connections", "requests", "tls_full", "tls_resumed"].map(|k| u(&v[k]))
    }
}

impl Drop for CountServer {
    fn drop(&mut self) {
        stop_child(&mut self.child, "-TERM");
    }
}

/// `handshake watch --json [opts] -- command...`: (exit code, report).
fn watch(opts: &[&str], command: &[&str]) -> (Option<i32>, Value) {
    json_command("watch", opts, command)
}

/// The report matches docs/watch.schema.json.
fn check_schema(v: &Value) {
    let errors = schema_violations("watch.schema.json", v);
    assert!(errors.is_empty(), "{errors:?}\n{v}");
}

/// The server's counts over a watched command, and the watch's report: every figure the
/// watch gives for the command's connections must equal the server's.
fn watched_against(srv: &CountServer, command: &[&str]) -> (Value, [u64; 4]) {
    let before = srv.counts();
    let (code, v) = watch(&[], command);
    assert_eq!(code, Some(0), "{command:?}: {v}");
    let after = srv.counts();
    let delta = [0, 1, 2, 3].map(|i| after[i] - before[i]);
    check_schema(&v);
    let t = total(&v);
    assert_eq!(u(&v["capture"]["kernel_drops"]), 0, "{v}");
    assert_eq!(u(&t["connections"]), delta[0], "connections: {v}");
    assert_eq!(u(&t["requests"]), delta[1], "requests: {v}");
    assert_eq!(u(&t["responses"]), delta[1], "responses: {v}");
    assert_eq!(u(&t["tls_handshakes"]["full"]), delta[2], "full TLS: {v}");
    assert_eq!(
        u(&t["tls_handshakes"]["resumed"]),
        delta[3],
        "resumed TLS: {v}"
    );
    (v, delta)
}

#[test]
fn curl_several_urls_reuse_one_connection_and_close_opens_one_each() {
    let _serial = serial();
    let srv = CountServer::start("curl", false);
    let url = srv.url();
    let (a, b, c) = (format!("{url}a"), format!("{url}b"), format!("{url}c"));
    let (v, d) = watched_against(
        &srv,
        &[
            "curl",
            "-sf",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            &a,
            &b,
            &c,
        ],
    );
    assert_eq!(d[..2], [1, 3], "{v}");
    assert!(verdict(&v).contains("reused"), "{v}");
    assert_eq!(
        v["headline"]["text"],
        "3 requests over 1 connection: reused (3.0 requests per connection).",
        "{v}"
    );
    let (v, d) = watched_against(
        &srv,
        &[
            "curl",
            "-sf",
            "-H",
            "Connection: close",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            &a,
            &b,
            &c,
        ],
    );
    assert_eq!(d[..2], [3, 3], "{v}");
    // Each connection ended with a FIN from one side or the other (Python closes after
    // `Connection: close`; curl, knowing it, may close first).
    let t = total(&v);
    let fins = t["endings"]["server_fin"].as_u64().unwrap_or(0)
        + t["endings"]["client_fin"].as_u64().unwrap_or(0);
    assert_eq!(fins, 3, "{v}");
    assert!(verdict(&v).contains("no reuse"), "{v}");
    // Whichever side closed first, the cause is the client's: its request heads asked
    // to close (read from the cleartext heads, as audit reads them).
    assert_eq!(t["client_asked_close"]["connection_close"], 3, "{v}");
    let h = v["headline"]["text"].as_str().unwrap();
    assert_eq!(
        h,
        "3 requests over 3 connections: not reused, because the client sent `Connection: close`, on 3 of 3 connections.",
        "{v}"
    );
}

#[test]
fn node_default_agent_reuses_and_agent_false_does_not() {
    let _serial = serial();
    assert!(have("node"), "node is needed for this test");
    let srv = CountServer::start("node", false);
    let script = |agent: &str| {
        format!(
            "const http = require('http'); let n = 0; const go = () => http.get(process.argv[1], {{ {agent} }}, r => {{ r.resume(); r.on('end', () => {{ if (++n < 4) setTimeout(go, 10); else process.exit(0); }}); }}); go();"
        )
    };
    let url = srv.url();
    let (v, d) = watched_against(&srv, &["node", "-e", &script(""), &url]);
    assert_eq!(
        d[..2],
        [1, 4],
        "Node's default agent keeps one connection alive: {v}"
    );
    let (v, d) = watched_against(&srv, &["node", "-e", &script("agent: false"), &url]);
    assert_eq!(
        d[..2],
        [4, 4],
        "agent: false opens a connection per request: {v}"
    );
}

#[test]
fn python_http_client_reuses_and_urllib_does_not() {
    let _serial = serial();
    let srv = CountServer::start("python", false);
    let port = srv.port.to_string();
    let reuse = "import http.client,sys\nc=http.client.HTTPConnection('127.0.0.1',int(sys.argv[1]))\nfor i in range(5):\n c.request('GET','/x');c.getresponse().read()\n";
    let (v, d) = watched_against(&srv, &["python3", "-c", reuse, &port]);
    assert_eq!(d[..2], [1, 5], "{v}");
    let urllib = "import urllib.request,sys\nfor i in range(3):\n urllib.request.urlopen('http://127.0.0.1:%s/y' % sys.argv[1]).read()\n";
    let (v, d) = watched_against(&srv, &["python3", "-c", urllib, &port]);
    assert_eq!(d[..2], [3, 3], "urllib sends Connection: close: {v}");
}

/// A TLS client through Python's ssl (OpenSSL): two connections, one request each.
/// Arguments: port, CA file, "resume" (the second resumes the first's session) or "new",
/// and "1.2" (at most TLS 1.2, offering ALPN http/1.1) or "any".
const TLS_CLIENT: &str = "import socket,ssl,sys\nctx=ssl.create_default_context(cafile=sys.argv[2])\nif sys.argv[4]=='1.2':\n ctx.maximum_version=ssl.TLSVersion.TLSv1_2\n ctx.set_alpn_protocols(['http/1.1'])\nsess=None\nfor i in range(2):\n s=ctx.wrap_socket(socket.create_connection(('127.0.0.1',int(sys.argv[1]))),server_hostname='localhost',session=sess)\n s.sendall(b'GET / HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n')\n try:\n  while s.recv(65536): pass\n except (ssl.SSLError, OSError): pass\n sess=None if sys.argv[3]=='new' else s.session\n s.close()\n";

/// TLS through Python's ssl (OpenSSL) on both sides: a full handshake, then one that
/// resumes the session; and curl over TLS with two URLs on one connection.
#[test]
fn tls_full_and_resumed_handshakes_equal_the_servers() {
    let _serial = serial();
    let srv = CountServer::start("tls", true);
    let port = srv.port.to_string();
    let ca = srv.ca();
    let (v, d) = watched_against(
        &srv,
        &["python3", "-c", TLS_CLIENT, &port, &ca, "new", "any"],
    );
    assert_eq!(d, [2, 2, 2, 0], "without the session: {v}");
    let (v, d) = watched_against(
        &srv,
        &["python3", "-c", TLS_CLIENT, &port, &ca, "resume", "any"],
    );
    assert_eq!(d, [2, 2, 1, 1], "{v}");
    let t = total(&v);
    // One request per connection: no idle gap (the handshake's turns are not gaps).
    assert_eq!(u(&t["idle_gaps"]["count"]), 0, "{v}");
    assert_eq!(u(&t["tls_sni"]["localhost"]), 2, "{v}");
    assert_eq!(u(&t["tls_versions"]["1.3"]), 2, "{v}");
    assert_eq!(t["requests_estimated"], true);
    let url = format!("https://localhost:{}/", srv.port);
    let resolve = format!("localhost:{}:127.0.0.1", srv.port);
    let (v, d) = watched_against(
        &srv,
        &[
            "curl",
            "-sf",
            "--http1.1",
            "--cacert",
            &ca,
            "--resolve",
            &resolve,
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            &url,
            &url,
        ],
    );
    assert_eq!(d, [1, 2, 1, 0], "{v}");
    // TLS 1.3 hides the server's ALPN choice; curl --http1.1 offered only http/1.1.
    assert_eq!(u(&total(&v)["tls_alpn_offered"]["http/1.1"]), 1, "{v}");
}

/// A second process talks to the same server during the watch: its connections are
/// seen but left out of the watched command's figures.
#[test]
fn another_process_on_the_same_server_is_not_counted() {
    let _serial = serial();
    let srv = CountServer::start("other", false);
    let url = srv.url();
    let mut noise = Command::new("sh")
        .args([
            "-c",
            &format!("for i in $(seq 40); do curl -sf -o /dev/null -H 'Connection: close' {url}n; sleep 0.02; done"),
        ])
        .spawn()
        .unwrap();
    let port = srv.port.to_string();
    let slow = "import http.client,sys,time\nc=http.client.HTTPConnection('127.0.0.1',int(sys.argv[1]))\nfor i in range(5):\n c.request('GET','/w');c.getresponse().read();time.sleep(0.1)\n";
    let (code, v) = watch(&[], &["python3", "-c", slow, &port]);
    noise.wait().unwrap();
    assert_eq!(code, Some(0));
    let t = total(&v);
    assert_eq!(u(&t["connections"]), 1, "{v}");
    assert_eq!(u(&t["requests"]), 5, "{v}");
    assert!(
        u(&v["other_connections"]) > 0,
        "the other process's were seen: {v}"
    );
}

/// `--port`: every connection to that server, from any process.
#[test]
fn port_mode_counts_every_client_of_the_endpoint() {
    let _serial = serial();
    let srv = CountServer::start("port", false);
    let url = srv.url();
    let port = srv.port.to_string();
    let before = srv.counts();
    let w = Command::new(bin())
        .args(["watch", "--json", "--port", &port, "-d", "2s"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..2 {
        let st = Command::new("curl")
            .args(["-sf", "-o", "/dev/null", "-o", "/dev/null", &url, &url])
            .status()
            .unwrap();
        assert!(st.success());
    }
    let out = w.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_schema(&v);
    let after = srv.counts();
    let t = total(&v);
    assert_eq!(u(&t["connections"]), after[0] - before[0], "{v}");
    assert_eq!(u(&t["requests"]), after[1] - before[1], "{v}");
    assert_eq!((u(&t["connections"]), u(&t["requests"])), (2, 4));
    // One curl after the other, each with its one connection: never two open at once.
    assert_eq!(u(&v["peak_concurrent_connections"]), 1, "{v}");
    assert_eq!(v["endpoints"][0]["endpoint"], format!("127.0.0.1:{port}"));
}

/// `--port` while a client holds its one connection open past the watch's end, after
/// two curls left their sockets in TIME_WAIT to the same server before the watch began:
/// no watched connection ended, so there are no lifetimes ("none ended", count 0) and no
/// TIME_WAIT of theirs; the earlier sockets, which `ss` lists, are not counted.
#[test]
fn time_wait_and_lifetimes_are_only_the_watched_connections() {
    let _serial = serial();
    let srv = CountServer::start("tw-earlier", false);
    let url = srv.url();
    let port = srv.port.to_string();
    for _ in 0..2 {
        let st = Command::new("curl")
            .args(["-sf", "-o", "/dev/null", &url])
            .status()
            .unwrap();
        assert!(st.success());
    }
    // Each side may close first (curl, or the server on seeing curl's end): at least one
    // curl socket is left in TIME_WAIT for the watch to leave out.
    let earlier = time_wait_sockets("dst", srv.port).len();
    assert!(earlier >= 1, "the curls' sockets in TIME_WAIT: {earlier}");
    let holder = "import http.client,sys,time\nc=http.client.HTTPConnection('127.0.0.1',int(sys.argv[1]))\nc.request('GET','/g');c.getresponse().read()\ntime.sleep(30)\n";
    let watched = |json: bool| -> String {
        let before = srv.counts();
        let mut args = vec!["watch", "--port", &port, "-d", "2s"];
        if json {
            args.insert(1, "--json");
        }
        let w = Command::new(bin())
            .args(&args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let mut client = Command::new("python3")
            .args(["-c", holder, &port])
            .spawn()
            .unwrap();
        let out = w.wait_with_output().unwrap();
        stop_child(&mut client, "-TERM");
        assert!(out.status.success(), "{out:?}");
        let after = srv.counts();
        assert_eq!(
            after[0] - before[0],
            1,
            "the server accepted the one connection"
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let v: Value = serde_json::from_str(&watched(true)).unwrap();
    check_schema(&v);
    let t = total(&v);
    assert_eq!(u(&t["connections"]), 1, "{v}");
    assert_eq!(u(&t["endings"]["open_at_end"]), 1, "{v}");
    assert_eq!(u(&t["lifetimes_ms"]["count"]), 0, "{v}");
    assert_eq!(t["time_wait"], serde_json::json!({}), "{v}");
    let text = watched(false);
    assert!(
        text.contains("  lifetimes             none ended\n"),
        "{text}"
    );
    assert!(!text.contains("TIME_WAIT"), "{text}");
}

/// The same client under `watch -- CMD` and `audit -- CMD`: the same connections and
/// requests.
#[test]
fn watch_and_audit_agree_on_the_same_client() {
    let _serial = serial();
    let srv = CountServer::start("agree", false);
    let url = srv.url();
    let curl = |u: &str| {
        vec![
            "curl".to_string(),
            "-sf".into(),
            "-o".into(),
            "/dev/null".into(),
            "-o".into(),
            "/dev/null".into(),
            format!("{u}a"),
            format!("{u}b"),
        ]
    };
    let w = curl(&url);
    let w: Vec<&str> = w.iter().map(String::as_str).collect();
    let (_, wv) = watch(&[], &w);
    let a = curl("{url}");
    let mut args = vec!["audit", "--json", "--"];
    args.extend(a.iter().map(String::as_str));
    let out = run(&args);
    let av: Value = serde_json::from_slice(&out.stdout).unwrap();
    for k in [
        "connections",
        "requests",
        "reuse_ratio",
        "unused_connections",
    ] {
        assert_eq!(total(&wv)[k], total(&av)[k], "{k}: watch {wv} audit {av}");
    }
    assert_eq!(
        total(&wv)["requests_per_connection"],
        total(&av)["requests_per_connection"]
    );
    assert_eq!(
        total(&wv)["idle_gaps"]["count"],
        total(&av)["idle_gaps"]["count"],
        "watch {wv} audit {av}"
    );
}

/// Without CAP_NET_RAW: a message that says what is missing, and exit 2. Bad options
/// are usage errors too.
#[test]
fn without_privileges_and_with_bad_options_it_says_so() {
    let _serial = serial();
    let copy = std::env::temp_dir().join(format!("handshake-watch-bin-{}", std::process::id()));
    std::fs::copy(bin(), &copy).unwrap();
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(&copy)
        .args(["watch", "-d", "1s"])
        .output()
        .expect("setpriv runs");
    let _ = std::fs::remove_file(&copy);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("CAP_NET_RAW"), "{err}");
    for (args, says) in [
        (vec!["watch", "--pid", "999999999"], "no such process"),
        (vec!["watch", "--host", "not-an-ip", "-d", "1s"], "--host"),
        (vec!["watch", "-d", "soon"], "duration"),
        (vec!["watch", "--buffer", "0", "-d", "1s"], "--buffer"),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

/// A program whose connections last well under a millisecond: handshake's own bench with
/// a new connection per request, as the watched command (the server stays Python's).
/// The kernel records each of its connections as it opens, so none is missed.
#[test]
fn every_short_connection_of_a_command_is_counted() {
    let _serial = serial();
    let srv = CountServer::start("short", false);
    let url = srv.url();
    let (v, d) = watched_against(
        &srv,
        &[
            bin(),
            "bench",
            &url,
            "-n",
            "300",
            "-c",
            "4",
            "--strategy",
            "close",
            "--no-progress",
        ],
    );
    assert_eq!(d[..2], [300, 300], "{v}");
    assert_eq!(v["capture"]["attribution"], "cgroup", "{v}");
    // Four workers, each with one connection at a time (closed before the next opens):
    // never more than four open, and they overlap.
    let peak = u(&v["peak_concurrent_connections"]);
    assert!((2..=4).contains(&peak), "{v}");
    assert_eq!(u(&v["capture"]["attribution_lost"]), 0, "{v}");
    assert_eq!(u(&v["other_connections"]), 0, "{v}");
    // The cgroup made for the command is gone.
    let mine = "handshake-watch-";
    let left: Vec<_> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            post.starts_with("cgroup2 ")
                .then(|| pre.split(' ').nth(4).unwrap().to_string())
        })
        .flat_map(|m| std::fs::read_dir(m).unwrap().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with(mine))
        .collect();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}

/// Go's net/http: a connection goes back to the pool only when the body was read to
/// EOF; closing it unread ends the connection.
#[test]
fn go_reading_bodies_reuses_and_closing_them_unread_does_not() {
    let _serial = serial();
    let srv = CountServer::start("go", false);
    let dir = Dir::new("watch-go");
    let client = |read: bool| {
        let body = if read {
            "io.Copy(io.Discard, resp.Body)\n\t\tresp.Body.Close()"
        } else {
            "resp.Body.Close()\n\t\t_ = io.Discard"
        };
        format!(
            "package main\n\nimport (\n\t\"io\"\n\t\"net/http\"\n\t\"os\"\n)\n\nfunc main() {{\n\tfor i := 0; i < 5; i++ {{\n\t\tresp, err := http.Get(os.Args[1])\n\t\tif err != nil {{\n\t\t\tpanic(err)\n\t\t}}\n\t\t{body}\n\t}}\n}}\n"
        )
    };
    let read = go_build(&dir.0, "read", &client(true));
    let unread = go_build(&dir.0, "unread", &client(false));
    let url = srv.url();
    let (v, d) = watched_against(&srv, &[&read, &url]);
    assert_eq!(d[..2], [1, 5], "{v}");
    // Between five requests in turn on one connection, four idle gaps.
    assert_eq!(u(&total(&v)["idle_gaps"]["count"]), 4, "{v}");
    let (v, d) = watched_against(&srv, &[&unread, &url]);
    assert_eq!(d[..2], [5, 5], "{v}");
    assert!(verdict(&v).contains("no reuse"), "{v}");
}

/// TLS clients that open a connection per request: with a session cache, every
/// handshake after the first resumes; without, every one is full. Go (crypto/tls) and
/// Node (its https agent caches sessions; `agent: false` does not), against OpenSSL.
#[test]
fn go_and_node_tls_resume_with_a_session_cache_and_not_without() {
    let _serial = serial();
    assert!(have("node"), "node is needed for this test");
    let srv = CountServer::start("tls-resume", true);
    let dir = Dir::new("watch-go-tls");
    let go = |cache: &str| {
        format!(
            r#"package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
)

func main() {{
	pem, err := os.ReadFile(os.Args[2])
	if err != nil {{
		panic(err)
	}}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c := &http.Client{{Transport: &http.Transport{{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{{RootCAs: roots, ServerName: "localhost", ClientSessionCache: {cache}}},
	}}}}
	for i := 0; i < 3; i++ {{
		resp, err := c.Get(os.Args[1])
		if err != nil {{
			panic(err)
		}}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}}
}}
"#
        )
    };
    let with = go_build(&dir.0, "cache", &go("tls.NewLRUClientSessionCache(8)"));
    let without = go_build(&dir.0, "nocache", &go("nil"));
    let url = format!("https://127.0.0.1:{}/", srv.port);
    let ca = srv.ca();
    let (v, d) = watched_against(&srv, &[&with, &url, &ca]);
    assert_eq!(d, [3, 3, 1, 2], "Go with a session cache: {v}");
    let (v, d) = watched_against(&srv, &[&without, &url, &ca]);
    assert_eq!(d, [3, 3, 3, 0], "Go without: {v}");
    // The server issues tickets (Go with a cache resumed 2), but the wire cannot show
    // them inside TLS 1.3: both causes are said, with how to tell them apart.
    let f = finding(&v["verdict"], "tls_never_resumed");
    let text = f["text"].as_str().unwrap();
    assert!(
        text.contains("all 3 TLS handshakes were full: the client resumed no session, or the server issued none")
            && text.contains("`handshake doctor URL` says whether the server resumes"),
        "{text}"
    );

    let node = |agent: &str| {
        format!(
            "const https = require('https'), fs = require('fs'); const ca = fs.readFileSync(process.argv[2]); {agent}; let n = 0; const go = () => https.get({{ host: '127.0.0.1', port: +process.argv[1], servername: 'localhost', ca, agent, headers: {{ connection: 'close' }} }}, r => {{ r.resume(); r.on('end', () => {{ if (++n < 3) setTimeout(go, 50); else process.exit(0); }}); }}); go();"
        )
    };
    let port = srv.port.to_string();
    let (v, d) = watched_against(
        &srv,
        &[
            "node",
            "-e",
            &node("const agent = new https.Agent({ keepAlive: false })"),
            &port,
            &ca,
        ],
    );
    assert_eq!(d, [3, 3, 1, 2], "Node's agent caches sessions: {v}");
    let (v, d) = watched_against(
        &srv,
        &["node", "-e", &node("const agent = false"), &port, &ca],
    );
    assert_eq!(d, [3, 3, 3, 0], "agent: false: {v}");
}

/// Python requests: a Session keeps one connection; `requests.get` makes a session,
/// and so a connection, per call.
#[test]
fn python_requests_session_reuses_and_requests_get_does_not() {
    let _serial = serial();
    let srv = CountServer::start("requests", false);
    let url = srv.url();
    let session = "import requests,sys\ns=requests.Session()\nfor i in range(4):\n s.get(sys.argv[1]).content\n";
    let (v, d) = watched_against(&srv, &["python3", "-c", session, &url]);
    assert_eq!(d[..2], [1, 4], "{v}");
    let get = "import requests,sys\nfor i in range(3):\n requests.get(sys.argv[1]).content\n";
    let (v, d) = watched_against(&srv, &["python3", "-c", get, &url]);
    assert_eq!(d[..2], [3, 3], "{v}");
}

/// IPv6: curl to [::1], two URLs over one connection.
#[test]
fn ipv6_connections_are_seen() {
    let _serial = serial();
    let srv = CountServer::start_on("ipv6", false, "::1");
    let url = srv.url();
    let (v, d) = watched_against(
        &srv,
        &[
            "curl",
            "-sf",
            "-g",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            &format!("{url}a"),
            &format!("{url}b"),
        ],
    );
    assert_eq!(d[..2], [1, 2], "{v}");
    assert_eq!(v["endpoints"][0]["endpoint"], format!("[::1]:{}", srv.port));
}

/// A command that ends early, or is killed: the watch ends with it and reports its
/// status; the connection it had open is counted, closed by its kernel.
#[test]
fn a_command_that_exits_early_or_is_killed() {
    let _serial = serial();
    let srv = CountServer::start("early", false);
    let url = srv.url();
    let t = std::time::Instant::now();
    let (code, v) = watch(
        &["-d", "60s"],
        &["sh", "-c", &format!("curl -sf -o /dev/null {url}; exit 3")],
    );
    assert_eq!(code, Some(3), "{v}");
    assert_eq!(v["exit_status"], 3);
    assert!(t.elapsed() < Duration::from_secs(30), "{v}");
    assert_eq!(u(&total(&v)["connections"]), 1, "{v}");
    let before = srv.counts();
    let killed = "import http.client,os,sys\nc=http.client.HTTPConnection('127.0.0.1',int(sys.argv[1]))\nc.request('GET','/k');c.getresponse().read()\nos.kill(os.getpid(),9)\n";
    let (code, v) = watch(&[], &["python3", "-c", killed, &srv.port.to_string()]);
    let after = srv.counts();
    assert_eq!(code, Some(128 + 9), "{v}");
    check_schema(&v);
    let t = total(&v);
    assert_eq!(u(&t["connections"]), after[0] - before[0], "{v}");
    assert_eq!(u(&t["requests"]), 1, "{v}");
    let endings: u64 = t["endings"].as_object().unwrap().values().map(u).sum();
    assert_eq!(
        endings, 1,
        "the connection ended when its process died: {v}"
    );
}

/// The cgroup v2 hierarchy's mount point.
fn cgroup2_root() -> std::path::PathBuf {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .find_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            post.starts_with("cgroup2 ")
                .then(|| pre.split(' ').nth(4).unwrap().into())
        })
        .expect("a cgroup v2 hierarchy is mounted")
}

/// `--pid` of a running Python client that already has a connection open: alone in a
/// cgroup (made here), its connections are told from others' in the kernel; sharing
/// the machine's cgroup, by socket owners, and the report says which. Either way the
/// open connection is "already open", the requests after the watch began are counted,
/// and another process on the same server at the same time is left out.
#[test]
fn pid_with_a_connection_already_open_and_another_process_beside_it() {
    let _serial = serial();
    let srv = CountServer::start("pid", false);
    let url = srv.url();
    let port = srv.port.to_string();
    // One request, then "ready"; 1.5 s later three more on the same connection and two
    // with urllib (a connection each); then it exits.
    let client = "import http.client,sys,time,urllib.request\nc=http.client.HTTPConnection('127.0.0.1',int(sys.argv[1]))\nc.request('GET','/0');c.getresponse().read()\nprint('ready',flush=True)\ntime.sleep(1.5)\nfor i in range(3):\n c.request('GET','/p');c.getresponse().read();time.sleep(0.05)\nfor i in range(2):\n urllib.request.urlopen('http://127.0.0.1:%s/u' % sys.argv[1]).read()\nc.close()\n";
    let cg = cgroup2_root().join(format!("handshake-test-{}", std::process::id()));
    std::fs::create_dir_all(&cg).unwrap();
    struct Rmdir(std::path::PathBuf);
    impl Drop for Rmdir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let _rmdir = Rmdir(cg.clone());
    for own_cgroup in [true, false] {
        let base = srv.counts();
        let join = if own_cgroup {
            format!("echo $$ > {}/cgroup.procs && ", cg.display())
        } else {
            String::new()
        };
        let mut c = Command::new("sh")
            .args([
                "-c",
                &format!("{join}exec python3 -c \"$0\" \"$1\""),
                client,
                &port,
            ])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(c.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "ready");
        // The server counts a request after sending its response, so the client can say
        // "ready" first: wait for the count before taking it as the starting point.
        let t = std::time::Instant::now();
        while srv.counts()[1] < base[1] + 1 && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        let before = srv.counts();
        let mut noise = Command::new("sh")
            .args([
                "-c",
                &format!("for i in $(seq 30); do curl -sf -o /dev/null -H 'Connection: close' {url}n; sleep 0.03; done"),
            ])
            .spawn()
            .unwrap();
        let pid = c.id().to_string();
        let (code, v) = watch(&["--pid", &pid, "-d", "30s"], &[]);
        let status = c.wait().unwrap();
        noise.wait().unwrap();
        assert!(status.success());
        assert_eq!(code, Some(0), "{v}");
        check_schema(&v);
        let noise_conns = 30;
        let after = srv.counts();
        let t = total(&v);
        let mode = if own_cgroup { "cgroup" } else { "sockets" };
        assert_eq!(v["capture"]["attribution"], mode, "{v}");
        assert_eq!(u(&t["already_open"]), 1, "{v}");
        assert_eq!(
            u(&t["connections"]),
            after[0] - before[0] - noise_conns + 1,
            "the new ones and the one already open: {v}"
        );
        assert_eq!(u(&t["connections"]), 3, "{v}");
        assert_eq!(u(&t["requests"]), after[1] - before[1] - noise_conns, "{v}");
        assert!(u(&v["other_connections"]) > 0, "{v}");
        if !own_cgroup {
            assert!(
                v["capture"]["attribution_note"]
                    .as_str()
                    .is_some_and(|n| n.contains("not its own")),
                "{v}"
            );
        }
    }
}

/// Three connections held open together, each used twice with 0.3 s between: the peak
/// of concurrent connections is the server's own peak, the idle gaps and lifetimes are
/// those of the client's schedule, and the client's sockets left in TIME_WAIT (it
/// closed first) are those `ss` lists.
#[test]
fn peak_concurrency_idle_gaps_lifetimes_and_time_wait() {
    let _serial = serial();
    let srv = CountServer::start("peak", false);
    let port = srv.port.to_string();
    let client = "import http.client,sys,time\ncs=[http.client.HTTPConnection('127.0.0.1',int(sys.argv[1])) for i in range(3)]\nfor r in range(2):\n for c in cs:\n  c.request('GET','/g');c.getresponse().read()\n time.sleep(0.3)\nfor c in cs:\n c.close()\n";
    let (v, d) = watched_against(&srv, &["python3", "-c", client, &port]);
    assert_eq!(d[..2], [3, 6], "{v}");
    let peak = u(&srv.stats()["peak_open"]);
    assert_eq!(peak, 3);
    assert_eq!(u(&v["peak_concurrent_connections"]), peak, "{v}");
    let t = total(&v);
    let gaps = &t["idle_gaps"];
    assert_eq!(u(&gaps["count"]), 3, "{v}");
    let (min, max) = (
        gaps["min_ms"].as_f64().unwrap(),
        gaps["max_ms"].as_f64().unwrap(),
    );
    assert!((250.0..1500.0).contains(&min) && max < 1500.0, "{gaps}");
    let life = t["lifetimes_ms"]["min"].as_f64().unwrap();
    assert!(life >= 300.0, "{v}");
    assert_eq!(u(&t["endings"]["client_fin"]), 3, "{v}");
    let sockets = time_wait_sockets("dst", srv.port);
    let listed = sockets.len() as u64;
    assert_eq!(listed, 3, "{sockets:?}");
    assert_eq!(u(&t["time_wait"]["client"]), listed, "{v}");
}

/// A capture buffer too small for the traffic: the kernel drops packets, and the report
/// says how many and that the figures may be short, rather than miss them silently.
#[test]
fn dropped_packets_are_counted_and_said() {
    let _serial = serial();
    let srv = CountServer::start("drops", false);
    let url = srv.url();
    let before = srv.counts();
    let (code, v) = watch(
        &["--buffer", "4096"],
        &[
            bin(),
            "bench",
            &url,
            "-n",
            "3000",
            "-c",
            "8",
            "--strategy",
            "close",
            "--no-progress",
        ],
    );
    let after = srv.counts();
    assert_eq!(code, Some(0), "{v}");
    check_schema(&v);
    let c = &v["capture"];
    let drops = u(&c["kernel_drops"]);
    assert!(drops > 0, "a 4 KiB buffer cannot hold 36,000 packets: {c}");
    assert_eq!(u(&c["packets"]) - drops, u(&c["segments"]), "{c}");
    assert!(
        verdict(&v).contains(&format!("The kernel dropped {drops} of")),
        "{v}"
    );
    let t = total(&v);
    assert!(u(&t["requests"]) <= after[1] - before[1], "{v}");
}

/// Pipelined requests on one connection: a chunked response (in parts, its first chunk
/// looking like a response head, with a trailer), a HEAD (a length and no body) and a
/// plain GET, sent at once by a raw-socket client; then curl fetching two chunked
/// responses in turn. Every request and response is counted once, as the server counts.
#[test]
fn chunked_bodies_head_and_pipelined_requests_are_counted_once() {
    let _serial = serial();
    let srv = CountServer::start("chunked", false);
    let port = srv.port.to_string();
    let pipelined = "import socket,sys\ns=socket.create_connection(('127.0.0.1',int(sys.argv[1])))\ns.sendall(b'GET /chunked HTTP/1.1\\r\\nHost: x\\r\\n\\r\\nHEAD / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\nGET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n')\nwhile s.recv(65536): pass\ns.close()\n";
    let (v, d) = watched_against(&srv, &["python3", "-c", pipelined, &port]);
    assert_eq!(d[..2], [1, 3], "{v}");
    let url = format!("{}chunked", srv.url());
    let (v, d) = watched_against(
        &srv,
        &[
            "curl",
            "-sf",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            &url,
            &url,
        ],
    );
    assert_eq!(d[..2], [1, 2], "{v}");
}

/// TLS 1.2 (the client caps the version): the resumed handshake is told by the session
/// id the server echoes, and the ALPN choice, visible in 1.2, is shown.
#[test]
fn tls_1_2_resumption_and_alpn_choice_are_seen() {
    let _serial = serial();
    let srv = CountServer::start("tls12", true);
    let port = srv.port.to_string();
    let ca = srv.ca();
    let (v, d) = watched_against(
        &srv,
        &["python3", "-c", TLS_CLIENT, &port, &ca, "resume", "1.2"],
    );
    assert_eq!(d, [2, 2, 1, 1], "{v}");
    let t = total(&v);
    assert_eq!(u(&t["tls_versions"]["1.2"]), 2, "{v}");
    assert_eq!(u(&t["tls_alpn"]["http/1.1"]), 2, "{v}");
}

/// `--host`: connections to a server on 127.0.0.2 are counted, those to another on
/// 127.0.0.1 during the same watch are not.
#[test]
fn host_mode_counts_only_that_address() {
    let _serial = serial();
    let there = CountServer::start_on("host-a", false, "127.0.0.2");
    let elsewhere = CountServer::start("host-b", false);
    let before = there.counts();
    let w = Command::new(bin())
        .args(["watch", "--json", "--host", "127.0.0.2", "-d", "2s"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    for url in [there.url(), elsewhere.url(), there.url()] {
        let st = Command::new("curl")
            .args(["-sf", "-o", "/dev/null", &url])
            .status()
            .unwrap();
        assert!(st.success());
    }
    let out = w.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    check_schema(&v);
    let after = there.counts();
    let t = total(&v);
    assert_eq!(u(&t["connections"]), after[0] - before[0], "{v}");
    assert_eq!((u(&t["connections"]), u(&t["requests"])), (2, 2), "{v}");
    assert_eq!(v["endpoints"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(
        v["endpoints"][0]["endpoint"],
        format!("127.0.0.2:{}", there.port)
    );
}

/// Cleartext HTTP/2 (prior knowledge) against Node's http2 server, which counts its
/// sessions and streams: curl with one URL, and a Node client's four requests at once
/// over one connection. Requests are the streams the client opens. (curl 7.88 fails on
/// its second URL over a reused prior-knowledge connection, so it gets one.)
#[test]
fn cleartext_http2_streams_are_counted_as_requests() {
    let _serial = serial();
    assert!(have("node"), "node is needed for this test");
    let dir = Dir::new("watch-h2c");
    let stats = dir.path("stats.json");
    let mut srv = Command::new("node")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/h2c_server.js"))
        .arg(&stats)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    struct Stop(Child);
    impl Drop for Stop {
        fn drop(&mut self) {
            stop_child(&mut self.0, "-TERM");
        }
    }
    let mut line = String::new();
    std::io::BufReader::new(srv.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _stop = Stop(srv);
    let port: u16 = line.trim().strip_prefix("PORT ").unwrap().parse().unwrap();
    let counts = || {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        [u(&v["sessions"]), u(&v["streams"])]
    };
    let url = format!("http://127.0.0.1:{port}/");
    let node = "const http2 = require('http2'); const s = http2.connect(process.argv[1]); let n = 0; for (let i = 0; i < 4; i++) { const r = s.request({ ':path': '/' + i }); r.resume(); r.on('end', () => { if (++n === 4) s.close(); }); }";
    for (client, expect) in [
        (
            vec![
                "curl",
                "-sf",
                "--http2-prior-knowledge",
                "-o",
                "/dev/null",
                &url,
            ],
            [1, 1],
        ),
        (vec!["node", "-e", node, &url], [1, 4]),
    ] {
        let before = counts();
        let (code, v) = watch(&[], &client);
        let after = counts();
        assert_eq!(code, Some(0), "{v}");
        check_schema(&v);
        let delta = [after[0] - before[0], after[1] - before[1]];
        assert_eq!(delta, expect, "{client:?}");
        let t = total(&v);
        assert_eq!(u(&t["connections"]), delta[0], "{v}");
        assert_eq!(u(&t["kinds"]["http2"]), delta[0], "{v}");
        assert_eq!(u(&t["requests"]), delta[1], "{v}");
        assert_eq!(u(&t["responses"]), delta[1], "{v}");
    }
}

/// Node: five requests, each on a connection of its own (`agent: false`).
const NODE_ONE_SHOTS: &str = "const http=require('http');let n=0;\
(function go(){if(n++<5)http.get(process.argv[1],{agent:false,headers:{'User-Agent':'node-oneshot/1'}},r=>{r.resume();r.on('end',go)})})()";

/// Python with five one-shot `requests.get`, one curl with three URLs, Node with five
/// `agent: false` requests, one after the other, against `url`.
fn three_programs(url: &str) {
    let py = "import requests,sys\nfor _ in range(5): requests.get(sys.argv[1])\n";
    let o = "/dev/null";
    for args in [
        vec!["python3", "-c", py, url],
        vec!["curl", "-s", "-o", o, "-o", o, "-o", o, url, url, url],
        vec!["node", "-e", NODE_ONE_SHOTS, url],
    ] {
        let st = Command::new(args[0]).args(&args[1..]).status().unwrap();
        assert!(st.success(), "{args:?}");
    }
}

/// A watch's report after Ctrl-C (SIGINT, by its PID).
fn interrupted_report(mut w: Child) -> Value {
    let _ = Command::new("kill")
        .args(["-INT", &w.id().to_string()])
        .status();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut w.stdout.take().unwrap(), &mut out).unwrap();
    let _ = w.wait();
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Watching an endpoint while three programs talk to it (Python with five one-shot
/// `requests.get`, one curl with three URLs, Node with five `agent: false` requests): each
/// program is named with its own connections and requests (nginx's log by User-Agent is
/// the truth) and judged on its own; the headline gives the total, then each program's
/// sentence, never one blended verdict.
#[test]
fn each_client_program_of_an_endpoint_is_named_and_judged_on_its_own() {
    let _serial = serial();
    let Some(n) = nginx_by_agent() else { return };
    let url = n.url();
    let w = Command::new(bin())
        .args([
            "watch",
            "--json",
            "--port",
            &n.port.to_string(),
            "-d",
            "60s",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    three_programs(&url);
    std::thread::sleep(Duration::from_millis(500));
    let v = interrupted_report(w);
    check_schema(&v);
    let programs = v["programs"].as_array().expect("programs");
    let named: Vec<&str> = programs
        .iter()
        .map(|p| p["program"].as_str().unwrap())
        .collect();
    let python = *named
        .iter()
        .find(|p| p.starts_with("python"))
        .unwrap_or_else(|| panic!("no python among {named:?}"));
    let verdict = |at: &str| -> (&str, &str) {
        v["verdict"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| {
                f["evidence"]
                    .as_array()
                    .is_some_and(|e| e.iter().any(|e| e["figure"] == format!("{at}.requests")))
            })
            .and_then(|f| Some((f["code"].as_str()?, f["text"].as_str()?)))
            .unwrap_or_else(|| panic!("no finding at {at}: {}", v["verdict"]))
    };
    // Each with the fix of its own client: a Session for requests, an agent for Node.
    for (program, agent, code, fix) in [
        (
            python,
            "python-requests/",
            "not_reused_client_closed_itself",
            "requests.Session",
        ),
        ("curl", "curl/", "reused", ""),
        (
            "node",
            "node-oneshot/",
            "not_reused_client_close_header",
            "keepAlive: true",
        ),
    ] {
        let p = programs
            .iter()
            .find(|p| p["program"] == program)
            .unwrap_or_else(|| panic!("no {program} among {named:?}"));
        let (requests, conns, _) = by_agent(&n, agent);
        assert_eq!(
            (u(&p["requests"]), u(&p["connections"])),
            (requests, conns),
            "{program}: {p}"
        );
        assert_eq!(p["clients"][0], "127.0.0.1", "{p}");
        let (got, text) = verdict(&format!("programs[{program}]"));
        assert_eq!(got, code, "{program}: {text}");
        assert!(text.contains(fix), "{program}: {text}");
    }
    assert_eq!(by_agent(&n, "curl/"), (3, 1, 2));
    assert_eq!(by_agent(&n, "node-oneshot/"), (5, 5, 0));
    assert_eq!(programs.len(), 3, "{named:?}");
    let h = &v["headline"];
    let text = h["text"].as_str().unwrap();
    assert_eq!(h["code"], "by_program", "{text}");
    assert!(
        text.starts_with("13 requests over 11 connections from 3 client programs")
            && text.contains("curl: 3 requests over 1 connection: reused")
            && text.contains(&format!(
                "{python}: 5 requests over 5 connections: not reused"
            ))
            && !text.contains("1.2 requests per connection"),
        "{text}"
    );
}
