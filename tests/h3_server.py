#!/usr/bin/env python3
"""Small HTTP/3 test server (aioquic) used as independent ground truth.

It counts what it sees and writes the counts to a JSON stats file, so that a
test can compare them with what the client under test reports.

Usage:
    python3 tests/h3_server.py --cert CERT.pem --key KEY.pem --stats STATS.json
        [--host 127.0.0.1] [--port 0] [--early-data on|off]
        [--mode normal|app-error|drop|version-negotiation] [--max-streams N]
        [--ticket-reuse on|off] [--tcp on|off]

With --tcp on it also answers HTTP/1.1 over TLS on TCP at the same port number
(keep-alive; HTTP/1.0 closes unless it asks for keep-alive; Python's ssl
module, the same certificate), with an `Alt-Svc: h3=":<port>"` header, so that
`handshake doctor` has a TCP origin that points at this HTTP/3 server. Its
requests are not counted in the stats.

After binding it prints exactly one line "PORT <n>" to stdout, then serves
until SIGTERM/SIGINT and exits with status 0. Only loopback addresses may be
used as --host (anything else: exit status 2).

Stats keys (JSON object, rewritten atomically whenever a count changes):
    connections          QUIC connections created (first client Initial of a
                         new connection, >= 1200 bytes, accepted by aioquic)
    handshakes           HandshakeCompleted events
    resumed              ... of which session_resumed (TLS 1.3 PSK)
    early_data_accepted  ... of which early_data_accepted: the client offered
                         early data and the server accepted it (whether or not
                         a request was actually sent in 0-RTT)
    requests             HTTP/3 requests whose headers were received
    early_requests       ... of which the headers were processed before the
                         connection's HandshakeCompleted, i.e. came in 0-RTT
    tickets_issued       session tickets issued (NewSessionTicket sent; aioquic
                         sends one per handshake, if the client offered
                         psk_key_exchange_modes)
    app_errors           connections closed by --mode app-error (the first
                         request closes the connection; later ones are ignored
                         and not counted)
    closed_connections   connections terminated (ConnectionTerminated event,
                         i.e. after the closing/draining period or idle timeout)

Why "before HandshakeCompleted" is exactly "arrived in 0-RTT" with aioquic:
the server only installs the client's 1-RTT read key when it processes the
client Finished (tls.Context._server_handle_finished), and HandshakeCompleted
is queued in that same CRYPTO frame handling (QuicConnection._handle_crypto_frame).
A 1-RTT packet that arrives earlier cannot be decrypted and is dropped, so any
request carried in 1-RTT shows up after HandshakeCompleted. 0-RTT keys exist
from the ClientHello on, so 0-RTT requests show up before HandshakeCompleted
(unless a 0-RTT packet was lost and its data resent in 1-RTT: then it did not
arrive in 0-RTT and is not counted as early).
"""

import argparse
import asyncio
import ipaddress
import json
import os
import signal
import ssl
import sys
from urllib.parse import parse_qs, urlsplit

from aioquic.asyncio import QuicConnectionProtocol, serve
from aioquic.buffer import Buffer
from aioquic.h3.connection import H3_ALPN, ErrorCode, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import (
    ConnectionTerminated,
    HandshakeCompleted,
    ProtocolNegotiated,
)
from aioquic.quic.packet import (
    QuicPacketType,
    encode_quic_version_negotiation,
    pull_quic_header,
)
from aioquic.tls import Direction, Epoch

# Versions offered in --mode version-negotiation. Both follow the reserved
# 0x?a?a?a?a pattern (RFC 9000 section 15), so no real client supports them;
# neither is QUIC v1 (0x00000001) nor v2 (0x6b3343cf).
FAKE_VERSIONS = [0x5A5A5A5A, 0x1A2A3A4A]


