#!/usr/bin/env python3
"""CPU per request: handshake against every peer installed here, one harness, one run.

Every row is one load shape against one server on 127.0.0.1 (nginx with one worker, or
`handshake serve --threads 1` for HTTP/3, which this nginx lacks). Each tool in the row
runs once per pair, the order reversed every other pair (A B, B A, ...), --pairs times
(at least 5). A tool's figure is its own CPU time (user + system, rusage of the child)
per completed request. Per row the script prints each tool's median with its min-max,
the best peer (lowest median), and handshake's ratio to it per pair: median [min-max],
for handshake's best setting and for its defaults, and each tool's kernel share (system
time over user + system): where both tools spend most of their CPU in the kernel, on
the same system calls, a lead has to come out of the user-space rest. Server rows
drive `handshake serve` and nginx with the same peer tool and divide each server's CPU
(utime+stime of its processes from /proc) by the requests answered.

Rows (c=50 unless said; --rows picks some):
  http-keepalive    nginx, HTTP/1.1 keep-alive
  http-close        nginx, a new connection per request
  https-keepalive   nginx TLS 1.3, keep-alive
  https-close       nginx TLS 1.3, a full handshake per request (tickets and cache off)
  h2                nginx TLS h2, 4 connections x 16 streams
  h3                handshake serve, HTTP/3, 4 connections x 16 streams
  server-http-keepalive, server-http-close, server-https-keepalive,
  server-https-close, server-h2: serve against nginx, driven by wrk -t1 -c50 (h2load
  -c4 -m16 -t1 for h2)

Usage: python3 bench/peers.py [--handshake PATH] [--pairs 5] [--rows a,b] [--scale 1.0]
       [--json FILE]
Peers looked for: wrk, ab, h2load, oha (PATH or --oha; HTTP/3 if built with it),
vegeta, nginx (Debian packages wrk, apache2-utils, nghttp2-client, nginx; cargo
install oha --features http3; go install vegeta).
"""
import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from loopback import default_handshake, NGINX_HEAD, children, free_port, make_certs, proc_cpu, run_measured_split, stop, wait_port

C = 50
H2_CONNS, H2_STREAMS = 4, 16

NGINX_CONF = NGINX_HEAD + """
    ssl_protocols TLSv1.3;
    ssl_session_tickets off;
    ssl_session_cache off;
    ssl_certificate {tmp}/leaf.pem;
    ssl_certificate_key {tmp}/leaf.key;
    server {{
        listen 127.0.0.1:{http} backlog=4096;
        listen 127.0.0.1:{https} ssl backlog=4096;
        location / {{ return 200 "Hello, world\\n"; }}
    }}
    server {{
        listen 127.0.0.1:{h2} ssl http2 backlog=4096;
        location / {{ return 200 "Hello, world\\n"; }}
    }}
}}
"""


def version(cmd):
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # The first line that names a version ("Version: v12.11.1"; an empty "Version:" is none).
    lines = [l.strip() for l in r.stdout.splitlines() if l.strip()]
    line = next((l for l in lines if re.search(r"\d+\.\d+", l)), "")
    return line[:60] or "installed (no version given)"


