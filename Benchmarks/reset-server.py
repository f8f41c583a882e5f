#!/usr/bin/env python3
"""Serves one file on 127.0.0.1 and resets the connection (TCP RST) after every STEP bytes of a
response, honouring Range and If-Range with a strong ETag, as a flaky link or proxy would.

    python3 Benchmarks/reset-server.py FILE PORT STEP

A benchmark aid, not a test: Benchmarks/resets.sh runs bookcache, curl and aria2c against it.
"""
import http.server
import os
import socket
import struct
import sys

PATH, PORT, STEP = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
SIZE = os.path.getsize(PATH)
ETAG = '"%x-%x"' % (SIZE, int(os.path.getmtime(PATH)))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        start = 0
        header = self.headers.get("Range")
        if_range = self.headers.get("If-Range")
        if header and header.startswith("bytes=") and (if_range is None or if_range == ETAG):
            start = int(header[6:].split("-")[0])
        if start >= SIZE and start > 0:
            self.send_response(416)
            self.send_header("Content-Range", "bytes */%d" % SIZE)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(206 if start else 200)
        self.send_header("Content-Type", "application/epub+zip")
        self.send_header("ETag", ETAG)
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Length", str(SIZE - start))
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, SIZE - 1, SIZE))
        self.end_headers()
        sent = 0
        with open(PATH, "rb") as f:
            f.seek(start)
            while True:
                chunk = f.read(min(1 << 20, STEP - sent))
                if not chunk:
                    return
                self.wfile.write(chunk)
                sent += len(chunk)
                if sent >= STEP:
                    # An abortive close: the client sees "connection reset by peer".
                    self.wfile.flush()
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.connection.close()
                    self.close_connection = True
                    return


http.server.ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
