#!/usr/bin/env python3
"""Open-loop accuracy: does the instrument add latency of its own when it paces sends?

handshake (`bench --rate R -c C`, keep-alive, C 4 unless -c) and vegeta (`attack -rate R
-max-workers C`) take turns against the same nginx (one worker, 127.0.0.1 only, its own config
and temp dir), at each rate in --rates: A B A B ... for --pairs pairs of --seconds each.
Per rate it prints the medians over the pairs of

  - each tool's median and p99 latency (ms), as each reports it;
  - handshake's median `blocked` on reused connections (ms): the time from a send's
    intended start to its real start; the wait the pacer itself adds;
  - the ratio handshake / vegeta of the median latency, per pair, with its min and max;
  - the rate each achieved (requests sent over the run's length) against the one asked.

At scale (issue 46): `--rates 20000 -c 1000`.

Usage: python3 bench/open_loop.py [--handshake PATH] [--rates 500,2000] [-c 4]
       [--pairs 5] [--seconds 5]
Needs: nginx (Debian package) and vegeta
(`go install github.com/tsenart/vegeta/v12@latest`, found on PATH or in ~/go/bin).
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

from loopback import default_handshake, NGINX_CONF, free_port, stop, wait_port


def find_vegeta():
    found = shutil.which("vegeta")
    if found:
        return found
    home = os.path.expanduser("~/go/bin/vegeta")
    if os.access(home, os.X_OK):
        return home
    raise SystemExit("vegeta not found: go install github.com/tsenart/vegeta/v12@latest")


def vegeta_version(binary):
    """`go install` leaves `vegeta -version` empty; the module's version is in the binary."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    try:
        info = subprocess.run([go, "version", "-m", binary], capture_output=True, text=True).stdout
    except OSError:
        return "(version unknown)"
    for line in info.splitlines():
        parts = line.split()
        if parts[:2] == ["mod", "github.com/tsenart/vegeta/v12"]:
            return parts[2]
    return "(version unknown)"


def run(cmd, stdin=None, timeout=120):
    out = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=timeout)
    if out.returncode != 0:
        raise SystemExit(f"{cmd} failed: {out.stderr[-2000:]!r}")
    return out.stdout


def vegeta(binary, url, rate, seconds, conns):
    attack = run([binary, "attack", f"-rate={rate}", f"-duration={seconds}s", "-keepalive=true",
                  f"-max-workers={conns}"],
                 stdin=f"GET {url}\n".encode())
    report = json.loads(run([binary, "report", "-type=json"], stdin=attack))
    if report["success"] < 0.999:
        raise SystemExit(f"vegeta: success ratio {report['success']}: {report.get('errors')}")
    lat = report["latencies"]
    return {"p50": lat["50th"] / 1e6, "p99": lat["99th"] / 1e6, "requests": report["requests"],
            "achieved": report["rate"]}


def handshake(binary, url, rate, seconds, conns):
    out = run([binary, "bench", url, "--rate", str(rate), "-c", str(conns), "--duration", f"{seconds}s",
               "--json", "--no-progress"])
    s = json.loads(out)["scenarios"][0]
    if s["requests"]["ok"] != s["requests"]["attempted"]:
        raise SystemExit(f"handshake: {s['requests']}")
    blocked = s["phases_ms"]["reused"]["blocked"]
    return {"p50": s["latency_ms"]["p50"], "p99": s["latency_ms"]["p99"],
            "blocked_p50": blocked["p50"], "blocked_p99": blocked["p99"],
            "late": s["requests"]["late_sends"], "requests": s["requests"]["attempted"],
            "achieved": s["requests"]["attempted"] / seconds,
            "connections": s["connections"]["opened"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--handshake", default=default_handshake())
    ap.add_argument("--rates", default="500,2000")
    ap.add_argument("-c", type=int, default=4)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    args = ap.parse_args()
    veg = find_vegeta()
    version = vegeta_version(veg)
    tmp = tempfile.mkdtemp(prefix="hs-openloop-")
    port = free_port()
    conf = os.path.join(tmp, "nginx.conf")
    with open(conf, "w") as f:
        f.write(NGINX_CONF.format(tmp=tmp, port=port).replace(
            "worker_connections 4096", f"worker_connections {max(4096, args.c + 1000)}"))
    nginx = subprocess.Popen(["nginx", "-c", conf, "-p", tmp], stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        url = f"http://127.0.0.1:{port}/"
        print(f"vegeta {version}; nginx one worker; -c {args.c}; {args.pairs} pairs of "
              f"{args.seconds} s per rate")
        print(f"{'rate':>6} {'hs p50':>8} {'vg p50':>8} {'hs/vg p50 [min, max]':>24} "
              f"{'hs p99':>8} {'vg p99':>8} {'blocked p50':>12} {'blocked p99':>12} {'late':>5} "
              f"{'hs rate %':>9} {'vg rate %':>9} {'hs conns':>8}")
        for rate in [int(r) for r in args.rates.split(",")]:
            hs, vg = [], []
            for _ in range(args.pairs):
                hs.append(handshake(args.handshake, url, rate, args.seconds, args.c))
                vg.append(vegeta(veg, url, rate, args.seconds, args.c))
            ratios = [h["p50"] / v["p50"] for h, v in zip(hs, vg)]

            def med(rows, key):
                return statistics.median(r[key] for r in rows)

            print(f"{rate:>6} {med(hs, 'p50'):>8.3f} {med(vg, 'p50'):>8.3f} "
                  f"{statistics.median(ratios):>8.2f} [{min(ratios):.2f}, {max(ratios):.2f}]"
                  f"{'':>6} {med(hs, 'p99'):>8.3f} {med(vg, 'p99'):>8.3f} "
                  f"{med(hs, 'blocked_p50'):>12.3f} {med(hs, 'blocked_p99'):>12.3f} "
                  f"{int(med(hs, 'late')):>5} {100 * med(hs, 'achieved') / rate:>9.2f} "
                  f"{100 * med(vg, 'achieved') / rate:>9.2f} {int(med(hs, 'connections')):>8}")
            sys.stdout.flush()
    finally:
        stop(nginx, signal.SIGQUIT)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
