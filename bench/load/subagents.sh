#!/usr/bin/env bash
# Sibling sub-agents: the WEKA Claude Code sessions that fork sub-agents,
# replayed with each fork's sub-agents running at once under the session's
# key (as Claude Code sends them), through sticky routing that keeps every
# sibling on the parent's replica (kvgate session_hash, nginx sticky) and
# through cache_aware, which prices each request. The report's "Sub-agents"
# table gives the siblings' mean TTFT and hit rate per target, against
# session_hash. Reports land in build/subagents-report/.
#   bench/load/subagents.sh
#
# The sessions run all at once (closed loop), scaled as trace.sh weka70
# scales them (prompts and outputs 32x shorter, think times 1000x shorter
# and at most 0.2 s); four kvgate-sim replicas with 2,000 blocks of 16
# tokens at KVGATE_TIME_SCALE (default 0.5). KVGATE_TARGETS overrides the
# targets.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
traces=${KVGATE_TRACES:-../shared/data/traces}
source scripts/lib.sh
export KVGATE_REPLICAS=${KVGATE_REPLICAS:-4}
export KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-0.5}
if [[ -n "${KVGATE_TARGETS:-}" ]]; then
  read -r -a targets <<<"$KVGATE_TARGETS"
else
  targets=(session_hash nginx_sticky cache_aware)
fi
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run subagents
# One session per line: the ones with a sub-agent entry.
for shard in "$traces"/weka-claude-code/claude_code_traces_*.jsonl.gz; do
  zcat "$shard" | grep '"type": *"subagent"' || true
done >"$work/forking.jsonl"
count=$(wc -l <"$work/forking.jsonl")
start_fleet 2000 32000 "${targets[@]}"
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" --workload "$work/forking.jsonl" \
  --subagents parallel --concurrency "$count" --trace-block-tokens 2 --output-scale 32 --time-scale 1000 \
  --max-think-ms "${KVGATE_MAX_THINK_MS:-200}" --baseline "${targets[0]}" --fleet "$fleet" --out "$work/report"
out=build/subagents-report
rm -rf "$out"
mkdir -p "$out"
cp "$work/report/"* "$out/"
