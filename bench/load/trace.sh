#!/usr/bin/env bash
# Replays a public trace through kvgate under several policies, like
# scripts/demo.sh does with the chat preset: three kvgate-sim replicas with
# KV events, one gateway per policy, `kvgate-bench compare` from reset
# caches. Reports land in build/trace-report/.
#   bench/load/trace.sh mooncake [REQUESTS] [BLOCKS_PER_REPLICA]
#     the start of Mooncake's conversation trace (Kimi, FAST'25), open loop
#     at 10x speed; 512-token blocks scaled to 32 tokens (prompts 16x
#     shorter); round_robin, prefix_hash, the peers dynamo_cost and
#     sglang_cache_aware, cache_aware.
#   bench/load/trace.sh weka [SESSIONS] [BLOCKS_PER_REPLICA]
#     Claude Code sessions (WEKA's kv-cache-tester, first shard), 8 at a
#     time, think times 1000x shorter and at most 0.5 s (the recording
#     holds pauses of days); 64-token blocks scaled to 2 tokens
#     (prompts 32x shorter); round_robin, session_hash, dynamo_cost,
#     sglang_cache_aware, cache_aware.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
traces=${KVGATE_TRACES:-../shared/data/traces}
case "${1:-mooncake}" in
  mooncake)
    policies=(round_robin prefix_hash dynamo_cost sglang_cache_aware cache_aware)
    blocks=${3:-8192}
    # The longest scaled prompt is 126,195 / 16 = 7,887 tokens, plus its output.
    max_model_len=12288
    workload=(--workload "$traces/mooncake-fast25/conversation_trace.jsonl" --max-requests "${2:-2000}"
              --trace-block-tokens 32 --time-scale 10)
    ;;
  weka)
    policies=(round_robin session_hash dynamo_cost sglang_cache_aware cache_aware)
    blocks=${3:-1600}
    # The longest scaled prompt is 755,680 / 32 = 23,615 tokens; 1,600
    # blocks of 16 hold 25,600, about six sessions' contexts per replica.
    max_model_len=25600
    workload=(--workload "$traces/weka-claude-code/claude_code_traces_0001-0050.jsonl.gz" --sessions "${2:-8}"
              --concurrency 8 --trace-block-tokens 2 --time-scale 1000 --max-think-ms 500)
    ;;
  *)
    echo "usage: bench/load/trace.sh mooncake|weka [COUNT] [BLOCKS_PER_REPLICA]" >&2
    exit 2
    ;;
esac

cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
source scripts/lib.sh
begin_run trace
start_fleet "$blocks" "$max_model_len" "${policies[@]}"
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" "${workload[@]}" --out "$work/report"
mkdir -p build/trace-report
cp "$work/report/"* build/trace-report/
