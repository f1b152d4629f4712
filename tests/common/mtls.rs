//! Servers that ask for a client certificate (mutual TLS), for bench's, trace's and
//! doctor's tests.

use std::collections::BTreeMap;
use std::path::Path;

use super::{free_port, wait_listening, write_certs, Dir, Nginx};

/// OpenSSL's own server (`openssl s_server -Verify 1 -verify_return_error`, another TLS
/// stack than nginx's use of it: it ends a handshake without a certificate with TLS
/// 1.3's certificate_required alert), and an RSA 2048 client certificate made by
/// `openssl` (X.509 v1, as `openssl x509 -req` makes one without extensions).
pub struct SServer {
    child: std::process::Child,
    pub port: u16,
    pub dir: Dir,
}

impl SServer {
    pub fn start() -> SServer {
        let dir = Dir::new("mtls-s-server");
        let sh = |script: &str| {
            let ok = std::process::Command::new("sh")
                .args(["-c", script])
                .current_dir(&dir.0)
                .output()
                .unwrap();
            assert!(ok.status.success(), "{script}: {ok:?}");
        };
        sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -subj '/CN=s_server CA' -days 2");
        sh("openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout srv.key -out srv.csr -subj /CN=localhost \
            && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1' > ext \
            && openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile ext");
        sh("openssl req -newkey rsa:2048 -nodes -keyout cli.key -out cli.csr -subj '/CN=rsa client' \
            && openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cli.pem -days 2");
        let port = free_port();
        let log = dir.0.join("s_server.log");
        let child = std::process::Command::new("openssl")
            .args([
                "s_server",
                "-Verify",
                "1",
                "-verify_return_error",
                "-CAfile",
                "ca.pem",
            ])
            .args(["-cert", "srv.pem", "-key", "srv.key", "-www", "-accept"])
            .arg(format!("127.0.0.1:{port}"))
            .current_dir(&dir.0)
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_listening(port, "openssl s_server", &log);
        SServer { child, port, dir }
    }
}

impl Drop for SServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir.0);
    }
}

/// A client CA (written as `client_ca.pem`, its key as `client_ca.key`) and a client
/// certificate it signed, with an ECDSA P-256 key (`client.pem`, `client.key`), in `dir`.
pub fn write_client_certs(dir: &Path, subject: &str) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "handshake client CA");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut leaf = CertificateParams::new(Vec::<String>::new()).unwrap();
    leaf.distinguished_name.push(DnType::CommonName, subject);
    let leaf = leaf.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("client_ca.pem"), ca_cert.pem()).unwrap();
    std::fs::write(dir.join("client_ca.key"), ca_key_pem).unwrap();
    std::fs::write(dir.join("client.pem"), leaf.pem()).unwrap();
    std::fs::write(dir.join("client.key"), key.serialize_pem()).unwrap();
}

/// nginx asking for a client certificate (`ssl_verify_client` `verify`: `on` or
/// `optional`), one its client CA signed (HTTP/2 beside HTTP/1.1 by
/// ALPN), logging per request: its connection, whether the session was resumed, the
/// verification and the certificate's subject, the status.
pub fn nginx_mtls(verify: &str) -> Option<(Nginx, String)> {
    let nginx = Nginx::start_servers(
        "log_format mtls '$connection $ssl_session_reused $ssl_client_verify \"$ssl_client_s_dn\" $status';",
        1,
        |ports, d| {
            write_certs(d, &["localhost"]);
            write_client_certs(d, "bench client");
            format!(
                "server {{ listen 127.0.0.1:{} ssl http2; ssl_certificate {d}/cert.pem; \
                 ssl_certificate_key {d}/key.pem; ssl_protocols TLSv1.2 TLSv1.3; \
                 ssl_client_certificate {d}/client_ca.pem; ssl_verify_client {verify}; \
                 ssl_session_tickets on; access_log {d}/access.log mtls; \
                 location / {{ return 200 \"ok\\n\"; }} }}",
                ports[0],
                d = d.display()
            )
        },
    )?;
    let log = nginx.dir.join("access.log").display().to_string();
    Some((nginx, log))
}

/// What nginx logged: requests, and per connection its first request's `$ssl_session_reused`,
/// each request's verification and subject, and the statuses.
pub struct Logged {
    pub requests: u64,
    /// Connection → whether its handshake resumed a session.
    pub connections: BTreeMap<String, bool>,
    pub verified: u64,
    pub subjects: Vec<String>,
    pub statuses: BTreeMap<String, u64>,
}

pub fn logged(log: &str) -> Logged {
    std::thread::sleep(std::time::Duration::from_millis(200));
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut l = Logged {
        requests: 0,
        connections: BTreeMap::new(),
        verified: 0,
        subjects: Vec::new(),
        statuses: BTreeMap::new(),
    };
    for line in text.lines() {
        let (head, rest) = line.split_once(" \"").unwrap();
        let (subject, status) = rest.rsplit_once("\" ").unwrap();
        let f: Vec<&str> = head.split(' ').collect();
        l.requests += 1;
        l.connections.entry(f[0].to_string()).or_insert(f[1] == "r");
        l.verified += u64::from(f[2] == "SUCCESS");
        if !l.subjects.contains(&subject.to_string()) {
            l.subjects.push(subject.to_string());
        }
        *l.statuses.entry(status.to_string()).or_default() += 1;
    }
    std::fs::write(log, "").unwrap();
    l
}

