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

    Benchmarks/delay-proxy.py LISTEN_PORT UPSTREAM_PORT DELAY_MS

Prints "ready" on stdout once it listens; runs until killed.
"""

import asyncio
import socket
import sys
import time


async def pump(reader, writer, delay, not_before=0.0):
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

    sender = asyncio.create_task(deliver())
    try:
        while True:
            data = await reader.read(262144)
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

    async def handle(client_reader, client_writer):
        connected = time.monotonic()
        client_writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream)
        except OSError:
            client_writer.close()
            return
        server_writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # The handshake's round trip: the client's first bytes leave once its SYN-ACK would be back.
        await asyncio.gather(
            pump(client_reader, server_writer, delay, not_before=connected + 3 * delay),
            pump(server_reader, client_writer, delay),
            return_exceptions=True,
        )

    server = await asyncio.start_server(handle, "127.0.0.1", listen, backlog=1024)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
