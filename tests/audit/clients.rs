//! `handshake audit` with real clients (curl, Python, Node, Go) and real nginx as a
//! reverse proxy: the connections and requests it reports equal what each client is known
//! to do, every request seen is answered, and audit exits with the command's status.

use crate::common::*;
use serde_json::Value;

/// Run `handshake audit [opts] -- command...`; returns (exit code, report).
fn audit(opts: &[&str], command: &[&str]) -> (Option<i32>, Value) {
    let (code, v, _) = crate::common::audit(opts, &[], command);
    (code, v)
}

/// Requests seen = requests answered; the per-client figures add up to the total.
fn check(v: &Value) {
    let t = total(v);
    assert_eq!(
        u(&t["requests"]),
        u(&t["responses"]),
        "every request seen was answered: {t}"
    );
    let clients = v["clients"].as_array().unwrap();
    assert_eq!(
        clients.iter().map(|c| u(&c["connections"])).sum::<u64>(),
        u(&t["connections"])
    );
    let endings: u64 = t["endings"].as_object().unwrap().values().map(u).sum();
    assert_eq!(endings, u(&t["connections"]), "one ending per connection");
}

#[test]
fn curl_reuses_one_connection_for_several_urls_in_one_process() {
    let _machine = shared();
    let (code, v) = audit(
        &[],
        &[
            "curl",
            "-sf",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "-o",
            "/dev/null",
            "{url}a",
            "{url}b",
            "{url}bytes/1000",
        ],
    );
    assert_eq!(code, Some(0));
    check(&v);
    assert_eq!(u(&total(&v)["connections"]), 1);
    assert_eq!(u(&total(&v)["requests"]), 3);
    assert_eq!(u(&total(&v)["endings"]["client_closed"]), 1);
    assert!(
        verdict(&v).contains("3 requests over 1 connection: connections are reused"),
        "{}",
        verdict(&v)
    );
}

#[test]
fn curl_with_connection_close_opens_one_connection_per_request() {
    let _machine = shared();
    let (_, v) = audit(
        &[],
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
            "{url}a",
            "{url}b",
            "{url}c",
        ],
    );
    check(&v);
    assert_eq!(u(&total(&v)["connections"]), 3);
    assert_eq!(u(&total(&v)["connection_headers"]["close"]), 3);
    let s = verdict(&v);
    assert!(
        s.contains("3 requests over 3 connections: no reuse.")
            && s.contains("the client sent `Connection: close` on every connection"),
        "{s}"
    );
    assert_eq!(
        v["headline"]["text"],
        "3 requests over 3 connections: not reused, because the client sent `Connection: close`, on 3 of 3 connections."
    );
}

/// One curl request: one request cannot show reuse, and the verdict says so (it was
/// empty), with how to see it; with `Connection: close` it also says that.
#[test]
fn a_single_request_gets_a_verdict() {
    let _machine = shared();
    for close in [false, true] {
        let mut cmd = vec!["curl", "-sf", "-o", "/dev/null", "{url}"];
        if close {
            cmd.splice(1..1, ["-H", "Connection: close"]);
        }
        let (code, v) = audit(&[], &cmd);
        assert_eq!(code, Some(0), "{v}");
        check(&v);
        let t = total(&v);
        assert_eq!((u(&t["requests"]), u(&t["connections"])), (1, 1), "{t}");
        let s = verdict(&v);
        assert!(
            s.starts_with("1 request over 1 connection: one request cannot show reuse."),
            "{s}"
        );
        assert_eq!(
            s.contains("The client sent `Connection: close`"),
            close,
            "{s}"
        );
    }
}

#[test]
fn audit_exits_with_the_commands_status() {
    let _machine = shared();
    let (code, v) = audit(
        &[],
        &[
            "sh",
            "-c",
            "curl -s -o /dev/null \"$HANDSHAKE_URL\"; exit 7",
        ],
    );
    assert_eq!(code, Some(7));
    assert_eq!(v["exit_status"], 7);
    assert_eq!(u(&total(&v)["requests"]), 1, "HANDSHAKE_URL is exported");
}

