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

Needs root (network namespaces). Usage: python3 bench/delay_line.py [--handshake PATH]
[--seconds 5] [--repeats 3]
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
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("delay_line.py needs root (network namespaces and TUN devices)")
    if not shutil.which(a.handshake) and not os.path.exists(a.handshake):
        raise SystemExit(f"no handshake binary at {a.handshake} (cargo build --release)")

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
    return 0


if __name__ == "__main__":
    sys.exit(main())
