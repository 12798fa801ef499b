#!/usr/bin/env bash
# Hybrid-attention models: replicas whose KV cache keeps a sliding-window
# group beside the full-attention one (vLLM's hybrid KV cache manager,
# kvgate-sim --kv-groups), so a hit needs the window before it too. Long
# multi-turn chats at 70% load on a pool under KV pressure, through round
# robin, sticky sessions, the Dynamo and SGLang re-implementations (which,
# like those routers, drop the local group and score the full-attention
# prefix) and cache_aware. The report adds kvgate's predicted cached tokens
# against the engine's (exact, over) and what the full-attention group alone
# would have predicted on the same requests. Reports land in
# build/hybrid-report/SHAPE-WORKLOAD[-approximate]/.
#   bench/load/hybrid.sh gpt-oss|gemma3 [chat|weka70] [SESSIONS]
# gpt-oss: one full group, one 128-token window, 4,000 blocks per replica
# (2,000 positions, as trace.sh's 2,000 blocks). gemma3: one full group and
# five 1,024-token window groups (five sliding layers to one global, split
# into groups of equal size, as vLLM does), so a position takes six
# blocks: 12,000 per replica.
# KVGATE_NO_EVENTS=1: kvgate is not given the events (approximate mode) and
# is told the window and the groups in models[].attention instead.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
traces=${KVGATE_TRACES:-../shared/data/traces}
shape=${1:-gpt-oss}
name=${2:-chat}
source scripts/lib.sh
case "$shape" in
  gpt-oss)
    window=128
    groups=full,sliding_window:128
    group_count=2
    local_groups=1
    blocks=4000
    ;;
  gemma3)
    window=1024
    groups=full$(printf ',sliding_window:1024%.0s' 1 2 3 4 5)
    group_count=6
    local_groups=5
    blocks=12000
    ;;
  *)
    echo "usage: bench/load/hybrid.sh gpt-oss|gemma3 [chat|weka70] [SESSIONS]" >&2
    exit 2
    ;;
esac
case "$name" in
  chat)
    max_model_len=2560
    workload=(--workload chat --sessions "${3:-200}")
    ;;
  weka70)
    # The longest scaled prompts hold ~25k tokens: a replica takes any
    # prompt its pool holds in every group.
    max_model_len=$((blocks * 16 / group_count))
    weka_workload "$traces" "${3:-75}"
    ;;
  *)
    echo "usage: bench/load/hybrid.sh gpt-oss|gemma3 [chat|weka70] [SESSIONS]" >&2
    exit 2
    ;;
esac
export KVGATE_REPLICAS=${KVGATE_REPLICAS:-4} KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-2}
export KVGATE_SIM_FLAGS="--kv-groups $groups ${KVGATE_SIM_FLAGS:-}"
label=$shape-$name
if [[ -n "${KVGATE_NO_EVENTS:-}" ]]; then
  export KVGATE_MODEL_SETTINGS="    attention: {sliding_window: $window, local_groups: $local_groups}
${KVGATE_MODEL_SETTINGS:-}"
  label+=-approximate
fi
choose_targets round_robin session_hash dynamo_cost sglang_cache_aware cache_aware
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run hybrid
start_fleet "$blocks" "$max_model_len" "${targets[@]}" >/dev/null
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" "${workload[@]}" --load 0.7 --concurrency 64 \
  --baseline round_robin --fleet "$fleet; $shape's cache groups ($groups)" --out "$work/report" >/dev/null
out=build/hybrid-report/$label
collect_report "$out"
sed -n '/^| run | requests/,/^$/p;/^| run | predicted requests/,/^$/p' "$out/report.md"