/// The client CA and an ECDSA P-256 client certificate (`client.pem`, `client.key`,
/// "CN=audit client"), an RSA 2048 one from the same CA (`rsa.pem`, `rsa.key`,
/// "CN=rsa client"; `v1.pem` is the same as an X.509 v1 certificate, as `openssl x509
/// -req` makes one without extensions), and one from another CA ("CN=another CA": `other/client.pem`), in `d`.
pub fn write_client_cert_set(d: &Path) {
    write_client_certs(d, "audit client");
    let ok = std::process::Command::new("sh")
        .arg("-c")
        .arg(
            "printf 'basicConstraints=CA:FALSE\\nextendedKeyUsage=clientAuth\\n' > v3 \
             && openssl req -newkey rsa:2048 -nodes -keyout rsa.key -out rsa.csr -subj '/CN=rsa client' 2>/dev/null \
             && openssl x509 -req -in rsa.csr -CA client_ca.pem -CAkey client_ca.key -CAcreateserial -out rsa.pem -days 2 -extfile v3 2>/dev/null \
             && openssl x509 -req -in rsa.csr -CA client_ca.pem -CAkey client_ca.key -CAcreateserial -out v1.pem -days 2 2>/dev/null \
             && mkdir -p other && cd other \
             && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -subj '/CN=another CA' -days 2 2>/dev/null \
             && openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout client.key -out client.csr -subj /CN=stranger 2>/dev/null \
             && openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 -extfile ../v3 2>/dev/null",
        )
        .current_dir(d)
        .status()
        .unwrap();
    assert!(ok.success());
}

/// An nginx of [`nginx_mtls`]'s URL (by name) and the flags that reach and trust it:
/// `--resolve`, `--cacert`, and with `cert` the client certificate (`--cert`, `--key`).
pub fn target_args(n: &Nginx, cert: bool) -> Vec<String> {
    let d = &n.dir;
    let path = |f: &str| d.join(f).display().to_string();
    let mut a = vec![
        format!("https://localhost:{}/", n.port),
        "--resolve".into(),
        format!("localhost:{}:127.0.0.1", n.port),
        "--cacert".into(),
        path("ca.pem"),
    ];
    if cert {
        a.extend([
            "--cert".into(),
            path("client.pem"),
            "--key".into(),
            path("client.key"),
        ]);
    }
    a
}

/// `target_args` and then `more`, as the argument list a run takes.
pub fn with_target<'a>(target: &'a [String], more: &[&'a str]) -> Vec<&'a str> {
    target
        .iter()
        .map(String::as_str)
        .chain(more.iter().copied())
        .collect()
}

/// A Go client (`crypto/tls`) with its certificate from `$CERT`/`$KEY`, the server's CA
/// from `$CA`, a TLS session cache and no keep-alive: `N` requests to `URL` (its
/// arguments), a new connection each, printing per request whether its handshake
/// resumed ("go resumed true").
pub const GO_MTLS_CLIENT: &str = r#"package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
)

func main() {
	cert, err := tls.LoadX509KeyPair(os.Getenv("CERT"), os.Getenv("KEY"))
	if err != nil {
		panic(err)
	}
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(os.Getenv("CA"))
	pool.AppendCertsFromPEM(pem)
	config := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ClientSessionCache: tls.NewLRUClientSessionCache(8)}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: config}}
	n, _ := strconv.Atoi(os.Args[2])
	for i := 0; i < n; i++ {
		resp, err := c.Get(os.Args[1])
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		fmt.Println("go resumed", resp.TLS.DidResume)
	}
}
"#;

/// A bench report against the embedded server with `--cert`: `n` requests ok, and its
/// full and resumed handshakes and certificates presented equal the server's own counts
/// (each full handshake presented one). `what` opens each failure's message.
pub fn agrees_with_the_embedded_server(v: &serde_json::Value, n: u64, what: &str) {
    use super::u;
    let s = &v["scenarios"][0];
    let th = &s["connections"]["tls_handshakes"];
    let cc = &th["client_certificate"];
    let srv = &v["server"];
    let says = format!("{what}: {th}; server {srv}");
    assert_eq!(u(&s["requests"]["ok"]), n, "{says}");
    assert_eq!(u(&th["full"]), u(&srv["tls_handshakes_full"]), "{says}");
    assert_eq!(
        u(&th["resumed"]),
        u(&srv["tls_handshakes_resumed"]),
        "{says}"
    );
    assert_eq!(u(&cc["presented"]), u(&th["full"]), "{says}");
    assert_eq!(
        u(&cc["presented"]),
        u(&srv["tls_client_certificates"]),
        "{says}"
    );
}
