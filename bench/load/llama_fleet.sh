#!/usr/bin/env bash
# Real llama.cpp `llama-server` replicas for the benchmarks, on 127.0.0.1,
# kept track of by files in DIR (ports, arguments, PIDs).
#   bench/load/llama_fleet.sh start DIR N   N replicas on free ports; prints one URL per line
#   bench/load/llama_fleet.sh restart DIR   the same replicas again, cold, on the same ports
#                                           (llama-server's RAM prompt cache empties only so)
#   bench/load/llama_fleet.sh metrics DIR   each replica's prefill ms per prompt token and decode ms
#                                           per sequence per step, from its own counters
#                                           ("rN prefill_ms decode_ms")
#   bench/load/llama_fleet.sh wait-gateways DIR ADMIN...  until each kvgate sees every worker healthy and empty
#   bench/load/llama_fleet.sh wait-routers DIR N PORT...  until each peer router counts N healthy workers
#   bench/load/llama_fleet.sh stop DIR
#   bench/load/llama_fleet.sh request-fields TOKENIZER_DIR
#                                           kvgate-bench --request-fields for these replicas, so the
#                                           random-weights model answers as a trained one would for a
#                                           router: a logit_bias banning the vocabulary's byte-fallback
#                                           tokens (<0xNN>: strung together they make text the pinned
#                                           llama-server's output parser refuses mid-stream, "does not
#                                           match the expected Content-only format", cutting the
#                                           answer and its usage) and favouring its ten digit tokens,
#                                           with ignore_eos (the vocabulary splits digits, so an answer
#                                           tokenizes back to the tokens generated, as a trained
#                                           model's text mostly does, and runs to max_tokens). A
#                                           grammar would do the same, but llama-server's grammar
#                                           sampler adds to every decoded token's cost.
# Environment: KVGATE_LLAMA_SERVER (default ../shared/engines/llama.cpp/llama-server),
# KVGATE_LLAMA_MODEL (default ../shared/data/models/rand-llama-d256-l4.gguf),
# KVGATE_SLOTS (-np, default 2), KVGATE_CACHE_RAM (--cache-ram MiB; unset:
# llama-server's own default), KVGATE_LLAMA_CONTEXT (-c, default 16384),
# KVGATE_LLAMA_THREADS (-t, default 1) and KVGATE_LLAMA_THREADS_rN (one
# replica's, e.g. a faster one).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
command=$1
dir=$2
server=${KVGATE_LLAMA_SERVER:-$top/../shared/engines/llama.cpp/llama-server}
model=${KVGATE_LLAMA_MODEL:-$top/../shared/data/models/rand-llama-d256-l4.gguf}

launch() {  # launch ID: starts the replica from its saved port and arguments
  local id=$1 port
  port=$(cat "$dir/$id.port")
  # shellcheck disable=SC2046
  setsid "$server" $(cat "$dir/$id.args") --host 127.0.0.1 --port "$port" >>"$dir/$id.log" 2>&1 &  # appended: every restart's log kept
  echo $! >"$dir/$id.pid"
}

