#!/usr/bin/env bash
# The endpoint picker against the proxy, on the same replicas in one
# invocation, and the picker's own cost:
#  1. the demo's chat workload (kvgate-bench's "chat" preset, SESSIONS
#     sessions, default 200) at 70% load, through kvgate's proxy with
#     cache_aware and through kvgate-epp-dataplane (Envoy's data path)
#     asking kvgate's picker with cache_aware: hit rate, TTFT;
#  2. the WEKA Claude Code sessions at 70% (trace.sh weka70's scaling,
#     WEKA sessions, default 75), the same two targets;
#  3. kvgate-epp-load against the picker: a 32k-token chat's pick latency
#     beside the gateway's own decision time (kvgate_picker_pick_seconds),
#     and small requests per second with kvgate pinned to one CPU.
# Reports land in build/picker-report/ (chat/, weka/, cost.json).
#   bench/load/picker.sh [SESSIONS] [WEKA_SESSIONS]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
traces=${KVGATE_TRACES:-../shared/data/traces}
sessions=${1:-200}
weka_sessions=${2:-75}
source scripts/lib.sh
cmake --build build -j"${KVGATE_JOBS:-2}" \
  --target kvgate kvgate-sim kvgate-bench kvgate-epp-dataplane kvgate-epp-load >/dev/null
out=build/picker-report
rm -rf "$out"
mkdir -p "$out"
targets=(cache_aware picker_cache_aware)

echo "== 1. the chat workload at 70% load"
(
  export KVGATE_TIME_SCALE=2
  begin_run picker-chat
  start_fleet 4000 2560 "${targets[@]}" >/dev/null
  build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" --workload chat --sessions "$sessions" \
    --load 0.7 --concurrency 64 --baseline cache_aware --fleet "$fleet" --out "$work/report" >/dev/null
  mkdir -p "$out/chat" && cp "$work/report/"* "$out/chat/"
)
sed -n '/^| run | requests/,/^$/p' "$out/chat/report.md"

echo "== 2. the WEKA sessions at 70% load"
(
  export KVGATE_REPLICAS=4 KVGATE_TIME_SCALE=2
  weka_workload "$traces" "$weka_sessions"
  begin_run picker-weka
  start_fleet 2000 32000 "${targets[@]}" >/dev/null
  build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" "${workload[@]}" --load 0.70 \
    --baseline cache_aware --fleet "$fleet" --out "$work/report" >/dev/null
  mkdir -p "$out/weka" && cp "$work/report/"* "$out/weka/"
)
sed -n '/^| run | requests/,/^$/p' "$out/weka/report.md"

echo "== 3. the picker's own cost"
(
  export KVGATE_TIME_SCALE=2
  begin_run picker-cost
  start_fleet 4000 40000 picker_cache_aware >/dev/null
  admin=${admins[0]#*=}
  epp=${epps[0]#*=}
  gateway_pid=$(pgrep -f "kvgate --config $work/picker_cache_aware.yaml" | head -1)
  # The gateway on CPU 0 (all its threads: I/O, gRPC, control), the client on CPU 1.
  taskset -a -p 0x1 "$gateway_pid" >/dev/null
  load=(taskset 0x2 build/bench/epp/kvgate-epp-load --picker "$epp" --admin "$admin")
  "${load[@]}" --prompt-tokens 32768 --count 50 >/dev/null  # warm-up: tokeniser caches, connections
  long=$("${load[@]}" --prompt-tokens 32768 --count 1000 --concurrency 1)
  small=$("${load[@]}" --prompt-tokens 64 --count 20000 --concurrency 8)
  printf '{"long_chat": %s, "small_requests_one_core": %s}\n' "$long" "$small" >"$out/cost.json"
)
cat "$out/cost.json"
