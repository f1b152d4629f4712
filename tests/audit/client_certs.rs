//! `audit --tls --client-ca`: the audit asks each client for a certificate and reports
//! the certificates presented, the handshakes resumed (which send none), the subjects,
//! and the handshakes refused. Each real client (curl, Python's `ssl` and `requests`, Go's
//! `crypto/tls`, Node's `https.Agent`) prints, per connection, whether it resumed a
//! session: the audit's counts equal what the clients say.

use std::path::Path;

use crate::common::mtls::write_client_cert_set as certs;
use crate::common::*;
use serde_json::Value;

/// `audit --tls --client-ca client_ca.pem [opts] -- sh -c SCRIPT`, with `$CA` (the audit's
/// own CA, written before the command runs), `$CERT`, `$KEY` and `$D` in its environment;
/// the exit code, the report and what the command printed.
fn audit_mtls(d: &Path, opts: &[&str], script: &str, cert: &str) -> (Option<i32>, Value, String) {
    let ca = d.join("audit_ca.pem").display().to_string();
    let client_ca = d.join("client_ca.pem").display().to_string();
    let mut all = vec!["--tls", "--client-ca", &client_ca, "--cacert-out", &ca];
    all.extend_from_slice(opts);
    let (c, k) = (
        d.join(format!("{cert}.pem")).display().to_string(),
        d.join(format!("{cert}.key")).display().to_string(),
    );
    let dir = d.display().to_string();
    crate::common::audit(
        &all,
        &[("CA", &ca), ("CERT", &c), ("KEY", &k), ("D", &dir)],
        &["sh", "-c", script],
    )
}

/// How many of the client's lines `PREFIX true` and `PREFIX false` it printed.
fn said(out: &str, prefix: &str) -> (u64, u64) {
    let n = |v: &str| {
        out.lines()
            .filter(|l| l.trim().to_lowercase() == format!("{prefix} {v}"))
            .count() as u64
    };
    (n("true"), n("false"))
}

/// The total's client certificates.
fn certs_of(v: &Value) -> &Value {
    &total(v)["client_certificates"]
}

