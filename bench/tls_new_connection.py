#!/usr/bin/env python3
"""HTTPS with a new connection (full TLS 1.3 handshake) per request: the generator's own
CPU per request, handshake vs oha, against one nginx worker on loopback, c=50, both
verifying nginx's certificate with --cacert (a CA and a leaf for localhost and
127.0.0.1, made by openssl here).

Two URLs: `https://localhost:PORT/` (a host name: each new connection needs its
address, which is where DNS costs show) and `https://127.0.0.1:PORT/` (no lookup).
handshake also runs with `--dns-cache off` (a lookup per new connection) for reference.
Runs are interleaved (every tool once per round, the order rotating) and the medians of
--runs rounds are printed with their min-max, then the ratio of medians per URL.

With --before PATH, another build of handshake runs beside them at 127.0.0.1 (a change's
cost, judged within the same run), and with --groups LIST handshake also runs offering
only those key-exchange groups (`--tls-groups`: nginx here has OpenSSL 3.0, which takes
x25519 and not X25519MLKEM768, so the default offer's ML-KEM key share is made and sent
for nothing). --keepalive measures keep-alive instead (one handshake per connection).

Usage: python3 bench/tls_new_connection.py [--handshake PATH] [--oha PATH] [--runs 5]
       [-n 10000] [--before PATH] [--groups LIST] [--keepalive]
Needs: nginx, openssl (Debian), oha (cargo install oha).
"""
import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

from loopback import default_handshake, free_port, make_certs, run_measured, stop, wait_port

NGINX_CONF = """
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    ssl_protocols TLSv1.3;
    ssl_session_tickets off;
    ssl_session_cache off;
    server {{
        listen 127.0.0.1:{port} ssl backlog=4096;
        ssl_certificate {tmp}/leaf.pem;
        ssl_certificate_key {tmp}/leaf.key;
        location / {{ return 200 "Hello, world\\n"; }}
    }}
}}
"""


def handshake(binary, url, n, cacert, extra, keepalive=False):
    strategy = "keepalive" if keepalive else "close"
    cmd = [binary, "bench", url, "-c", "50", "-n", str(n), "--strategy", strategy,
           "--cacert", cacert, "--json", "--no-progress", *extra]
    out, cpu = run_measured(cmd, timeout=600)
    s = json.loads(out)["scenarios"][0]
    ok = s["requests"]["ok"]
    full = s["connections"]["tls_handshakes"]["full"]
    if ok != n or (full != n and not keepalive):
        raise SystemExit(f"handshake: {ok} ok of {n}, {s['connections']['tls_handshakes']}")
    return cpu * 1e6 / n, s["throughput"]["requests_per_s"]


def oha(binary, url, n, cacert, keepalive=False):
    close = [] if keepalive else ["--disable-keepalive"]
    cmd = [binary, "-n", str(n), "-c", "50", *close, "--cacert", cacert,
           "--no-tui", "--output-format", "json", url]
    out, cpu = run_measured(cmd, timeout=600)
    r = json.loads(out)
    codes = r.get("statusCodeDistribution", {})
    if codes.get("200", 0) != n:
        raise SystemExit(f"oha: {codes} of {n}, errors {r.get('errorDistribution')}")
    return cpu * 1e6 / n, r["summary"]["requestsPerSec"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--handshake", default=default_handshake())
    ap.add_argument("--oha", default=shutil.which("oha") or "oha")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("-n", type=int, default=10000)
    ap.add_argument("--before", help="another handshake build, run beside at 127.0.0.1")
    ap.add_argument("--groups", help="also run handshake with --tls-groups LIST at 127.0.0.1")
    ap.add_argument("--keepalive", action="store_true")
    args = ap.parse_args()
    ka = args.keepalive
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    tmp = tempfile.mkdtemp(prefix="handshake-bench-tls-")
    proc = None
    try:
        make_certs(tmp)
        port = free_port()
        with open(f"{tmp}/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(tmp=tmp, port=port))
        proc = subprocess.Popen([nginx, "-c", f"{tmp}/nginx.conf", "-p", tmp],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)
        cacert = f"{tmp}/ca.pem"
        arms = []
        for host in ["localhost", "127.0.0.1"]:
            url = f"https://{host}:{port}/"
            arms.append((host, "oha", lambda u=url: oha(args.oha, u, args.n, cacert, ka)))
            arms.append((host, "handshake", lambda u=url: handshake(args.handshake, u, args.n, cacert, [], ka)))
            if host == "localhost" and not ka:
                arms.append((host, "handshake --dns-cache off",
                             lambda u=url: handshake(args.handshake, u, args.n, cacert, ["--dns-cache", "off"])))
            if host == "127.0.0.1" and args.before:
                arms.append((host, "handshake (before)",
                             lambda u=url: handshake(args.before, u, args.n, cacert, [], ka)))
            if host == "127.0.0.1" and args.groups:
                arms.append((host, f"handshake --tls-groups {args.groups}",
                             lambda u=url: handshake(args.handshake, u, args.n, cacert,
                                                     ["--tls-groups", args.groups], ka)))
        results = {(h, t): [] for h, t, _ in arms}
        for r in range(args.runs):
            order = arms[r % len(arms):] + arms[:r % len(arms)]
            for host, tool, fn in order:
                cpu, rps = fn()
                results[(host, tool)].append((cpu, rps))
                print(f"  round {r + 1}: {host:<10} {tool:<26} {cpu:7.1f} µs/request  {rps:8.0f} req/s",
                      file=sys.stderr)
        shape = "keep-alive" if ka else "new connection per request (TLS 1.3 full)"
        print(f"HTTPS, {shape}, c=50, n={args.n}, "
              f"nginx 1 worker; medians of {args.runs} interleaved runs [min-max]")
        print(f"{'URL host':<10} {'tool':<26} {'CPU µs/request':>24} {'req/s':>8}")
        med = {}
        for (host, tool), v in results.items():
            cpus = [c for c, _ in v]
            med[(host, tool)] = statistics.median(cpus)
            print(f"{host:<10} {tool:<26} {statistics.median(cpus):8.1f} [{min(cpus):.1f}-{max(cpus):.1f}]"
                  f"{'':>3} {statistics.median([r for _, r in v]):8.0f}")
        for host in ["localhost", "127.0.0.1"]:
            ratio = med[(host, "handshake")] / med[(host, "oha")]
            per_run = sorted(a[0] / b[0] for a, b in zip(results[(host, "handshake")], results[(host, "oha")]))
            print(f"handshake / oha, {host}: {ratio:.2f} (per round {per_run[0]:.2f}-{per_run[-1]:.2f})")
        host = "127.0.0.1"
        for tool in [t for h, t, _ in arms if h == host and t not in ("oha", "handshake")]:
            ratio = med[(host, tool)] / med[(host, "oha")]
            per_run = sorted(a[0] / b[0] for a, b in zip(results[(host, tool)], results[(host, "oha")]))
            print(f"{tool} / oha, {host}: {ratio:.2f} (per round {per_run[0]:.2f}-{per_run[-1]:.2f})")
        if args.before:
            per_run = sorted(a[0] / b[0] for a, b in zip(results[(host, "handshake")],
                                                         results[(host, "handshake (before)")]))
            print(f"handshake / handshake (before), {host}: "
                  f"{med[(host, 'handshake')] / med[(host, 'handshake (before)')]:.2f} "
                  f"(per round {per_run[0]:.2f}-{per_run[-1]:.2f})")
    finally:
        if proc:
            stop(proc, signal.SIGQUIT)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