#[test]
fn python_urllib_and_http_client() {
    let _machine = shared();
    let script = "import sys, urllib.request\nfor i in range(4):\n    urllib.request.urlopen(sys.argv[1] + 'x').read()\n";
    let (code, v) = audit(&[], &["python3", "-c", script, "{url}"]);
    assert_eq!(code, Some(0));
    check(&v);
    assert_eq!(
        u(&total(&v)["connections"]),
        4,
        "urllib opens a connection per request"
    );
    assert!(verdict(&v).contains("4 requests over 4 connections: no reuse."));
    let script = "import sys, http.client, urllib.parse\nu = urllib.parse.urlparse(sys.argv[1])\nc = http.client.HTTPConnection(u.hostname, u.port)\nfor i in range(5):\n    c.request('GET', '/p'); c.getresponse().read()\nc.close()\n";
    let (_, v) = audit(&[], &["python3", "-c", script, "{url}"]);
    check(&v);
    assert_eq!(u(&total(&v)["connections"]), 1, "one HTTPConnection");
    assert_eq!(u(&total(&v)["requests"]), 5);
    assert_eq!(u(&total(&v)["idle_gaps"]["count"]), 4);
}

#[test]
fn node_default_agent_and_agent_false() {
    let _machine = shared();
    assert!(have("node"), "node is needed for this test");
    let script = |agent: &str| {
        format!(
            "const http = require('http'); const url = process.argv[1];\n\
             (async () => {{ for (let i = 0; i < 5; i++) {{ await new Promise((ok, bad) => {{\n\
               http.get(url, {{ {agent} }}, (res) => {{ res.resume(); res.on('end', ok); }}).on('error', bad); }}); }}\n\
             }})().then(() => process.exit(0), (e) => {{ console.error(e); process.exit(1); }});"
        )
    };
    let (code, v) = audit(&[], &["node", "-e", &script(""), "{url}"]);
    assert_eq!(code, Some(0));
    check(&v);
    // Node 19 and later keep connections alive with the default agent.
    assert_eq!(u(&total(&v)["connections"]), 1, "{}", verdict(&v));
    let (_, v) = audit(&[], &["node", "-e", &script("agent: false"), "{url}"]);
    check(&v);
    assert_eq!(u(&total(&v)["connections"]), 5);
    assert!(
        verdict(&v).contains("5 requests over 5 connections: no reuse."),
        "{}",
        verdict(&v)
    );
    // Node's agent: false sends `Connection: close`: the headline names it.
    assert_eq!(u(&total(&v)["connection_headers"]["close"]), 5);
    assert_eq!(
        v["headline"]["text"],
        "5 requests over 5 connections: not reused, because the client sent `Connection: close`, on 5 of 5 connections."
    );
}

fn go_client(read_body: bool) -> String {
    let body = if read_body {
        "io.Copy(io.Discard, resp.Body)\n\t\tresp.Body.Close()"
    } else {
        "resp.Body.Close()"
    };
    format!(
        "package main\n\nimport (\n\t\"io\"\n\t\"net/http\"\n\t\"os\"\n)\n\nfunc main() {{\n\tc := &http.Client{{}}\n\tfor i := 0; i < 5; i++ {{\n\t\tresp, err := c.Get(os.Args[1] + \"bytes/65536\")\n\t\tif err != nil {{\n\t\t\tpanic(err)\n\t\t}}\n\t\t{body}\n\t}}\n\t_ = io.Discard\n}}\n"
    )
}

