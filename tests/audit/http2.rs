//! `handshake audit` with HTTP/2 clients: curl (ALPN h2, several URLs in one process, in
//! turn and in parallel), Go's default HTTPS client, Node's `http2` module (one session,
//! and a session per request) and handshake's own h2c client. The connections and
//! streams the audit reports equal what each client says it did; forwarding to an
//! HTTP/1.1 upstream keeps working.

use crate::common::*;
use serde_json::Value;

/// Run `handshake audit --json [opts] -- command...`; returns (exit code, report).
fn audit(opts: &[&str], command: &[&str]) -> (Option<i32>, Value) {
    let (code, _, v) = audit_full(opts, command);
    (code, v)
}

/// The same, with what the client printed (audit sends the client's standard output
/// to its standard error; its own lines there start with "handshake audit").
fn audit_full(opts: &[&str], command: &[&str]) -> (Option<i32>, String, Value) {
    let (code, v, err) = crate::common::audit(opts, &[], command);
    let client: Vec<&str> = err
        .lines()
        .filter(|l| !l.starts_with("handshake audit"))
        .collect();
    (code, client.join("\n"), v)
}

/// The client's output and the report; the client must succeed.
fn client_output(opts: &[&str], command: &[&str]) -> (String, Value) {
    let (code, out, v) = audit_full(opts, command);
    assert_eq!(code, Some(0), "{command:?}: {out}");
    (out, v)
}

fn check(v: &Value) {
    let t = total(v);
    assert_eq!(
        u(&t["requests"]),
        u(&t["responses"]),
        "every stream seen was answered: {t}"
    );
    let endings: u64 = t["endings"].as_object().unwrap().values().map(u).sum();
    assert_eq!(endings, u(&t["connections"]), "one ending per connection");
}

#[test]
fn curl_http2_several_urls_share_one_connection_in_turn_and_in_parallel() {
    let _machine = shared();
    let dir = Dir::new("audit-h2-curl");
    let ca = dir.path("ca.pem");
    // %{num_connects}: connections curl itself opened for each transfer.
    let (out, v) = client_output(
        &["--tls", "--cacert-out", &ca],
        &[
            "sh",
            "-c",
            &format!(
                "curl -s --http2 --cacert {ca} -w '%{{http_version}} %{{num_connects}}\\n' \
                 \"$HANDSHAKE_URL\" \"${{HANDSHAKE_URL}}bytes/100000\" \"$HANDSHAKE_URL\" \
                 -o /dev/null -o /dev/null -o /dev/null"
            ),
        ],
    );
    check(&v);
    let curl: Vec<(String, u64)> = out
        .lines()
        .map(|l| {
            let mut p = l.split_whitespace();
            (
                p.next().unwrap().to_string(),
                p.next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    assert_eq!(curl.len(), 3, "{out}");
    assert!(curl.iter().all(|(ver, _)| ver == "2"), "{out}");
    let curl_connects: u64 = curl.iter().map(|(_, n)| n).sum();
    let t = total(&v);
    assert_eq!(u(&t["connections"]), curl_connects);
    assert_eq!(u(&t["connections"]), 1);
    assert_eq!(u(&t["h2"]["streams"]), 3);
    assert_eq!(u(&t["http_versions"]["HTTP/2"]), 3);
    assert!(
        verdict(&v).contains(
            "HTTP/2: 3 streams over 1 HTTP/2 connection, one at a time: the connection is reused"
        ),
        "{}",
        verdict(&v)
    );

    // In parallel (-Z): ten transfers, one connection, several streams at once.
    let urls: Vec<String> = (0..10)
        .map(|_| "\"${HANDSHAKE_URL}delay/100\"".to_string())
        .collect();
    let outs = ["-o /dev/null"; 10].join(" ");
    let (out, v) = client_output(
        &["--tls", "--cacert-out", &ca],
        &[
            "sh",
            "-c",
            &format!(
                "curl -s -Z --http2 --cacert {ca} -w '%{{num_connects}}\\n' {} {outs} 2>/dev/null",
                urls.join(" ")
            ),
        ],
    );
    check(&v);
    let curl_connects: u64 = out.lines().map(|l| l.trim().parse::<u64>().unwrap()).sum();
    let t = total(&v);
    assert_eq!(u(&t["connections"]), curl_connects, "{out}");
    assert_eq!(u(&t["h2"]["streams"]), 10);
    assert!(
        u(&t["h2"]["peak_concurrent_streams"]) >= 2,
        "parallel transfers overlap on one connection: {t}"
    );
}

#[test]
fn go_default_https_client_uses_one_http2_connection() {
    let _machine = shared();
    let dir = Dir::new("audit-h2-go");
    // One request, then twenty from twenty goroutines; httptrace says which took a new
    // connection. (Twenty at once with no connection yet would make Go dial several and
    // keep one: a dial race the audit reports as connections that carried nothing.)
    let src = r#"package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"os"
	"sync"
	"sync/atomic"
)

func main() {
	// Go's default client, as it is: HTTP/2 when the server offers it by ALPN.
	c := http.DefaultClient
	var fresh int64
	var proto atomic.Value
	get := func(path string) {
		trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
			if !i.Reused {
				atomic.AddInt64(&fresh, 1)
			}
		}}
		req, _ := http.NewRequest("GET", os.Args[1]+path, nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		resp, err := c.Do(req)
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		proto.Store(resp.Proto)
	}
	get("")
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			get("delay/50")
		}()
	}
	wg.Wait()
	fmt.Println(proto.Load(), fresh)
}
"#;
    let client = go_build(&dir.0, "client", src);
    let ca = dir.path("ca.pem");
    let (out, v) = client_output(
        &["--tls", "--cacert-out", &ca],
        // The audit's CA, trusted the way Go reads it on Linux.
        &["env", &format!("SSL_CERT_FILE={ca}"), &client, "{url}"],
    );
    check(&v);
    let mut p = out.split_whitespace();
    assert_eq!(p.next(), Some("HTTP/2.0"), "{out}");
    let go_conns: u64 = p.next().unwrap().parse().unwrap();
    let t = total(&v);
    assert_eq!(u(&t["connections"]), go_conns, "{out} {t}");
    assert_eq!(u(&t["h2"]["streams"]), 21);
    assert_eq!(u(&t["h2"]["connections"]), go_conns);
    assert_eq!(go_conns, 1, "{t}");
    assert!(u(&t["h2"]["peak_concurrent_streams"]) >= 2, "{t}");
}

