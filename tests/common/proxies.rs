//! Forward proxies a test starts: Debian's tinyproxy (and the pieces squid's start
//! shares), each stopped by its PID and its directory removed on drop.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, stop_child, Dir};

/// A forward proxy the test started (squid or tinyproxy), stopped by its PID on drop.
pub struct ProxyServer {
    pub child: Child,
    pub port: u16,
    pub log: std::path::PathBuf,
    pub _dir: Dir,
}

impl Drop for ProxyServer {
    fn drop(&mut self) {
        stop_child(&mut self.child, "-TERM");
    }
}

/// Wait until something listens on `port`, without connecting to it (a proxy logs every
/// connection): binding the port fails then.
pub fn wait_listening(port: u16, what: &str, log: &std::path::Path) {
    let t = Instant::now();
    while std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{what} did not start: {}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The directory a proxy that drops its privileges can write its log in.
pub fn shared_dir(name: &str) -> Dir {
    // One of its own per proxy (tests run side by side in one process).
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let d = Dir::new(&format!("{name}{n}"));
    Command::new("chmod").arg("777").arg(&d.0).status().unwrap();
    d
}

/// tinyproxy on a free port, asking for `user:pa55` when `auth`, logging each client
/// connection and request.
pub fn tinyproxy(auth: bool) -> ProxyServer {
    let dir = shared_dir("tinyproxy");
    let port = free_port();
    let conf = format!(
        "User nobody\nGroup nogroup\nPort {port}\nListen 127.0.0.1\nTimeout 30\n\
         LogFile \"{d}/tinyproxy.log\"\nLogLevel Connect\nPidFile \"{d}/tinyproxy.pid\"\n\
         MaxClients 100\nAllow 127.0.0.1\nDisableViaHeader Yes\n{auth}",
        d = dir.0.display(),
        auth = if auth { "BasicAuth user pa55\n" } else { "" }
    );
    std::fs::write(dir.0.join("tinyproxy.conf"), conf).unwrap();
    let child = Command::new("tinyproxy")
        .args(["-d", "-c", &dir.path("tinyproxy.conf")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("tinyproxy (Debian package tinyproxy; scripts/test installs it)");
    wait_listening(port, "tinyproxy", &dir.0.join("tinyproxy.log"));
    ProxyServer {
        child,
        port,
        log: dir.0.join("tinyproxy.log"),
        _dir: dir,
    }
}