class Stats:
    """Counters, written atomically to a JSON file whenever one changes."""

    KEYS = (
        "connections",
        "handshakes",
        "resumed",
        "early_data_accepted",
        "requests",
        "early_requests",
        "tickets_issued",
        "app_errors",
        "closed_connections",
    )

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.counts = dict.fromkeys(self.KEYS, 0)
        self.write()

    def bump(self, *keys):
        for key in keys:
            self.counts[key] += 1
        self.write()

    def write(self):
        # Temp file in the same directory, then rename: readers see either
        # the old or the new complete file, never a partial one.
        tmp = f"{self.path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(self.counts, f)
            f.write("\n")
        os.replace(tmp, self.path)


class TicketStore:
    """In-memory session ticket store (TLS 1.3 resumption)."""

    def __init__(self, stats, reuse):
        self.stats = stats
        self.reuse = reuse
        self.tickets = {}

    def add(self, ticket):  # session_ticket_handler: a ticket was issued
        self.tickets[ticket.ticket] = ticket
        self.stats.bump("tickets_issued")

    def get(self, label):  # session_ticket_fetcher: client offers a ticket
        # Single-use by default (consumed on first presentation), which is the
        # anti-replay protection for 0-RTT recommended by RFC 8446 section 8.1.
        if self.reuse:
            return self.tickets.get(label)
        return self.tickets.pop(label, None)


class H3Server(QuicConnectionProtocol):
    """One QUIC connection: HTTP/3 plus counting."""

    def __init__(self, quic, *, opts, stats, **kwargs):
        super().__init__(quic, **kwargs)
        self.opts = opts
        self.stats = stats
        self.h3 = None
        self.handshake_done = False
        self.closed_by_us = False
        self.bodies = {}  # stream_id -> headers of a request whose body we read

        # Max bidirectional streams the client may open at once. aioquic has
        # no configuration field for it (hard-coded 128), so set the limit
        # before the first packet is processed: it is then sent in the
        # transport parameters, and raised by one each time a stream ends.
        limit = quic._local_max_streams_bidi
        limit.value = limit.sent = opts.max_streams

        if not opts.early_data:
            # aioquic's server accepts 0-RTT whenever a valid ticket is
            # presented with the early_data extension. Hook the TLS context
            # (created on the first Initial packet) to refuse it instead.
            init = quic._initialize

            def initialize(peer_cid):
                init(peer_cid)
                quic.tls.update_traffic_key_cb = self._refuse_0rtt(
                    quic.tls, quic.tls.update_traffic_key_cb
                )

            quic._initialize = initialize

        stats.bump("connections")

    @staticmethod
    def _refuse_0rtt(tls, install_key):
        # The TLS server sets early_data_accepted = True and then installs
        # the 0-RTT read key. Undo the flag and skip the key: EncryptedExtensions
        # then carries no early_data (= rejected), 0-RTT packets can't be
        # decrypted and are dropped, and the client resends in 1-RTT.
        def update_traffic_key(direction, epoch, cipher_suite, secret):
            if direction == Direction.DECRYPT and epoch == Epoch.ZERO_RTT:
                tls.early_data_accepted = False
                return
            install_key(direction, epoch, cipher_suite, secret)

        return update_traffic_key

    def quic_event_received(self, event):
        if isinstance(event, ProtocolNegotiated):
            # ALPN done (on the ClientHello, before any 0-RTT stream data).
            self.h3 = H3Connection(self._quic)
        elif isinstance(event, HandshakeCompleted):
            self.handshake_done = True
            keys = ["handshakes"]
            if event.session_resumed:
                keys.append("resumed")
            if event.early_data_accepted:
                keys.append("early_data_accepted")
            self.stats.bump(*keys)
            if self.closed_by_us:  # app-error close deferred from 0-RTT
                self.app_error_close()
        elif isinstance(event, ConnectionTerminated):
            self.stats.bump("closed_connections")

        if self.h3 is not None and not self.closed_by_us:
            for h3_event in self.h3.handle_event(event):
                self.h3_event_received(h3_event)

    def h3_event_received(self, event):
        if self.closed_by_us:
            return  # app-error mode: ignore everything after the 1st request
        if isinstance(event, HeadersReceived):
            # Count (and write the file) BEFORE any response is queued.
            keys = ["requests"]
            if not self.handshake_done:
                keys.append("early_requests")
            self.stats.bump(*keys)

            if self.opts.mode == "app-error":
                # Ignore anything else on this connection (so exactly one
                # request is counted per app-error connection).
                self.closed_by_us = True
                if self.handshake_done:
                    self.app_error_close()
                # else: a 0-RTT request. Closing now would have to be sent in
                # Initial/Handshake packets too, where RFC 9000 section 10.2.3
                # (and aioquic) turn it into a transport APPLICATION_ERROR
                # (0x0c) without code or reason, and the client would see that
                # first. So wait for HandshakeCompleted, then close in 1-RTT.
                return

            headers = dict(event.headers)
            method = headers.get(b":method", b"")
            if method in (b"GET", b"HEAD") or event.stream_ended:
                self.respond(event.stream_id, headers)
            else:
                self.bodies[event.stream_id] = headers  # wait for the body
        elif isinstance(event, DataReceived):
            if event.stream_ended and event.stream_id in self.bodies:
                self.respond(event.stream_id, self.bodies.pop(event.stream_id))

    def app_error_close(self):
        self._quic.close(
            error_code=ErrorCode.H3_INTERNAL_ERROR, reason_phrase="app-error mode"
        )
        self.stats.bump("app_errors")

    def respond(self, stream_id, headers):
        status, body = 200, b"hello\n"
        path = headers.get(b":path", b"/").decode("latin-1")  # never fails
        query = parse_qs(urlsplit(path).query)
        if "bytes" in query:
            try:
                n = int(query["bytes"][0])
                if n < 0:
                    raise ValueError
                body = b"x" * n
            except ValueError:
                status, body = 400, b"bad bytes\n"
        head = headers.get(b":method") == b"HEAD"
        fields = [(b":status", str(status).encode()), (b"content-type", b"text/plain")]
        if "to" in query:
            # ?to=PATH: a redirect there (for -L).
            fields[0] = (b":status", b"301")
            fields.append((b"location", query["to"][0].encode("latin-1")))
            body = b"moved\n"
        if not head:
            # No content-length on HEAD: strict clients (aioquic's among them)
            # check it against the (empty) body and fail with H3_MESSAGE_ERROR.
            fields.append((b"content-length", str(len(body)).encode()))
        self.h3.send_headers(stream_id, fields, end_stream=head)
        if not head:
            self.h3.send_data(stream_id, body, end_stream=True)
        # Sent by the caller (datagram_received/_handle_timer call transmit).


