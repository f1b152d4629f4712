//! Servers the oracle starts besides nginx and Apache, each with its own config in its
//! own directory, in the foreground, stopped by its PID: HAProxy (Debian's haproxy) in
//! front of nginx, and Caddy (Debian's caddy).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::common::*;

/// A server process the oracle started, with its port; stopped by its PID (and its
/// directory removed) when dropped.
pub struct Front {
    child: Child,
    pub port: u16,
    _dir: Dir,
}

impl Drop for Front {
    fn drop(&mut self) {
        stop_child(&mut self.child, "-TERM");
    }
}

/// Wait until `port` accepts, or panic with what the server wrote (`log`).
fn listening(child: &mut Child, port: u16, what: &str, log: &str) {
    let t = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        let ended = child.try_wait().ok().flatten().is_some();
        if ended || t.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{what} did not start: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// HAProxy in HTTP mode on a free port, in front of `backend` (nginx), with `policy`
/// (`option httpclose`, `timeout http-keep-alive 500ms`, or nothing: keep-alive).
pub fn haproxy(backend: u16, policy: &str) -> Front {
    let dir = Dir::new(&format!("oracle-haproxy-{backend}"));
    let port = free_port();
    let conf = format!(
        "defaults\n  mode http\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\n  {policy}\n\
         frontend f\n  bind 127.0.0.1:{port}\n  default_backend b\n\
         backend b\n  server n1 127.0.0.1:{backend}\n"
    );
    std::fs::write(dir.path("haproxy.cfg"), conf).unwrap();
    let log = dir.path("stderr.log");
    let mut child = Command::new("/usr/sbin/haproxy")
        .args(["-db", "-f", &dir.path("haproxy.cfg")])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("haproxy (Debian package haproxy; scripts/test installs it)");
    listening(&mut child, port, "HAProxy", &log);
    Front {
        child,
        port,
        _dir: dir,
    }
}

/// Caddy on a free port answering every request with `status` ("hello"), with its
/// idle timeout (`idle`, e.g. "500ms"; its default where `None`) and `Connection:
/// close` on each response where `close` (Go's server then ends the connection).
pub fn caddy(status: u16, idle: Option<&str>, close: bool) -> Front {
    let port = free_port();
    let dir = Dir::new(&format!("oracle-caddy-{port}"));
    let timeouts = idle
        .map(|t| format!("  servers {{\n    timeouts {{\n      idle {t}\n    }}\n  }}\n"))
        .unwrap_or_default();
    let header = if close {
        "  header Connection close\n"
    } else {
        ""
    };
    let conf = format!(
        "{{\n  admin off\n  auto_https off\n{timeouts}}}\n\
         http://127.0.0.1:{port} {{\n{header}  respond \"hello\" {status}\n}}\n"
    );
    std::fs::write(dir.path("Caddyfile"), conf).unwrap();
    let log = dir.path("stderr.log");
    let mut child = Command::new("caddy")
        .args([
            "run",
            "--config",
            &dir.path("Caddyfile"),
            "--adapter",
            "caddyfile",
        ])
        .env("XDG_DATA_HOME", &dir.0)
        .env("XDG_CONFIG_HOME", &dir.0)
        .env("HOME", &dir.0)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("caddy (Debian package caddy; scripts/test installs it)");
    listening(&mut child, port, "Caddy", &log);
    Front {
        child,
        port,
        _dir: dir,
    }
}
