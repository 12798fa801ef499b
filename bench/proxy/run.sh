#!/usr/bin/env bash
# Proxy overhead benchmark: wrk against (a) kvgate-test-upstream directly,
# (b) kvgate in front of it, (c) nginx in front of it (proxy_pass with
# upstream keepalive), in one run. The proxy under test gets one worker
# thread pinned to CPU 1; the upstream and wrk share CPU 0, so (b) and (c)
# have the same core budget. Prints a Markdown table with ratios.
# Usage: bench/proxy/run.sh [SECONDS] [CONNECTIONS] [POLICY] [TOKENIZER_DIR]
# With TOKENIZER_DIR (e.g. .cache/tokenizers/qwen3) the model is tokenised
# exactly (chat template + tokenizer) instead of approximately.
# KVGATE_THREADS=N runs kvgate with N I/O threads on CPUs 0-(N-1) instead of
# one thread on CPU 1 (with two cores the load shares them: compare its CPU
# per request, not its requests/s).
# KVGATE_PERF=FILE records kvgate's profile during its run (perf record with
# DWARF call graphs; its CPU figure then includes perf's overhead).
# KVGATE_BASELINE=PATH adds another kvgate binary (an earlier build) as a
# fourth target with the same config, for a before/after in one run.
# KVGATE_SYSCALLS=1 counts each proxy's system calls during its run (perf
# stat on syscall tracepoints; the counting itself adds CPU, so take the CPU
# figures from a run without it) and prints them per request.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
seconds=${1:-10}
connections=${2:-32}
policy=${3:-cache_aware}  # kvgate's routing policy
tokenizer=${4:-}          # a model folder, for exact tokenisation
tokenizer_line=""
[[ -n $tokenizer ]] && tokenizer_line="    tokenizer: \"$(cd "$tokenizer" && pwd)\""

bash scripts/setup.sh bench >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 --target kvgate kvgate-test-upstream >/dev/null

source scripts/lib.sh
begin_run proxy-bench

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() {
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$1/v1/models" && return 0
    sleep 0.1  # start-up poll of a process outside our control (nginx)
  done
  echo "port $1 never answered" >&2
  exit 1
}

upstream_port=$(free_port)
taskset -c 0 build/bench/upstream/kvgate-test-upstream --port "$upstream_port" --id u0 >/dev/null 2>&1 &
pids+=($!)
wait_port "$upstream_port"

kvgate_port=$(free_port)
cat >"$work/kvgate.yaml" <<YAML
listen: "127.0.0.1:$kvgate_port"
admin_listen: "127.0.0.1:0"
threads: ${KVGATE_THREADS:-1}
access_log: false
log_level: warn
routing: {policy: $policy}
models:
  - name: test-model
$tokenizer_line
    workers:
      - {id: u0, url: "http://127.0.0.1:$upstream_port"}
YAML
kvgate_cpus=1
[[ ${KVGATE_THREADS:-1} -gt 1 ]] && kvgate_cpus=0-$((KVGATE_THREADS - 1))
taskset -c "$kvgate_cpus" build/src/kvgate --config "$work/kvgate.yaml" >/dev/null 2>"$work/kvgate.log" &
pids+=($!)
kvgate_pid=$!
wait_port "$kvgate_port"

baseline=${KVGATE_BASELINE:-}
if [[ -n $baseline ]]; then
  baseline_port=$(free_port)
  sed "s/127.0.0.1:$kvgate_port/127.0.0.1:$baseline_port/" "$work/kvgate.yaml" >"$work/baseline.yaml"
  taskset -c "$kvgate_cpus" "$baseline" --config "$work/baseline.yaml" >/dev/null 2>"$work/baseline.log" &
  pids+=($!)
  baseline_pid=$!
  wait_port "$baseline_port"
fi

