#!/usr/bin/env bash
# Replays the start of Mooncake's conversation trace (Kimi, FAST'25) through
# kvgate under several policies, like scripts/demo.sh does with the chat
# preset: three kvgate-sim replicas with KV events, one gateway per policy,
# `kvgate-bench compare` from reset caches. The trace's 512-token blocks are
# scaled to 32 tokens (prompts 16x shorter) and its arrival times compressed
# 10x so that it runs in minutes on two cores.
# Usage: bench/load/trace.sh [REQUESTS] [BLOCKS_PER_REPLICA]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
requests=${1:-2000}
blocks=${2:-2048}
trace=${KVGATE_TRACE:-../shared/data/traces/mooncake-fast25/conversation_trace.jsonl}
policies=(round_robin prefix_hash cache_aware)

cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
source scripts/lib.sh
begin_run trace
# The longest scaled prompt is 126,195 / 16 = 7,887 tokens, plus its output.
start_fleet "$blocks" 12288 "${policies[@]}"
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" --workload "$trace" \
  --max-requests "$requests" --trace-block-tokens 32 --time-scale 10 --out "$work/report"
mkdir -p build/trace-report
cp "$work/report/"* build/trace-report/
