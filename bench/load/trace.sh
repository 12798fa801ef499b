#!/usr/bin/env bash
# The headline runs: a public trace through kvgate's policies and through
# the load balancers a user would deploy instead, at a dialled load on a
# fleet under KV pressure. Each target gets the identical offered traffic
# from reset caches. Reports land in build/trace-report/NAME/ (report.md,
# report.html, summary.json, records, and report.png when Chromium is
# installed), each kvgate's /debug/workers and decision log beside them.
#   bench/load/trace.sh weka70|weka85|weka70-recorded|mooncake70 [COUNT] [BLOCKS_PER_REPLICA]
#
# weka70, weka85: Claude Code sessions (WEKA's kv-cache-tester, the first
#   two shards: the first COUNT sessions, default 75) at 70% / 85% load. Prompts
#   32x shorter (64-token blocks become 2 tokens) and outputs 32x shorter, so
#   prefill and decode keep their proportion; think times 1000x shorter and
#   at most 0.2 s (KVGATE_MAX_THINK_MS; the recording holds pauses of days). 2,000 blocks of 16
#   tokens per replica: 32k tokens, the study's 1M-token cache scaled 32x.
# weka70-recorded: the first COUNT (default 75, weka70's) of those sessions
#   at their recorded prompt and output lengths, on replicas 32x faster
#   (time scale 64) with 64,000 blocks each: the fidelity check of weka70's
#   scaling (the same sessions against the same share of KV memory).
# mooncake70: Mooncake's conversation trace (Kimi, FAST'25; the first COUNT
#   requests, default 2,000) at 70% load; 512-token blocks become 32 tokens,
#   outputs 16x shorter; 4,000 blocks per replica.
#
# Fleet: KVGATE_REPLICAS (default 4) kvgate-sim replicas at KVGATE_TIME_SCALE
# (default 2 for WEKA, 0.5 for Mooncake: the request rate stays within what
# this 2-core machine drives without the bench or the proxies becoming the
# bottleneck; each report gives the bench's CPU share). Targets:
# KVGATE_TARGETS overrides the list (variants: scripts/lib.sh);
# KVGATE_REPORT_SUFFIX is appended to the report's folder (repeated runs). Each
# gateway's /debug/workers at the end lands beside the report.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
traces=${KVGATE_TRACES:-../shared/data/traces}
source scripts/lib.sh
export KVGATE_REPLICAS=${KVGATE_REPLICAS:-4}
name=${1:-weka70}
# The routers a user would deploy instead, as they ship (bench/peers; llm-d's
# picker needs KVGATE_LLMD_EPP, else the report names it as not started);
# kvgate's policies, cache_aware both as the proxy and as the picker behind
# the same Envoy; then kvgate's re-implementations of Dynamo's and SGLang's
# routers.
peers=(round_robin nginx_sticky haproxy_leastconn smg_cache_aware vllm_router_cache_aware llmd_approximate llmd_affinity llmd_precise)
kvgate=(session_hash prefix_hash cache_aware envoy_cache_aware)
reimplementations=(dynamo_cost sglang_cache_aware)
case "$name" in
  weka70 | weka85)
    load=0.70
    [[ "$name" == weka85 ]] && load=0.85
    time_scale=2
    blocks=${3:-2000}
    # The longest scaled prompts of the first two shards hold ~25k tokens;
    # the replicas take any prompt their cache can hold.
    max_model_len=$((blocks * 16))
    weka_workload "$traces" "${2:-75}"
    ;;
  weka70-recorded)
    # One slice at the recorded prompt and output lengths: the replicas run
    # 32x faster instead (time scale 64 against weka70's 2) with 32x the KV
    # blocks (1M tokens each, the routing study's cache), so a long prompt
    # costs its real share of prefill and queues the requests behind it.
    load=0.70
    time_scale=64
    blocks=${3:-64000}
    max_model_len=$((blocks * 16))
    weka_workload "$traces" "${2:-75}" 64 1
    ;;
  mooncake70)
    load=0.70
    # Mooncake's requests are short and many: half real time keeps the
    # request rate (~100/s) within what this machine drives.
    time_scale=0.5
    blocks=${3:-4000}
    # The longest scaled prompt is 126,195 / 16 = 7,887 tokens, plus its output.
    max_model_len=12288
    mooncake_workload "$traces" "${2:-2000}"
    ;;
  *)
    echo "usage: bench/load/trace.sh weka70|weka85|weka70-recorded|mooncake70 [COUNT] [BLOCKS_PER_REPLICA]" >&2
    exit 2
    ;;
esac
export KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-$time_scale}
choose_targets "${peers[@]}" "${kvgate[@]}" "${reimplementations[@]}"

cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run trace
start_fleet "$blocks" "$max_model_len" "${targets[@]}"
baselines=()
for target in round_robin nginx_sticky; do
  [[ " ${targets[*]} " == *" $target "* ]] && baselines+=(--baseline "$target")
done
started_at=$(date +%s)
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" "${workload[@]}" --load "$load" \
  "${baselines[@]}" --fleet "$fleet" --out "$work/report"
echo "trace.sh $name: $(($(date +%s) - started_at)) s for ${#targets[@]} targets"
out=build/trace-report/$name${KVGATE_REPORT_SUFFIX:-}
collect_report "$out"
if command -v chromium >/dev/null 2>&1; then
  scripts/report_screenshot.sh "$out/report.html" "$out/report.png"
fi