nginx_port=$(free_port)
mkdir -p "$work/nginx"
cat >"$work/nginx.conf" <<NGINX
worker_processes 1;
worker_cpu_affinity 10;
daemon off;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $work/nginx/body;
  proxy_temp_path $work/nginx/proxy;
  upstream engine { server 127.0.0.1:$upstream_port; keepalive 64; }
  server {
    listen 127.0.0.1:$nginx_port;
    location / {
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
NGINX
nginx -c "$work/nginx.conf" &
pids+=($!)
nginx_pid=$!
wait_port "$nginx_port"

# CPU seconds (user + system) used so far by a process and its children
# threads/processes: the proxy's cost independent of who saturates first.
cpu_seconds() {
  local total=0 pid ticks
  for pid in "$@" $(pgrep -P "$1" || true); do
    ticks=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    total=$((total + ticks))
  done
  awk -v t="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.3f", t / hz }'
}

run_wrk() {
  local proxy_pid=${3:-}
  local cpu_before=0 perf_pid=""
  [[ -n $proxy_pid ]] && cpu_before=$(cpu_seconds "$proxy_pid")
  local stat_pid=""
  if [[ -n ${KVGATE_SYSCALLS:-} && -n $proxy_pid ]]; then
    local events=raw_syscalls:sys_enter call
    for call in sendmsg sendto writev write recvmsg recvfrom readv read epoll_wait epoll_ctl; do
      events+=",syscalls:sys_enter_$call"
    done
    perf stat -x, -e "$events" -p "$(pgrep -P "$proxy_pid" | tr "\n" , )$proxy_pid" -o "$work/$2.syscalls" 2>/dev/null &
    stat_pid=$!
  fi
  if [[ -n ${KVGATE_PERF:-} && $2 == kvgate ]]; then
    perf record -q -F 1999 --call-graph=dwarf,16384 -o "$KVGATE_PERF" -p "$proxy_pid" 2>/dev/null &
    perf_pid=$!
  fi
  taskset -c 0 wrk -t1 -c"$connections" -d"${seconds}s" --latency -s bench/proxy/post.lua \
    "http://127.0.0.1:$1/v1/chat/completions" >"$work/$2.txt"
  if [[ -n $perf_pid ]]; then
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
  fi
  if [[ -n $stat_pid ]]; then
    kill -INT "$stat_pid" 2>/dev/null || true  # perf stat may have failed to start
    wait "$stat_pid" || true
  fi
  local rps p50 p99 non2xx
  rps=$(awk '/^Requests\/sec/ { print $2 }' "$work/$2.txt")
  p50=$(awk '$1 == "50%" { print $2 }' "$work/$2.txt")
  p99=$(awk '$1 == "99%" { print $2 }' "$work/$2.txt")
  non2xx=$(awk '/Non-2xx/ { print $NF }' "$work/$2.txt")
  local requests cpu_us="-"
  requests=$(awk '/requests in/ { print $1 }' "$work/$2.txt")
  echo "$requests" >"$work/$2.requests"
  if [[ -n $proxy_pid ]]; then
    cpu_us=$(awk -v a="$cpu_before" -v b="$(cpu_seconds "$proxy_pid")" -v n="$requests" \
      'BEGIN { printf "%.1f", (b - a) * 1e6 / n }')
  fi
  echo "$2 $rps $p50 $p99 ${non2xx:-0} $cpu_us"
}

# Warm both proxies' connection pools, then measure.
taskset -c 0 wrk -t1 -c"$connections" -d2s -s bench/proxy/post.lua "http://127.0.0.1:$kvgate_port/v1/chat/completions" >/dev/null
taskset -c 0 wrk -t1 -c"$connections" -d2s -s bench/proxy/post.lua "http://127.0.0.1:$nginx_port/v1/chat/completions" >/dev/null
if [[ -n $baseline ]]; then
  taskset -c 0 wrk -t1 -c"$connections" -d2s -s bench/proxy/post.lua \
    "http://127.0.0.1:$baseline_port/v1/chat/completions" >/dev/null
fi
{
  run_wrk "$upstream_port" direct
  run_wrk "$kvgate_port" kvgate "$kvgate_pid"
  run_wrk "$nginx_port" nginx "$nginx_pid"
  if [[ -n $baseline ]]; then run_wrk "$baseline_port" baseline "$baseline_pid"; fi
} >"$work/summary.txt"

echo "wrk -t1 -c$connections -d${seconds}s, small non-streaming chat completion; $(date -u +%Y-%m-%dT%H:%MZ)"
echo
echo "| target | requests/s | p50 | p99 | non-2xx | proxy CPU µs/request |"
echo "|---|---|---|---|---|---|"
awk '{ printf "| %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6 }' "$work/summary.txt"
awk '{ rps[$1] = $2; cpu[$1] = $6 }
     END { printf "\nkvgate / nginx: requests/s %.2f, proxy CPU per request %.2f\n",
                  rps["kvgate"] / rps["nginx"], cpu["kvgate"] / cpu["nginx"]
          if ("baseline" in rps)
            printf "kvgate / baseline: requests/s %.2f, proxy CPU per request %.2f\n",
                   rps["kvgate"] / rps["baseline"], cpu["kvgate"] / cpu["baseline"] }' "$work/summary.txt"
if [[ -n ${KVGATE_SYSCALLS:-} ]]; then
  echo
  echo "System calls per request (perf stat on the proxy's process):"
  echo
  for target in kvgate nginx baseline; do
    [[ -s $work/$target.syscalls ]] || continue
    awk -F, -v t="$target" -v n="$(cat "$work/$target.requests")" '
      $3 ~ /sys_enter/ { name = $3; sub(/.*sys_enter_?/, "", name); if (name == "") name = "all"
                         line = line sprintf(" %s %.2f", name, $1 / n) }
      END { print "- " t ":" line }' "$work/$target.syscalls"
  done
fi
