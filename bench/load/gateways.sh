#!/usr/bin/env bash
# Several kvgate replicas in front of one fleet: does scaling out the gateway
# cost cache hits? One, two and three cache_aware gateways in front of the
# same kvgate-sim replicas, the client taking the gateways in turn request
# by request (kvgate-bench --run NAME=URL+URL: a session's consecutive turns
# land on different gateways). All three gateways run throughout, subscribed to
# every replica's KV events, so each run pays for the same processes.
# Reports land in build/gateways-report/NAME/.
#   bench/load/gateways.sh chat|weka70 [COUNT]
# KVGATE_SPREAD=session: the client takes the gateways in turn session by
#   session instead (each session keeps its gateway, as an SDK client's
#   keep-alive connection does behind a Service that balances connections).
# KVGATE_GATEWAY_ROWS: which of one, two, three to run (default all three).
# chat: the chat preset (COUNT sessions, default 200, at 70% load).
# weka70: the WEKA Claude Code sessions as bench/load/trace.sh weka70 runs
#   them (COUNT sessions, default 75, at 70% load, 2,000 blocks per replica).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
traces=${KVGATE_TRACES:-../shared/data/traces}
source scripts/lib.sh
export KVGATE_REPLICAS=${KVGATE_REPLICAS:-4}
name=${1:-chat}
case "$name" in
  chat)
    export KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-20}
    blocks=${3:-4000}
    max_model_len=32768
    workload=(--workload chat --sessions "${2:-200}" --seed 7 --load 0.7)
    ;;
  weka70)
    export KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-2}
    blocks=${3:-2000}
    max_model_len=$((blocks * 16))
    weka_workload "$traces" "${2:-75}"
    workload+=(--load 0.70)
    ;;
  *)
    echo "usage: bench/load/gateways.sh chat|weka70 [COUNT]" >&2
    exit 2
    ;;
esac
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run gateways
# KVGATE_ROUTING: the gateways' routing: (default cache_aware as shipped).
routing=${KVGATE_ROUTING:-'{policy: cache_aware}'}
export KVGATE_TARGET_gw1="$routing" KVGATE_TARGET_gw2="$routing" KVGATE_TARGET_gw3="$routing"
start_fleet "$blocks" "$max_model_len" gw1 gw2 gw3
urls=()
for run in "${runs[@]}"; do
  [[ "$run" == --run ]] || urls+=("${run#*=}")
done
join='+'
spread="client round robin per request"
if [[ "${KVGATE_SPREAD:-request}" == session ]]; then
  join='|'
  spread="client round robin per session"
fi
runs=()
for row in ${KVGATE_GATEWAY_ROWS:-one two three}; do
  case "$row" in
    one) runs+=(--run "one=${urls[0]}") ;;
    two) runs+=(--run "two=${urls[0]}${join}${urls[1]}") ;;
    three) runs+=(--run "three=${urls[0]}${join}${urls[1]}${join}${urls[2]}") ;;
    *)
      echo "KVGATE_GATEWAY_ROWS: one, two or three, not $row" >&2
      exit 2
      ;;
  esac
done
started_at=$(date +%s)
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" "${workload[@]}" --baseline "${runs[1]%%=*}" \
  --fleet "$fleet; 1, 2 and 3 cache_aware gateways, $spread" --out "$work/report"
echo "gateways.sh $name: $(($(date +%s) - started_at)) s"
out=build/gateways-report/$name${KVGATE_REPORT_SUFFIX:-}
rm -rf "$out"
mkdir -p "$out"
cp "$work/report/"* "$out/"
# What each gateway saw (drift, event streams, learned costs).
for entry in "${admins[@]}"; do
  curl -fsS "http://${entry#*=}/debug/workers" >"$out/workers-${entry%%=*}.json" || true
  curl -fsS "http://${entry#*=}/metrics" >"$out/metrics-${entry%%=*}.txt" || true
done
