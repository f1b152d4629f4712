//! Servers that ask for a client certificate (mutual TLS), for bench's and trace's tests.

use super::{free_port, wait_listening, Dir};

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
