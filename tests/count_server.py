#!/usr/bin/env python3
"""A small HTTP/1.1 server that counts what it serves, as ground truth that is not
handshake's own (Python's http.server and, with --tls, its ssl module / OpenSSL).

Usage:
    python3 tests/count_server.py --stats STATS.json [--host 127.0.0.1] [--port 0]
        [--cert CERT.pem --key KEY.pem]

It keeps connections alive (HTTP/1.1) unless the client asks to close, answers every
GET with a 13-byte body (/chunked...: a chunked body, flushed in parts, whose first
chunk looks like a response head, and a trailer), HEAD with the same length and no body,
and rewrites STATS.json atomically after every change:

    connections   TCP connections accepted
    requests      requests answered
    tls_full      TLS handshakes that were full (with --cert)
    tls_resumed   ... resumed (session_reused: a TLS 1.3 PSK or a 1.2 session)
    open          connections being served now
    peak_open     the most served at once

After binding (127.0.0.1 unless --host, which may be ::1) it prints one line "PORT <n>" and serves until SIGTERM/SIGINT,
then exits 0.
"""

import argparse
import json
import os
import signal
import socket
import socketserver
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

lock = threading.Lock()
counts = {"connections": 0, "requests": 0, "tls_full": 0, "tls_resumed": 0, "open": 0, "peak_open": 0}
stats_path = None


def save():
    tmp = stats_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(counts, f)
    os.replace(tmp, stats_path)


def bump(key):
    with lock:
        counts[key] += 1
        save()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        with lock:
            counts["open"] += 1
            counts["peak_open"] = max(counts["peak_open"], counts["open"])
        bump("connections")
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()
            bump("tls_resumed" if self.connection.session_reused else "tls_full")

    def finish(self):
        try:
            super().finish()
        finally:
            with lock:
                counts["open"] -= 1
                save()

    def do_HEAD(self):
        # The length a GET would have, and no body.
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", "13")
        self.end_headers()
        self.wfile.flush()
        bump("requests")

    def do_GET(self):
        if self.path.startswith("/chunked"):
            # A chunked body whose data looks like a response head, with a trailer.
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Trailer", "X-Checksum")
            self.end_headers()
            for part in (b"HTTP/1.1 200 OK\r\n\r\n", b"hello, ", b"world\n"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.flush()
            self.wfile.write(b"0\r\nX-Checksum: 1\r\n\r\n")
            self.wfile.flush()
            bump("requests")
            return
        body = b"hello, world\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        bump("requests")

    def log_message(self, *args):
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True
    tls = None

    def handle_error(self, request, client_address):
        # A client that resets its connection (Go closing an unread body) is not the
        # server's error; anything else is shown.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)

    def get_request(self):
        sock, addr = super().get_request()
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr


def main():
    global stats_path
    p = argparse.ArgumentParser()
    p.add_argument("--stats", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--cert")
    p.add_argument("--key")
    a = p.parse_args()
    stats_path = a.stats
    if ":" in a.host:
        Server.address_family = socket.AF_INET6
    srv = Server((a.host, a.port), Handler)
    if a.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.cert, a.key)
        ctx.set_alpn_protocols(["http/1.1"])
        srv.tls = ctx
    save()
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=srv.shutdown).start())
    signal.signal(signal.SIGINT, lambda *_: threading.Thread(target=srv.shutdown).start())
    print("PORT", srv.server_address[1], flush=True)
    srv.serve_forever()
    srv.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
