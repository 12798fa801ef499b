#!/usr/bin/env bash
# The headline figure: how much traffic the same fleet carries at the same
# latency. For each target, kvgate-bench capacity runs the workload from
# reset caches at loads that double, then bisect, until p90 TTFT exceeds
# the SLO; the highest load that held, in sessions per minute (requests
# per second for a trace), and its ratio to round robin and nginx sticky.
# Reports land in build/capacity-report/NAME/ (capacity.json, report.md,
# report.html with the p90 TTFT against load per target, each kvgate's
# decision log over its steps).
#   bench/load/capacity.sh weka|mooncake [COUNT]
#
# weka: the first COUNT (default 64) Claude Code sessions of WEKA's
#   kv-cache-tester slice, each cut to its first 30 requests
#   (KVGATE_MAX_TURNS), scaled as bench/load/trace.sh weka70 scales them
#   (prompts and outputs 32x shorter, think times 1000x shorter and at most
#   0.2 s); 2,000 KV blocks of 16 tokens per replica; SLO p90 TTFT 500 ms;
#   first step at 25% load. Sessions arrive as a Poisson process at the
#   step's rate, so the KV pressure (and the cliff) comes from how many run
#   at once.
# mooncake: the first COUNT (default 1,000) requests of Mooncake's
#   conversation trace, scaled as trace.sh mooncake70 scales them; 4,000
#   blocks per replica; SLO p90 TTFT 1,000 ms; first step at 50% load.
#
# Fleet: KVGATE_REPLICAS (default 4) kvgate-sim replicas at KVGATE_TIME_SCALE
# (default 0.5 for WEKA, 0.25 for Mooncake: slow enough that the highest
# load searched stays within what this 2-core machine drives, so the bench
# and the proxies are not what runs out first; each step's bench CPU share
# is in capacity.json). KVGATE_TARGETS overrides the targets (round_robin,
# nginx_sticky, the real peers of bench/peers, dynamo_cost, cache_aware);
# KVGATE_MAX_STEPS the runs per target (default 6: doubling, then
# bisecting, so a capacity above the first step is bracketed by the step
# that held and the next one up that missed, at most about 10% apart),
# KVGATE_SLO_MS the SLO, KVGATE_START_LOAD the first step.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
traces=${KVGATE_TRACES:-../shared/data/traces}
source scripts/lib.sh
export KVGATE_REPLICAS=${KVGATE_REPLICAS:-4}
name=${1:-weka}
case "$name" in
  weka)
    time_scale=0.5
    slo=500
    start_load=0.25
    blocks=2000
    max_model_len=$((blocks * 16))
    weka_workload "$traces" "${2:-64}"
    workload+=(--max-turns "${KVGATE_MAX_TURNS:-30}")
    ;;
  mooncake)
    time_scale=0.25
    slo=1000
    start_load=0.5
    blocks=4000
    max_model_len=12288
    mooncake_workload "$traces" "${2:-1000}"
    ;;
  *)
    echo "usage: bench/load/capacity.sh weka|mooncake [COUNT]" >&2
    exit 2
    ;;
esac
export KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-$time_scale}
# The routers a user would deploy instead, as they ship (llm-d's picker needs
# KVGATE_LLMD_EPP, else the report names it as not started), then kvgate's
# re-implementation of Dynamo's router and kvgate.
choose_targets round_robin nginx_sticky smg_cache_aware vllm_router_cache_aware llmd_approximate llmd_affinity llmd_precise \
  dynamo_cost cache_aware

cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run capacity
start_fleet "$blocks" "$max_model_len" "${targets[@]}"
started_at=$(date +%s)
build/bench/load/kvgate-bench capacity "${runs[@]}" "${resets[@]}" "${workload[@]}" \
  --slo-p90-ttft-ms "${KVGATE_SLO_MS:-$slo}" --start-load "${KVGATE_START_LOAD:-$start_load}" \
  --max-steps "${KVGATE_MAX_STEPS:-6}" --fleet "$fleet" --out "$work/report"
echo "capacity.sh $name: $(($(date +%s) - started_at)) s for ${#targets[@]} targets"
out=build/capacity-report/$name
# Beside the report, each kvgate's decision log over all its steps: why it
# sent each request where it did on the way to its cliff.
collect_report "$out"
if command -v chromium >/dev/null 2>&1; then
  scripts/report_screenshot.sh "$out/report.html" "$out/report.png" || true
fi
