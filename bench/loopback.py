"""Helpers the benchmark scripts share: a free loopback port, waiting for a server to
listen on it, stopping a process we started by its PID, running a tool while measuring
its own CPU time, the CPU time of processes from /proc, a one-worker nginx config, a CA
and a leaf certificate, and one `handshake bench` run."""
import json
import os
import resource
import signal
import socket
import subprocess
import tempfile
import time

# One nginx worker, its files in {tmp}, persistent connections unbounded: the start of
# its config, up to its servers (a config closes with "}}").
NGINX_HEAD = """
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    keepalive_requests 100000000;
    keepalive_timeout 75s;
"""

# That nginx answering "Hello, world" on 127.0.0.1:{port}.
NGINX_CONF = NGINX_HEAD + """
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{ return 200 "Hello, world\\n"; }}
    }}
}}
"""



GNU_TIME = "/usr/bin/time"


def run_peak(cmd, timeout):
    """Run cmd to its end: (stdout bytes, stderr bytes, exit code, peak RSS KiB, CPU s).

    The peak is exact under GNU time (`/usr/bin/time -f %M`, Debian's `time`): time forks
    the command from its own small process and reads its ru_maxrss, which counts the
    end of the run too (a report built at exit). Without it, the command's VmHWM read
    every 20 ms, which misses what the last moments add. (wait4's ru_maxrss of a child
    this Python forks would carry this Python's own RSS over the exec: 16 MiB.) The CPU
    time is wait4's, the command's and its children's."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    timed = os.access(GNU_TIME, os.X_OK)
    peak_file = tempfile.NamedTemporaryFile(prefix="handshake-bench-peak-", delete=False)
    peak_file.close()
    try:
        full = [GNU_TIME, "-f", "%M", "-o", peak_file.name, *cmd] if timed else list(cmd)
        # Its own process group, so that a timeout (or this script's end) stops the
        # command under time too.
        p = subprocess.Popen(full, stdout=out, stderr=err, start_new_session=True)
        deadline = time.time() + timeout
        peak = 0
        try:
            while True:
                h = None if timed else hwm_kib(p.pid)
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                peak = max(peak, h or 0)
                if time.time() > deadline:
                    raise SystemExit(f"{cmd[0]} did not finish within {timeout} s")
                time.sleep(0.02)
        except BaseException:
            os.killpg(p.pid, signal.SIGKILL)
            os.wait4(p.pid, 0)
            raise
        p.returncode = os.waitstatus_to_exitcode(status)
        if timed:
            # On a failure time writes "Command exited with non-zero status N" first.
            with open(peak_file.name) as f:
                lines = f.read().split()
            peak = int(lines[-1]) if lines and lines[-1].isdigit() else 0
    finally:
        os.unlink(peak_file.name)
    out.seek(0)
    err.seek(0)
    return out.read(), err.read(), p.returncode, peak, ru.ru_utime + ru.ru_stime


def default_handshake():
    """The binary the scripts measure: the `profiling` build (release code with symbols,
    for perf; `cargo build --profile profiling`), else the release build."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target")
    for profile in ("profiling", "release"):
        path = os.path.join(root, profile, "handshake")
        if os.path.exists(path):
            return os.path.normpath(path)
    return os.path.normpath(os.path.join(root, "profiling", "handshake"))


def hwm_kib(pid):
    """VmHWM of a live process: the peak RSS of its address space since its exec."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, timeout=10.0):
    t = time.time()
    while time.time() - t < timeout:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listened on 127.0.0.1:{port} within {timeout} s")


def stop(proc, sig):
    """Stop a process we started, by its PID: the signal, then SIGKILL after 10 s."""
    proc.send_signal(sig)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_measured(cmd, timeout=300):
    """Run cmd; return (stdout, CPU seconds of that child alone: user + system)."""
    out, user, system = run_measured_split(cmd, timeout)
    return out, user + system


def run_measured_split(cmd, timeout=300):
    """Run cmd; return (stdout, its user CPU seconds, its system CPU seconds)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"{cmd} failed: {out.stderr[-2000:]}")
    return out.stdout, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def handshake_bench(binary, url, conns, n, keepalive, threads, extra=()):
    cmd = [binary, "bench", url, "-c", str(conns), "-n", str(n), "--json", "--no-progress",
           "--strategy", "keepalive" if keepalive else "close", "-t", str(threads), *extra]
    out, cpu = run_measured(cmd)
    s = json.loads(out)["scenarios"][0]
    return s["requests"]["attempted"], s["throughput"]["requests_per_s"], cpu


def proc_cpu(pids):
    """utime+stime in seconds of these processes (all their threads)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / tick


def children(pid):
    out = subprocess.run(["pgrep", "-P", str(pid)], stdout=subprocess.PIPE, text=True).stdout
    return [int(x) for x in out.split()]


def sh(*cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def make_certs(tmp):
    """A P-256 CA and a leaf for localhost and 127.0.0.1 signed by it."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    sh("openssl", "req", "-x509", *ec, "-days", "2", "-subj", "/CN=bench CA",
       "-keyout", f"{tmp}/ca.key", "-out", f"{tmp}/ca.pem")
    sh("openssl", "req", *ec, "-subj", "/CN=localhost",
       "-keyout", f"{tmp}/leaf.key", "-out", f"{tmp}/leaf.csr")
    with open(f"{tmp}/ext.cnf", "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
    sh("openssl", "x509", "-req", "-in", f"{tmp}/leaf.csr", "-CA", f"{tmp}/ca.pem",
       "-CAkey", f"{tmp}/ca.key", "-CAcreateserial", "-days", "2",
       "-extfile", f"{tmp}/ext.cnf", "-out", f"{tmp}/leaf.pem")
