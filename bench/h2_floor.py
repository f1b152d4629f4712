#!/usr/bin/env python3
"""The h2 crate's floor: what any client built on it costs per request, beside handshake
and h2load, in one run.

`bench/peers.py`'s h2 row sets handshake's CPU per request beside h2load's (nghttp2, in
C). This script adds the leanest client this project can write on the h2 crate
(`examples/h2_floor.rs`: tokio's current-thread runtime, rustls, the engine's own
`h2::client::Builder`, a task per connection and per stream lane; no clock read, no
record, no histogram, nothing but the requests), so that what handshake adds to the crate
and what the crate costs against nghttp2 are told apart.

All three run the h2 row's shape against one nginx (one worker, TLS 1.3, `http2`) on
127.0.0.1: -n requests over 4 connections of 16 streams (handshake: `--strategy h2 -c 64
--connections 4 -t 1`; h2load: `-c 4 -m 16 -t 1`), each once per round in an order that
turns every round, --pairs rounds. A tool's figures are its own user and system CPU
(rusage of the child) per request, medians with their min-max; ratios are per round.

Usage: python3 bench/h2_floor.py [--handshake PATH] [--floor PATH] [--pairs 7] [-n 300000]
       [--json FILE]
The floor's binary is built with `cargo build --profile profiling --example h2_floor`
(its default path: target/profiling/examples/h2_floor). Needs nginx and h2load (Debian
packages nginx, nghttp2-client).
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

from loopback import NGINX_HEAD, default_handshake, free_port, make_certs, run_measured_split, stop, wait_port

CONNS, STREAMS = 4, 16

NGINX_CONF = NGINX_HEAD + """
    ssl_protocols TLSv1.3;
    ssl_certificate {tmp}/leaf.pem;
    ssl_certificate_key {tmp}/leaf.key;
    server {{
        listen 127.0.0.1:{port} ssl http2 backlog=4096;
        location / {{ return 200 "Hello, world\\n"; }}
    }}
}}
"""


def check_count(name, out, n):
    """Each tool's own count of the requests answered 200 must be -n."""
    if name == "handshake":
        ok = json.loads(out)["scenarios"][0]["requests"]["ok"]
    elif name == "h2load":
        ok = int(re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded", out).group(1))
    else:
        ok = int(out.split()[0])
    if ok != n:
        raise SystemExit(f"{name}: {ok} of {n} requests ok")


def spread(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--handshake", default=default_handshake())
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target")
    ap.add_argument("--floor", default=os.path.normpath(os.path.join(root, "profiling", "examples", "h2_floor")))
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("-n", type=int, default=300_000)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    for path, how in ((a.handshake, "cargo build --profile profiling"),
                      (a.floor, "cargo build --profile profiling --example h2_floor")):
        if not os.path.exists(path):
            raise SystemExit(f"{path} is missing: {how}")
    h2load = shutil.which("h2load")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    if not h2load or not os.path.exists(nginx):
        raise SystemExit("needs h2load and nginx (Debian packages nghttp2-client, nginx)")
    tmp = tempfile.mkdtemp(prefix="handshake-h2floor-")
    ng = None
    try:
        make_certs(tmp)
        for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            os.makedirs(f"{tmp}/{d}", exist_ok=True)
        port = free_port()
        with open(f"{tmp}/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(tmp=tmp, port=port))
        ng = subprocess.Popen([nginx, "-c", f"{tmp}/nginx.conf", "-p", tmp],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)
        url, ca, n = f"https://localhost:{port}/", f"{tmp}/ca.pem", str(a.n)
        tools = {
            "handshake": [a.handshake, "bench", url, "--cacert", ca, "--strategy", "h2", "-c",
                          str(CONNS * STREAMS), "--connections", str(CONNS), "-t", "1", "-n", n,
                          "--json", "--no-progress"],
            "h2 crate floor": [a.floor, url, ca, "-n", n, "--connections", str(CONNS),
                               "--streams", str(STREAMS)],
            "h2load": [h2load, "-n", n, "-c", str(CONNS), "-m", str(STREAMS), "-t", "1", url],
        }
        names = list(tools)
        got = {k: {"user_us": [], "sys_us": []} for k in names}
        for p in range(a.pairs):
            order = names[p % len(names):] + names[:p % len(names)]
            for name in order:
                out, user, system = run_measured_split(tools[name], timeout=600)
                check_count(name, out, a.n)
                got[name]["user_us"].append(user * 1e6 / a.n)
                got[name]["sys_us"].append(system * 1e6 / a.n)
            print(f"round {p + 1}: " + ", ".join(
                f"{k} {got[k]['user_us'][-1]:.2f}+{got[k]['sys_us'][-1]:.2f}" for k in names), file=sys.stderr)
        for k in names:
            got[k]["total_us"] = [u + s for u, s in zip(got[k]["user_us"], got[k]["sys_us"])]
        per = lambda k, what: [x / y for x, y in zip(got[k][what], got["h2load"][what])]
        print(f"\n{a.n} requests, {CONNS} connections x {STREAMS} streams, nginx TLS h2; "
              f"µs per request, median [min-max] of {a.pairs} rounds")
        print(f"{'tool':<16} {'user':>18} {'system':>18} {'total':>18} {'user / h2load':>18} {'total / h2load':>18}")
        for k in names:
            print(f"{k:<16} {spread(got[k]['user_us']):>18} {spread(got[k]['sys_us']):>18} "
                  f"{spread(got[k]['total_us']):>18} {spread(per(k, 'user_us')):>18} {spread(per(k, 'total_us')):>18}")
        above = [h / f for h, f in zip(got["handshake"]["user_us"], got["h2 crate floor"]["user_us"])]
        print(f"handshake's user time over the floor's: {spread(above)}")
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"n": a.n, "tools": got}, f, indent=1)
    finally:
        if ng:
            stop(ng, signal.SIGQUIT)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
