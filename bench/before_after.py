#!/usr/bin/env python3
"""Two builds of handshake, side by side: CPU per request against the same nginx (one
worker, loopback), keep-alive and a new connection per request, then HTTP/2 and HTTP/3
(`--strategy h2` and `h3`) against the same server (build A's `serve --threads 1` over
TLS: nginx here has no HTTP/3), in interleaved pairs (A B, B A, A B, ...), so a change
to the hot path is judged against the machine's own drift. Prints per mode each
build's median CPU per request, the ratio B/A of each pair, and the ratios' median and
min-max: a median inside the pairs' spread is no difference.

Usage: python3 bench/before_after.py A_BINARY B_BINARY [--pairs 5] [--requests 200000]
       [--close-requests 20000] [--mux-requests 100000] [--conns 50] [--threads 1]
       [--bench-args "--metrics 127.0.0.1:0 --metrics-linger 0s"]
       python3 bench/before_after.py A_BINARY B_BINARY --serve [--pairs 5] [--seconds 3]
Needs: nginx; with --serve, wrk (each build's `serve --threads 1` driven by wrk -t1, its
CPU per request served, keep-alive and a new connection per request).
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

from loopback import (NGINX_CONF, free_port, handshake_bench, proc_cpu, run_measured, stop,
                      wait_port)
from peers import wrk


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--close-requests", type=int, default=20_000)
    ap.add_argument("--mux-requests", type=int, default=100_000,
                    help="requests of each h2 and h3 run (0: no h2 and h3 rows)")
    ap.add_argument("--conns", type=int, default=50)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--bench-args", default="",
                    help="more arguments for every bench run, as one string (say, "
                         "'--metrics 127.0.0.1:0 --metrics-linger 0s': the live metrics' cost)")
    ap.add_argument("--serve", action="store_true", help="compare the builds' servers instead")
    ap.add_argument("--seconds", type=int, default=3, help="with --serve: each wrk run's length")
    args = ap.parse_args()
    if args.serve:
        return compare_servers(args)
    if not shutil.which("nginx"):
        raise SystemExit("needs nginx (Debian package nginx)")
    tmp = tempfile.mkdtemp(prefix="hs-before-after-")
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(tmp=tmp, port=port))
    nginx = subprocess.Popen(["nginx", "-c", conf, "-p", tmp], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        url = f"http://127.0.0.1:{port}/"
        print(f"A = {args.a}\nB = {args.b}\nnginx 1 worker, -c {args.conns} -t {args.threads}, "
              f"{args.pairs} interleaved pairs; CPU (user+sys) per request, us"
              + (f"; bench {args.bench_args}" if args.bench_args else ""))
        for mode, keepalive, n in (("keep-alive", True, args.requests),
                                   ("close", False, args.close_requests)):
            def measure(who, keepalive=keepalive, n=n):
                binary = args.a if who == "A" else args.b
                done, _, cpu = handshake_bench(binary, url, args.conns, n, keepalive, args.threads,
                                               args.bench_args.split())
                return cpu * 1e6 / done
            in_pairs(mode, args.pairs, measure)
    finally:
        stop(nginx, signal.SIGQUIT)
        shutil.rmtree(tmp, ignore_errors=True)
    if args.mux_requests > 0:
        multiplexed(args)


def multiplexed(args):
    """HTTP/2 and HTTP/3 rows: both builds' `bench --strategy h2|h3` against build A's
    `serve --threads 1` (TLS, h2 by ALPN, h3 on the same UDP port); the client's CPU
    per request."""
    tmp = tempfile.mkdtemp(prefix="hs-before-after-mux-")
    port = free_port()
    cacert = os.path.join(tmp, "ca.pem")
    server = subprocess.Popen([args.a, "serve", "--threads", "1",
                               "--listen", f"127.0.0.1:{free_port()}",
                               "--tls-listen", f"127.0.0.1:{port}", "--cacert-out", cacert],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        url = f"https://127.0.0.1:{port}/"
        print(f"build A's serve --threads 1 (TLS), -c {args.conns} -t {args.threads}, "
              f"{args.mux_requests} requests a run")
        for strategy in ("h2", "h3"):
            def measure(who, strategy=strategy):
                binary = args.a if who == "A" else args.b
                cmd = [binary, "bench", url, "-c", str(args.conns), "-n", str(args.mux_requests),
                       "--json", "--no-progress", "--strategy", strategy, "--cacert", cacert,
                       "-t", str(args.threads), *args.bench_args.split()]
                out, cpu = run_measured(cmd)
                s = json.loads(out)["scenarios"][0]
                return cpu * 1e6 / s["requests"]["attempted"]
            in_pairs(strategy, args.pairs, measure)
    finally:
        stop(server, signal.SIGINT)
        shutil.rmtree(tmp, ignore_errors=True)


def in_pairs(mode, pairs, measure):
    """`measure("A")` and `measure("B")` (µs per request) in interleaved pairs (A B, B A,
    ...); each pair on stderr, then the medians and the ratios' median and min-max."""
    us = {"A": [], "B": []}
    ratios = []
    for i in range(pairs):
        got = {}
        for who in ("A", "B") if i % 2 == 0 else ("B", "A"):
            got[who] = measure(who)
            us[who].append(got[who])
        ratios.append(got["B"] / got["A"])
        print(f"  {mode:<10} pair {i + 1}: A {got['A']:.2f}  B {got['B']:.2f}  "
              f"B/A {ratios[-1]:.3f}", file=sys.stderr)
    print(f"{mode:<10} A {statistics.median(us['A']):.2f}  B {statistics.median(us['B']):.2f}  "
          f"B/A median {statistics.median(ratios):.3f} (pairs {min(ratios):.3f}-{max(ratios):.3f})")


def compare_servers(args):
    """Each build's `serve --threads 1` on its own port, driven by wrk -t1 in interleaved
    pairs; the server's CPU (user+sys, /proc) per request wrk completed."""
    if not shutil.which("wrk"):
        raise SystemExit("--serve needs wrk (Debian package wrk)")
    servers = {}
    try:
        for who, binary in (("A", args.a), ("B", args.b)):
            port = free_port()
            p = subprocess.Popen([binary, "serve", "--threads", "1", "--listen", f"127.0.0.1:{port}", "--no-tls"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            servers[who] = (p, f"http://127.0.0.1:{port}/")
            wait_port(port)
        print(f"A = {args.a}\nB = {args.b}\nserve --threads 1, driven by wrk -t1 -c {args.conns} "
              f"-d {args.seconds}s, {args.pairs} interleaved pairs; the server's CPU (user+sys) per request, us")
        for mode, close in (("keep-alive", False), ("close", True)):
            def measure(who, close=close):
                proc, url = servers[who]
                before = proc_cpu([proc.pid])
                done, _, _ = wrk("wrk", url, args.seconds, 1, close, args.conns)
                return (proc_cpu([proc.pid]) - before) * 1e6 / done
            in_pairs(mode, args.pairs, measure)
    finally:
        for proc, _ in servers.values():
            stop(proc, signal.SIGINT)


if __name__ == "__main__":
    main()
