//! `--cacert` with the server's own self-signed certificate, made by `openssl req -x509`
//! (which marks it `CA:TRUE`), served by Python's `ssl` module (OpenSSL, not handshake):
//! trusted as the end-entity certificate, as curl does, for close, close-resumed and
//! keepalive, with connection and resumption counts equal to that server's own; the
//! name is still checked, and another self-signed certificate is still refused.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::common::*;

/// A Python HTTPS server (http.server + ssl) on 127.0.0.1, counting the TCP connections
/// it accepted and the TLS sessions it resumed; `GET /__count` answers both as JSON.
const PY_SERVER: &str = r#"
import http.server, json, ssl, sys, threading

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
lock = threading.Lock()
counts = {"connections": 0, "resumed": 0}

class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    def get_request(self):
        sock, addr = self.socket.accept()
        tls = ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return tls, addr
    def finish_request(self, request, client_address):
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError):
            with lock:
                counts["connections"] += 1
            return
        with lock:
            counts["connections"] += 1
            counts["resumed"] += 1 if request.session_reused else 0
        super().finish_request(request, client_address)

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if self.path == "/__count":
            with lock:
                body = json.dumps(counts).encode()
        else:
            body = b"hello, world\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass

srv = Server(("127.0.0.1", 0), Handler)
print(srv.server_address[1], flush=True)
srv.serve_forever()
"#;

struct PyTls {
    child: Child,
    port: u16,
}

impl PyTls {
    fn start(cert: &Path, key: &Path) -> PyTls {
        let mut child = Command::new("python3")
            .args(["-c", PY_SERVER])
            .arg(cert)
            .arg(key)
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the server prints its port");
        PyTls { child, port }
    }

    /// (connections accepted, sessions resumed) so far, this request's own included
    /// (curl does not resume).
    fn counts(&self) -> (u64, u64) {
        let out = Command::new("curl")
            .args(["-sk", &format!("https://127.0.0.1:{}/__count", self.port)])
            .output()
            .expect("curl runs");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("counts");
        (u(&v["connections"]), u(&v["resumed"]))
    }
}

impl Drop for PyTls {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `openssl req -x509` as the recipes give it: a self-signed certificate for localhost
/// and 127.0.0.1.
fn openssl_self_signed(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let cert = dir.join(format!("{name}.pem"));
    let key = dir.join(format!("{name}.key"));
    let st = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-keyout",
        ])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl runs (Debian package openssl)");
    assert!(st.success());
    (cert, key)
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("handshake-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn openssl_self_signed_certificate_is_trusted_as_given_against_a_python_server() {
    let _machine = shared();
    let dir = tempdir("selfsigned");
    let (cert, key) = openssl_self_signed(&dir, "server");
    let text = Command::new("openssl")
        .args(["x509", "-noout", "-text", "-in"])
        .arg(&cert)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("CA:TRUE"),
        "openssl req -x509 makes a CA:TRUE certificate, the case under test"
    );
    let srv = PyTls::start(&cert, &key);
    let url = format!("https://localhost:{}/", srv.port);
    let cacert = cert.to_str().unwrap();

    // curl (OpenSSL) accepts it: the behaviour to match.
    let curl = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "--cacert", cacert, &url])
        .output()
        .unwrap();
    assert!(
        curl.status.success(),
        "{}",
        String::from_utf8_lossy(&curl.stderr)
    );

    for (strategy, n) in [("close", 12u64), ("close-resumed", 12), ("keepalive", 12)] {
        let (c0, r0) = srv.counts();
        let r = bench_json(&[
            &url,
            "--cacert",
            cacert,
            "--strategy",
            strategy,
            "-n",
            "12",
            "-c",
            "2",
        ]);
        let s = scenario(&r);
        check_accounting(s);
        assert_eq!(u(&s["requests"]["ok"]), n, "{strategy}: {}", s["requests"]);
        let (c1, r1) = srv.counts();
        let opened = u(&s["connections"]["opened"]);
        assert_eq!(
            opened,
            c1 - c0 - 1,
            "{strategy}: the Python server's own count (less the first count request)"
        );
        let tls = &s["connections"]["tls_handshakes"];
        assert_eq!(u(&tls["full"]) + u(&tls["resumed"]), opened);
        assert_eq!(
            u(&tls["resumed"]),
            r1 - r0,
            "{strategy}: resumed sessions as the server counted them"
        );
        match strategy {
            "close" => assert_eq!((opened, u(&tls["resumed"])), (12, 0)),
            "close-resumed" => {
                assert_eq!(opened, 12);
                assert!(u(&tls["resumed"]) >= 8, "{tls}");
            }
            _ => assert_eq!(opened, 2),
        }
    }

    // The name is still checked: the same certificate for a name it does not carry.
    let other = format!("https://other.example:{}/", srv.port);
    let resolve = format!("other.example:{}:127.0.0.1", srv.port);
    let r = bench_json(&[&other, "--cacert", cacert, "--resolve", &resolve, "-n", "2"]);
    let s = scenario(&r);
    assert_eq!(u(&s["requests"]["errors"]["tls"]), 2);
    assert_eq!(u(&s["requests"]["error_details"]["cert_wrong_name"]), 2);

    // Verified chains are remembered per name (a browser's verification cache): in one
    // run, the certificate verified for localhost is still refused for other.example.
    let list = dir.join("urls.txt");
    std::fs::write(&list, format!("{url}\n{other}\n")).unwrap();
    let r = bench_json(&[
        "--urls-from-file",
        list.to_str().unwrap(),
        "--cacert",
        cacert,
        "--resolve",
        &resolve,
        "--strategy",
        "close",
        "-n",
        "10",
        "-c",
        "1",
    ]);
    let s = scenario(&r);
    assert_eq!(u(&s["requests"]["ok"]), 5, "{}", s["requests"]);
    assert_eq!(u(&s["requests"]["error_details"]["cert_wrong_name"]), 5);

    // Another self-signed certificate given with --cacert does not vouch for this one.
    let (stranger, _) = openssl_self_signed(&dir, "stranger");
    let r = bench_json(&[&url, "--cacert", stranger.to_str().unwrap(), "-n", "2"]);
    let s = scenario(&r);
    assert_eq!(u(&s["requests"]["errors"]["tls"]), 2, "{}", s["requests"]);
    assert_eq!(u(&s["requests"]["ok"]), 0);

    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
