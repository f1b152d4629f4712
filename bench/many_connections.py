#!/usr/bin/env python3
"""100,000 concurrent keep-alive connections from this machine, every one counted by the
server.

A process may hold as many descriptors as its hard open-file limit (20,000 on the
machines here, which root cannot raise without CAP_SYS_RESOURCE), so the connections are
split: --agents `handshake bench` processes, each `--segment I/N` of `-c`, all at once,
from the source addresses of --local-addr (each has its own ephemeral ports: one address
gives about 28,000 connections to one server port). The server is nginx with as many
workers (`reuseport` spreads the connections over them), and its `stub_status` is the
ground truth: the connections it accepted and the requests it answered during the run
must equal the merged report's `connections.opened` and its requests, with no error.

Prints each agent's connections, requests/s and peak RSS (VmHWM, read while it runs),
the sum, RSS per connection, and the merged report's connections by source address.

Usage: python3 bench/many_connections.py [--handshake PATH] [-c 100000] [--agents 6]
       [--seconds 20] [--local-addr 127.0.0.2-127.0.0.9]
Exit 1 when a count differs or an error was counted.
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

from loopback import NGINX_HEAD, default_handshake, free_port, hwm_kib, stop, wait_port


def status(port):
    """nginx's stub_status: (accepted connections, requests)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=10).read().decode()
    accepts, _handled, requests = map(int, re.search(r"\n\s*(\d+) (\d+) (\d+)", text).groups())
    return accepts, requests


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--handshake", default=default_handshake())
    ap.add_argument("-c", type=int, default=100_000)
    ap.add_argument("--agents", type=int, default=6)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--local-addr", default="127.0.0.2-127.0.0.9")
    a = ap.parse_args()
    hs = os.path.abspath(a.handshake)
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    share = -(-a.c // a.agents)
    if hard != resource.RLIM_INFINITY and share + 1000 > hard:
        raise SystemExit(f"{share} connections per agent need more than the hard limit of "
                         f"{hard} descriptors: give more --agents")
    tmp = tempfile.mkdtemp(prefix="handshake-many-")
    port, status_port = free_port(), free_port()
    conf = NGINX_HEAD.format(tmp=tmp)
    conf = conf.replace("worker_processes 1;", f"worker_processes {a.agents};")
    conf = conf.replace("worker_connections 4096", f"worker_connections {hard - 500}")
    conf = conf.replace("daemon off;", f"daemon off;\nworker_rlimit_nofile {hard};")
    conf += f"""    server {{
        listen 127.0.0.1:{port} backlog=4096 reuseport;
        location / {{ return 200 "Hello, world\\n"; }}
    }}
    server {{
        listen 127.0.0.1:{status_port};
        location /status {{ stub_status; }}
    }}
}}
"""
    with open(os.path.join(tmp, "nginx.conf"), "w") as f:
        f.write(conf)
    nginx = subprocess.Popen(["nginx", "-c", os.path.join(tmp, "nginx.conf"), "-p", tmp],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    agents = []
    failed = []
    try:
        wait_port(port)
        wait_port(status_port)
        accepts0, requests0 = status(status_port)
        url = f"http://127.0.0.1:{port}/"
        for i in range(1, a.agents + 1):
            out = open(os.path.join(tmp, f"agent{i}.json"), "w+")
            err = open(os.path.join(tmp, f"agent{i}.err"), "w+")
            cmd = [hs, "bench", url, "-c", str(a.c), "--segment", f"{i}/{a.agents}",
                   "-d", f"{a.seconds}s", "--json", "--no-progress",
                   "--local-addr", a.local_addr]
            agents.append(dict(proc=subprocess.Popen(cmd, stdout=out, stderr=err), out=out,
                               err=err, peak=0, path=out.name))
        deadline = time.time() + a.seconds + 120
        while any(x["proc"].poll() is None for x in agents):
            for x in agents:
                if x["proc"].poll() is None:
                    x["peak"] = max(x["peak"], hwm_kib(x["proc"].pid) or 0)
            if time.time() > deadline:
                for x in agents:
                    if x["proc"].poll() is None:
                        x["proc"].kill()
                failed.append("an agent did not finish in time")
                break
            time.sleep(0.05)
        # Two status requests (before and after) are nginx's own requests too.
        accepts1, requests1 = status(status_port)
        accepted = accepts1 - accepts0 - 1
        answered = requests1 - requests0 - 1
    finally:
        for x in agents:
            if x["proc"].poll() is None:
                x["proc"].kill()
                x["proc"].wait()
        stop(nginx, signal.SIGQUIT)
    reports = []
    print(f"{'agent':<6} {'connections':>11} {'requests/s':>11} {'peak RSS MiB':>12} {'errors':>6}")
    for i, x in enumerate(agents, 1):
        x["out"].seek(0)
        x["err"].seek(0)
        try:
            s = json.load(x["out"])["scenarios"][0]
        except ValueError:
            raise SystemExit(f"agent {i}: no report: {x['err'].read()[-1500:]}")
        reports.append(x["path"])
        errors = s["requests"]["attempted"] - s["requests"]["ok"]
        print(f"{i:<6} {s['connections']['opened']:>11} "
              f"{s['throughput']['requests_per_s']:>11.0f} {x['peak'] / 1024:>12.1f} {errors:>6}")
    merged = subprocess.run([hs, "merge", "--json", *reports], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    shutil.rmtree(tmp, ignore_errors=True)
    if merged.returncode != 0:
        raise SystemExit(f"merge failed: {merged.stderr}")
    m = json.loads(merged.stdout)["scenarios"][0]
    opened = m["connections"]["opened"]
    ok = m["requests"]["ok"]
    errors = m["requests"]["attempted"] - ok
    peak = sum(x["peak"] for x in agents)
    print(f"all    {opened:>11} {m['throughput']['requests_per_s']:>11.0f} {peak / 1024:>12.1f} "
          f"{errors:>6}")
    print(f"RSS per connection: {peak / opened:.2f} KiB (the agents' peaks summed over "
          f"{opened:,} connections)")
    print(f"nginx accepted {accepted:,} connections and answered {answered:,} requests; "
          f"the merged report: {opened:,} opened, {ok:,} requests ok")
    by = m["connections"].get("by_source_address") or {}
    print("by source address: " + ", ".join(f"{k} {v}" for k, v in by.items()))
    if opened != a.c:
        failed.append(f"opened {opened}, not -c {a.c}")
    if accepted != opened:
        failed.append(f"nginx accepted {accepted}, the report opened {opened}")
    if answered != ok:
        failed.append(f"nginx answered {answered}, the report has {ok} ok")
    if errors:
        failed.append(f"{errors} errors")
    if sum(by.values()) != opened:
        failed.append(f"by source address sums to {sum(by.values())}, not {opened}")
    for f in failed:
        print(f"FAILED {f}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