def module_version(path):
    """A Go binary's main module and version, from the build information it carries."""
    try:
        r = subprocess.run(["go", "version", "-m", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    mod = next((l.split()[1:3] for l in r.stdout.splitlines() if l.strip().startswith("mod\t")), None)
    return " ".join(mod) if mod else None


def find_peers(oha_path):
    """Each peer installed here, with its version line; oha's HTTP/3 is checked by use."""
    peers = {}
    for name, cmd in (("wrk", ["wrk", "-v"]), ("ab", ["ab", "-V"]), ("h2load", ["h2load", "--version"]),
                      ("vegeta", ["vegeta", "-version"])):
        path = shutil.which(name) or (os.path.expanduser(f"~/go/bin/{name}") if name == "vegeta" else None)
        if path and os.path.exists(path):
            v = version([path] + cmd[1:])
            if name == "vegeta" and (v or "").startswith("Runtime"):
                # Built by `go install` (no version stamped): the module's version.
                v = module_version(path) or v
            peers[name] = (path, v)
    oha = oha_path or shutil.which("oha")
    if oha and os.path.exists(oha):
        peers["oha"] = (oha, version([oha, "--version"]))
    return peers


# --- the tools: each returns (completed requests, CPU seconds, requests/s) -----------

def handshake(binary, url, n, strategy, extra=(), cacert=None, conns=C):
    cmd = [binary, "bench", url, "-c", str(conns), "-n", str(n), "--strategy", strategy,
           "--json", "--no-progress", *extra]
    if cacert:
        cmd += ["--cacert", cacert]
    out, *cpu = run_measured_split(cmd, timeout=600)
    s = json.loads(out)["scenarios"][0]
    ok = s["requests"]["ok"]
    if ok != n:
        raise SystemExit(f"handshake {strategy}: {ok} of {n} ok: {s['requests']['errors']}")
    return ok, cpu, s["throughput"]["requests_per_s"]


def wrk(path, url, seconds, threads, close=False, conns=C):
    cmd = [path, f"-t{threads}", f"-c{conns}", f"-d{seconds}s", url]
    if close:
        cmd[1:1] = ["-H", "Connection: close"]
    out, *cpu = run_measured_split(cmd)
    m = re.search(r"(\d+) requests in ([\d.]+)(\w+)", out)
    n = int(m.group(1))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    if errors:
        raise SystemExit(f"wrk: {errors.group(1)} non-2xx responses")
    secs = float(m.group(2)) * {"s": 1, "ms": 1e-3, "m": 60}[m.group(3)]
    return n, cpu, n / secs


def ab(path, url, n, keepalive):
    cmd = [path, "-q", "-n", str(n), "-c", str(C)] + (["-k"] if keepalive else []) + [url]
    out, *cpu = run_measured_split(cmd, timeout=600)
    done = int(re.search(r"Complete requests:\s+(\d+)", out).group(1))
    failed = int(re.search(r"Failed requests:\s+(\d+)", out).group(1))
    if failed:
        raise SystemExit(f"ab: {failed} failed requests")
    rps = float(re.search(r"Requests per second:\s+([\d.]+)", out).group(1))
    return done, cpu, rps


def oha(path, url, n, keepalive=True, cacert=None, http_version=None, conns=C, parallel=1):
    cmd = [path, "-n", str(n), "-c", str(conns), "--no-tui", "--output-format", "json"]
    if not keepalive:
        cmd.append("--disable-keepalive")
    if cacert:
        cmd += ["--cacert", cacert]
    if http_version:
        cmd += ["--http-version", http_version, "-p", str(parallel)]
    out, *cpu = run_measured_split(cmd + [url], timeout=600)
    r = json.loads(out)
    ok = r.get("statusCodeDistribution", {}).get("200", 0)
    if ok != n:
        raise SystemExit(f"oha: {ok} of {n} ok, errors {r.get('errorDistribution')}")
    return ok, cpu, r["summary"]["requestsPerSec"]


def h2load(path, url, n, conns=H2_CONNS, streams=H2_STREAMS):
    cmd = [path, "-n", str(n), "-c", str(conns), "-m", str(streams), "-t", "1", url]
    out, *cpu = run_measured_split(cmd, timeout=600)
    done = int(re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded", out).group(2))
    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
    return done, cpu, rps


def vegeta(path, url, seconds, keepalive, cacert=None):
    """A closed loop of 50 workers (-rate=0); the attack's own CPU, its report's count."""
    tmp = tempfile.mkdtemp(prefix="handshake-vegeta-")
    try:
        targets = f"{tmp}/targets"
        with open(targets, "w") as f:
            f.write(f"GET {url}\n")
        cmd = [path, "attack", "-rate=0", f"-max-workers={C}", f"-workers={C}", f"-duration={seconds}s",
               f"-targets={targets}", f"-output={tmp}/results.bin", f"-keepalive={'true' if keepalive else 'false'}"]
        if cacert:
            cmd.append(f"-root-certs={cacert}")
        _, *cpu = run_measured_split(cmd, timeout=600)
        rep = subprocess.run([path, "report", "-type=json", f"{tmp}/results.bin"], stdout=subprocess.PIPE,
                             text=True, check=True).stdout
        r = json.loads(rep)
        ok = r["status_codes"].get("200", 0)
        if ok != r["requests"]:
            raise SystemExit(f"vegeta: {ok} of {r['requests']} ok: {r.get('errors')}")
        return ok, cpu, r["throughput"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --- the rows -------------------------------------------------------------------------

def client_rows(a, peers, urls, ca, serve_ca):
    """name -> (what, [(tool, is_handshake, is_default, run)])."""
    hs = a.handshake
    s = a.scale
    n = lambda base: max(1000, int(base * s))
    secs = max(1, round(3 * s))
    P = {k: v[0] for k, v in peers.items()}
    rows = {}

    def add(name, what, tools):
        rows[name] = (what, [t for t in tools if t])

    http, https, h2, h3 = urls["http"], urls["https"], urls["h2"], urls["h3"]
    add("http-keepalive", f"HTTP/1.1 keep-alive, c={C}", [
        ("handshake", True, True, lambda: handshake(hs, http, n(200_000), "keepalive")),
        ("handshake -t1", True, False, lambda: handshake(hs, http, n(200_000), "keepalive", ["-t", "1"])),
        "wrk" in P and ("wrk -t1", False, False, lambda: wrk(P["wrk"], http, secs, 1)),
        "wrk" in P and ("wrk -t2", False, False, lambda: wrk(P["wrk"], http, secs, 2)),
        "ab" in P and ("ab -k", False, False, lambda: ab(P["ab"], http, n(200_000), True)),
        "oha" in P and ("oha", False, False, lambda: oha(P["oha"], http, n(200_000))),
        "vegeta" in P and ("vegeta", False, False, lambda: vegeta(P["vegeta"], http, secs, True)),
    ])
    add("http-close", f"HTTP/1.1, a new connection per request, c={C}", [
        ("handshake", True, True, lambda: handshake(hs, http, n(20_000), "close")),
        ("handshake -t1", True, False, lambda: handshake(hs, http, n(20_000), "close", ["-t", "1"])),
        "wrk" in P and ("wrk -t1", False, False, lambda: wrk(P["wrk"], http, secs, 1, close=True)),
        "wrk" in P and ("wrk -t2", False, False, lambda: wrk(P["wrk"], http, secs, 2, close=True)),
        "ab" in P and ("ab", False, False, lambda: ab(P["ab"], http, n(20_000), False)),
        "oha" in P and ("oha", False, False, lambda: oha(P["oha"], http, n(20_000), keepalive=False)),
        "vegeta" in P and ("vegeta", False, False, lambda: vegeta(P["vegeta"], http, secs, False)),
    ])
    add("https-keepalive", f"HTTPS (TLS 1.3) keep-alive, c={C}", [
        ("handshake", True, True, lambda: handshake(hs, https, n(150_000), "keepalive", cacert=ca)),
        ("handshake -t1", True, False, lambda: handshake(hs, https, n(150_000), "keepalive", ["-t", "1"], ca)),
        "wrk" in P and ("wrk -t1", False, False, lambda: wrk(P["wrk"], https, secs, 1)),
        "ab" in P and ("ab -k", False, False, lambda: ab(P["ab"], https, n(150_000), True)),
        "oha" in P and ("oha", False, False, lambda: oha(P["oha"], https, n(150_000), cacert=ca)),
    ])
    add("https-close", f"HTTPS, a full TLS 1.3 handshake per request, c={C}", [
        ("handshake", True, True, lambda: handshake(hs, https, n(5_000), "close", cacert=ca)),
        ("handshake x25519", True, False,
         lambda: handshake(hs, https, n(5_000), "close", ["--tls-groups", "x25519"], ca)),
        "oha" in P and ("oha", False, False, lambda: oha(P["oha"], https, n(5_000), keepalive=False, cacert=ca)),
        "ab" in P and ("ab", False, False, lambda: ab(P["ab"], https, n(5_000), False)),
        "wrk" in P and ("wrk -t1", False, False, lambda: wrk(P["wrk"], https, secs, 1, close=True)),
    ])
    h2_args = ["--connections", str(H2_CONNS)]
    add("h2", f"HTTP/2 over TLS, {H2_CONNS} connections x {H2_STREAMS} streams", [
        ("handshake", True, True, lambda: multiplexed(hs, h2, n(300_000), h2_args, ca)),
        ("handshake -t1", True, False, lambda: multiplexed(hs, h2, n(300_000), h2_args + ["-t", "1"], ca)),
        "h2load" in P and ("h2load -t1", False, False, lambda: h2load(P["h2load"], h2, n(300_000))),
        "oha" in P and ("oha", False, False,
                        lambda: oha(P["oha"], h2, n(300_000), cacert=ca, http_version="2",
                                    conns=H2_CONNS, parallel=H2_STREAMS)),
    ])
    if h3:
        add("h3", f"HTTP/3 keep-alive, {H2_CONNS} connections x {H2_STREAMS} streams (handshake serve)", [
            ("handshake", True, True, lambda: multiplexed(hs, h3, n(100_000), h2_args, serve_ca, "h3")),
            ("handshake -t1", True, False,
             lambda: multiplexed(hs, h3, n(100_000), h2_args + ["-t", "1"], serve_ca, "h3")),
            a.oha_h3 and ("oha http3", False, False,
                          lambda: oha(P["oha"], h3, n(100_000), cacert=serve_ca, http_version="3",
                                      conns=H2_CONNS, parallel=H2_STREAMS)),
        ])
    return rows


def multiplexed(binary, url, n, args, ca, strategy="h2"):
    """h2 or h3: the peers' c x m streams are handshake's workers over --connections."""
    return handshake(binary, url, n, strategy, args, ca, conns=H2_CONNS * H2_STREAMS)


def server_rows(a, peers, urls, serve_urls, nginx_pids, serve_pid):
    """Server rows: (what, [(server name, pids, driver)])."""
    P = {k: v[0] for k, v in peers.items()}
    secs = max(1, round(3 * a.scale))
    rows = {}
    if "wrk" in P:
        for name, scheme, close in (("server-http-keepalive", "http", False), ("server-http-close", "http", True),
                                    ("server-https-keepalive", "https", False), ("server-https-close", "https", True)):
            what = f"{scheme.upper()} {'new connection per request' if close else 'keep-alive'}, driven by wrk -t1 -c{C}"
            rows[name] = (what, [
                ("handshake serve", [serve_pid], lambda u=serve_urls[scheme], c=close: wrk(P["wrk"], u, secs, 1, c)),
                ("nginx", nginx_pids, lambda u=urls[scheme], c=close: wrk(P["wrk"], u, secs, 1, c)),
            ])
    if "h2load" in P:
        n = max(1000, int(300_000 * a.scale))
        rows["server-h2"] = (f"HTTP/2 over TLS, driven by h2load -c{H2_CONNS} -m{H2_STREAMS} -t1", [
            ("handshake serve", [serve_pid], lambda: h2load(P["h2load"], serve_urls["h2"], n)),
            ("nginx", nginx_pids, lambda: h2load(P["h2load"], urls["h2"], n)),
        ])
    return rows


# --- running and printing -----------------------------------------------------------

def spread(xs, f="{:.2f}"):
    return f"{f.format(statistics.median(xs))} [{f.format(min(xs))}-{f.format(max(xs))}]"


def interleaved(tools, pairs, measure):
    """Each tool once per pair, the order reversed every other pair; per tool its figures."""
    out = {name: [] for name, *_ in tools}
    for p in range(pairs):
        order = tools if p % 2 == 0 else list(reversed(tools))
        for t in order:
            out[t[0]].append(measure(t))
    return out


def client_row(name, what, tools, pairs):
    def measure(t):
        done, (user, system), rps = t[3]()
        if done == 0 or user + system <= 0:
            raise SystemExit(f"{name}: {t[0]} measured nothing ({done} requests, {user + system:.3f} s of CPU)")
        us = (user + system) * 1e6 / done
        kernel = system / (user + system)
        print(f"  {name:<16} {t[0]:<18} {us:>8.2f} us/req {rps:>10.0f} req/s kernel {kernel:.0%}",
              file=sys.stderr)
        return us, rps, kernel
    res = interleaved(tools, pairs, measure)
    peers = [t[0] for t in tools if not t[1]]
    result = {"row": name, "what": what,
              "tools": {k: {"cpu_us": [x[0] for x in v], "rps": [x[1] for x in v], "kernel_share": [x[2] for x in v]}
                        for k, v in res.items()}}
    if not peers:
        return result
    best = min(peers, key=lambda p: statistics.median(result["tools"][p]["cpu_us"]))
    result["best_peer"] = best

    def ratios(tool):
        return [h / b for h, b in zip(result["tools"][tool]["cpu_us"], result["tools"][best]["cpu_us"])]
    hs_tools = [t[0] for t in tools if t[1]]
    default = next(t[0] for t in tools if t[1] and t[2])
    best_hs = min(hs_tools, key=lambda t: statistics.median(ratios(t)))
    result["handshake_best"] = best_hs
    result["ratio_best"] = ratios(best_hs)
    result["ratio_default"] = ratios(default)
    # The ratio handshake's best setting would have with no user time at all: its kernel
    # time alone (the exchange's system calls and packets) over the best peer's total.
    hs = result["tools"][best_hs]
    result["floor_best"] = [u * k / b for u, k, b in zip(hs["cpu_us"], hs["kernel_share"],
                                                       result["tools"][best]["cpu_us"])]
    return result


def server_row(name, what, servers, pairs):
    def measure(t):
        before = proc_cpu(t[1])
        done, _, rps = t[2]()
        us = (proc_cpu(t[1]) - before) * 1e6 / done
        print(f"  {name:<22} {t[0]:<16} {us:>8.2f} us/req {rps:>10.0f} req/s", file=sys.stderr)
        return us, rps
    res = interleaved(servers, pairs, measure)
    tools = {k: {"cpu_us": [x[0] for x in v], "rps": [x[1] for x in v]} for k, v in res.items()}
    ratio = [h / n for h, n in zip(tools["handshake serve"]["cpu_us"], tools["nginx"]["cpu_us"])]
    return {"row": name, "what": what, "tools": tools, "ratio_serve_nginx": ratio}


def print_tables(clients, servers, peers, pairs):
    print(f"\nClient rows: each tool's CPU per request (µs, user+sys), median [min-max] of {pairs} "
          f"interleaved pairs; ratio = handshake / best peer per pair, median [min-max]")
    print(f"{'row':<16} {'best peer':<12} {'peer µs/req':>22} {'handshake best':<18} {'µs/req':>22} "
          f"{'ratio best':>20} {'ratio default':>20}")
    for r in clients:
        if "best_peer" not in r:
            print(f"{r['row']:<16} (no peer installed)")
            continue
        b, h = r["best_peer"], r["handshake_best"]
        print(f"{r['row']:<16} {b:<12} {spread(r['tools'][b]['cpu_us']):>22} {h:<18} "
              f"{spread(r['tools'][h]['cpu_us']):>22} {spread(r['ratio_best']):>20} {spread(r['ratio_default']):>20}")
    print("\nEvery tool, CPU µs per request, requests/s and the kernel's share of the CPU (medians):")
    for r in clients:
        cells = ", ".join(f"{k} {statistics.median(v['cpu_us']):.2f} ({statistics.median(v['rps']):.0f}/s, "
                          f"kernel {statistics.median(v['kernel_share']):.0%})"
                          for k, v in r["tools"].items())
        print(f"  {r['row']}: {cells}")
    print("\nEach row's user and kernel CPU (µs per request, medians), and the floor: handshake's kernel "
          "time alone over the best peer's total per pair, the ratio it would have with no user time:")
    for r in clients:
        if "best_peer" not in r:
            continue
        parts = []
        for k in (r["best_peer"], r["handshake_best"]):
            v = r["tools"][k]
            kern = statistics.median([u * sh for u, sh in zip(v["cpu_us"], v["kernel_share"])])
            user = statistics.median([u * (1 - sh) for u, sh in zip(v["cpu_us"], v["kernel_share"])])
            parts.append(f"{k} user {user:.2f} + kernel {kern:.2f}")
        print(f"  {r['row']:<16} {'; '.join(parts)}; floor {spread(r['floor_best'])}")
    if servers:
        print(f"\nServer rows: the server's CPU per request (µs), median [min-max] of {pairs} pairs; "
              f"ratio = serve / nginx per pair")
        print(f"{'row':<24} {'handshake serve':>22} {'nginx':>22} {'ratio':>20}")
        for r in servers:
            t = r["tools"]
            print(f"{r['row']:<24} {spread(t['handshake serve']['cpu_us']):>22} {spread(t['nginx']['cpu_us']):>22} "
                  f"{spread(r['ratio_serve_nginx']):>20}")
    print("\nPeers: " + "; ".join(f"{k} {v[1]}" for k, v in sorted(peers.items())))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--handshake", default=default_handshake())
    ap.add_argument("--oha", default=None, help="oha's path (default: on PATH)")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--rows", default=None, help="comma-separated row names (default: all)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every run's size")
    ap.add_argument("--json", default=None, help="write every figure to this file")
    a = ap.parse_args()
    if a.pairs < 5:
        raise SystemExit("--pairs: at least 5 interleaved pairs")
    nginx_bin = shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.path.exists(nginx_bin):
        raise SystemExit("nginx is not installed (Debian package nginx)")
    peers = find_peers(a.oha)
    tmp = tempfile.mkdtemp(prefix="handshake-peers-")
    procs = []
    try:
        make_certs(tmp)
        ca = f"{tmp}/ca.pem"
        ports = {k: free_port() for k in ("http", "https", "h2")}
        with open(f"{tmp}/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(tmp=tmp, **ports))
        ng = subprocess.Popen([nginx_bin, "-c", f"{tmp}/nginx.conf", "-p", tmp],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append((ng, signal.SIGTERM))
        for p in ports.values():
            wait_port(p)
        sp, stp = free_port(), free_port()
        serve = subprocess.Popen([a.handshake, "serve", "--threads", "1", "--listen", f"127.0.0.1:{sp}",
                                  "--tls-listen", f"127.0.0.1:{stp}", "--cacert-out", f"{tmp}/serve-ca.pem"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append((serve, signal.SIGINT))
        wait_port(sp)
        wait_port(stp)
        time.sleep(0.2)
        urls = {"http": f"http://127.0.0.1:{ports['http']}/", "https": f"https://localhost:{ports['https']}/",
                "h2": f"https://localhost:{ports['h2']}/", "h3": f"https://localhost:{stp}/"}
        serve_urls = {"http": f"http://127.0.0.1:{sp}/", "https": f"https://localhost:{stp}/",
                      "h2": f"https://localhost:{stp}/"}
        # oha speaks HTTP/3 only when built with it: one request says.
        a.oha_h3 = False
        if "oha" in peers:
            r = subprocess.run([peers["oha"][0], "-n", "1", "--no-tui", "--http-version", "3", "--cacert",
                                f"{tmp}/serve-ca.pem", urls["h3"]], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=30)
            a.oha_h3 = r.returncode == 0
            if a.oha_h3:
                peers["oha"] = (peers["oha"][0], peers["oha"][1] + " (http3)")
        # The h3 row's server is handshake serve: its own CA.
        rows = client_rows(a, peers, urls, ca, f"{tmp}/serve-ca.pem")
        srows = server_rows(a, peers, urls, serve_urls, [ng.pid] + children(ng.pid), serve.pid)
        wanted = set(a.rows.split(",")) if a.rows else None
        unknown = (wanted or set()) - set(rows) - set(srows)
        if unknown:
            raise SystemExit(f"--rows: no row {sorted(unknown)}; rows: {', '.join(list(rows) + list(srows))}")
        clients = [client_row(k, w, t, a.pairs) for k, (w, t) in rows.items() if not wanted or k in wanted]
        servers = [server_row(k, w, t, a.pairs) for k, (w, t) in srows.items() if not wanted or k in wanted]
        print_tables(clients, servers, peers, a.pairs)
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"pairs": a.pairs, "peers": {k: v[1] for k, v in peers.items()},
                           "clients": clients, "servers": servers}, f, indent=2)
    finally:
        for p, sig in reversed(procs):
            stop(p, sig)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
