#!/usr/bin/env bash
# The main job on an embedded default: builds kvgate and kvgate-sim, starts
# three simulated vLLM replicas (8B model on one H100 each, 20x faster than
# real time) and the gateway in front of them on 127.0.0.1, drives a sample
# workload of multi-turn chat sessions (streaming and not) through it, and
# prints where the requests went, how they fared and how much prompt each
# replica served from its prefix cache. The workload runs twice on the same
# replicas (caches reset in between): first with the least_load policy, then,
# after a SIGHUP reload, with cache_aware fed by the replicas' KV events, so
# the two hit rates can be compared.
# Usage: scripts/demo.sh [REQUESTS] [CONCURRENCY]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
requests=${1:-120}
concurrency=${2:-8}

bash scripts/setup.sh build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim

source scripts/lib.sh
begin_run demo

workers_yaml=""
replicas=()
for id in r0 r1 r2; do
  start_server "$id" build/bench/sim/kvgate-sim --model demo-model --block-size 16 \
    --num-gpu-blocks 96 --max-model-len 700 --time-scale 20 \
    --kv-events-endpoint tcp://127.0.0.1:0 --kv-events-replay-endpoint tcp://127.0.0.1:0
  line=$started
  read -r -t 10 -u "$started_fd" events_line
  read -r -t 10 -u "$started_fd" replay_line
  workers_yaml+="      - {id: $id, url: \"http://${line#listening }\", kv_events: \"${events_line#kv-events }\","
  workers_yaml+=" kv_events_replay: \"${replay_line#kv-events-replay }\", kv_capacity_blocks: 96}"$'\n'
  replicas+=("${line#listening }")
done

write_config() {
  cat >"$work/kvgate.yaml" <<YAML
listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
threads: 2
access_log: false
routing:
  policy: $1
health_check: {interval: 1s}
models:
  - name: demo-model
    block_size: 16
    workers:
$workers_yaml
YAML
}
write_config least_load
start_server kvgate build/src/kvgate --config "$work/kvgate.yaml"
gateway_pid=${pids[-1]}
line=$started
api=$(sed -E 's/.*api=([^ ]+).*/\1/' <<<"$line")
admin=$(sed -E 's/.*admin=([^ ]+).*/\1/' <<<"$line")
echo "kvgate: api http://$api  admin http://$admin  (3 kvgate-sim replicas with KV events)"

# One request of session S, turn T: a shared system prompt, then the
# conversation so far (it grows each turn); every third request streams.
system_prompt="You are the support assistant of a large online shop. Answer politely, cite the order number, \
never invent tracking data, and keep every answer under one hundred words unless the customer asks for detail."
export system_prompt
# The body of request n: session n % 12, turn n / 12.
body_for() {
  # Separate statements: in one `local` line the arithmetic would be
  # expanded before n is assigned, making every request session 0, turn 0.
  local n=$1
  local session=$((n % 12)) turn=$((n / 12)) stream=false
  ((n % 3 == 0)) && stream=true
  # Each session pastes its own order history (~600 bytes) in the first turn,
  # so sessions differ early and a replica's 96 blocks hold about four sessions.
  local document="" i
  for ((i = 0; i < 12; i++)); do document+="order $((1000 + session))-$i shipped $((session * 7 + i)) items; "; done
  local history="{\"role\":\"system\",\"content\":\"$system_prompt\"},"
  history+="{\"role\":\"user\",\"content\":\"My orders: $document\"},{\"role\":\"assistant\",\"content\":\"Noted.\"},"
  for ((i = 0; i <= turn; i++)); do
    history+="{\"role\":\"user\",\"content\":\"Customer $session asks question $i about order $((1000 + session)).\"},"
    history+="{\"role\":\"assistant\",\"content\":\"answer $i\"},"
  done
  echo "{\"model\":\"demo-model\",\"stream\":$stream,\"max_tokens\":16,\"messages\":[${history}{\"role\":\"user\",\"content\":\"next\"}]}"
}
send() {
  local n=$1
  local session=$((n % 12)) body
  body=$(body_for "$n")
  curl -s -o /dev/null -w '%{http_code} %{time_starttransfer} %{time_total}\n' \
    -H "x-session-id: demo-$session" \
    -H 'content-type: application/json' -d "$body" "http://$api/v1/chat/completions"
}
export -f body_for send
export api
# Sums a vLLM counter over the replicas.
replica_counter() {
  local total=0 replica value
  for replica in "${replicas[@]}"; do
    value=$(curl -s "http://$replica/metrics" | awk -v name="$1" '$1 ~ "^"name"[{]" { print int($NF) }')
    total=$((total + ${value:-0}))
  done
  echo "$total"
}

