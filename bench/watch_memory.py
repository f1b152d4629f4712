#!/usr/bin/env python3
"""Peak memory of `handshake watch` does not grow with the connections it watches.

For each count N (default 10,000 and 100,000), against `handshake serve` on a free
127.0.0.1 port, `handshake bench --strategy close -n N` (a new connection per request,
each well under a millisecond) is watched two ways:

  command  `handshake watch -- handshake bench ...`: bench is the watched program, its
           connections told from others' in the kernel (its cgroup).
  port     bench started on its own with `--start-at` a second ahead, and `handshake
           watch --port -d` long enough to see all of it.

The watch's peak is its VmHWM, read from /proc until it exits.

Prints the peak, the connections and requests watch saw beside bench's own counts, how
they were attributed, and the kernel's packet drops (a capture that cannot keep up says
so rather than miss silently). Every process is stopped by its PID.

With --metrics, watch also serves its live metrics (`--metrics`), and in port mode
the script scrapes them a second before the watch ends: the label sets of
handshake_connections_opened_total, under --metrics-max-series however many client
ports the connections came from.

Usage: python3 bench/watch_memory.py [--handshake PATH] [--counts 10000,100000]
           [--modes command,port] [--metrics]
Exit status 1 if, in either mode, the largest run's peak exceeds the smallest's by more
than 20 %. Needs root (watch captures packets).
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

from loopback import default_handshake, free_port, hwm_kib, stop, wait_port


def run_with_hwm(cmd, timeout=600):
    """Run cmd; (stdout, stderr, its peak KiB, seconds). The peak is its VmHWM, read
    from /proc until it exits: wait4's ru_maxrss would count a child's too (bench, under
    watch) and the RSS of the Python that forked it, before exec."""
    t0 = time.time()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = 0
    try:
        # watch writes nothing until the end, so its pipes cannot fill meanwhile.
        while p.poll() is None:
            if time.time() - t0 > timeout:
                raise SystemExit(f"{cmd[:2]} did not finish within {timeout} s")
            peak = max(peak, hwm_kib(p.pid) or 0)
            time.sleep(0.05)
        out, err = p.communicate()
    finally:
        stop(p, signal.SIGTERM)
    return out, err.decode(), peak, time.time() - t0


def metrics_args(metrics_port):
    if metrics_port is None:
        return []
    return ["--metrics", f"127.0.0.1:{metrics_port}", "--metrics-linger", "0s"]


def series_of(metrics_port, out):
    """Scrape the watch's metrics: the label sets of connections opened, into out."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError as e:
        out["error"] = str(e)
        return
    out["series"] = sum(1 for l in text.splitlines()
                        if l.startswith("handshake_connections_opened_total{"))
    out["opened"] = sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                        if l.startswith("handshake_connections_opened_total{"))


def watch_command(hs, port, n, c, metrics_port=None):
    """watch -- bench: (watch report, bench report, watch's peak KiB, seconds)."""
    out, err, peak, secs = run_with_hwm(
        [hs, "watch", "--json", *metrics_args(metrics_port), "--", hs, "bench", f"http://127.0.0.1:{port}/", "-n", str(n),
         "-c", str(c), "--strategy", "close", "--json", "--no-progress"])
    # The command's stdout goes to watch's stderr: bench's report is there.
    bench, _ = json.JSONDecoder().raw_decode(err[err.index("{"):])
    return json.loads(out), bench, peak, secs


def watch_port(hs, port, n, c, metrics_port=None, scraped=None):
    """watch --port while bench runs: (watch report, bench report, peak KiB, seconds)."""
    at = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=1.5)).isoformat()
    load = subprocess.Popen(
        [hs, "bench", f"http://127.0.0.1:{port}/", "-n", str(n), "-c", str(c),
         "--strategy", "close", "--start-at", at, "--json", "--no-progress"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        watch_for = 3 + n / 4000
        if metrics_port is not None:
            t = threading.Timer(watch_for - 1, series_of, (metrics_port, scraped))
            t.daemon = True
            t.start()
        out, _, kib, secs = run_with_hwm(
            [hs, "watch", "--json", *metrics_args(metrics_port), "--port", str(port), "-d",
             f"{watch_for}s"])
        bench = json.loads(load.communicate(timeout=60)[0])
    finally:
        stop(load, signal.SIGTERM)
    return json.loads(out), bench, kib, secs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--handshake", default=default_handshake())
    ap.add_argument("--counts", default="10000,100000")
    ap.add_argument("-c", "--concurrency", type=int, default=8)
    ap.add_argument("--modes", default="command,port")
    ap.add_argument("--metrics", action="store_true",
                    help="watch serves its live metrics too (and port mode scrapes them)")
    a = ap.parse_args()
    hs = os.path.abspath(a.handshake)
    results = {}
    for mode in a.modes.split(","):
        for n in [int(x) for x in a.counts.split(",")]:
            port = free_port()
            srv = subprocess.Popen(
                [hs, "serve", "--listen", f"127.0.0.1:{port}", "--no-tls"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            try:
                wait_port(port)
                mport = free_port() if a.metrics else None
                scraped = {}
                if mode == "command":
                    w, bench, kib, secs = watch_command(hs, port, n, a.concurrency, mport)
                else:
                    w, bench, kib, secs = watch_port(hs, port, n, a.concurrency, mport, scraped)
            finally:
                stop(srv, signal.SIGTERM)
            s = bench["scenarios"][0]
            results.setdefault(mode, []).append((n, kib))
            print(json.dumps({
                "mode": mode,
                "connections_bench": n,
                "watch_peak_rss_mib": round(kib / 1024, 1),
                "watch_seconds": round(secs, 1),
                "watched_connections": w["total"]["connections"],
                "watched_requests": w["total"]["requests"],
                "other_connections": w.get("other_connections"),
                "attribution": w["capture"].get("attribution"),
                "attribution_lost": w["capture"].get("attribution_lost"),
                "bench_connections": s["connections"]["opened"],
                "bench_ok": s["requests"]["ok"],
                "kernel_drops": w["capture"]["kernel_drops"],
                "packets": w["capture"]["packets"],
                "metrics": a.metrics,
                "scraped_series": scraped.get("series"),
                "scraped_opened": scraped.get("opened"),
            }), flush=True)
    worst = 0.0
    for mode, r in results.items():
        lo, hi = r[0][1], r[-1][1]
        growth = (hi - lo) / lo
        worst = max(worst, growth)
        print(f"{mode}: peak RSS {lo / 1024:.1f} MiB at {r[0][0]} connections, "
              f"{hi / 1024:.1f} MiB at {r[-1][0]}: {growth * 100:+.1f} %")
    return 1 if worst > 0.20 else 0


if __name__ == "__main__":
    sys.exit(main())
