//! Apache (Debian's apache2), a server that is not handshake's own, started in the
//! foreground with its own config for one test and stopped by its PID.

use std::sync::atomic::{AtomicU64, Ordering};

use super::stop_child;

/// Apache (not handshake's own server), in the foreground with its own config and
/// directory, on a free loopback port; stopped by its PID when dropped.
pub struct Apache {
    child: std::process::Child,
    pub port: u16,
    pub dir: std::path::PathBuf,
}

impl Apache {
    /// None (with a message) only when Apache is missing and HANDSHAKE_SKIP_APACHE is set.
    pub fn start(settings: &str) -> Option<Apache> {
        let bin = "/usr/sbin/apache2";
        if !std::path::Path::new(bin).exists() {
            if std::env::var_os("HANDSHAKE_SKIP_APACHE").is_some() {
                eprintln!("skipping: Apache is not installed (HANDSHAKE_SKIP_APACHE set)");
                return None;
            }
            panic!("Apache is needed (Debian package apache2; scripts/test installs it). Set HANDSHAKE_SKIP_APACHE=1 to skip.");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        static STARTED: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "handshake-apache-{}-{}",
            std::process::id(),
            STARTED.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(dir.join("www")).unwrap();
        std::fs::write(dir.join("www/index.html"), "hello\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        for d in [dir.clone(), dir.join("www")] {
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let d = dir.display();
        let m = "/usr/lib/apache2/modules";
        let conf = format!(
            "ServerRoot {d}\nLoadModule mpm_event_module {m}/mod_mpm_event.so\n\
             LoadModule authz_core_module {m}/mod_authz_core.so\n\
             Listen 127.0.0.1:{port}\nPidFile {d}/httpd.pid\nErrorLog {d}/error.log\n\
             LogFormat \"%k %r\" keepalives\nCustomLog {d}/access.log keepalives\n\
             DocumentRoot {d}/www\nServerName localhost\nUser www-data\nGroup www-data\n{settings}\n"
        );
        std::fs::write(dir.join("httpd.conf"), conf).unwrap();
        let child = std::process::Command::new(bin)
            .args(["-X", "-f", dir.join("httpd.conf").to_str().unwrap()])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        // Dropped (stopped, its directory removed) also when it fails to start.
        let mut ap = Apache { child, port, dir };
        let t = std::time::Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            let ended = ap.child.try_wait().ok().flatten().is_some();
            if ended || t.elapsed() > std::time::Duration::from_secs(10) {
                let why = ["stderr.log", "error.log"]
                    .map(|f| std::fs::read_to_string(ap.dir.join(f)).unwrap_or_default());
                panic!("Apache did not start: {}{}", why[0], why[1]);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Some(ap)
    }

    /// The most keep-alive requests Apache logged on one connection (`%k`: the requests
    /// before this one on its connection).
    pub fn most_keepalives_logged(&self) -> u64 {
        std::fs::read_to_string(self.dir.join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(' ').next()?.parse().ok())
            .max()
            .unwrap_or(0)
    }
}

impl Drop for Apache {
    fn drop(&mut self) {
        stop_child(&mut self.child, "-TERM");
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
