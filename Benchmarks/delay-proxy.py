#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 that delays every byte by a fixed time each way.

This kernel has no netem, so a round trip is made here: each chunk read from one side is
written to the other side DELAY_MS after it arrived, in order, whatever the other chunks do.
Bandwidth is not limited (the proxy buffers what the round trip holds in flight), so a client
pays the round trip exactly where a real network makes it wait: connecting, the TLS handshake,
each request's first byte. The bytes pass through unchanged (TLS and HTTP/2 included).

The proxy accepts a connection at once (it never sees the SYN), so the TCP handshake's round trip
is charged here instead: what a client sends on a new connection reaches the server no earlier
than 1.5 round trips after it connected, as when its first bytes could leave only once the
SYN-ACK came back (since 2026-11-27; before, a new connection cost one round trip less than on a
real network). TCP's slow start is not modelled: a new connection is as fast as an old one.

    Benchmarks/delay-proxy.py LISTEN_PORT UPSTREAM_PORT DELAY_MS [TURNAROUND_LOG]

Prints "ready" on stdout once it listens; runs until killed. With TURNAROUND_LOG it appends to that
file, in milliseconds, each client's turnaround: the time from the last bytes it was handed to the
first bytes it sent after them, on the same connection. For HTTP/1.1 that is the time a client takes
between one response's end and its next request there (reading what was handed over included) —
what the network waits for while the client finishes a book and starts the next. Multiplexed
HTTP/2 sends while it receives, so there the numbers mean little.
"""

import asyncio
import socket
import sys
import time


class Turnaround:
    """When a connection last handed bytes to its client, and the log of the client's turnarounds."""

    def __init__(self, log):
        self.log = log
        self.handed = None

    def sent(self):
        self.handed = time.monotonic()

    def received(self):
        if self.handed is not None and self.log is not None:
            self.log.write(f"{(time.monotonic() - self.handed) * 1000:.3f}\n")
            self.log.flush()
        self.handed = None


async def pump(reader, writer, delay, not_before=0.0, on_read=None, on_write=None):
    queue = asyncio.Queue()

    async def deliver():
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if data is None:
                try:
                    writer.write_eof()
                except OSError:
                    pass
                return
            writer.write(data)
            await writer.drain()
            if on_write:
                on_write()

    sender = asyncio.create_task(deliver())
    try:
        while True:
            data = await reader.read(262144)
            if data and on_read:
                on_read()
            queue.put_nowait((max(time.monotonic() + delay, not_before), data or None))
            if not data:
                break
        await sender
    except (ConnectionError, OSError):
        sender.cancel()
    finally:
        writer.close()


async def main():
    listen, upstream, delay_ms = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    delay = delay_ms / 1000
    log = open(sys.argv[4], "a") if len(sys.argv) > 4 else None

    async def handle(client_reader, client_writer):
        connected = time.monotonic()
        client_writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            client_writer.close()
            return
        server_writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        turnaround = Turnaround(log)
        # The handshake's round trip: the client's first bytes leave once its SYN-ACK would be back.
        await asyncio.gather(
            pump(client_reader, server_writer, delay, not_before=connected + 3 * delay, on_read=turnaround.received),
            pump(server_reader, client_writer, delay, on_write=turnaround.sent),
            return_exceptions=True,
        )

    server = await asyncio.start_server(handle, "127.0.0.1", listen, backlog=1024)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
