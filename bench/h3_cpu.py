#!/usr/bin/env python3
"""HTTP/3 against HTTPS over TCP: CPU per request on loopback, side by side in one run.

One `handshake serve --threads 1 --early-data on` (HTTPS on TCP and HTTP/3 on UDP at
the same port, 127.0.0.1 only, its CA written by --cacert-out) answers every strategy:

  over TCP:  close (full TLS 1.3 handshake per request), close-resumed, close-0rtt,
             keepalive (32 connections)
  over QUIC: h3-close (full handshake per request), h3-resumed, h3-0rtt,
             h3 (4 QUIC connections, 8 streams in flight on each)

`handshake bench -t 1 -c 32` for each, interleaved: every strategy once per round, the
order rotating. Printed per strategy: requests/s, the generator's own CPU per request
(user+sys from rusage of the child) and the server's (utime+stime of the serve process
from /proc, read before and after), medians of --runs rounds with min-max, and the
ratio to `close` and to `keepalive` per round (median [min-max]).

No tool on this machine speaks HTTP/3 to stand beside handshake's QUIC figures (nginx
here has no QUIC module; h2load, oha, wrk and ab have no HTTP/3 or no 0-RTT), so the
comparison is handshake's QUIC against handshake's TCP, same server, same run.

Usage: python3 bench/h3_cpu.py [--handshake PATH] [--runs 5] [-n 10000] [--reused-n 100000]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile

from loopback import default_handshake, free_port, proc_cpu, run_measured, stop, wait_port

NEW = ["close", "close-resumed", "close-0rtt", "h3-close", "h3-resumed", "h3-0rtt"]
REUSED = ["keepalive", "h3"]
CONCURRENCY = 32
QUIC_CONNECTIONS = 4


def bench(binary, url, ca, strategy, n):
    cmd = [binary, "bench", url, "--cacert", ca, "--strategy", strategy, "-t", "1",
           "-c", str(CONCURRENCY), "-n", str(n), "--json", "--no-progress"]
    if strategy == "h3":
        cmd += ["--connections", str(QUIC_CONNECTIONS)]
    out, cpu = run_measured(cmd)
    s = json.loads(out)["scenarios"][0]
    ok = s["requests"]["ok"]
    if ok != n:
        raise SystemExit(f"{strategy}: {ok} of {n} requests answered: {s['requests']}")
    c = s["connections"]
    return {
        "ok": ok,
        "rps": s["throughput"]["requests_per_s"],
        "cpu_us": cpu * 1e6 / ok,
        "opened": c["opened"],
        "resumed": c["tls_handshakes"]["resumed"],
        "early": c["early_data"]["accepted"],
    }


def spread(xs, fmt="{:.1f}"):
    return f"{fmt.format(statistics.median(xs))} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--handshake", default=default_handshake())
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("-n", type=int, default=10_000, help="requests per run, new-connection strategies")
    ap.add_argument("--reused-n", type=int, default=100_000, help="requests per run, keepalive and h3")
    args = ap.parse_args()
    order = NEW + REUSED
    with tempfile.TemporaryDirectory(prefix="handshake-h3-bench-") as tmp:
        ca = os.path.join(tmp, "ca.pem")
        port = free_port()
        srv = subprocess.Popen(
            [args.handshake, "serve", "--threads", "1", "--early-data", "on", "--h3", "on",
             "--listen", f"127.0.0.1:{free_port()}", "--tls-listen", f"127.0.0.1:{port}",
             "--cacert-out", ca],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(port)
            url = f"https://127.0.0.1:{port}/"
            res = {s: [] for s in order}
            for r in range(args.runs):
                turn = order[r % len(order):] + order[:r % len(order)]
                for s in turn:
                    n = args.reused_n if s in REUSED else args.n
                    before = proc_cpu([srv.pid])
                    fig = bench(args.handshake, url, ca, s, n)
                    fig["server_us"] = (proc_cpu([srv.pid]) - before) * 1e6 / fig["ok"]
                    res[s].append(fig)
                print(f"round {r + 1} of {args.runs} done", file=sys.stderr)
        finally:
            stop(srv, signal.SIGTERM)

    print(f"handshake bench -t 1 -c {CONCURRENCY} against handshake serve --threads 1 on "
          f"loopback; {args.runs} rounds, medians [min-max]; CPU in µs per request")
    print(f"{'strategy':<14} {'req/s':>22} {'client CPU':>22} {'server CPU':>22}"
          f" {'client vs close':>18} {'client vs keepalive':>20}  connections (resumed, 0-RTT)")
    for s in order:
        rows = res[s]
        ratio = lambda base: [a["cpu_us"] / b["cpu_us"] for a, b in zip(rows, res[base])]
        last = rows[-1]
        print(f"{s:<14} {spread([x['rps'] for x in rows], '{:.0f}'):>22} "
              f"{spread([x['cpu_us'] for x in rows]):>22} "
              f"{spread([x['server_us'] for x in rows]):>22} "
              f"{spread(ratio('close'), '{:.2f}'):>18} {spread(ratio('keepalive'), '{:.2f}'):>20}"
              f"  {last['opened']} ({last['resumed']}, {last['early']})")


if __name__ == "__main__":
    main()
