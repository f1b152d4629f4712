#!/usr/bin/env python3
"""Peak memory of `handshake bench` does not grow with the number of requests.

Runs 1 million and 10 million keep-alive requests (c=50) against `handshake serve`
(started here on a free 127.0.0.1 port, stopped by its PID) and prints the client's peak
RSS for each (`loopback.run_peak`: GNU time's %M, which counts the report built at
exit; the VmHWM read while it runs without it), with requests/s. Latencies go into
HDR histograms and errors into fixed tables, so the two peaks should be the same. If wrk
is installed, it runs for as long as the 1M run took, as a reference for a
constant-memory peer. oha and hey keep every sample (see ../shared/PEERS.md): with
--peers, each of them that is installed (or named by --oha / --hey) runs the same counts
(or --peer-counts) against the same server, so their peaks stand beside handshake's.

Usage: python3 bench/memory.py [--handshake PATH] [--counts 1000000,10000000] [-c 50]
                               [--peers] [--oha PATH] [--hey PATH] [--peer-counts N,N]
Exit status 1 if the largest run's peak exceeds the smallest's by more than 10%.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from loopback import default_handshake, free_port, run_peak, stop, wait_port


def peak_rss_kib(cmd, timeout):
    """Run cmd: (its stdout, its peak RSS KiB, seconds); fails unless it exits 0."""
    t0 = time.time()
    out, _, code, peak, _ = run_peak(cmd, timeout)
    if code != 0:
        raise SystemExit(f"{cmd} exited {code}")
    return out, peak, time.time() - t0


def peer_run(name, path, url, n, c):
    """One -n run of oha or hey; its own count of successful responses."""
    if name == "oha":
        cmd = [path, "-n", str(n), "-c", str(c), "--no-tui", "--output-format", "json", url]
    else:
        cmd = [path, "-n", str(n), "-c", str(c), url]
    out, rss, wall = peak_rss_kib(cmd, timeout=max(300, n / 5000))
    text = out.decode(errors="replace")
    if name == "oha":
        summary = json.loads(text)
        ok = int(summary["statusCodeDistribution"].get("200", 0))
        errors = sum(summary.get("errorDistribution", {}).values())
    else:
        # hey keeps at most 1,000,000 results: past that its summary counts only those.
        m = re.search(r"\[200\]\s+(\d+) responses", text)
        ok = int(m.group(1)) if m else 0
        tail = text.split("Error distribution:", 1)[1] if "Error distribution:" in text else ""
        errors = sum(int(e) for e in re.findall(r"^\s+\[(\d+)\]\t", tail, re.M))
        if ok + errors < n:
            print(f"hey's summary counts {ok + errors:,} of the {n:,} requests it sent",
                  file=sys.stderr)
            return (name, n, ok, n - ok - errors, wall, n / wall, rss)
    if ok + errors != n:
        raise SystemExit(f"{name} accounted {ok} + {errors} of {n} requests")
    return (name, n, ok, errors, wall, ok / wall, rss)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--handshake", default=default_handshake())
    ap.add_argument("--counts", default="1000000,10000000")
    ap.add_argument("-c", "--concurrency", type=int, default=50)
    ap.add_argument("--peers", action="store_true", help="also run oha and hey")
    ap.add_argument("--oha", default=shutil.which("oha"))
    ap.add_argument("--hey", default=shutil.which("hey"))
    ap.add_argument("--peer-counts", help="counts for oha and hey (default: --counts)")
    args = ap.parse_args()
    hs = os.path.abspath(args.handshake)
    if not os.path.exists(hs):
        raise SystemExit(f"{hs} not found: run `cargo build --release` first")
    counts = [int(x) for x in args.counts.split(",")]

    port = free_port()
    server = subprocess.Popen(
        [hs, "serve", "--listen", f"127.0.0.1:{port}", "--no-tls", "--body-size", "13"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    rows = []
    try:
        wait_port(port)
        url = f"http://127.0.0.1:{port}/"
        for n in counts:
            cmd = [hs, "bench", url, "-n", str(n), "-c", str(args.concurrency),
                   "--no-progress", "--json"]
            out, rss, wall = peak_rss_kib(cmd, timeout=max(120, n / 20000))
            s = json.loads(out)["scenarios"][0]
            req = s["requests"]
            errors = sum(req["errors"].values())
            if req["attempted"] != n or req["ok"] + errors != n:
                raise SystemExit(f"accounting broken for n={n}: {req}")
            rows.append(("handshake", n, req["ok"], errors, wall,
                         s["throughput"]["requests_per_s"], rss))
        if shutil.which("wrk"):
            secs = max(1, round(rows[0][4]))
            cmd = ["wrk", "-t2", f"-c{args.concurrency}", f"-d{secs}s", url]
            out, rss, wall = peak_rss_kib(cmd, timeout=secs + 60)
            text = out.decode()
            total = next((int(l.split()[0]) for l in text.splitlines()
                          if "requests in" in l), 0)
            rows.append(("wrk", total, total, 0, wall, total / secs, rss))
        peer_counts = [int(x) for x in (args.peer_counts or args.counts).split(",")]
        for name, path in (("oha", args.oha), ("hey", args.hey)):
            if not (args.peers and path):
                continue
            for n in peer_counts:
                rows.append(peer_run(name, path, url, n, args.concurrency))
    finally:
        stop(server, signal.SIGTERM)

    print(f"{'tool':<10} {'requests':>10} {'ok':>10} {'not ok':>6} {'wall s':>7} "
          f"{'req/s':>9} {'peak RSS MiB':>13}")
    for tool, n, ok, errors, wall, rps, rss in rows:
        print(f"{tool:<10} {n:>10} {ok:>10} {errors:>6} {wall:>7.1f} {rps:>9.0f} "
              f"{rss / 1024:>13.1f}")
    ours = [r for r in rows if r[0] == "handshake"]
    growth = ours[-1][6] / ours[0][6]
    print(f"peak RSS, {ours[-1][1]:,} vs {ours[0][1]:,} requests: {growth:.3f}x")
    for peer in ("oha", "hey"):
        theirs = [r for r in rows if r[0] == peer]
        if len(theirs) > 1 and theirs[0][6]:
            print(f"{peer}'s peak RSS, {theirs[-1][1]:,} vs {theirs[0][1]:,} requests: "
                  f"{theirs[-1][6] / theirs[0][6]:.2f}x")
    sys.exit(0 if growth <= 1.10 else 1)


if __name__ == "__main__":
    main()
