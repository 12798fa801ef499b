#!/usr/bin/env bash
# Several kvgate replicas in front of one fleet: does scaling out the gateway
# cost cache hits, alone and as one cluster? One, two and three cache_aware gateways in front of the
# same kvgate-sim replicas, the client taking the gateways in turn request
# by request (kvgate-bench --run NAME=URL+URL: a session's consecutive turns
# land on different gateways). All three gateways run throughout, subscribed to
# every replica's KV events, so each run pays for the same processes.
# Reports land in build/gateways-report/NAME/.
#   bench/load/gateways.sh chat|weka70|llamacpp [COUNT]
# KVGATE_SPREAD=session: the client takes the gateways in turn session by
#   session instead (each session keeps its gateway, as an SDK client's
#   keep-alive connection does behind a Service that balances connections).
# KVGATE_GATEWAY_ROWS: which of one, two, three, shared to run (default
#   one, two, three, shared). shared: three more gateways that share their
#   session and routing state as one cluster (cluster:, a redis-server this
#   script starts), the client spreading as for three.
# chat: the chat preset (COUNT sessions, default 200, at 70% load).
# weka70: the WEKA Claude Code sessions as bench/load/trace.sh weka70 runs
#   them (COUNT sessions, default 75, at 70% load, 2,000 blocks per replica).
# llamacpp: real llama-server replicas as bench/load/llamacpp-real.sh runs
#   them (3 x 2 slots, no KV events: every gateway alone knows only what it
#   routed), COUNT chat sessions in flight (default 12); KVGATE_SEED.
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
  llamacpp)
    # Real llama-server replicas (bench/load/llamacpp-real.sh's fleet: 3 x 2
    # slots, the model's own tokenizer, URLs only, no KV events), COUNT
    # conversations of the chat preset in flight, cold replicas per row.
    export KVGATE_REPLICAS=${KVGATE_REPLICAS_LLAMA:-3} KVGATE_SLOTS=${KVGATE_SLOTS:-2}
    export KVGATE_ENGINE=llamacpp-real KVGATE_BARE_WORKERS=1 KVGATE_TIME_SCALE=1
    model=${KVGATE_LLAMA_MODEL:-$top/../shared/data/models/rand-llama-d256-l4.gguf}
    mkdir -p build/gateways-report
    export KVGATE_TOKENIZER="$top/build/gateways-report/tokenizer"
    python3 tools/gguf_tokenizer.py "$model" "$KVGATE_TOKENIZER"
    blocks=1000000
    max_model_len=16384
    workload=(--workload chat --sessions "${2:-12}" --concurrency "${2:-12}" --seed "${KVGATE_SEED:-1}")
    ;;
  *)
    echo "usage: bench/load/gateways.sh chat|weka70|llamacpp [COUNT]" >&2
    exit 2
    ;;
esac
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run gateways
# KVGATE_ROUTING: the gateways' routing: (default cache_aware as shipped).
routing=${KVGATE_ROUTING:-'{policy: cache_aware}'}
rows=${KVGATE_GATEWAY_ROWS:-one two three shared}
gateways=(gw1 gw2 gw3)
export KVGATE_TARGET_gw1="$routing" KVGATE_TARGET_gw2="$routing" KVGATE_TARGET_gw3="$routing"
if [[ " $rows " == *" shared "* ]]; then
  start_redis
  for gateway in cl1 cl2 cl3; do
    export "KVGATE_TARGET_$gateway=$routing"
    export "KVGATE_SETTINGS_$gateway=cluster: {url: \"redis://127.0.0.1:$redis_port\", replica_id: $gateway}"
    gateways+=("$gateway")
  done
fi
start_fleet "$blocks" "$max_model_len" "${gateways[@]}"
# Every gateway first serves a few agent sessions (other conversations than
# the measured ones), as a gateway that has been running has: each has
# learned its replicas' prefill costs before the rows start, whichever row
# it serves in. On real llama-server replicas, also twice as many chats as
# the fleet has slots: slots taken over and conversations coming back show
# whether the engines keep a RAM prompt cache.
for run in "${runs[@]}"; do
  [[ "$run" == --run ]] && continue
  build/bench/load/kvgate-bench run --target "${run#*=}" ${request_fields[@]+"${request_fields[@]}"} --workload agent \
    --sessions 4 --concurrency 4 --seed 99 --session-prefix warm- \
    --name warm-up --out "$work/warm-${run%%=*}" >/dev/null 2>&1 || true
  if [[ "$name" == llamacpp ]]; then
    warm_chats=$((2 * KVGATE_REPLICAS * KVGATE_SLOTS))
    build/bench/load/kvgate-bench run --target "${run#*=}" ${request_fields[@]+"${request_fields[@]}"} --workload chat \
      --sessions "$warm_chats" --concurrency "$warm_chats" --seed 99 --session-prefix warm- \
      --name warm-up-chat --out "$work/warm-chat-${run%%=*}" >/dev/null 2>&1 || true
  fi
done
if [[ "$name" == llamacpp ]]; then
  # Cold replicas before each row, every gateway seeing them up again.
  resets=(--reset-command "bench/load/llama_fleet.sh restart $work/llama && bench/load/llama_fleet.sh \
wait-gateways $work/llama ${admins[*]#*=}")
fi
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
for row in $rows; do
  case "$row" in
    one) runs+=(--run "one=${urls[0]}") ;;
    two) runs+=(--run "two=${urls[0]}${join}${urls[1]}") ;;
    three) runs+=(--run "three=${urls[0]}${join}${urls[1]}${join}${urls[2]}") ;;
    shared) runs+=(--run "three_shared=${urls[3]}${join}${urls[4]}${join}${urls[5]}") ;;
    *)
      echo "KVGATE_GATEWAY_ROWS: one, two, three or shared, not $row" >&2
      exit 2
      ;;
  esac
done
started_at=$(date +%s)
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" ${request_fields[@]+"${request_fields[@]}"} "${workload[@]}" --baseline "${runs[1]%%=*}" \
  --fleet "$fleet; 1, 2 and 3 cache_aware gateways alone, 3 sharing state over Redis (three_shared), $spread" \
  --out "$work/report"
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