wait_healthy() {  # wait_healthy ID
  local id=$1 port tries
  port=$(cat "$dir/$id.port")
  for tries in $(seq 600); do
    if [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" == 200 ]]; then
      return 0
    fi
    if ! kill -0 "$(cat "$dir/$id.pid")" 2>/dev/null; then
      echo "llama_fleet: $id exited:" >&2
      tail -5 "$dir/$id.log" >&2
      return 1
    fi
    sleep 0.05  # start-up poll: llama-server announces nothing on stdout
  done
  echo "llama_fleet: $id never became healthy" >&2
  return 1
}

halt() {  # halt ID
  local pid
  pid=$(cat "$dir/$1.pid" 2>/dev/null || true)
  [[ -n "$pid" ]] || return 0
  kill "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done  # until the port is free again
}

replicas() { find "$dir" -name 'r*.port' -printf '%f\n' | sed 's/\.port$//' | sort -V; }

case "$command" in
  start)
    [[ -x "$server" ]] || { echo "llama_fleet: no llama-server at $server (set KVGATE_LLAMA_SERVER)" >&2; exit 1; }
    mkdir -p "$dir"
    for ((index = 0; index < $3; index++)); do
      id=r$index
      threads_var="KVGATE_LLAMA_THREADS_$id"
      python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' >"$dir/$id.port"
      args="-m $model -np ${KVGATE_SLOTS:-2} -c ${KVGATE_LLAMA_CONTEXT:-16384} -t ${!threads_var:-${KVGATE_LLAMA_THREADS:-1}}"
      args+=" --metrics -fa off --no-warmup"
      [[ -n "${KVGATE_CACHE_RAM:-}" ]] && args+=" --cache-ram $KVGATE_CACHE_RAM"
      echo "$args" >"$dir/$id.args"
      launch "$id"
    done
    for id in $(replicas); do
      wait_healthy "$id"
      echo "http://127.0.0.1:$(cat "$dir/$id.port")"
    done
    ;;
  restart)
    for id in $(replicas); do halt "$id"; done
    for id in $(replicas); do launch "$id"; done
    for id in $(replicas); do wait_healthy "$id"; done
    ;;
  metrics)
    for id in $(replicas); do
      curl -s "http://127.0.0.1:$(cat "$dir/$id.port")/metrics" | awk -v id="$id" '
        $1 == "llamacpp:prompt_seconds_total" { ps = $2 } $1 == "llamacpp:prompt_tokens_total" { pt = $2 }
        $1 == "llamacpp:tokens_predicted_seconds_total" { ds = $2 } $1 == "llamacpp:tokens_predicted_total" { dt = $2 }
        $1 == "llamacpp:n_busy_slots_per_decode" { busy = $2 }
        # A slot'"'"'s token takes a whole decode step, shared by the busy slots.
        END { printf "%s %.4f %.4f\n", id, (pt > 0 ? 1000 * ps / pt : 0),
              (dt > 0 ? 1000 * ds / dt / (busy > 1 ? busy : 1) : 0) }'
    done
    ;;
  wait-gateways)
    # Until every worker of each kvgate admin address (after DIR) is
    # healthy again and its modelled cache is empty: the gateway has seen
    # the restart (its health checks, and its scrape of the engine's
    # counters, which went down), so a run does not start on what the
    # replicas held before it.
    shift 2
    for admin in "$@"; do
      for tries in $(seq 600); do
        curl -s "http://$admin/debug/workers" | python3 -c '
import json, sys
workers = json.load(sys.stdin)["workers"]
sys.exit(0 if workers and all(w["healthy"] and w["index"]["blocks"] == 0 for w in workers) else 1)' && break
        sleep 0.05  # polling another process's state
      done
    done
    ;;
  wait-routers)
    # Until each peer router (smg, vllm-router) on the loopback ports after
    # DIR N counts N healthy workers on its /readiness.
    workers=$3
    shift 3
    for port in "$@"; do
      for tries in $(seq 600); do
        curl -s "http://127.0.0.1:$port/readiness" | grep -q "\"healthy_workers\":$workers[,}]" && break
        sleep 0.05  # polling another process's state
      done
    done
    ;;
  stop)
    for id in $(replicas); do halt "$id"; done
    ;;
  request-fields)
    python3 - "$dir/tokenizer.json" <<'PY'
import json, re, sys
vocab = json.load(open(sys.argv[1]))["model"]["vocab"]
bias = {str(i): -100 for token, i in vocab.items() if re.fullmatch(r"<0x[0-9A-Fa-f]{2}>", token)}
bias.update({str(i): 100 for token, i in vocab.items() if re.fullmatch(r"[0-9]", token)})
if any(re.fullmatch(r"\u2581?[0-9]{2,}", token) for token in vocab):
    print("llama_fleet.sh: this vocabulary has multi-digit tokens: digit answers may not tokenize back "
          "to the tokens generated", file=sys.stderr)
fields = {"logit_bias": bias, "ignore_eos": True}
print(json.dumps(fields, separators=(",", ":")))
PY
    ;;
  *)
    echo "usage: llama_fleet.sh start|restart|metrics|stop|request-fields DIR [N]" >&2
    exit 2
    ;;
esac
