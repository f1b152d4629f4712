#!/usr/bin/env python3
"""HTTP/2 CPU per request on loopback, side by side from one run.

1. Generators: handshake (--strategy h2) vs h2load against the same nginx (one worker,
   cleartext prior knowledge, its own config and temp dir, 127.0.0.1 only), 4
   connections x 16 streams each: requests/s and the tool's own CPU time per request
   (user+sys from rusage of the child). handshake runs -c 64 workers over
   --connections 4 (16 streams in flight on each); h2load runs -c 4 -m 16.
2. Servers: the embedded server (`handshake serve`, one thread) vs nginx (one worker),
   both driven by the same h2load -c 4 -m 16 over h2c: the server's CPU per request
   (utime+stime of its processes from /proc).
Medians of --runs runs; tools alternate within each round; the spread (min-max) is
printed with each median.

Usage: python3 bench/h2_cpu.py [--handshake PATH] [--runs 5] [--requests 200000]
Needs: nginx, h2load (Debian packages nginx, nghttp2-client).
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

from loopback import free_port, run_measured, stop, wait_port
from cpu_per_request import NGINX_CONF as CPU_NGINX_CONF, children, proc_cpu

# The HTTP/1 benchmark's nginx, its listener speaking h2c (nginx 1.22: `listen ... http2`;
# keepalive_requests bounds HTTP/2 streams per connection too).
NGINX_CONF = CPU_NGINX_CONF.replace("listen 127.0.0.1:{port} backlog", "listen 127.0.0.1:{port} http2 backlog")
assert "http2 backlog" in NGINX_CONF

CONNS = 4
STREAMS = 16


def h2load(url, n):
    cmd = ["h2load", "-n", str(n), "-c", str(CONNS), "-m", str(STREAMS), "-t", "1", url]
    out, cpu = run_measured(cmd)
    done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done", out).group(1))
    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
    return done, rps, cpu


def handshake(binary, url, n, threads):
    cmd = [binary, "bench", url, "--strategy", "h2", "--connections", str(CONNS),
           "-c", str(CONNS * STREAMS), "-n", str(n), "-t", str(threads), "--json",
           "--no-progress"]
    out, cpu = run_measured(cmd)
    s = json.loads(out)["scenarios"][0]
    assert s["connections"]["opened"] == CONNS, s["connections"]
    return s["requests"]["ok"], s["throughput"]["requests_per_s"], cpu


def server_cpu(pids, url, n):
    """Drive a server with h2load -c 4 -m 16; return the server's CPU us per request."""
    before = proc_cpu(pids)
    done, _, _ = h2load(url, n)
    after = proc_cpu(pids)
    return (after - before) * 1e6 / done


def spread(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--handshake", default="target/release/handshake")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--requests", type=int, default=200_000)
    args = ap.parse_args()
    for tool in ("nginx", "h2load"):
        if not shutil.which(tool) and not os.path.exists(f"/usr/sbin/{tool}"):
            raise SystemExit(f"{tool} is not installed (Debian packages nginx, nghttp2-client)")
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    tmp = tempfile.mkdtemp(prefix="handshake-bench-h2-")
    port = free_port()
    with open(f"{tmp}/nginx.conf", "w") as f:
        f.write(NGINX_CONF.format(tmp=tmp, port=port))
    ng = subprocess.Popen([nginx_bin, "-c", f"{tmp}/nginx.conf", "-p", tmp],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    hs_port = free_port()
    hs = subprocess.Popen([args.handshake, "serve", "--no-tls", "--threads", "1", "--listen",
                           f"127.0.0.1:{hs_port}"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        wait_port(hs_port)
        url = f"http://127.0.0.1:{port}/"
        hs_url = f"http://127.0.0.1:{hs_port}/"
        n = args.requests
        tools = [
            ("handshake -t1", lambda: handshake(args.handshake, url, n, 1)),
            ("handshake -t2", lambda: handshake(args.handshake, url, n, 2)),
            ("h2load -t1", lambda: h2load(url, n)),
        ]
        gen = {name: [] for name, _ in tools}
        srv = {"handshake serve": [], "nginx": []}
        for _ in range(args.runs):
            for name, fn in tools:
                done, rps, cpu = fn()
                gen[name].append((rps, cpu * 1e6 / done))
                print(f"  {name:<15} {rps:>10.0f} req/s {cpu * 1e6 / done:>8.2f} us/req",
                      file=sys.stderr)
            srv["handshake serve"].append(server_cpu([hs.pid], hs_url, n))
            srv["nginx"].append(server_cpu([ng.pid] + children(ng.pid), url, n))
            print(f"  server: handshake serve {srv['handshake serve'][-1]:.2f} us/req, "
                  f"nginx {srv['nginx'][-1]:.2f} us/req", file=sys.stderr)
        print(f"HTTP/2 (h2c) against nginx 1 worker on 127.0.0.1, {CONNS} connections x "
              f"{STREAMS} streams, {n} requests per run, medians [min-max] of {args.runs} runs")
        print(f"{'tool':<15} {'req/s':>22} {'CPU us/req':>22}")
        base = statistics.median(r[1] for r in gen["h2load -t1"])
        for name, _ in tools:
            rs = gen[name]
            us = [r[1] for r in rs]
            print(f"{name:<15} {spread([r[0] for r in rs]):>22} {spread(us):>22}"
                  f"   {statistics.median(us) / base:.2f}x h2load")
        # Per-round ratios: both measured in the same round, so drift cancels.
        ratios = [a[1] / b[1] for a, b in zip(gen["handshake -t1"], gen["h2load -t1"])]
        print(f"handshake -t1 / h2load per round: {spread(ratios)}")
        hs_us, ng_us = srv["handshake serve"], srv["nginx"]
        ratios = [a / b for a, b in zip(hs_us, ng_us)]
        print(f"\nServer CPU per request over h2c, driven by h2load -c {CONNS} -m {STREAMS}")
        print(f"handshake serve {spread(hs_us)} us/req, nginx {spread(ng_us)} us/req, "
              f"ratio per round {spread(ratios)}")
    finally:
        stop(hs, signal.SIGINT)
        stop(ng, signal.SIGTERM)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