class Dropper(asyncio.DatagramProtocol):
    """--mode drop: read and ignore every datagram."""

    def datagram_received(self, data, addr):
        pass


class VersionNegotiator(asyncio.DatagramProtocol):
    """--mode version-negotiation: answer each client packet with a Version
    Negotiation packet listing only versions the client did not offer."""

    def connection_made(self, transport):
        self.transport = transport

    def datagram_received(self, data, addr):
        try:
            header = pull_quic_header(Buffer(data=data), host_cid_length=8)
        except ValueError:
            return
        # Only long-header packets carry a version; never answer a VN packet.
        if header.version is None or header.packet_type == (
            QuicPacketType.VERSION_NEGOTIATION
        ):
            return
        versions = [v for v in FAKE_VERSIONS if v != header.version]
        self.transport.sendto(
            encode_quic_version_negotiation(
                source_cid=header.destination_cid,
                destination_cid=header.source_cid,
                supported_versions=versions,
            ),
            addr,
        )


def parse_args():
    p = argparse.ArgumentParser(description="HTTP/3 test server (aioquic)")
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--stats", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--early-data", choices=["on", "off"], default="on")
    p.add_argument(
        "--mode",
        choices=["normal", "app-error", "drop", "version-negotiation"],
        default="normal",
    )
    p.add_argument("--max-streams", type=int, default=100)
    p.add_argument(
        "--ticket-reuse",
        choices=["on", "off"],
        default="off",
        help="let one ticket resume several connections (default: single use)",
    )
    p.add_argument("--tcp", choices=["on", "off"], default="off")
    opts = p.parse_args()
    try:
        loopback = ipaddress.ip_address(opts.host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        p.error(f"--host must be a loopback address, got {opts.host!r}")  # exit 2
    if not 0 <= opts.port <= 65535:
        p.error("--port must be in 0..65535")
    if opts.max_streams < 0:
        p.error("--max-streams must be >= 0")
    opts.early_data = opts.early_data == "on"
    opts.ticket_reuse = opts.ticket_reuse == "on"
    opts.tcp = opts.tcp == "on"
    return opts


async def serve_http1(reader, writer, port):
    """HTTP/1.x over TLS on TCP, answering every request with 200 and Alt-Svc."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            version = lines[0].rsplit(" ", 1)[-1]
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    k, v = line.split(":", 1)
                    headers[k.strip().lower()] = v.strip().lower()
            length = int(headers.get("content-length", "0") or 0)
            if length:
                await reader.readexactly(length)
            conn = headers.get("connection", "")
            keep = (version == "HTTP/1.1" and conn != "close") or (
                version == "HTTP/1.0" and conn == "keep-alive"
            )
            body = b"ok\n"
            out = (
                f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n"
                f'Alt-Svc: h3=":{port}"; ma=60\r\n'
                f"Connection: {'keep-alive' if keep else 'close'}\r\n\r\n"
            ).encode() + body
            writer.write(out)
            await writer.drain()
            if not keep:
                break
    except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError, ValueError):
        pass
    finally:
        writer.close()


async def main(opts):
    loop = asyncio.get_running_loop()
    stats = Stats(opts.stats)  # initial all-zero file

    async def bind_udp(port):
        """The UDP side: (aioquic server or None, its transport)."""
        if opts.mode in ("drop", "version-negotiation"):
            # No QUIC stack at all: a bare UDP socket.
            factory = Dropper if opts.mode == "drop" else VersionNegotiator
            transport, _ = await loop.create_datagram_endpoint(
                factory, local_addr=(opts.host, port)
            )
            return None, transport
        config = QuicConfiguration(
            alpn_protocols=H3_ALPN,  # ["h3"]
            is_client=False,
        )
        config.load_cert_chain(opts.cert, opts.key)
        tickets = TicketStore(stats, opts.ticket_reuse)
        server = await serve(
            opts.host,
            port,
            configuration=config,
            create_protocol=lambda quic, **kw: H3Server(
                quic, opts=opts, stats=stats, **kw
            ),
            session_ticket_fetcher=tickets.get,
            session_ticket_handler=tickets.add,
        )
        return server, server._transport

    # With --tcp on, TCP binds first and UDP takes the same port number; with port 0
    # a number free on TCP may be taken on UDP, so try again with another.
    tcp = None
    port = opts.port
    for attempt in range(50):
        if opts.tcp:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(opts.cert, opts.key)
            ctx.set_alpn_protocols(["http/1.1"])
            tcp = await asyncio.start_server(
                lambda r, w: serve_http1(r, w, port), opts.host, opts.port, ssl=ctx
            )
            port = tcp.sockets[0].getsockname()[1]
        try:
            server, transport = await bind_udp(port)
            break
        except OSError:
            if tcp is None or opts.port != 0 or attempt == 49:
                raise
            tcp.close()
            await tcp.wait_closed()
    port = transport.get_extra_info("sockname")[1]

    # Handlers first, so a SIGTERM sent right after "PORT" is seen exits 0.
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    print(f"PORT {port}", flush=True)
    await stop.wait()

    if tcp is not None:
        tcp.close()
    if server is not None:
        server.close()  # sends CONNECTION_CLOSE to open connections
    else:
        transport.close()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
    sys.exit(0)
