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
# The sessions are scaled as trace.sh weka70 scales them (prompts and
# outputs 32x shorter, think times 1000x shorter and at most 0.2 s); four
# kvgate-sim replicas with 2,000 blocks of 16 tokens at KVGATE_TIME_SCALE
# (default 0.5). By default the forking sessions run all at once (closed
# loop) on an otherwise idle fleet. KVGATE_BACKGROUND=N adds the first N
# sessions without sub-agents of the same shards, interleaved with the
# forking ones, all arriving as a Poisson process at KVGATE_LOAD (default
# 0.5): siblings then meet a busy fleet. KVGATE_TARGETS overrides the
# targets (the first is the baseline).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
traces=${KVGATE_TRACES:-../shared/data/traces}
source scripts/lib.sh
export KVGATE_REPLICAS=${KVGATE_REPLICAS:-4}
export KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-0.5}
choose_targets session_hash nginx_sticky cache_aware
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run subagents
# One session per line: the ones with a sub-agent entry.
for shard in "$traces"/weka-claude-code/claude_code_traces_*.jsonl.gz; do
  zcat "$shard" | grep '"type": *"subagent"' || true
done >"$work/forking.jsonl"
count=$(wc -l <"$work/forking.jsonl")
sessions_file=$work/forking.jsonl
pace=(--concurrency "$count")
if ((${KVGATE_BACKGROUND:-0} > 0)); then
  for shard in "$traces"/weka-claude-code/claude_code_traces_*.jsonl.gz; do
    zcat "$shard" | grep -v '"type": *"subagent"' || true
  done | head -n "$KVGATE_BACKGROUND" >"$work/background.jsonl"
  # A forking session after every few background ones, so that they arrive
  # among them rather than first.
  python3 - "$work/forking.jsonl" "$work/background.jsonl" "$work/mixed.jsonl" <<'PY'
import sys
forking = open(sys.argv[1]).read().splitlines()
background = open(sys.argv[2]).read().splitlines()
step = max(1, len(background) // max(1, len(forking)))
mixed = []
for index, line in enumerate(background):
    if index % step == step // 2 and forking:
        mixed.append(forking.pop(0))
    mixed.append(line)
mixed.extend(forking)
open(sys.argv[3], "w").write("\n".join(mixed) + "\n")
PY
  sessions_file=$work/mixed.jsonl
  pace=(--load "${KVGATE_LOAD:-0.5}")
fi
start_fleet 2000 32000 "${targets[@]}"
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" --workload "$sessions_file" \
  --subagents parallel "${pace[@]}" --trace-block-tokens 2 --output-scale 32 --time-scale 1000 \
  --max-think-ms "${KVGATE_MAX_THINK_MS:-200}" --baseline "${targets[0]}" --fleet "$fleet" --out "$work/report"
out=build/subagents-report
rm -rf "$out"
mkdir -p "$out"
cp "$work/report/"* "$out/"