/// A Go client with `DisableKeepAlives: true` (it sends `Connection: close`), built under
/// a name that says nothing: its `User-Agent` names Go, and the fix is Go's own setting,
/// with no other product's; Java's HttpURLConnection with `-Dhttp.keepAlive=false` (the
/// process is `java`, its agent `Java/17`) is told of that flag. Each client's own count
/// of requests is the audit's.
#[test]
fn a_client_is_told_its_own_setting_by_its_user_agent() {
    let _machine = shared();
    let tmp = Dir::new("go-dka");
    let go = go_build(
        &tmp.0,
        "client",
        "package main\n\nimport (\n\t\"io\"\n\t\"net/http\"\n\t\"os\"\n)\n\nfunc main() {\n\tc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}\n\tfor i := 0; i < 4; i++ {\n\t\tresp, err := c.Get(os.Args[1])\n\t\tif err != nil {\n\t\t\tpanic(err)\n\t\t}\n\t\tio.Copy(io.Discard, resp.Body)\n\t\tresp.Body.Close()\n\t}\n}\n",
    );
    let (code, v) = audit(&[], &[&go, "{url}"]);
    assert_eq!(code, Some(0), "{v}");
    check(&v);
    let t = total(&v);
    assert_eq!((u(&t["requests"]), u(&t["connections"])), (4, 4), "{t}");
    assert_eq!(u(&t["user_agents"]["Go-http-client/1.1"]), 4, "{t}");
    let said = verdict(&v);
    assert!(
        said.contains("`DisableKeepAlives: true`")
            && !said.contains("Node")
            && !said.contains("HAProxy"),
        "{said}"
    );
    if !have("java") {
        eprintln!("SKIPPED the Java half: no java here");
        return;
    }
    let java = tmp.0.join("Get.java");
    std::fs::write(
        &java,
        "public class Get { public static void main(String[] a) throws Exception {\n  for (int i = 0; i < 3; i++) {\n    var c = (java.net.HttpURLConnection) new java.net.URL(a[0]).openConnection();\n    c.getInputStream().readAllBytes();\n  }\n} }\n",
    )
    .unwrap();
    let (code, v) = audit(
        &[],
        &[
            "java",
            "-Dhttp.keepAlive=false",
            java.to_str().unwrap(),
            "{url}",
        ],
    );
    assert_eq!(code, Some(0), "{v}");
    check(&v);
    let t = total(&v);
    assert_eq!((u(&t["requests"]), u(&t["connections"])), (3, 3), "{t}");
    let said = verdict(&v);
    assert!(said.contains("`-Dhttp.keepAlive=false`"), "{said}");
}

#[test]
fn go_reading_bodies_to_eof_reuses_and_closing_them_unread_does_not() {
    let _machine = shared();
    let tmp = Dir::new("go");
    let dir = tmp.0.clone();
    // Built first so the audit measures the client, not the compiler.
    for (read, name) in [(true, "read"), (false, "unread")] {
        go_build(&dir, name, &go_client(read));
    }
    let (code, v) = audit(&[], &[dir.join("read").to_str().unwrap(), "{url}"]);
    assert_eq!(code, Some(0));
    check(&v);
    assert_eq!(u(&total(&v)["connections"]), 1, "{}", verdict(&v));
    // Closing an unread body ends the connection. When response bytes were still in the
    // client's socket, its kernel resets it (seen as unread); when Go had already pulled
    // them in, it is a plain close. Every connection is one or the other. Which one is
    // up to the scheduler (all five plain closes happen now and then), so the client
    // runs up to three times for a run with resets, whose verdict must name the cause.
    let mut v = Value::Null;
    for _ in 0..3 {
        v = audit(&[], &[dir.join("unread").to_str().unwrap(), "{url}"]).1;
        check(&v);
        assert_eq!(u(&total(&v)["connections"]), 5);
        let t = total(&v);
        let unread = t["endings"]["client_closed_unread"].as_u64().unwrap_or(0);
        let closed = t["endings"]["client_closed"].as_u64().unwrap_or(0);
        assert_eq!(unread + closed, 5, "{t}");
        if unread >= 1 {
            break;
        }
    }
    let s = verdict(&v);
    assert!(
        s.contains("5 requests over 5 connections: no reuse."),
        "{s}"
    );
    assert!(
        s.contains("with unread response bytes left") && s.contains("in Go: read the body to EOF"),
        "{s}"
    );
    // The headline names what most connections did.
    let unread = total(&v)["endings"]["client_closed_unread"]
        .as_u64()
        .unwrap_or(0);
    let (because, n) = if unread >= 3 {
        ("the client reset its connections with response bytes unread (it does not read response bodies to the end)", unread)
    } else {
        ("the client closed each connection itself after one response, without asking the server to (no `Connection: close`)", 5 - unread)
    };
    assert_eq!(
        v["headline"]["text"],
        format!("5 requests over 5 connections: not reused, because {because}, on {n} of 5 connections.")
    );
}

