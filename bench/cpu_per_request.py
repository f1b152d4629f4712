#!/usr/bin/env python3
"""CPU per request on loopback, side by side from one run.

1. Generators: handshake vs wrk vs ab against the same nginx (one worker, its own config
   and temp dir, 127.0.0.1 only), with keep-alive (c=50) and with a new connection per
   request: requests/s and the tool's own CPU time per request (user+sys from rusage of
   the child process).
2. Servers: the embedded server (`handshake serve`, one thread) vs nginx (one worker),
   both driven by the same `wrk -t1 -c50`: the server's CPU per request (utime+stime
   of its processes from /proc).
Medians of --runs runs; tools alternate within each round.

Usage: python3 bench/cpu_per_request.py [--handshake PATH] [--runs 3] [--seconds 5]
Needs: nginx, wrk, ab (Debian packages nginx, wrk, apache2-utils).
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from loopback import free_port, run_measured, stop, wait_port

NGINX_CONF = """
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
    server {{
        listen 127.0.0.1:{port} backlog=4096;
        location / {{ return 200 "Hello, world\\n"; }}
    }}
}}
"""


def wrk(url, conns, seconds, keepalive, threads):
    cmd = ["wrk", f"-t{threads}", f"-c{conns}", f"-d{seconds}s", url]
    if not keepalive:
        cmd[1:1] = ["-H", "Connection: close"]
    out, cpu = run_measured(cmd)
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    n = int(m.group(1))
    secs = float(m.group(2)) * {"s": 1, "ms": 1e-3, "m": 60}[m.group(3)]
    return n, n / secs, cpu


def ab(url, conns, n, keepalive):
    cmd = ["ab", "-q", "-n", str(n), "-c", str(conns)] + (["-k"] if keepalive else []) + [url]
    out, cpu = run_measured(cmd)
    done = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))
    rps = float(re.search(r"Requests per second:\s+([\d.]+)", out).group(1))
    return done, rps, cpu


def handshake(binary, url, conns, n, keepalive, threads):
    cmd = [binary, "bench", url, "-c", str(conns), "-n", str(n), "--json", "--no-progress",
           "--strategy", "keepalive" if keepalive else "close", "-t", str(threads)]
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


def server_cpu(pids, url, seconds, keepalive):
    """Drive a server with wrk -t1 -c50; return (requests, server CPU us per request)."""
    before = proc_cpu(pids)
    cmd = ["wrk", "-t1", "-c50", f"-d{seconds}s", url]
    if not keepalive:
        cmd[1:1] = ["-H", "Connection: close"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=300).stdout
    after = proc_cpu(pids)
    n = int(re.search(r"(\d+) requests in", out).group(1))
    return n, (after - before) * 1e6 / n


def compare_servers(args, nginx_pid, nginx_url):
    port = free_port()
    hs = subprocess.Popen([args.handshake, "serve", "--no-tls", "--threads", "1", "--listen",
                           f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        hs_url = f"http://127.0.0.1:{port}/"
        rows = []
        for mode, ka in (("keep-alive", True), ("close", False)):
            res = {"handshake serve": [], "nginx": []}
            for _ in range(args.runs):
                res["handshake serve"].append(server_cpu([hs.pid], hs_url, args.seconds, ka)[1])
                res["nginx"].append(server_cpu([nginx_pid] + children(nginx_pid), nginx_url, args.seconds, ka)[1])
                print(f"  server {mode:<11} handshake {res['handshake serve'][-1]:.2f} us/req, nginx {res['nginx'][-1]:.2f} us/req", file=sys.stderr)
            hs_us = statistics.median(res["handshake serve"])
            ng_us = statistics.median(res["nginx"])
            rows.append((mode, hs_us, ng_us))
        print(f"\nServer CPU per request, driven by wrk -t1 -c50, medians of {args.runs} runs")
        print(f"{'mode':<11} {'handshake serve':>16} {'nginx':>8} {'ratio':>6}")
        for mode, h, n in rows:
            print(f"{mode:<11} {h:>16.2f} {n:>8.2f} {h / n:>6.2f}")
    finally:
        stop(hs, signal.SIGINT)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--handshake", default="target/release/handshake")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--modes", default="keep-alive,close", help="comma-separated: keep-alive, close")
    ap.add_argument("--no-servers", action="store_true", help="skip the server comparison")
    args = ap.parse_args()
    for tool in ("nginx", "wrk", "ab"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            raise SystemExit(f"{tool} is not installed (Debian packages nginx, wrk, apache2-utils)")
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    tmp = tempfile.mkdtemp(prefix="handshake-bench-")
    port = free_port()
    with open(f"{tmp}/nginx.conf", "w") as f:
        f.write(NGINX_CONF.format(tmp=tmp, port=port))
    ng = subprocess.Popen([nginx_bin, "-c", f"{tmp}/nginx.conf", "-p", tmp],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        url = f"http://127.0.0.1:{port}/"
        c = args.conns
        # Request counts sized so each run lasts a few seconds.
        n_ka = 150_000 * args.seconds // 5 * 5
        n_close = 12_000 * args.seconds // 5 * 5
        rows = []
        plans = [
            ("keep-alive", True, [
                ("handshake -t1", lambda: handshake(args.handshake, url, c, n_ka, True, 1)),
                ("handshake -t2", lambda: handshake(args.handshake, url, c, n_ka, True, 2)),
                ("wrk -t1", lambda: wrk(url, c, args.seconds, True, 1)),
                ("wrk -t2", lambda: wrk(url, c, args.seconds, True, 2)),
                ("ab -k", lambda: ab(url, c, n_ka, True)),
            ]),
            ("close", False, [
                ("handshake -t1", lambda: handshake(args.handshake, url, c, n_close, False, 1)),
                ("handshake -t2", lambda: handshake(args.handshake, url, c, n_close, False, 2)),
                ("wrk -t1", lambda: wrk(url, c, args.seconds, False, 1)),
                ("wrk -t2", lambda: wrk(url, c, args.seconds, False, 2)),
                ("ab", lambda: ab(url, c, n_close, False)),
            ]),
        ]
        wanted = set(args.modes.split(","))
        for mode, _, tools in plans:
            if mode not in wanted:
                continue
            results = {name: [] for name, _ in tools}
            # Alternate tools within each round so drift hits all alike.
            for _ in range(args.runs):
                for name, fn in tools:
                    n, rps, cpu = fn()
                    results[name].append((rps, cpu * 1e6 / n, n))
                    print(f"  {mode:<11} {name:<15} {rps:>10.0f} req/s {cpu * 1e6 / n:>8.2f} us/req", file=sys.stderr)
            for name, _ in tools:
                rs = results[name]
                rows.append((mode, name, statistics.median(r[2] for r in rs),
                             statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)))
        print(f"nginx 1 worker on 127.0.0.1, c={c}, medians of {args.runs} runs")
        print(f"{'mode':<11} {'tool':<15} {'requests':>9} {'req/s':>10} {'CPU us/req':>11}")
        for mode, name, n, rps, us in rows:
            print(f"{mode:<11} {name:<15} {int(n):>9} {rps:>10.0f} {us:>11.2f}")
        sys.stdout.flush()
        if not args.no_servers:
            compare_servers(args, ng.pid, url)
    finally:
        stop(ng, signal.SIGTERM)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
