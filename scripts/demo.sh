#!/usr/bin/env bash
# The main job on an embedded default: builds kvgate, kvgate-sim and
# kvgate-bench, starts three simulated vLLM replicas (8B model on one H100
# each, twice as fast as real time, KV events on) and one gateway per
# policy in front of them on 127.0.0.1, then drives the same multi-turn
# chat workload (kvgate-bench's "chat" preset, sessions arriving as a
# Poisson process) through each gateway in turn, the replicas' prefix
# caches reset before each run, and prints the comparison: prefix-cache hit
# rate per turn, time to first token, load balance, and the prefill
# utilisation each run reached. Then the same for agent sessions where
# cache-awareness matters (the "tools" preset: kinds of agents sharing long
# tool preambles, a few long sessions among many short ones), and which
# policy won each run.
# Usage: scripts/demo.sh [SESSIONS] [LOAD] [AGENT_SESSIONS]
#   LOAD: the offered load as round robin's share of the fleet's prefill
#   capacity (kvgate-bench --load); the report says what each run measured.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
sessions=${1:-200}
load=${2:-1.0}
agents=${3:-96}
policies=(round_robin session_hash cache_aware)
# Twice real time: the fleet's prefill capacity is one this machine's
# gateway and load generator can drive to a real queue (at 20x they cannot).
export KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-2}

bash scripts/setup.sh build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench

source scripts/lib.sh
begin_run demo

# 4,000 blocks of 16 tokens per replica (64,000 tokens): the chat sessions
# in flight fit the fleet's caches, if each stays where its blocks are; the
# agent sessions (up to ~8,000 tokens) do not all fit.
start_fleet 4000 16384 "${policies[@]}"
echo
echo "######## $sessions chat sessions arriving at load $load, through each gateway (replica caches reset before each)"
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" --workload chat --sessions "$sessions" \
  --load "$load" --concurrency 64 --fleet "$fleet" --out "$work/report"
mkdir -p build/demo-report/chat build/demo-report/tools
cp "$work/report/"* build/demo-report/chat/
echo
echo "######## $agents agent sessions (the tools preset) arriving at load $load, through each gateway"
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" --workload tools --sessions "$agents" \
  --load "$load" --concurrency 64 --fleet "$fleet" --out "$work/tools-report"
cp "$work/tools-report/"* build/demo-report/tools/
echo
python3 - build/demo-report <<'PY'
import json, sys
for name in ("chat", "tools"):
    runs = json.load(open(f"{sys.argv[1]}/{name}/summary.json"))["runs"]
    ranked = sorted(runs, key=lambda run: run["ttft_ms"]["mean"])
    best, sticky = ranked[0], next(run for run in runs if run["name"] == "session_hash")
    line = ", ".join(f'{run["name"]} {run["ttft_ms"]["mean"]:.1f} ms' for run in ranked)
    print(f"{name}: lowest mean TTFT {best['name']} ({line}); "
          f"cache_aware / session_hash {next(r for r in runs if r['name'] == 'cache_aware')['ttft_ms']['mean'] / sticky['ttft_ms']['mean']:.2f}x")
PY
echo "Reports: build/demo-report/{chat,tools}/report.md, report.html, summary.json (per-request records-*.jsonl)"
echo
echo "== a dry-run routing decision (POST /debug/route) on the cache_aware gateway"
system='You are the support assistant of a large online shop. Answer politely, cite the order number, never invent tracking data.'
first="{\"model\":\"demo-model\",\"max_tokens\":8,\"messages\":[{\"role\":\"system\",\"content\":\"$system\"},"
first+="{\"role\":\"user\",\"content\":\"Order 1042 has not arrived after ten days. Where is my parcel?\"}]}"
served=$(curl -s -D - -o /dev/null -H 'x-session-id: demo' -d "$first" "http://$api/v1/chat/completions" |
  awk -F': ' 'tolower($1) == "x-kvgate-worker" { print $2 }' | tr -d '\r')
echo "turn 1 of session demo was served by $served; where its turn 2 would go, and why:"
follow_up="${first%]\}},{\"role\":\"assistant\",\"content\":\"It left our warehouse on Monday.\"},"
follow_up+="{\"role\":\"user\",\"content\":\"Can you send it again?\"}]}"
curl -s -H 'x-session-id: demo' -d "$follow_up" "http://$admin/debug/route?format=text"
echo "(the same as JSON, with every price: POST http://$admin/debug/route without ?format=text)"
