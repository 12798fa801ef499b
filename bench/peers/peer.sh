#!/usr/bin/env bash
# Starts a load balancer a user would deploy instead of kvgate, in front of
# the given replicas, in the foreground (the caller owns the PID and stops
# it; the port answers once it is up).
#   bench/peers/peer.sh KIND PORT DIR REPLICA_URL...
# KIND: nginx_sticky | haproxy_leastconn | haproxy_sticky (Debian's nginx
# and HAProxy); smg_cache_aware (SGLang's model gateway) |
# vllm_router_cache_aware (vLLM's router), the routers as their PyPI wheels
# ship them (scripts/install_tools.sh puts them in .tools/bin), with the
# settings their docs give for prefix-cache-aware routing: docs/benchmarking.md
# names each flag and its source. DIR holds the rendered configuration, logs
# and temp files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if (($# < 4)); then
  echo "usage: $0 nginx_sticky|haproxy_leastconn|haproxy_sticky|smg_cache_aware|vllm_router_cache_aware PORT DIR REPLICA_URL..." >&2
  exit 64
fi
kind=$1 port=$2 dir=$3
shift 3
mkdir -p "$dir"
servers=""
index=0
for url in "$@"; do
  address=${url#http://}
  address=${address%%/*}
  case "$kind" in
    nginx_*) servers+="    server $address;"$'\n' ;;
    haproxy_*) servers+="  server r$index $address"$'\n' ;;
  esac
  index=$((index + 1))
done
render() {  # TEMPLATE BALANCE > config
  local line
  while IFS= read -r line; do
    case "$line" in
      @SERVERS@) printf '%s' "$servers" ;;
      @BALANCE@) printf '%s\n' "$2" ;;
      *)
        line=${line//@PORT@/$port}
        line=${line//@DIR@/$dir}
        printf '%s\n' "$line"
        ;;
    esac
  done <"$1"
}
tools=$(cd "$here/../.." && pwd)/.tools/bin
need_tool() {
  if [[ ! -x "$tools/$1" ]]; then
    echo "peer $kind needs $1 in .tools/bin: run scripts/setup.sh bench (or test)" >&2
    exit 69
  fi
}
# The Rust routers serve Prometheus on a port of their own (29000 by
# default, which two of them would share): a free one each.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
need() {
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "peer $kind needs $1: install Debian's $2 (scripts/setup.sh bench does)" >&2
    exit 69
  fi
}
case "$kind" in
  nginx_sticky)
    need nginx nginx-light
    render "$here/nginx_sticky.conf.in" "" >"$dir/nginx.conf"
    exec nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf"
    ;;
  haproxy_leastconn)
    need haproxy haproxy
    render "$here/haproxy.cfg.in" "  balance leastconn" >"$dir/haproxy.cfg"
    exec haproxy -db -f "$dir/haproxy.cfg"
    ;;
  haproxy_sticky)
    need haproxy haproxy
    render "$here/haproxy.cfg.in" "  balance hdr(x-session-id)
  hash-type consistent" >"$dir/haproxy.cfg"
    exec haproxy -db -f "$dir/haproxy.cfg"
    ;;
  smg_cache_aware)
    # SGLang's router: a radix tree of the request text per worker; a
    # request goes to the worker matching the largest share of it (at least
    # --cache-threshold, else the worker with the smallest tree) unless the
    # load gap passes the balance thresholds. No tokenizer: it routes text.
    need_tool smg
    exec "$tools/smg" launch --host 127.0.0.1 --port "$port" --worker-urls "$@" --policy cache_aware \
      --disable-tokenizer-autoload --prometheus-host 127.0.0.1 --prometheus-port "$(free_port)" \
      --log-dir "$dir" --log-level warn
    ;;
  vllm_router_cache_aware)
    # vLLM's router (a fork of SGLang's): the same text radix tree and
    # balance rule.
    need_tool vllm-router
    exec "$tools/vllm-router" --host 127.0.0.1 --port "$port" --worker-urls "$@" --policy cache_aware \
      --prometheus-host 127.0.0.1 --prometheus-port "$(free_port)" --log-dir "$dir" --log-level warning
    ;;
  *)
    echo "unknown peer '$kind' (nginx_sticky, haproxy_leastconn, haproxy_sticky, smg_cache_aware," \
      "vllm_router_cache_aware)" >&2
    exit 64
    ;;
esac