#[test]
fn node_http2_one_session_and_a_session_per_request() {
    let _machine = shared();
    assert!(have("node"), "node is needed for this test");
    let dir = Dir::new("audit-h2-node");
    let ca = dir.path("ca.pem");
    let script = |per_request: bool| {
        format!(
            r#"
const http2 = require('http2'); const fs = require('fs');
const url = process.argv[1]; const ca = fs.readFileSync({ca:?});
let sessions = 0; let session = null;
function get() {{
  return new Promise((ok, fail) => {{
    if (!session || {per_request}) {{ session = http2.connect(url, {{ ca }}); sessions++; }}
    const s = session; const req = s.request({{ ':path': '/' }});
    req.on('data', () => {{}}); req.on('error', fail);
    req.on('end', () => {{ if ({per_request}) s.close(); ok(); }}); req.end();
  }});
}}
(async () => {{ for (let i = 0; i < 6; i++) await get(); session.close(); console.log(sessions); }})();
"#
        )
    };
    for per_request in [false, true] {
        let (out, v) = client_output(
            &["--tls", "--cacert-out", &ca],
            &["node", "-e", &script(per_request), "{url}"],
        );
        check(&v);
        let sessions: u64 = out.trim().parse().unwrap_or_else(|_| panic!("{out}"));
        let t = total(&v);
        assert_eq!(u(&t["connections"]), sessions, "{t}");
        assert_eq!(u(&t["h2"]["streams"]), 6);
        if per_request {
            assert_eq!(sessions, 6);
            assert!(
                verdict(&v).contains("a new HTTP/2 connection per request"),
                "{}",
                verdict(&v)
            );
        } else {
            assert_eq!(sessions, 1);
        }
    }
}

#[test]
fn h2c_prior_knowledge_client_and_forwarding_to_an_http1_upstream() {
    let _machine = shared();
    let upstream = start(ServerConfig::default());
    let up = upstream.http_url().unwrap();
    let before = upstream.snapshot();
    // handshake's own h2c client, through the audit to the HTTP/1.1 upstream.
    let (code, v) = audit(
        &["--upstream", &up],
        &[
            "sh",
            "-c",
            &format!(
                "{} bench \"${{HANDSHAKE_URL}}bytes/5000\" -s h2 -n 40 -c 4 --no-progress >/dev/null",
                bin()
            ),
        ],
    );
    assert_eq!(code, Some(0), "{v}");
    check(&v);
    let t = total(&v);
    assert_eq!(u(&t["connections"]), 1, "{t}");
    assert_eq!(u(&t["h2"]["streams"]), 40);
    assert!(u(&t["h2"]["peak_concurrent_streams"]) <= 4);
    let after = upstream.snapshot();
    assert_eq!(after.requests - before.requests, 40, "all forwarded");
    assert_eq!(after.h2_streams, before.h2_streams, "as HTTP/1.1");
    // The bodies came back whole: curl over TLS h2 through the audit, sizes checked.
    let dir = Dir::new("audit-h2-fwd");
    let ca = dir.path("ca.pem");
    let (out, v) = client_output(
        &["--tls", "--cacert-out", &ca, "--upstream", &up],
        &[
            "sh",
            "-c",
            &format!(
                "curl -s --http2 --cacert {ca} -w '%{{http_code}} %{{size_download}}\\n' \
                 \"${{HANDSHAKE_URL}}bytes/70000\" \"${{HANDSHAKE_URL}}status/404\" -o /dev/null -o /dev/null"
            ),
        ],
    );
    check(&v);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["200 70000", "404 13"],
        "{out}"
    );
    upstream.stop();
}