run_workload() {
  local policy=$1
  local queries_before hits_before
  queries_before=$(replica_counter vllm:prefix_cache_queries_total)
  hits_before=$(replica_counter vllm:prefix_cache_hits_total)
  echo
  echo "######## policy $policy: $requests requests from 12 sessions, $concurrency at a time"
  seq 0 $((requests - 1)) | xargs -P "$concurrency" -I{} bash -c 'send {}' >"$work/results-$policy.txt"
  local results="$work/results-$policy.txt"
  echo "== client view"
  printf "requests: %d   time to first byte p50 %s ms, p99 %s ms   total p50 %s ms\n" \
    "$(wc -l <"$results")" \
    "$(awk '{ print $2 }' "$results" | percentile 0.5)" \
    "$(awk '{ print $2 }' "$results" | percentile 0.99)" \
    "$(awk '{ print $3 }' "$results" | percentile 0.5)"
  awk '{ count[$1]++ } END { for (code in count) printf "  HTTP %s: %d\n", code, count[code] }' "$results" | sort
  echo "== replicas' view (vLLM metrics)"
  local queries hits
  queries=$(($(replica_counter vllm:prefix_cache_queries_total) - queries_before))
  hits=$(($(replica_counter vllm:prefix_cache_hits_total) - hits_before))
  awk -v p="$policy" -v h="$hits" -v q="$queries" \
    'BEGIN { printf "  %s: %d of %d prompt tokens served from the prefix cache (%.1f%%)\n", p, h, q, (q > 0 ? 100 * h / q : 0) }' \
    | tee -a "$work/summary.txt"
}

# Percentiles by sorting (Debian's default awk, mawk, has no asort).
percentile() { sort -n | awk -v q="$1" '{ v[NR] = $1 } END { i = int(NR * q); if (i < 1) i = 1; printf "%.2f", v[i] * 1000 }'; }

run_workload least_load
for replica in "${replicas[@]}"; do curl -s -X POST -o /dev/null "http://$replica/reset_prefix_cache"; done
write_config cache_aware
kill -HUP "$gateway_pid"
# The reload is done when the gateway reports the new policy.
for _ in $(seq 100); do
  curl -s "http://$admin/debug/workers" | grep -q '"policy":"cache_aware"' && break
  sleep 0.1
done
run_workload cache_aware

echo
echo "== gateway view (kvgate_requests_total by worker and status, both runs)"
curl -s "http://$admin/metrics" | grep '^kvgate_requests_total' | sed 's/^kvgate_requests_total/  /'
echo "== KV events taken in (kvgate_kv_events_total)"
curl -s "http://$admin/metrics" | grep '^kvgate_kv_events_total' | grep -v ' 0$' | sed 's/^kvgate_kv_events_total/  /'
echo
echo "== prefix-cache hit rate, same workload, same replicas"
cat "$work/summary.txt"
echo
echo "== a dry-run routing decision (POST /debug/route) for session 1's next turn"
curl -s -H 'x-session-id: demo-1' -d "$(body_for $((requests + 1)))" "http://$admin/debug/route"
echo