/// The text of the verdict's finding `code` (empty when absent).
fn said_by(v: &Value, code: &str) -> String {
    v["verdict"]
        .as_array()
        .and_then(|a| a.iter().find(|f| f["code"] == code))
        .and_then(|f| f["text"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[test]
fn curl_presents_its_certificate_on_every_connection_and_never_resumes() {
    let _machine = shared();
    let tmp = Dir::new("audit-mtls-curl");
    certs(&tmp.0);
    // Three processes: three connections, three full handshakes (curl keeps no session
    // between processes), each with the RSA certificate.
    let (code, v, out) = audit_mtls(
        &tmp.0,
        &[],
        "for i in 1 2 3; do curl -s -o /dev/null -w 'curl connects %{num_connects}\\n' --cacert \"$CA\" --cert \"$CERT\" --key \"$KEY\" \"$HANDSHAKE_URL\" || exit 1; done",
        "rsa",
    );
    assert_eq!(code, Some(0), "{out}");
    let connects: u64 = out
        .lines()
        .filter_map(|l| l.strip_prefix("curl connects "))
        .map(|n| n.trim().parse::<u64>().unwrap())
        .sum();
    let c = certs_of(&v);
    assert_eq!(connects, 3, "{out}");
    assert_eq!(u(&total(&v)["connections"]), connects);
    assert_eq!(u(&c["presented"]), 3, "{c}");
    assert_eq!(u(&c["resumed"]), 0, "{c}");
    assert_eq!(u(&c["refused"]), 0, "{c}");
    assert_eq!(u(&c["subjects"]["CN=rsa client"]), 3, "{c}");
    assert_eq!(u(&c["key_types"]["RSA 2048"]), 3, "{c}");
    let f = said_by(&v, "client_cert_never_resumed");
    assert!(
        f.contains("The client presented its certificate (CN=rsa client, RSA 2048) in each of its 3 full handshakes and resumed none")
            && f.contains("(3 signatures here)"),
        "{f}"
    );
    // One process, three URLs: one connection, one certificate.
    let (code, v, _) = audit_mtls(
        &tmp.0,
        &[],
        "curl -s -o /dev/null --cacert \"$CA\" --cert \"$CERT\" --key \"$KEY\" \"$HANDSHAKE_URL\" \"$HANDSHAKE_URL\" \"$HANDSHAKE_URL\"",
        "client",
    );
    assert_eq!(code, Some(0));
    let c = certs_of(&v);
    assert_eq!(u(&total(&v)["connections"]), 1);
    assert_eq!(u(&total(&v)["requests"]), 3);
    assert_eq!(u(&c["presented"]), 1, "{c}");
    assert_eq!(u(&c["subjects"]["CN=audit client"]), 1, "{c}");
    assert_eq!(u(&c["key_types"]["ECDSA P-256"]), 1, "{c}");
    assert_eq!(said_by(&v, "client_cert_never_resumed"), "");
    // The text gives the certificates in a line.
    let d = &tmp.0;
    let (ca, client_ca) = (tmp.path("audit_ca.pem"), tmp.path("client_ca.pem"));
    let curl = format!(
        "curl -s -o /dev/null --cacert {ca} --cert {} --key {} \"$HANDSHAKE_URL\"",
        d.join("client.pem").display(),
        d.join("client.key").display()
    );
    let out = run(&[
        "audit",
        "--tls",
        "--client-ca",
        &client_ca,
        "--cacert-out",
        &ca,
        "--no-progress",
        "--",
        "sh",
        "-c",
        &curl,
    ]);
    // Its lines as one (they wrap at the width).
    let text = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains(
            " Client certificates presented 1, resumed 0, none 0, refused 0; CN=audit client (1) "
        ),
        "{text}"
    );
}

#[test]
fn without_a_certificate_or_with_a_strangers_the_handshake_is_refused_and_said() {
    let _machine = shared();
    let tmp = Dir::new("audit-mtls-refused");
    certs(&tmp.0);
    let curl = "curl -s -o /dev/null --cacert \"$CA\"";
    // Required: one curl without a certificate, one with another CA's, one with an
    // X.509 v1 certificate (WebPKI refuses it); all three fail.
    let script = format!(
        "{curl} \"$HANDSHAKE_URL\"; echo \"curl exit $?\"; {curl} --cert \"$D/other/client.pem\" --key \"$D/other/client.key\" \"$HANDSHAKE_URL\"; echo \"curl exit $?\"; {curl} --cert \"$D/v1.pem\" --key \"$D/rsa.key\" \"$HANDSHAKE_URL\"; echo \"curl exit $?\""
    );
    let (code, v, out) = audit_mtls(&tmp.0, &[], &script, "client");
    assert_eq!(code, Some(0), "{out}");
    // curl itself failed each time.
    assert_eq!(out.matches("curl exit 0").count(), 0, "{out}");
    assert_eq!(out.matches("curl exit ").count(), 3, "{out}");
    let t = total(&v);
    let c = certs_of(&v);
    assert_eq!(u(&t["connections"]), 3, "{t}");
    assert_eq!(u(&t["requests"]), 0, "{t}");
    assert_eq!(u(&t["endings"]["certificate_refused"]), 3, "{t} {out}");
    assert_eq!(u(&t["unused_connections"]), 0, "refused is not unused: {t}");
    assert_eq!(u(&c["refused"]), 3, "{c}");
    assert_eq!(u(&c["refused_none_sent"]), 1, "{c}");
    assert_eq!(u(&c["refusals"]["no certificate was sent"]), 1, "{c}");
    assert_eq!(
        u(&c["refusals"]["unknown issuer (no CA in --client-ca signed it)"]),
        1,
        "{c}"
    );
    let f = said_by(&v, "client_cert_not_sent");
    assert!(
        f.starts_with("1 handshake was refused: the client sent no certificate where the audit requires one (--client-ca)")
            && f.contains("curl --cert/--key"),
        "{f}"
    );
    let v1 = "an X.509 v1 certificate (WebPKI takes v3 only; OpenSSL-based servers take v1)";
    assert_eq!(u(&c["refusals"][v1]), 1, "{c}");
    let f = said_by(&v, "client_cert_refused");
    assert!(
        f.starts_with(&format!("The audit refused the certificate the client presented in 2 handshakes: {v1} (1); unknown issuer (no CA in --client-ca signed it) (1).")),
        "{f}"
    );
    // Optional: served without one, and said.
    let (code, v, out) = audit_mtls(
        &tmp.0,
        &["--client-cert", "optional"],
        &format!("{curl} \"$HANDSHAKE_URL\" \"$HANDSHAKE_URL\"; echo \"curl exit $?\""),
        "client",
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("curl exit 0"), "{out}");
    let c = certs_of(&v);
    assert_eq!(u(&total(&v)["requests"]), 2);
    assert_eq!(u(&c["not_presented"]), 1, "{c}");
    assert_eq!(u(&c["presented"]), 0, "{c}");
    let f = said_by(&v, "client_cert_optional_none");
    assert!(
        f.starts_with("1 of 1 full handshakes carried no client certificate; the audit served them (--client-cert optional)."),
        "{f}"
    );
}

#[test]
fn python_resumes_with_its_certificate_and_the_audit_counts_what_it_says() {
    let _machine = shared();
    let tmp = Dir::new("audit-mtls-python");
    certs(&tmp.0);
    // Python's ssl: a new connection per request, offering the last one's session; it
    // prints whether each one was resumed. Then requests with cert=, one Session.
    let py = r#"import os, socket, ssl, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
ctx = ssl.create_default_context(cafile=os.environ['CA'])
ctx.load_cert_chain(os.environ['CERT'], os.environ['KEY'])
session = None
for i in range(4):
    t = ctx.wrap_socket(socket.create_connection((u.hostname, u.port)), server_hostname=u.hostname, session=session)
    t.sendall(b'GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n')
    while t.recv(65536):
        pass
    print('python resumed', t.session_reused, flush=True)
    session = t.session
    t.close()
import requests
s = requests.Session()
for i in range(3):
    s.get(sys.argv[1], cert=(os.environ['CERT'], os.environ['KEY']), verify=os.environ['CA'])
"#;
    let client = tmp.path("client.py");
    std::fs::write(&client, py).unwrap();
    let (code, v, out) = audit_mtls(
        &tmp.0,
        &[],
        &format!("python3 '{client}' \"$HANDSHAKE_URL\""),
        "client",
    );
    assert_eq!(code, Some(0), "{out}");
    let (resumed, full) = said(&out, "python resumed");
    assert_eq!(resumed + full, 4, "{out}");
    assert!(resumed >= 1, "Python resumed no session: {out}");
    let c = certs_of(&v);
    // The ssl connections and requests' one.
    assert_eq!(u(&total(&v)["connections"]), 5, "{}", total(&v));
    assert_eq!(u(&c["resumed"]), resumed, "{c} / {out}");
    assert_eq!(u(&c["presented"]), full + 1, "{c} / {out}");
    assert_eq!(u(&c["subjects"]["CN=audit client"]), 5, "{c}");
    let f = said_by(&v, "client_cert_resumed");
    assert!(
        f.contains(&format!(
            "in {} full handshakes and resumed {resumed}, which sent no certificate and signed nothing",
            full + 1
        )),
        "{f}"
    );
}

#[test]
fn go_and_node_present_their_certificates_and_resume_as_they_say() {
    let _machine = shared();
    assert!(have("node"), "node is needed for this test");
    let tmp = Dir::new("audit-mtls-go-node");
    certs(&tmp.0);
    let bin = go_build(&tmp.0, "mtls", crate::common::mtls::GO_MTLS_CLIENT);
    let (code, v, out) = audit_mtls(
        &tmp.0,
        &[],
        &format!("'{bin}' \"$HANDSHAKE_URL\" 4"),
        "client",
    );
    assert_eq!(code, Some(0), "{out}");
    let (resumed, full) = said(&out, "go resumed");
    assert_eq!(resumed + full, 4, "{out}");
    let c = certs_of(&v);
    assert_eq!(u(&total(&v)["connections"]), 4);
    assert_eq!(u(&c["resumed"]), resumed, "{c} / {out}");
    assert_eq!(u(&c["presented"]), full, "{c} / {out}");
    assert!(resumed >= 1, "Go resumed no session: {out}");

    // Node: an https.Agent with the certificate, no keep-alive (a connection per
    // request), its TLS session cache on (the default).
    let node = r#"const https = require('https'); const fs = require('fs'); const e = process.env;
const agent = new https.Agent({ keepAlive: false, cert: fs.readFileSync(e.CERT), key: fs.readFileSync(e.KEY), ca: fs.readFileSync(e.CA) });
(async () => {
  for (let i = 0; i < 4; i++) {
    await new Promise((ok, bad) => https.get(process.argv[2], { agent }, (r) => {
      console.log('node resumed', r.socket.isSessionReused());
      r.resume(); r.on('end', ok);
    }).on('error', bad));
  }
})().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
"#;
    let js = tmp.path("client.js");
    std::fs::write(&js, node).unwrap();
    let (code, v, out) = audit_mtls(
        &tmp.0,
        &[],
        &format!("node '{js}' \"$HANDSHAKE_URL\""),
        "rsa",
    );
    assert_eq!(code, Some(0), "{out}");
    let (resumed, full) = said(&out, "node resumed");
    assert_eq!(resumed + full, 4, "{out}");
    let c = certs_of(&v);
    assert_eq!(u(&total(&v)["connections"]), 4);
    assert_eq!(u(&c["resumed"]), resumed, "{c} / {out}");
    assert_eq!(u(&c["presented"]), full, "{c} / {out}");
    assert_eq!(u(&c["key_types"]["RSA 2048"]), full, "{c}");
}

#[test]
fn client_ca_flags_are_checked() {
    let _machine = shared();
    let tmp = Dir::new("audit-mtls-usage");
    let missing = tmp.path("missing.pem");
    for (args, says) in [
        (vec!["audit", "--client-ca", missing.as_str()], "--tls"),
        (
            vec![
                "audit",
                "--tls",
                "--client-ca",
                missing.as_str(),
                "-d",
                "1s",
            ],
            "--client-ca",
        ),
        (
            vec!["audit", "--tls", "--client-cert", "optional"],
            "--client-ca",
        ),
        (
            vec![
                "audit",
                "--tls",
                "--client-ca",
                missing.as_str(),
                "--client-cert",
                "maybe",
            ],
            "maybe",
        ),
    ] {
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
