#!/usr/bin/env python3
"""Connections at scale: requests/s, peak RSS, RSS per connection and CPU per request of
handshake, wrk and oha holding -c keep-alive connections against one server.

For each -c (--counts, default 1,000 and 10,000) and each server (`handshake serve
--threads 1` and nginx with one worker, both HTTP/1.1 keep-alive on 127.0.0.1), every
tool installed runs for --seconds, the tools' order rotated every round, --rounds times
(default 3). A tool's figures are its own: peak RSS (GNU time's %M, or the child's VmHWM
read while it runs without GNU time), CPU (user + system of the child) over the requests it completed. RSS per
connection is given two ways: the peak over -c, and the peak's growth over the same
tool's run at -c 10 in that round (what one more connection costs, without the program's
fixed part: its code, libraries and tables). Medians, with the min-max over the rounds.

A -c whose descriptors (one per connection, on each side) pass this machine's hard
open-file limit is skipped, saying so: the limit is per process, and a process without
CAP_SYS_RESOURCE cannot raise it.

--max-kb-per-conn K: exit 1 when handshake's growth per connection passes K KiB at any
-c (the bounded check .ci/run makes at 10,000); --vs-wrk: exit 1 when it passes wrk's.

--protocol h2: HTTP/2 over TLS (nginx `ssl http2`, serve's TLS listener), handshake
`--strategy h2 --connections C -c C` beside h2load `-c C -m 1`: a stream at a time on
each connection, so connections are what grows.

Usage: python3 bench/scale.py [--handshake PATH] [--counts 1000,10000] [--rounds 3]
       [--seconds 5] [--servers serve,nginx] [--tools handshake,wrk,oha]
       [--protocol h1|h2]
       [--max-kb-per-conn K] [--vs-wrk] [--json FILE]
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from loopback import (NGINX_HEAD, default_handshake, free_port, make_certs, run_peak, stop,
                      wait_port)

BASE_C = 10


def measured(cmd, timeout):
    """Run cmd; (stdout, stderr, exit code, peak RSS KiB, CPU seconds) of that child."""
    out, err, code, peak, cpu = run_peak(cmd, timeout)
    return out.decode(errors="replace"), err.decode(errors="replace"), code, peak, cpu


def run_handshake(a, url, c):
    cmd = [a.handshake, "bench", url, "-c", str(c), "-d", f"{a.seconds}s", "--json",
           "--no-progress"]
    if a.protocol == "h2":
        cmd += ["--strategy", "h2", "--connections", str(c), "--cacert", a.ca[url]]
    out, err, code, rss, cpu = measured(cmd, a.seconds + 120)
    if code not in (0, 1):
        raise SystemExit(f"handshake -c {c} exited {code}: {err[-1500:]}")
    s = json.loads(out)["scenarios"][0]
    ok = s["requests"]["ok"]
    errors = s["requests"]["attempted"] - ok
    return dict(requests=ok, errors=errors, wall=s["duration_s"], rss_kib=rss, cpu_s=cpu,
                opened=s["connections"]["opened"])


def run_wrk(a, url, c):
    threads = min(2, c)
    cmd = [a.wrk, f"-t{threads}", f"-c{c}", f"-d{a.seconds}s", url]
    out, err, code, rss, cpu = measured(cmd, a.seconds + 120)
    if code != 0:
        raise SystemExit(f"wrk -c {c} exited {code}: {err[-1500:]}")
    m = re.search(r"(\d+) requests in ([\d.]+)(m?s)", out)
    wall = float(m.group(2)) / (1000 if m.group(3) == "ms" else 1)
    errors = 0
    e = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    if e:
        errors = sum(int(x) for x in e.groups())
    return dict(requests=int(m.group(1)), errors=errors, wall=wall, rss_kib=rss, cpu_s=cpu)


def run_oha(a, url, c):
    cmd = [a.oha, "-z", f"{a.seconds}s", "-c", str(c), "--no-tui", "--output-format", "json",
           url]
    out, err, code, rss, cpu = measured(cmd, a.seconds + 120)
    if code != 0:
        raise SystemExit(f"oha -c {c} exited {code}: {err[-1500:]}")
    r = json.loads(out)
    total = sum(r.get("statusCodeDistribution", {}).values())
    errors = sum(r.get("errorDistribution", {}).values())
    return dict(requests=total, errors=errors, wall=r["summary"]["total"], rss_kib=rss,
                cpu_s=cpu)


def run_h2load(a, url, c):
    cmd = [a.h2load, "-c", str(c), "-m", "1", "-t", "1", "-D", str(a.seconds), url]
    out, err, code, rss, cpu = measured(cmd, a.seconds + 300)
    if code != 0:
        raise SystemExit(f"h2load -c {c} exited {code}: {err[-1500:]}")
    m = re.search(r"finished in ([\d.]+)s", out)
    if not m or float(m.group(1)) <= 0:
        # Seen once at -c 1,000 (cause not found): a run that measured nothing is a
        # failure, named as such, not a division by zero.
        raise SystemExit(f"h2load -c {c} measured no duration: {out[-1500:]}")
    r = re.search(r"requests: \d+ total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, "
                  r"(\d+) errored", out)
    return dict(requests=int(r.group(1)), errors=int(r.group(2)) + int(r.group(3)),
                wall=float(m.group(1)), rss_kib=rss, cpu_s=cpu)


RUNNERS = {"handshake": run_handshake, "wrk": run_wrk, "oha": run_oha, "h2load": run_h2load}


class Servers:
    """The servers, started once (sized for the largest -c) and stopped by their PIDs."""

    def __init__(self, a, names, most):
        self.procs = []
        self.urls = {}
        self.tmp = tempfile.mkdtemp(prefix="handshake-scale-")
        h2 = a.protocol == "h2"
        a.ca = {}
        if h2:
            make_certs(self.tmp)
        scheme = "https" if h2 else "http"
        for name in names:
            port = free_port()
            if name == "serve":
                ca = os.path.join(self.tmp, "serve-ca.pem")
                listen = (["--no-tls", "--listen", f"127.0.0.1:{port}"] if not h2 else
                          ["--tls-listen", f"127.0.0.1:{port}", "--listen", "127.0.0.1:0",
                           "--cacert-out", ca])
                cmd = [a.handshake, "serve", *listen,
                       "--threads", "1", "--max-connections", str(most + 1000),
                       "--body-size", "13"]
            else:
                conf = NGINX_HEAD.format(tmp=self.tmp).replace(
                    "worker_connections 4096", f"worker_connections {most + 1000}")
                conf = conf.replace("daemon off;", f"daemon off;\nworker_rlimit_nofile {most + 2000};")
                tls = (f" ssl http2;\n        ssl_certificate {self.tmp}/leaf.pem;\n"
                       f"        ssl_certificate_key {self.tmp}/leaf.key" if h2 else "")
                conf += ("    server {{ listen 127.0.0.1:{port} backlog=4096" + tls.replace("{", "{{").replace("}", "}}") + ";\n"
                         "        location / {{ return 200 \"Hello, world\\n\"; }} }}\n}}\n"
                         ).format(port=port)
                path = os.path.join(self.tmp, "nginx.conf")
                with open(path, "w") as f:
                    f.write(conf)
                cmd = ["nginx", "-c", path, "-p", self.tmp]
            self.procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL))
            wait_port(port)
            self.urls[name] = f"{scheme}://127.0.0.1:{port}/"
            a.ca[self.urls[name]] = ca if name == "serve" else os.path.join(self.tmp, "ca.pem")

    def close(self):
        for p in self.procs:
            stop(p, signal.SIGTERM if p.args[0] != "nginx" else signal.SIGQUIT)
        shutil.rmtree(self.tmp, ignore_errors=True)


def spread(xs, f="{:.1f}"):
    return f"{f.format(statistics.median(xs))} [{f.format(min(xs))}-{f.format(max(xs))}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--handshake", default=default_handshake())
    ap.add_argument("--counts", default="1000,10000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--servers", default="serve,nginx")
    ap.add_argument("--tools", help="default: handshake,wrk,oha (h1), handshake,h2load (h2)")
    ap.add_argument("--protocol", choices=["h1", "h2"], default="h1",
                    help="h2: HTTP/2 over TLS, a stream at a time on each of -c connections")
    ap.add_argument("--h2load", default=shutil.which("h2load"))
    ap.add_argument("--wrk", default=shutil.which("wrk"))
    ap.add_argument("--oha", default=shutil.which("oha"))
    ap.add_argument("--max-kb-per-conn", type=float)
    ap.add_argument("--vs-wrk", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    a.handshake = os.path.abspath(a.handshake)
    a.tools = a.tools or ("handshake,h2load" if a.protocol == "h2" else "handshake,wrk,oha")
    if not os.path.exists(a.handshake):
        raise SystemExit(f"{a.handshake} not found: cargo build --profile profiling")
    tools = [t for t in a.tools.split(",") if t == "handshake" or getattr(a, t, None)]
    for t in a.tools.split(","):
        if t not in tools:
            print(f"{t}: not installed, left out", file=sys.stderr)
    counts = [int(x) for x in a.counts.split(",")]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    runnable = []
    for c in counts:
        if hard != resource.RLIM_INFINITY and c + 1000 > hard:
            print(f"-c {c}: skipped, {c + 1000} descriptors per process needed and the hard "
                  f"open-file limit here is {hard} (raising it takes CAP_SYS_RESOURCE)",
                  file=sys.stderr)
        else:
            runnable.append(c)
    if not runnable:
        raise SystemExit("no -c fits this machine's open-file limit")
    names = a.servers.split(",")
    servers = Servers(a, names, max(runnable))
    rows = {}  # (server, c, tool) -> list of dicts
    try:
        for r in range(a.rounds):
            order = tools[r % len(tools):] + tools[:r % len(tools)]
            for name in names:
                url = servers.urls[name]
                for tool in order:
                    base = RUNNERS[tool](a, url, BASE_C)
                    for c in runnable:
                        m = RUNNERS[tool](a, url, c)
                        m["base_rss_kib"] = base["rss_kib"]
                        rows.setdefault((name, c, tool), []).append(m)
                        print(f"round {r + 1} {name} -c {c} {tool}: "
                              f"{m['requests'] / m['wall']:.0f} req/s, "
                              f"{m['rss_kib'] / 1024:.1f} MiB (at -c {BASE_C}: "
                              f"{base['rss_kib'] / 1024:.1f}), {m['errors']} errors",
                              file=sys.stderr)
    finally:
        servers.close()

    print(f"\n{a.rounds} rounds of {a.seconds} s, medians [min-max]; RSS per connection: "
          f"peak / c, and (peak - peak at -c {BASE_C}) / (c - {BASE_C})")
    print(f"{'server':<6} {'-c':>7} {'tool':<10} {'req/s':>22} {'peak RSS MiB':>20} "
          f"{'KiB/conn':>8} {'growth KiB/conn':>20} {'CPU us/req':>18} {'errors':>6}")
    failed = []
    summary = []
    for (name, c, tool), ms in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        rps = [m["requests"] / m["wall"] for m in ms]
        rss = [m["rss_kib"] / 1024 for m in ms]
        per = [m["rss_kib"] / c for m in ms]
        growth = [(m["rss_kib"] - m["base_rss_kib"]) / (c - BASE_C) for m in ms]
        cpu = [m["cpu_s"] * 1e6 / max(1, m["requests"]) for m in ms]
        errors = sum(m["errors"] for m in ms)
        print(f"{name:<6} {c:>7} {tool:<10} {spread(rps, '{:.0f}'):>22} {spread(rss):>20} "
              f"{statistics.median(per):>8.1f} {spread(growth, '{:.2f}'):>20} "
              f"{spread(cpu, '{:.2f}'):>18} {errors:>6}")
        summary.append(dict(server=name, c=c, tool=tool, rps=rps, rss_mib=rss,
                            kib_per_conn=per, growth_kib_per_conn=growth, cpu_us=cpu,
                            errors=errors))
        if tool == "handshake":
            g = statistics.median(growth)
            if a.max_kb_per_conn is not None and g > a.max_kb_per_conn:
                failed.append(f"{name} -c {c}: {g:.2f} KiB per connection > {a.max_kb_per_conn}")
            theirs = rows.get((name, c, "wrk"))
            if a.vs_wrk and theirs:
                w = statistics.median((m["rss_kib"] - m["base_rss_kib"]) / (c - BASE_C)
                                      for m in theirs)
                if g > w:
                    failed.append(f"{name} -c {c}: {g:.2f} KiB per connection > wrk's {w:.2f}")
            if any(m["opened"] != c for m in ms):
                failed.append(f"{name} -c {c}: opened {[m['opened'] for m in ms]}, not {c}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(summary, f, indent=1)
    for f in failed:
        print(f"FAILED {f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