#[test]
fn misbehaving_clients_are_reported_without_crashing_the_audit() {
    let _machine = shared();
    let script = "import socket, sys, time, urllib.parse\n\
u = urllib.parse.urlparse(sys.argv[1]); a = (u.hostname, u.port)\n\
s = socket.create_connection(a); s.sendall(b'\\x16\\x03\\x01 not http\\r\\n\\r\\n'); s.recv(100); s.close()\n\
s = socket.create_connection(a); s.sendall(b'GET / HTTP/1.1\\r\\nHo'); time.sleep(0.1); s.close()\n\
s = socket.create_connection(a); s.sendall(b'GET / HTTP/1.1\\r\\nHo'); time.sleep(0.8); s.close()\n\
s = socket.create_connection(a); s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'); s.recv(1000); s.close()\n\
s = socket.create_connection(a); s.sendall(b'GET /bytes/20000000 HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'); s.recv(1000); s.close(); time.sleep(0.3)\n";
    let (code, v) = audit(
        &["--header-timeout", "300ms"],
        &["python3", "-c", script, "{url}"],
    );
    assert_eq!(code, Some(0));
    let t = total(&v);
    assert_eq!(u(&t["connections"]), 5);
    assert_eq!(u(&t["endings"]["garbage"]), 1, "{t}");
    assert_eq!(u(&t["endings"]["client_closed_mid_response"]), 1, "{t}");
    let cut = &t["cut_responses"];
    assert_eq!(u(&cut["body_bytes_total"]), 20_000_000);
    assert!(u(&cut["body_bytes_written"]) < 20_000_000, "{cut}");
    assert_eq!(u(&t["endings"]["client_closed_mid_request"]), 1, "{t}");
    assert_eq!(u(&t["endings"]["stalled"]), 1, "{t}");
    assert_eq!(u(&t["requests"]), 2);
    assert_eq!(
        u(&t["responses"]),
        1,
        "the cut response is not counted as answered"
    );
    let s = verdict(&v);
    assert!(
        s.contains("not HTTP") && s.contains("stalled") && s.contains("in the middle of a request"),
        "{s}"
    );
}

#[test]
fn forwarding_to_an_upstream_over_persistent_connections() {
    let _machine = shared();
    let srv = start(ServerConfig::default());
    let up = srv.http_url().unwrap();
    let (_, v) = audit(
        &["--upstream", &up],
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
            "{url}bytes/100",
            "{url}bytes/200",
            "{url}status/204",
        ],
    );
    check(&v);
    assert_eq!(u(&total(&v)["connections"]), 3);
    assert_eq!(srv.snapshot().requests, 3, "forwarded to the upstream");
    assert_eq!(
        srv.snapshot().connections_accepted,
        1,
        "one persistent upstream connection"
    );
    srv.stop();
}

