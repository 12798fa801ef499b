#!/usr/bin/env bash
# Starts a load balancer a user would deploy instead of kvgate, in front of
# the given replicas, in the foreground (the caller owns the PID and stops
# it; the port answers once it is up).
#   bench/peers/peer.sh KIND PORT DIR REPLICA_URL...
# KIND: nginx_sticky | haproxy_leastconn | haproxy_sticky. DIR holds the
# rendered configuration, logs and temp files.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if (($# < 4)); then
  echo "usage: $0 nginx_sticky|haproxy_leastconn|haproxy_sticky PORT DIR REPLICA_URL..." >&2
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
  *)
    echo "unknown peer '$kind' (nginx_sticky, haproxy_leastconn, haproxy_sticky)" >&2
    exit 64
    ;;
esac
