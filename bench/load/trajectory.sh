#!/usr/bin/env bash
# One agent trajectory told turn by turn: a recorded Claude Code session
# (WEKA's kv-cache-tester, at its recorded prompt lengths) through kvgate's
# cache_aware, nginx sticky sessions and round robin, each three ways from
# reset caches: with its session key, without one, and with its second turn
# sent straight to a replica that never saw the first. For every turn:
# worker, input tokens, predicted and engine-reported cached tokens, TTFT,
# decode time and the worker's KV usage; per target the hit rate across
# turns and what the cold second turn cost. Reports land in
# build/trajectory-report/SESSION/ (report.md, report.html, trajectory.json).
#   bench/load/trajectory.sh [SESSION_ID]      (default trace_0001: 41 turns)
#
# Fleet: KVGATE_REPLICAS (default 4) kvgate-sim replicas with KV events,
# 20,000 blocks of 16 tokens each (the session's 197k-token context fits),
# at KVGATE_TIME_SCALE (default 10: ten times faster than the H100 step
# costs, so a cold 70k-token prefill takes about a second). KVGATE_TARGETS
# overrides the targets.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
traces=${KVGATE_TRACES:-../shared/data/traces}
source scripts/lib.sh
export KVGATE_REPLICAS=${KVGATE_REPLICAS:-4}
export KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-10}
session=${1:-trace_0001}
choose_targets cache_aware nginx_sticky round_robin

cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run trajectory
start_fleet 20000 262144 "${targets[@]}"
# The replicas by the names they answer as (start_fleet names them r0, r1, ...).
replicas=()
index=0
for ((at = 1; at < ${#resets[@]}; at += 2)); do
  replicas+=(--replica "r$index=${resets[$at]}")
  index=$((index + 1))
done
out=build/trajectory-report/$session
rm -rf "$out"
mkdir -p "$out"
# The sessions are in the shards in order; the bench reads them all and
# follows the one named.
combined="$work/sessions.jsonl"
for shard in "$traces"/weka-claude-code/claude_code_traces_*.jsonl.gz; do zcat "$shard"; done >"$combined"
build/bench/load/kvgate-bench trajectory "$combined" --session "$session" "${runs[@]}" "${resets[@]}" \
  "${replicas[@]}" --trace-block-tokens 64 --fleet "$fleet" --out "$out"
if command -v chromium >/dev/null 2>&1; then
  scripts/report_screenshot.sh "$out/report.html" "$out/report.png" || true
fi
