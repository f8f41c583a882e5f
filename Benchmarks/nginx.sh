#!/usr/bin/env bash
# Starts nginx on 127.0.0.1:PORT serving DIR (sendfile on), in the foreground of a subshell;
# prints its pid. Usage: Benchmarks/nginx.sh DIR PORT WORKDIR
set -euo pipefail
dir="$(cd "$1" && pwd)"; port="$2"; work="$3"
mkdir -p "$work"
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
}
CONF
nginx -c "$work/nginx.conf" -p "$work"
for _ in $(seq 50); do [ -s "$work/nginx.pid" ] && break; sleep 0.1; done
cat "$work/nginx.pid"