#[test]
fn nginx_as_a_proxy_without_and_with_upstream_keepalive() {
    let _machine = shared();
    // nginx's default (HTTP/1.0 and `Connection: close` upstream), upstream keep-alive
    // set up in full, and HTTP/1.1 with X-Forwarded-For but `Connection: close` kept.
    for variant in ["default", "keepalive", "http11-close"] {
        let audit_port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let listen = format!("127.0.0.1:{audit_port}");
        let (http, location) = match variant {
            "keepalive" => (
                format!("upstream audited {{ server {listen}; keepalive 16; }}"),
                "proxy_pass http://audited; proxy_http_version 1.1; proxy_set_header Connection \"\";",
            ),
            "http11-close" => (
                format!("upstream audited {{ server {listen}; }}"),
                "proxy_pass http://audited; proxy_http_version 1.1; proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
            ),
            _ => (
                format!("upstream audited {{ server {listen}; }}"),
                "proxy_pass http://audited;",
            ),
        };
        let Some(ng) = Nginx::start(&http, location) else {
            return;
        };
        let (code, v) = audit(
            &["--listen", &listen],
            &[
                bin(),
                "bench",
                &ng.url(),
                "-n",
                "60",
                "-c",
                "2",
                "--no-progress",
            ],
        );
        drop(ng);
        assert_eq!(code, Some(0));
        check(&v);
        let t = total(&v);
        assert_eq!(u(&t["requests"]), 60);
        let says = verdict(&v);
        if variant == "keepalive" {
            assert!(u(&t["connections"]) <= 4, "upstream keep-alive reuses: {t}");
            assert!(says.contains("connections are reused"), "{says}");
            assert_eq!(u(&t["forwarded_requests"]), 0, "{t}");
            continue;
        }
        assert_eq!(
            u(&t["connections"]),
            60,
            "a new upstream connection per request: {t}"
        );
        assert!(says.contains("no reuse"), "{says}");
        assert_eq!(u(&t["connection_headers"]["close"]), 60, "{t}");
        for fix in [
            "`proxy_http_version 1.1;`",
            "`proxy_set_header Connection \"\";`",
            "`keepalive 16;` in its `upstream` block",
        ] {
            assert!(says.contains(fix), "{fix} in {says}");
        }
        if variant == "default" {
            assert_eq!(
                u(&t["http_versions"]["HTTP/1.0"]),
                60,
                "nginx speaks HTTP/1.0 upstream by default"
            );
            assert!(
                says.contains("what nginx sends to an upstream by default"),
                "{says}"
            );
        } else {
            assert_eq!(u(&t["http_versions"]["HTTP/1.1"]), 60, "{t}");
            assert_eq!(u(&t["forwarded_requests"]), 60, "{t}");
            assert!(says.contains("carry a proxy's headers"), "{says}");
        }
    }
}

