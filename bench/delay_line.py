#!/usr/bin/env python3
"""The lab's delay line: how many packets per second it moves, at what CPU, and whether
the phases it produces move when the load doubles.

1. Throughput: `handshake bench --rtt 0` (keep-alive, c=50, the link with no delay)
   for a few seconds; the report's `link.delay_line` gives the packets moved both ways
   and the delay line thread's own CPU time, hence packets/s and CPU per packet.
2. Stability: at --rtt 20ms, keep-alive runs at c=100 and at c=200 (twice the request
   rate), interleaved over --repeats rounds; the median wait of reused requests (1 RTT)
   and the median connect (1 RTT) should not change with the rate. Prints each run, the
   medians, and how much they moved.

3. Precision (`--precision`): an independent check of the link's round trip, ping
   (iputils, whose times are the kernel's receive stamps) across `handshake lab` at 10 and
   40 ms, alone and with two busy loops beside it, interleaved over --repeats rounds:
   ping's median and 99th percentile against the set RTT and its tolerance (2 % + 0.3 ms),
   and the delay line's own lateness from the lab's JSON.

Needs root (network namespaces). Usage: python3 bench/delay_line.py [--handshake PATH]
[--seconds 5] [--repeats 3] [--precision] [--only-precision]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from loopback import default_handshake


def bench(binary, args):
    cmd = [binary, "bench", "--json", "--no-progress", *args]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"{cmd} failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--handshake", default=default_handshake())
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--precision", action="store_true", help="add the ping check of the link's round trip")
    ap.add_argument("--only-precision", action="store_true", help="only the ping check")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("delay_line.py needs root (network namespaces and TUN devices)")
    if not shutil.which(a.handshake) and not os.path.exists(a.handshake):
        raise SystemExit(f"no handshake binary at {a.handshake} (cargo build --release)")

    if a.only_precision:
        return precision(a)
    print("== throughput: keep-alive at c=50 across the link with no delay")
    pps_all = []
    for i in range(a.repeats):
        r = bench(a.handshake, ["--rtt", "0", "-c", "50", "-d", f"{a.seconds}s"])
        s = r["scenarios"][0]
        line = r["link"]["delay_line"]
        packets = line["client_to_server"]["packets"] + line["server_to_client"]["packets"]
        wall = s["duration_s"]
        pps = packets / wall
        pps_all.append(pps)
        print(f"  run {i + 1}: {s['requests']['ok']} requests ({s['throughput']['requests_per_s']:.0f}/s), "
              f"{packets} packets in {wall:.2f} s = {pps:,.0f} packets/s; delay line CPU {line['cpu_s']:.2f} s "
              f"({100 * line['cpu_s'] / wall:.0f} % of a core, {1e6 * line['cpu_s'] / max(packets, 1):.2f} µs per packet)")
    print(f"  median {statistics.median(pps_all):,.0f} packets/s (range {min(pps_all):,.0f}-{max(pps_all):,.0f})")

    print("\n== stability: --rtt 20ms keep-alive at c=100 and c=200 (twice the rate), interleaved")
    LOW, HIGH = 100, 200
    waits = {LOW: [], HIGH: []}
    p99s = {LOW: [], HIGH: []}
    connects = {LOW: [], HIGH: []}
    rates = {LOW: [], HIGH: []}
    for i in range(a.repeats):
        for c in (LOW, HIGH):
            r = bench(a.handshake, ["--rtt", "20ms", "-c", str(c), "-d", f"{a.seconds}s"])
            s = r["scenarios"][0]
            w = s["phases_ms"]["reused"]["wait"]["p50"]
            p99s[c].append(s["phases_ms"]["reused"]["wait"]["p99"])
            k = s["phases_ms"]["new"]["connect"]["p50"]
            waits[c].append(w)
            connects[c].append(k)
            rates[c].append(s["throughput"]["requests_per_s"])
            line = r["link"]["delay_line"]
            packets = line["client_to_server"]["packets"] + line["server_to_client"]["packets"]
            print(f"  round {i + 1} c={c}: {s['throughput']['requests_per_s']:.0f} req/s, "
                  f"{packets / s['duration_s']:,.0f} packets/s, reused wait p50 {w:.3f} ms p99 {p99s[c][-1]:.3f} ms, connect p50 {k:.3f} ms")
    for c in (LOW, HIGH):
        print(f"  c={c}: median {statistics.median(rates[c]):.0f} req/s; reused wait p50 median "
              f"{statistics.median(waits[c]):.3f} ms (range {min(waits[c]):.3f}-{max(waits[c]):.3f}); "
              f"reused wait p99 median {statistics.median(p99s[c]):.3f} ms; connect p50 median {statistics.median(connects[c]):.3f} ms")
    dw = statistics.median(waits[HIGH]) - statistics.median(waits[LOW])
    print(f"  doubling the rate moved the reused wait by {dw:+.3f} ms ({100 * dw / 20:+.2f} % of the RTT)")
    if a.precision:
        return precision(a)
    return 0


def quantile(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))]


def ping_across(binary, rtt_ms, count=200):
    """ping's round trips across a lab of rtt_ms, and the lab's JSON."""
    cmd = [binary, "lab", "--rtt", f"{rtt_ms}ms", "--json", "--",
           "ping", "-n", "-c", str(count), "-i", "0.01", "10.200.0.2"]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if out.returncode != 0:
        raise SystemExit(f"{cmd} failed: {out.stderr[-2000:]}")
    times = [float(l.split("time=")[1].split()[0]) for l in out.stdout.splitlines() if "time=" in l]
    lab = json.loads(out.stderr[out.stderr.index("{\n"):])
    return times, lab


def precision(a):
    if not shutil.which("ping"):
        raise SystemExit("the precision check needs ping (Debian: iputils-ping)")
    print("\n== precision: ping across the lab, alone and beside two busy loops (interleaved)")
    spin = "import time\nend = time.monotonic() + 120\nwhile time.monotonic() < end: pass"
    rows = {}
    for i in range(a.repeats):
        for busy in (False, True):
            for rtt in (10, 40):
                loops = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(2 if busy else 0)]
                try:
                    times, lab = ping_across(a.handshake, rtt)
                finally:
                    for p in loops:
                        p.kill()
                        p.wait()
                tol = rtt * 0.02 + 0.3
                late = lab["link"]["delay_line"]["lateness"]
                med, p99 = statistics.median(times), quantile(times, 0.99)
                within = sum(1 for t in times if abs(t - rtt) <= tol) / len(times)
                key = (busy, rtt)
                rows.setdefault(key, []).append((med, p99, within, late))
                print(f"  round {i + 1} {'busy' if busy else 'alone'} {rtt} ms: ping median {med:.3f} ms, "
                      f"p99 {p99:.3f}, {100 * within:.1f} % within {tol:.2f} ms; delay line late p50 "
                      f"{late['p50_us']:.1f} µs p99 {late['p99_us']:.1f} max {late['max_us']:.0f}, "
                      f"{late['beyond_tolerance']} of {late['packets']} beyond; steal {lab['link']['steal_ms']} ms")
    print("  medians over the rounds [min-max]:")
    for (busy, rtt), v in sorted(rows.items()):
        meds = [x[0] for x in v]
        p99s = [x[1] for x in v]
        within = [x[2] for x in v]
        print(f"  {'busy ' if busy else 'alone'} {rtt:>3} ms: ping median {statistics.median(meds):.3f} "
              f"[{min(meds):.3f}-{max(meds):.3f}] (error {statistics.median(meds) - rtt:+.3f} ms, tolerance "
              f"{rtt * 0.02 + 0.3:.2f}); p99 {statistics.median(p99s):.3f}; within tolerance "
              f"{100 * statistics.median(within):.1f} % of pings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
