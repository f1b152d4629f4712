#!/usr/bin/env python3
"""What a client certificate costs the client per new connection (mutual TLS): handshake's
own CPU per request with a new connection per request (a full TLS 1.3 handshake each)
against one nginx worker on loopback that asks for a certificate optionally
(`ssl_verify_client optional`), without one, with an ECDSA P-256 certificate and with
an RSA 2048 one; and with the ECDSA certificate over `close-resumed` (TLS 1.3 tickets
carry the authentication: a resumed handshake sends no certificate and signs nothing).

Arms run interleaved (every arm once per round, the order rotating); printed: each arm's
median CPU per request with its min-max over the rounds, and per round each
certificate's extra CPU over the run without one (same round), its median and min-max.
Every run is checked: all requests ok, a full handshake per request (resumed ones for
close-resumed), and the certificate presented in each full handshake.

Usage: python3 bench/client_cert_cost.py [--handshake PATH] [--runs 7] [-n 4000] [-c 10]
Needs: nginx, openssl (Debian).
"""
import argparse
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile

from loopback import default_handshake, free_port, make_certs, run_measured, sh, stop, wait_port

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
    ssl_session_tickets on;
    server {{
        listen 127.0.0.1:{port} ssl backlog=4096;
        ssl_certificate {tmp}/leaf.pem;
        ssl_certificate_key {tmp}/leaf.key;
        ssl_client_certificate {tmp}/client_ca.pem;
        ssl_verify_client optional;
        location / {{ return 200 "Hello, world\\n"; }}
    }}
}}
"""


def client_certs(tmp):
    """A client CA, and an ECDSA P-256 and an RSA 2048 client certificate it signed (X.509
    v3, for client authentication)."""
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
       "-nodes", "-days", "2", "-subj", "/CN=bench client CA",
       "-keyout", f"{tmp}/client_ca.key", "-out", f"{tmp}/client_ca.pem")
    with open(f"{tmp}/client.cnf", "w") as f:
        f.write("basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n")
    for name, key in [("ec", ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]),
                      ("rsa", ["-newkey", "rsa:2048"])]:
        sh("openssl", "req", *key, "-nodes", "-subj", f"/CN=bench {name} client",
           "-keyout", f"{tmp}/{name}.key", "-out", f"{tmp}/{name}.csr")
        sh("openssl", "x509", "-req", "-in", f"{tmp}/{name}.csr", "-CA", f"{tmp}/client_ca.pem",
           "-CAkey", f"{tmp}/client_ca.key", "-CAcreateserial", "-days", "2",
           "-extfile", f"{tmp}/client.cnf", "-out", f"{tmp}/{name}.pem")


def run(binary, url, n, c, cacert, strategy, cert):
    """CPU µs per request of one run, after checking its counts."""
    extra = ["--cert", f"{cert}.pem", "--key", f"{cert}.key"] if cert else []
    cmd = [binary, "bench", url, "-c", str(c), "-n", str(n), "--strategy", strategy,
           "--cacert", cacert, "--json", "--no-progress", *extra]
    out, cpu = run_measured(cmd, timeout=600)
    s = json.loads(out)["scenarios"][0]
    th = s["connections"]["tls_handshakes"]
    cc = th.get("client_certificate", {})
    ok = s["requests"]["ok"] == n and th["full"] + th["resumed"] == n
    if strategy == "close":
        ok = ok and th["full"] == n
    if cert:
        ok = ok and cc.get("presented") == th["full"] and cc.get("requested") == th["full"]
    else:
        ok = ok and cc.get("presented", 0) == 0
    if not ok:
        raise SystemExit(f"{strategy} {cert}: {s['requests']} {th}")
    return cpu * 1e6 / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--handshake", default=default_handshake())
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("-n", type=int, default=4000)
    ap.add_argument("-c", type=int, default=10)
    args = ap.parse_args()
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    tmp = tempfile.mkdtemp(prefix="handshake-bench-mtls-")
    proc = None
    try:
        make_certs(tmp)
        client_certs(tmp)
        port = free_port()
        with open(f"{tmp}/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(tmp=tmp, port=port))
        proc = subprocess.Popen([nginx, "-c", f"{tmp}/nginx.conf", "-p", tmp],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(port)
        url = f"https://127.0.0.1:{port}/"
        cacert = f"{tmp}/ca.pem"
        arms = [
            ("close, no certificate", "close", None),
            ("close, ECDSA P-256", "close", f"{tmp}/ec"),
            ("close, RSA 2048", "close", f"{tmp}/rsa"),
            ("close-resumed, ECDSA P-256", "close-resumed", f"{tmp}/ec"),
        ]
        results = {name: [] for name, _, _ in arms}
        for r in range(args.runs):
            order = arms[r % len(arms):] + arms[:r % len(arms)]
            for name, strategy, cert in order:
                cpu = run(args.handshake, url, args.n, args.c, cacert, strategy, cert)
                results[name].append(cpu)
                print(f"  round {r + 1}: {name:<28} {cpu:7.1f} µs/request", file=sys.stderr)
        print(f"HTTPS to nginx (1 worker, ssl_verify_client optional), TLS 1.3, c={args.c}, "
              f"n={args.n}; handshake's CPU per request, medians of {args.runs} interleaved "
              f"rounds [min-max]")
        for name, v in results.items():
            print(f"{name:<28} {statistics.median(v):8.1f} [{min(v):.1f}-{max(v):.1f}] µs")
        base = results["close, no certificate"]
        for name in ["close, ECDSA P-256", "close, RSA 2048", "close-resumed, ECDSA P-256"]:
            d = sorted(a - b for a, b in zip(results[name], base))
            print(f"{name} - close, no certificate, per round: median {statistics.median(d):+.1f} µs "
                  f"[{d[0]:+.1f} to {d[-1]:+.1f}]")
    finally:
        if proc:
            stop(proc, signal.SIGQUIT)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