#[test]
fn tls_audit_shows_whether_the_client_resumes_sessions() {
    let _machine = shared();
    let dir = std::env::temp_dir().join(format!("handshake-audit-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    let ca_s = ca.to_str().unwrap();
    // handshake itself as the client: a new connection per request, with and without resumption.
    for (strategy, resumes) in [("close-resumed", true), ("close", false)] {
        let (code, v) = audit(
            &["--tls", "--cacert-out", ca_s],
            &["sh", "-c", &format!("{} bench \"$HANDSHAKE_URL\" -n 6 -c 1 --strategy {strategy} --cacert {ca_s} --no-progress >/dev/null", bin())],
        );
        assert_eq!(code, Some(0), "{v}");
        check(&v);
        let t = total(&v);
        assert!(v["url"].as_str().unwrap().starts_with("https://"));
        assert_eq!(u(&t["connections"]), 6);
        assert_eq!(
            u(&t["tls_handshakes"]["full"]) + u(&t["tls_handshakes"]["resumed"]),
            6
        );
        if resumes {
            assert!(u(&t["tls_handshakes"]["resumed"]) >= 5, "{t}");
            assert!(
                verdict(&v).contains("handshakes resumed a session"),
                "{}",
                verdict(&v)
            );
        } else {
            assert_eq!(u(&t["tls_handshakes"]["resumed"]), 0, "{t}");
            assert!(
                verdict(&v).contains("the client offered no session in all")
                    && verdict(&v).contains("though the server issues tickets"),
                "{}",
                verdict(&v)
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Clients that do not trust the audit's certificate (curl and Python without its CA)
/// end each handshake with an alert about it: the audit says so, and how to give them
/// the CA, not that they sent something other than HTTP; the command's status is curl's
/// own (60: the peer's certificate could not be verified).
#[test]
fn a_client_that_does_not_trust_the_audits_certificate_is_told_so() {
    let _machine = shared();
    let py = "import sys, urllib.request\nfor u in sys.argv[1:]:\n    try: urllib.request.urlopen(u)\n    except Exception as e: print(e)";
    for (client, command, status) in [
        (
            "curl",
            vec!["curl", "-s", "-o", "/dev/null", "{url}", "{url}"],
            60,
        ),
        ("python", vec!["python3", "-c", py, "{url}", "{url}"], 0),
    ] {
        let (code, v) = audit(&["--tls"], &command);
        assert_eq!(code, Some(status), "{client}: {v}");
        check(&v);
        let t = total(&v);
        assert_eq!(u(&t["connections"]), 2, "{client}: {t}");
        assert_eq!(u(&t["requests"]), 0, "{client}: {t}");
        assert_eq!(
            u(&t["endings"]["certificate_distrusted"]),
            2,
            "{client}: {t}"
        );
        let said = verdict(&v);
        assert!(
            said.contains(
                "On 2 connections the client refused the audit's certificate in the TLS handshake"
            ) && said.contains("give it the CA file that --cacert-out writes")
                && said.contains("the client refused the audit's certificate in each handshake")
                && !said.contains("not HTTP"),
            "{client}: {said}"
        );
    }
}

/// Node's https client without keep-alive (an agent with `keepAlive: false`, asking for a
/// kept-alive connection) closes each connection itself after its answer, over TLS with a
/// FIN and no `close_notify`: that is `client_closed`, as the same client is over plain
/// HTTP, not a disconnect in the middle of a request.
#[test]
fn node_https_without_keepalive_closes_after_each_answer() {
    let _machine = shared();
    assert!(have("node"), "node is needed for this test");
    let dir = std::env::temp_dir().join(format!("handshake-audit-node-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = dir.join("ca.pem");
    let ca_s = ca.to_str().unwrap();
    let script = |module: &str| {
        format!(
            "const m = require('{module}'); const url = process.argv[1];\n\
             (async () => {{ for (let i = 0; i < 5; i++) {{ await new Promise((ok, bad) => {{\n\
               const agent = new m.Agent({{ keepAlive: false }});\n\
               m.get(url, {{ agent, headers: {{ Connection: 'keep-alive' }} }}, (res) => {{ res.resume(); res.on('end', ok); }}).on('error', bad); }}); }}\n\
             }})().then(() => process.exit(0), (e) => {{ console.error(e); process.exit(1); }});"
        )
    };
    let tls_cmd = format!("NODE_EXTRA_CA_CERTS={ca_s} node -e \"$0\" \"$HANDSHAKE_URL\"");
    let runs = [
        audit(&[], &["node", "-e", &script("http"), "{url}"]),
        audit(
            &["--tls", "--cacert-out", ca_s],
            &["sh", "-c", &tls_cmd, &script("https")],
        ),
    ];
    let _ = std::fs::remove_dir_all(&dir);
    for (code, v) in runs {
        assert_eq!(code, Some(0), "{v}");
        check(&v);
        let t = total(&v);
        assert_eq!(u(&t["connections"]), 5, "{t}");
        assert_eq!(u(&t["responses"]), 5, "{t}");
        assert_eq!(u(&t["endings"]["client_closed"]), 5, "{t}");
        assert!(
            !verdict(&v).contains("middle of a request"),
            "{}",
            verdict(&v)
        );
    }
}

#[test]
fn chunked_bodies_are_forwarded_both_ways() {
    let _machine = shared();
    // The upstream checks the forwarded request (chunked by the client, re-framed with a
    // Content-Length by the audit) and answers with a chunked body.
    let (addr, accepted) = script_server(|mut st, _| {
        let Some(head) = read_head(&mut st) else {
            return;
        };
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        let mut body = [0u8; 11];
        let ok = head.contains("content-length: 11")
            && !head.contains("transfer-encoding")
            && std::io::Read::read_exact(&mut st, &mut body).is_ok()
            && &body == b"hello world";
        let reply: &[u8] = if ok {
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;x=1\r\n world\r\n0\r\n\r\n"
        } else {
            b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"
        };
        write(&mut st, reply);
    });
    let dir = std::env::temp_dir().join(format!("handshake-audit-chunked-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("out");
    let (code, v) = audit(
        &["--upstream", &format!("http://{addr}/")],
        &[
            "curl",
            "-sf",
            "-H",
            "Transfer-Encoding: chunked",
            "--data-binary",
            "hello world",
            "-o",
            out.to_str().unwrap(),
            "{url}echo",
        ],
    );
    assert_eq!(code, Some(0), "curl got a 2xx");
    check(&v);
    assert_eq!(
        std::fs::read(&out).unwrap(),
        b"hello world",
        "the chunked answer reaches the client whole"
    );
    assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The audit's timeline: two curl processes 2.2 s apart each open a connection in the
/// second they ran; the buckets add up to the totals.
#[test]
fn timeline_puts_each_connection_in_its_second() {
    let _machine = shared();
    let (code, v) = audit(
        &[],
        &[
            "sh",
            "-c",
            "curl -sf -o /dev/null \"${HANDSHAKE_URL}a\" && sleep 2.2 && curl -sf -o /dev/null -o /dev/null \"${HANDSHAKE_URL}b\" \"${HANDSHAKE_URL}c\"",
        ],
    );
    assert_eq!(code, Some(0));
    check(&v);
    let t = v["timeline"].as_array().unwrap();
    let col = |k: &str| t.iter().map(|b| u(&b[k])).collect::<Vec<_>>();
    assert_eq!(&col("new_connections")[..3], &[1, 0, 1], "{t:?}");
    assert_eq!(&col("requests")[..3], &[1, 0, 2], "{t:?}");
    let tot = total(&v);
    assert_eq!(
        col("new_connections").iter().sum::<u64>(),
        u(&tot["connections"])
    );
    assert_eq!(col("requests").iter().sum::<u64>(), u(&tot["requests"]));
    assert_eq!(col("closed_connections").iter().sum::<u64>(), 2);
    assert!(t.iter().all(|b| b["width_s"].as_f64() == Some(1.0)));
}

/// `audit --tls --html`: curl (HTTP/1.1) fetches three URLs over one connection, then, 2.2 s later,
/// two with `Connection: close` (two connections). The HTML report, opened in headless
/// Chromium, shows the JSON's figures (connections, reuse, TLS handshakes, endings, the
/// timeline); the connections are curl's own `num_connects`; the text report draws the
/// timeline.
#[test]
fn audit_html_report_draws_the_reports_numbers_in_chromium() {
    let _machine = shared();
    let tmp = Dir::new("audit-html");
    let dir = tmp.0.clone();
    let ca = dir.join("ca.pem");
    let counts = dir.join("connects");
    let (ca_s, counts_s) = (ca.to_str().unwrap(), counts.to_str().unwrap());
    let curl = format!("curl -sf --http1.1 --cacert {ca_s} -w '%{{num_connects}}\\n'");
    let script = format!(
        "{curl} -o /dev/null -o /dev/null -o /dev/null \"${{HANDSHAKE_URL}}a\" \"${{HANDSHAKE_URL}}b\" \"${{HANDSHAKE_URL}}c\" >> {counts_s} \
         && sleep 2.2 && {curl} -H 'Connection: close' -o /dev/null -o /dev/null \"${{HANDSHAKE_URL}}d\" \"${{HANDSHAKE_URL}}e\" >> {counts_s}"
    );
    let args = [
        "audit",
        "--tls",
        "--cacert-out",
        ca_s,
        "--",
        "sh",
        "-c",
        &script,
    ];
    let Some(v) = check_html(&args, "audit") else {
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    check(&v);
    let connects: u64 = std::fs::read_to_string(&counts)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse::<u64>().unwrap())
        .sum();
    let t = total(&v);
    assert_eq!(connects, 3, "curl's own count");
    assert_eq!(u(&t["connections"]), connects, "{t}");
    assert_eq!(u(&t["requests"]), 5);
    assert_eq!(
        u(&t["tls_handshakes"]["full"]) + u(&t["tls_handshakes"]["resumed"]),
        connects
    );
    // The text report: the timeline, a line per series.
    std::fs::remove_file(&counts).unwrap();
    let out = run(&[
        "audit",
        "--tls",
        "--cacert-out",
        ca_s,
        "--",
        "sh",
        "-c",
        &script,
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Timeline (1 s per character"), "{text}");
    for line in ["new conns/s", "requests/s", "full TLS/s"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(line) && l.contains('█')),
            "{line}: {text}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Three programs under one audit, each named and judged on its own (issue 56, item
/// 4): curl (3 URLs, one connection), Python (3 `http.client` connections, one request
/// each) and Node (5 requests with `agent: false`). Each program's counts equal what it
/// says it did (curl's `%{num_connects}`, the sockets Python and Node opened); the
/// verdict is each program's, with its own fix, and the headline blends nothing.
#[test]
fn each_client_program_is_named_and_judged_on_its_own() {
    let _machine = shared();
    assert!(have("node"), "node is needed for this test");
    let py = "import http.client, sys, urllib.parse\n\
              u = urllib.parse.urlsplit(sys.argv[1])\n\
              for i in range(3):\n\
              \x20   c = http.client.HTTPConnection(u.hostname, u.port)\n\
              \x20   c.request('GET', '/', headers={'Connection': 'close'})\n\
              \x20   c.getresponse().read()\n\
              \x20   c.close()\n\
              print('python sockets', 3)";
    let node = "const http = require('http'); const url = process.argv[1]; const socks = new Set();\n\
                (async () => { for (let i = 0; i < 5; i++) { await new Promise((ok, bad) => {\n\
                  const r = http.get(url, { agent: false }, (res) => { res.resume(); res.on('end', ok); });\n\
                  r.on('socket', (s) => socks.add(s)); r.on('error', bad); }); }\n\
                })().then(() => { console.log('node sockets', socks.size); process.exit(0); }, (e) => { console.error(e); process.exit(1); });";
    let script = "curl -s -o /dev/null -w 'curl connects %{num_connects}\\n' {url} {url} {url} && \
                  python3 -c \"$PY\" {url} && node -e \"$NODE\" {url}";
    let out = std::process::Command::new(bin())
        .args(["audit", "--json", "--", "sh", "-c", script])
        .env("PY", py)
        .env("NODE", node)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{said}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    check(&v);
    // What each client says it did.
    let curl_conns: u64 = said
        .lines()
        .filter_map(|l| l.strip_prefix("curl connects "))
        .map(|n| n.trim().parse::<u64>().unwrap())
        .sum();
    assert!(said.contains("python sockets 3"), "{said}");
    assert!(said.contains("node sockets 5"), "{said}");
    let programs = v["programs"].as_array().unwrap();
    let of = |name: &str| {
        programs
            .iter()
            .find(|p| p["program"] == name)
            .unwrap_or_else(|| panic!("{name} in {programs:?}"))
    };
    let counts = |name: &str| (u(&of(name)["requests"]), u(&of(name)["connections"]));
    assert_eq!(counts("curl"), (3, curl_conns));
    assert_eq!(curl_conns, 1, "curl keeps one connection for its URLs");
    assert_eq!(counts("python3"), (3, 3));
    assert_eq!(counts("node"), (5, 5));
    assert_eq!(programs.len(), 3, "{programs:?}");
    assert_eq!(of("curl")["clients"][0], "127.0.0.1");
    // The verdict: each program's own, with its own fix.
    let first = |name: &str| of(name)["verdict"][0]["code"].as_str().unwrap().to_string();
    assert_eq!(first("curl"), "reused");
    let text = verdict(&v);
    assert!(
        text.contains("For Python: one `requests.Session()`"),
        "{text}"
    );
    assert!(
        text.contains("For Node: an `http.Agent({ keepAlive: true })`"),
        "{text}"
    );
    let h = &v["headline"];
    assert_eq!(h["code"], "by_program", "{h}");
    let h = h["text"].as_str().unwrap();
    assert!(
        h.starts_with("11 requests over 9 connections from 3 client programs")
            && h.contains("curl: 3 requests over 1 connection: reused")
            && !h.contains("1.2 requests per connection"),
        "{h}"
    );
}
