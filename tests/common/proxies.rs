//! Forward proxies a test starts: Debian's tinyproxy and squid,
//! each stopped by its PID and its directory removed on drop.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, stop_child, write_certs, Dir};

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

/// squid on a free port, logging each request's client address and port, method, URL
/// and status; no cache.
pub fn squid() -> ProxyServer {
    squid_with(None).0
}

/// squid, also taking TLS (an https:// proxy, its certificate for localhost) on a second
/// port when `tls`; that port and the CA that signed its certificate (in squid's
/// directory, removed with it).
pub fn squid_with(tls: Option<()>) -> (ProxyServer, Option<(u16, std::path::PathBuf)>) {
    let dir = shared_dir("squid");
    let port = free_port();
    let https = tls.map(|()| {
        write_certs(&dir.0, &["localhost"]);
        let p = free_port();
        let line = format!(
            "https_port 127.0.0.1:{p} tls-cert={d}/cert.pem tls-key={d}/key.pem\n",
            d = dir.0.display()
        );
        (p, dir.0.join("ca.pem"), line)
    });
    let conf = format!(
        "{}http_port 127.0.0.1:{port}\npid_filename {d}/squid.pid\ncache_log {d}/cache.log\n\
         logformat hs %>a %>p %rm %ru %>Hs\naccess_log stdio:{d}/access.log hs\n\
         cache deny all\ncache_mem 4 MB\ncoredump_dir {d}\nnetdb_filename none\n\
         shutdown_lifetime 0 seconds\npinger_enable off\n\
         http_access allow localhost\nhttp_access deny all\n",
        https.as_ref().map_or("", |h| h.2.as_str()),
        d = dir.0.display()
    );
    std::fs::write(dir.0.join("squid.conf"), conf).unwrap();
    let child = Command::new("squid")
        .args([
            "-N",
            "-n",
            &format!("hs{port}"),
            "-f",
            &dir.path("squid.conf"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("squid (Debian package squid; scripts/test installs it)");
    wait_listening(port, "squid", &dir.0.join("cache.log"));
    let https = https.map(|(p, ca, _)| {
        wait_listening(p, "squid's https_port", &dir.0.join("cache.log"));
        (p, ca)
    });
    let s = ProxyServer {
        child,
        port,
        log: dir.0.join("access.log"),
        _dir: dir,
    };
    (s, https)
}
