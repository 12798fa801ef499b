#!/usr/bin/env bash
# Three kvgate replicas as one cluster (cluster:, a redis-server this script
# starts) behind HAProxy spreading requests one by one (round robin, health
# checks on each replica's /readyz, a refused connection tried on another
# replica), in front of kvgate-sim replicas, while the chat preset runs:
#   at 25% of the run  Redis is killed (SIGKILL); every replica routes alone
#   at 40%             Redis is started again on its port (empty)
#   at 55%             one replica is stopped (SIGTERM: it drains and exits)
#   at 70%             it is started again under the same replica id
# and the same run without faults beside it. Counts the requests lost
# (errors in the report), and what each replica dropped and caught up.
# Report in build/cluster-faults-report/.
#   bench/load/cluster-faults.sh [SESSIONS]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
source scripts/lib.sh
export KVGATE_REPLICAS=${KVGATE_REPLICAS:-4} KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-2}
sessions=${1:-200}
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run cluster-faults
start_redis
for gateway in cl1 cl2 cl3; do
  export "KVGATE_TARGET_$gateway={policy: cache_aware}"
  export "KVGATE_SETTINGS_$gateway=cluster: {url: \"redis://127.0.0.1:$redis_port\", replica_id: $gateway}"
done
start_fleet 4000 32768 cl1 cl2 cl3
declare -A api admin
for ((index = 0; index + 1 < ${#runs[@]}; index += 2)); do
  entry=${runs[$index + 1]}
  api[${entry%%=*}]=${entry#*=}
done
for entry in "${admins[@]}"; do
  admin[${entry%%=*}]=${entry#*=}
done
haproxy_port=$(free_port)
{
  cat <<CFG
global
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 600s
  timeout server 600s
  option http-keep-alive
  retries 3
  retry-on conn-failure empty-response
  option redispatch 1
frontend api
  bind 127.0.0.1:$haproxy_port
  default_backend gateways
backend gateways
  balance roundrobin
  option httpchk GET /readyz
CFG
  for gateway in cl1 cl2 cl3; do
    address=${api[$gateway]#http://}
    echo "  server $gateway $address check port ${admin[$gateway]##*:} inter 200ms fall 1 rise 1"
  done
} >"$work/haproxy.cfg"
haproxy -f "$work/haproxy.cfg" -db >"$work/haproxy.log" 2>&1 &
pids+=($!)
sleep 1
workload=(--workload chat --sessions "$sessions" --seed 7 --load 0.7)
# The run without faults, then the same run with them (sims reset between).
build/bench/load/kvgate-bench compare --run "calm=http://127.0.0.1:$haproxy_port" "${resets[@]}" "${workload[@]}" \
  --fleet "$fleet; 3 cache_aware replicas as one cluster behind HAProxy (round robin per request)" \
  --out "$work/calm" >"$work/calm.log" 2>&1
duration=$(python3 -c "import json;print(json.load(open('$work/calm/summary.json'))['runs'][0]['wall_seconds'])")
build/bench/load/kvgate-bench compare --run "faults=http://127.0.0.1:$haproxy_port" "${resets[@]}" "${workload[@]}" \
  --fleet "$fleet; the same, Redis killed and restarted, one replica stopped and restarted" \
  --out "$work/faults" >"$work/faults.log" 2>&1 &
bench=$!
at() { sleep "$(python3 -c "print($duration * $1)")"; }
(
  at 0.25
  echo "fault: Redis killed at $(date +%T.%N | cut -c1-12)"
  kill -9 "$redis_pid"
  at 0.15
  echo "fault: Redis started again at $(date +%T.%N | cut -c1-12)"
  redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no >"$work/redis-again.log" 2>&1 &
  echo $! >"$work/redis-again.pid"
  at 0.15
  echo "fault: cl2 stopped (SIGTERM) at $(date +%T.%N | cut -c1-12)"
  kill -TERM "$(pgrep -f "kvgate --config $work/cl2.yaml")"
  at 0.15
  echo "fault: cl2 started again at $(date +%T.%N | cut -c1-12)"
  build/src/kvgate --config "$work/cl2.yaml" >"$work/cl2-again.out" 2>"$work/cl2-again.log" &
  echo $! >"$work/cl2-again.pid"
) >"$work/faults-timeline.log" 2>&1 &
faults=$!
wait "$bench" || true
wait "$faults" || true
for file in redis-again cl2-again; do
  [[ -f "$work/$file.pid" ]] && pids+=("$(cat "$work/$file.pid")")
done
out=build/cluster-faults-report
rm -rf "$out" && mkdir -p "$out"
cp "$work/calm/report.md" "$out/calm.md"
cp "$work/faults/report.md" "$out/faults.md"
cp "$work/faults-timeline.log" "$work/haproxy.cfg" "$out/"
cp "$work"/cl*.log "$out/" 2>/dev/null || true
for gateway in cl1 cl3; do
  curl -fsS "http://${admin[$gateway]}/debug/cluster" >"$out/cluster-$gateway.json" || true
  curl -fsS "http://${admin[$gateway]}/metrics" | grep '^kvgate_cluster' >"$out/metrics-$gateway.txt" || true
done
echo "run of $duration s"
cat "$out/faults-timeline.log"
grep -h "^| calm\|^| faults\|^| run " "$out/calm.md" "$out/faults.md" | head -4
