#!/usr/bin/env bash
# The main job on an embedded default: builds kvgate, kvgate-sim and
# kvgate-bench, starts three simulated vLLM replicas (8B model on one H100
# each, 20x faster than real time, KV events on) and one gateway per policy
# in front of them on 127.0.0.1, then drives the same multi-turn chat
# workload (kvgate-bench's "chat" preset) through each gateway in turn, the
# replicas' prefix caches reset before each run, and prints the comparison:
# prefix-cache hit rate per turn, time to first token, load balance.
# Usage: scripts/demo.sh [SESSIONS] [CONCURRENCY]
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
sessions=${1:-24}
concurrency=${2:-8}
policies=(round_robin session_hash cache_aware)

bash scripts/setup.sh build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench

source scripts/lib.sh
begin_run demo

# 160 blocks of 16 tokens per replica (2,560 tokens, one long conversation
# or a few short ones): the replicas run under KV pressure, so where a
# session lands decides what gets evicted, and a hotspot costs hits.
workers_yaml=""
resets=()
for id in r0 r1 r2; do
  start_server "$id" build/bench/sim/kvgate-sim --model demo-model --block-size 16 \
    --num-gpu-blocks 160 --max-model-len 2560 --time-scale 20 \
    --kv-events-endpoint tcp://127.0.0.1:0 --kv-events-replay-endpoint tcp://127.0.0.1:0
  line=$started
  read -r -t 10 -u "$started_fd" events_line
  read -r -t 10 -u "$started_fd" replay_line
  workers_yaml+="      - {id: $id, url: \"http://${line#listening }\", kv_events: \"${events_line#kv-events }\","
  workers_yaml+=" kv_events_replay: \"${replay_line#kv-events-replay }\", kv_capacity_blocks: 160}"$'\n'
  resets+=(--reset "http://${line#listening }")
done

# One gateway per policy, all fed by the same replicas' events.
runs=()
for policy in "${policies[@]}"; do
  cat >"$work/$policy.yaml" <<YAML
listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
threads: 1
access_log: false
routing: {policy: $policy}
health_check: {interval: 1s}
models:
  - name: demo-model
    block_size: 16
    workers:
$workers_yaml
YAML
  start_server "kvgate-$policy" build/src/kvgate --config "$work/$policy.yaml"
  api=$(sed -E 's/.*api=([^ ]+).*/\1/' <<<"$started")
  admin=$(sed -E 's/.*admin=([^ ]+).*/\1/' <<<"$started")
  runs+=(--run "$policy=http://$api")
  echo "kvgate ($policy): api http://$api  admin http://$admin"
done

echo
echo "######## $sessions chat sessions, $concurrency at a time, through each gateway (replica caches reset before each)"
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" --workload chat --sessions "$sessions" \
  --concurrency "$concurrency" --out "$work/report"
mkdir -p build/demo-report
cp "$work/report/"* build/demo-report/
echo
echo "Reports: build/demo-report/report.md, report.html, summary.json (per-request records-*.jsonl)"
echo
echo "== a dry-run routing decision (POST /debug/route) on the cache_aware gateway"
system='You are the support assistant of a large online shop. Answer politely, cite the order number, never invent tracking data.'
first="{\"model\":\"demo-model\",\"max_tokens\":8,\"messages\":[{\"role\":\"system\",\"content\":\"$system\"},"
first+="{\"role\":\"user\",\"content\":\"Order 1042 has not arrived after ten days. Where is my parcel?\"}]}"
served=$(curl -s -D - -o /dev/null -H 'x-session-id: demo' -d "$first" "http://$api/v1/chat/completions" |
  awk -F': ' 'tolower($1) == "x-kvgate-worker" { print $2 }' | tr -d '\r')
echo "turn 1 of session demo was served by $served; the dry run of its turn 2:"
follow_up="${first%]\}},{\"role\":\"assistant\",\"content\":\"It left our warehouse on Monday.\"},"
follow_up+="{\"role\":\"user\",\"content\":\"Can you send it again?\"}]}"
curl -s -H 'x-session-id: demo' -d "$follow_up" "http://$admin/debug/route"
echo
