#!/usr/bin/env python3
"""Peak memory of `handshake watch` does not grow with the connections it watches.

For each count N (default 10,000 and 100,000): starts `handshake serve` on a free
127.0.0.1 port, starts `handshake bench --strategy close -n N` against it with
`--start-at` a second ahead, and watches the server's port with `handshake watch --port
-d` for long enough (watch starts before bench's first connection and ends after its
last). Prints the watch's peak RSS (its own ru_maxrss from wait4: watch starts no child
here), the connections and requests it saw beside bench's own counts, and the kernel's
packet drops (a capture that cannot keep up says so rather than miss silently). Every
process is stopped by its PID.

Usage: python3 bench/watch_memory.py [--handshake PATH] [--counts 10000,100000]
Exit status 1 if the largest run's peak exceeds the smallest's by more than 20 %.
Needs root (watch captures packets).
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import time

from loopback import free_port, stop, wait_port
from memory import peak_rss_kib


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--handshake", default="target/release/handshake")
    ap.add_argument("--counts", default="10000,100000")
    ap.add_argument("-c", "--concurrency", type=int, default=8)
    a = ap.parse_args()
    hs = os.path.abspath(a.handshake)
    results = []
    for n in [int(x) for x in a.counts.split(",")]:
        port = free_port()
        srv = subprocess.Popen(
            [hs, "serve", "--listen", f"127.0.0.1:{port}", "--no-tls"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_port(port)
            at = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1.5)).isoformat()
            load = subprocess.Popen(
                [hs, "bench", f"http://127.0.0.1:{port}/", "-n", str(n), "-c", str(a.concurrency),
                 "--strategy", "close", "--start-at", at, "--json", "--no-progress"],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            try:
                watch_for = 3 + n / 4000
                out, kib, secs = peak_rss_kib(
                    [hs, "watch", "--json", "--port", str(port), "-d", f"{watch_for}s"], timeout=600
                )
                bench = json.loads(load.communicate(timeout=60)[0])
            finally:
                stop(load, signal.SIGTERM)
            w = json.loads(out)
            s = bench["scenarios"][0]
            results.append((n, kib))
            print(json.dumps({
                "connections_bench": n,
                "watch_peak_rss_mib": round(kib / 1024, 1),
                "watch_seconds": round(secs, 1),
                "watched_connections": w["total"]["connections"],
                "watched_requests": w["total"]["requests"],
                "bench_connections": s["connections"]["opened"],
                "bench_ok": s["requests"]["ok"],
                "kernel_drops": w["capture"]["kernel_drops"],
                "packets": w["capture"]["packets"],
            }))
        finally:
            stop(srv, signal.SIGTERM)
    lo, hi = results[0][1], results[-1][1]
    growth = (hi - lo) / lo
    print(f"peak RSS {lo / 1024:.1f} MiB at {results[0][0]} connections, "
          f"{hi / 1024:.1f} MiB at {results[-1][0]}: {growth * 100:+.1f} %")
    return 1 if growth > 0.20 else 0


if __name__ == "__main__":
    sys.exit(main())
