#!/usr/bin/env bash
# Starts nginx on 127.0.0.1:PORT serving DIR (sendfile on), in the foreground of a subshell;
# prints its pid. Usage: Benchmarks/nginx.sh DIR PORT WORKDIR [TLS_PORT]
# With TLS_PORT it also serves DIR over HTTPS with HTTP/2 there, under a certificate made for
# 127.0.0.1 by WORKDIR/ca.pem's authority (made once).
set -euo pipefail
dir="$(cd "$1" && pwd)"; port="$2"; work="$3"; tls_port="${4:-}"
mkdir -p "$work"
tls=""
if [ -n "$tls_port" ]; then
  if [ ! -s "$work/ca.pem" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -subj "/CN=bench CA" \
      -keyout "$work/ca.key" -out "$work/ca.pem" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=127.0.0.1" \
      -keyout "$work/server.key" -out "$work/server.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >"$work/san.ext"
    openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial -days 30 \
      -extfile "$work/san.ext" -out "$work/server.pem" 2>/dev/null
  fi
  tls="server { listen 127.0.0.1:$tls_port ssl http2; ssl_certificate $work/server.pem; ssl_certificate_key $work/server.key; root $dir; }"
fi
cat >"$work/nginx.conf" <<CONF
worker_processes 1;
error_log $work/error.log warn;
pid $work/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 100000;
  client_body_temp_path $work/body;
  proxy_temp_path $work/proxy;
  fastcgi_temp_path $work/fastcgi;
  uwsgi_temp_path $work/uwsgi;
  scgi_temp_path $work/scgi;
  types { application/epub+zip epub; application/pdf pdf; }
  server {
    listen 127.0.0.1:$port;
    root $dir;
  }
  $tls
}
CONF
nginx -c "$work/nginx.conf" -p "$work"
for _ in $(seq 50); do [ -s "$work/nginx.pid" ] && break; sleep 0.1; done
cat "$work/nginx.pid"
