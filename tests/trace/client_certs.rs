//! Mutual TLS in trace: each handshake in which the server asked for a client
//! certificate says so, and whether one was presented; without one, the failure names
//! the flags.

use crate::common::mtls::SServer;
use crate::common::*;

#[test]
fn trace_says_which_handshake_was_asked_for_a_certificate() {
    let _machine = shared();
    let s = SServer::start();
    let url = format!("https://127.0.0.1:{}/", s.port);
    let ca = s.dir.path("ca.pem");
    let (cert, key) = (s.dir.path("cli.pem"), s.dir.path("cli.key"));
    // s_server -www closes after each answer: two connections, the second resumed.
    let out = run(&[
        "trace", &url, "--cacert", &ca, "--cert", &cert, "--key", &key, "--count", "2", "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = v["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{v}");
    let (first, second) = (&steps[0]["tls"], &steps[1]["tls"]);
    assert_eq!(first["resumed"], false, "{first}");
    assert_eq!(first["client_certificate"]["presented"], true, "{first}");
    assert_eq!(
        first["client_certificate"]["acceptable_cas"][0], "CN=s_server CA",
        "{first}"
    );
    // A resumed handshake carries the first one's authentication: not asked.
    assert_eq!(second["resumed"], true, "{second}");
    assert!(second.get("client_certificate").is_none(), "{second}");
    let out = run(&[
        "trace",
        &url,
        "--cacert",
        &ca,
        "--count",
        "1",
        "--no-progress",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains("Hint: the server asked for a client certificate in the handshake and none was sent, and a server that requires one ends the connection: give one with --cert FILE --key FILE"),
        "{text}"
    );
}
