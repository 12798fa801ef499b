# shellcheck shell=bash
# Shared by the scripts that start servers on 127.0.0.1 (sourced, not run).
# begin_run NAME: a work folder in $work and a list of started PIDs in
# $pids, both cleaned up when the script exits.
# start_server NAME COMMAND...: starts a server whose first stdout line
# announces its address and puts that line in $started (later lines can be
# read from file descriptor $started_fd). Call it directly,
# not inside $(...): a subshell would lose the PID and leak the server.
# start_fleet BLOCKS MAX_MODEL_LEN TARGET...: kvgate-sim replicas with KV
# events (BLOCKS KV blocks of 16 tokens each: the KV-pressure knob) and, per
# TARGET, a kvgate with that routing policy or a peer load balancer
# (bench/peers: nginx_sticky, haproxy_leastconn, haproxy_sticky,
# smg_cache_aware, vllm_router_cache_aware; llmd_approximate, llmd_affinity, llmd_precise:
# llm-d's endpoint picker behind Envoy, see start_llmd) in front of
# all of them. A TARGET whose environment variable KVGATE_TARGET_<TARGET>
# is set runs kvgate with that YAML flow mapping as its `routing:` (a
# variant, e.g. KVGATE_TARGET_ca_w1='{policy: cache_aware, cache_aware:
# {own_prefill_weight: 1}}'). Sets $runs (kvgate-bench --run flags), $resets
# (--reset flags, or --reset-command for real replicas), $request_fields
# (kvgate-bench --request-fields the replicas need, or nothing), $fleet (a description for the report), $admins (LABEL=
# admin address per kvgate), $epps (LABEL=picker address per picker_POLICY
# target), $routers (the ports of the Rust routers among the peers), $api and $admin (the last gateway's). Each
# kvgate writes its decision log to $work/decisions-TARGET.jsonl. Environment: KVGATE_REPLICAS (default 3), KVGATE_TIME_SCALE
# (default 20), KVGATE_SIM_FLAGS (more kvgate-sim flags, e.g. timing),
# KVGATE_ENGINE (vllm; llamacpp: kvgate-sim replicas as llama-server;
# llamacpp-real: real llama-server replicas, bench/load/llama_fleet.sh),
# KVGATE_SIM_FLAGS_r0 .. (one replica's own, after those: e.g.
# "--time-scale 1" makes r0 twice as slow as the others at the default 2),
# KVGATE_NO_EVENTS (set: kvgate is not given the replicas' KV events, its
# index is approximate), KVGATE_MODEL_SETTINGS (more keys of the model's entry, each line
# indented four spaces, e.g. adapters), KVGATE_SETTINGS (more top-level YAML for every kvgate, e.g.
# 'metrics_scrape: {interval: 250ms}'), KVGATE_THREADS (each kvgate's I/O
# threads, default 1), KVGATE_TOKENIZER (a model folder: exact tokenisation
# instead of the approximate one), KVGATE_KEEP_WORK (set: the run's work
# folder under /tmp, with every server's log, is kept and named at the end).
# free_port: an unused TCP port on 127.0.0.1. wait_port PORT: until it answers.
# wait_router_ready PORT N: until the router there has N healthy workers.
# gateway_yaml_head TARGET ROUTING: the top of a benchmarked kvgate's YAML
# (ports, decision log, `routing: ROUTING`); the caller adds its models.
# weka_workload TRACES_DIR SESSIONS [BLOCK_TOKENS OUTPUT_SCALE]: sets
# $workload to kvgate-bench's flags for the WEKA Claude Code sessions as the
# headline runs replay them (by default 2 tokens per 64-token block, outputs
# 32x shorter; 64 1: as recorded).
# mooncake_workload TRACES_DIR REQUESTS: the same for Mooncake's
# conversation trace. choose_targets DEFAULT...: sets $targets to the words
# of KVGATE_TARGETS, or to the defaults.

mooncake_workload() {
  # 512-token blocks become 32 tokens, outputs 16x shorter.
  workload=(--workload "$1/mooncake-fast25/conversation_trace.jsonl" --max-requests "$2"
            --trace-block-tokens 32 --output-scale 16)
}

choose_targets() {
  if [[ -n "${KVGATE_TARGETS:-}" ]]; then
    read -r -a targets <<<"$KVGATE_TARGETS"
  else
    targets=("$@")
  fi
}

weka_workload() {  # traces sessions [block_tokens output_scale]
  local shards=$1/weka-claude-code/claude_code_traces_0001-0050.jsonl.gz
  shards+=,$1/weka-claude-code/claude_code_traces_0051-0100.jsonl.gz
  # By default prompts 32x shorter (64-token blocks become 2 tokens), outputs
  # too; think times 1000x shorter and at most KVGATE_MAX_THINK_MS.
  workload=(--workload "$shards" --sessions "$2" --trace-block-tokens "${3:-2}" --output-scale "${4:-32}"
            --time-scale 1000 --max-think-ms "${KVGATE_MAX_THINK_MS:-200}")
}

begin_run() {
  work=$(mktemp -d "/tmp/kvgate-$1-XXXXXX")
  pids=()
  trap end_run EXIT
}

end_run() {
  [[ -d "$work/llama" ]] && bench/load/llama_fleet.sh stop "$work/llama"
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ -n "${KVGATE_KEEP_WORK:-}" ]]; then
    echo "work folder kept (KVGATE_KEEP_WORK): $work" >&2  # the servers' logs, for a run to be explained
  else
    rm -rf "$work"
  fi
}

# The comparison's reports ($work/report) into build/$1, beside each
# gateway's /debug/workers at the end and its decision log (compressed):
# what it learned and saw, and why it sent each request where it did.
collect_report() {
  local out=$1 entry
  rm -rf "$out"
  mkdir -p "$out"
  cp "$work/report/"* "$out/"
  for entry in "${admins[@]}"; do
    curl -fsS "http://${entry#*=}/debug/workers" >"$out/workers-${entry%%=*}.json" || true
    if [[ -f "$work/decisions-${entry%%=*}.jsonl" ]]; then
      gzip -c "$work/decisions-${entry%%=*}.jsonl" >"$out/decisions-${entry%%=*}.jsonl.gz"
    fi
  done
}

start_server() {
  local name=$1
  shift
  mkfifo "$work/$name.fifo"
  "$@" >"$work/$name.fifo" 2>"$work/$name.log" &
  pids+=($!)
  local fd line
  exec {fd}<"$work/$name.fifo"
  if ! read -r -t 10 -u "$fd" line; then
    echo "$name did not start:" >&2
    cat "$work/$name.log" >&2
    exit 1
  fi
  started=$line
  started_fd=$fd  # the server's stdout, for any further announcement lines
}

# Debian's redis-server for a cluster of gateways (cluster:): no
# persistence, a free loopback port; sets $redis_port and $redis_pid once
# it answers PING.
start_redis() {
  redis_port=$(free_port)
  start_server redis redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no
  redis_pid=${pids[-1]}
  for _ in $(seq 100); do
    [[ "$(redis-cli -p "$redis_port" ping 2>/dev/null)" == PONG ]] && return 0
    sleep 0.1
  done
  echo "redis-server did not answer on port $redis_port" >&2
  exit 1
}

# The settings every benchmarked gateway shares: ephemeral ports, its
# decision log beside the run, and the routing block given (YAML).
gateway_yaml_head() {  # target routing
  cat <<YAML
listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
threads: ${KVGATE_THREADS:-1}
access_log: false
decision_log: "$work/decisions-$1.jsonl"
routing: $2
health_check: {interval: 1s}
YAML
}

# A real Envoy (.tools/bin/envoy) running deploy/envoy/envoy.yaml, its
# listener on a free loopback port, its picker at PICKER_PORT; sets
# $envoy_port to the listener's port once Envoy is ready. ENVOY_CONFIG: another bootstrap with
# the same three ports (8081 listener, 9002 picker, 9901 admin).
# HEALTH_PORT: a picker that serves gRPC health on a port of its own (llm-d's
# EPP): Envoy's health checks go there.
#   start_envoy NAME PICKER_PORT [HEALTH_PORT]
start_envoy() {
  local name=$1 picker_port=$2 health_port=${3:-} port admin tries
  port=$(free_port)
  admin=$(free_port)
  local health=()
  [[ -n "$health_port" ]] &&
    health=(-e "s/^\( *\)  \(socket_address: {address: 127.0.0.1, port_value: $picker_port}\)$/\1  \2\n\1health_check_config: {port_value: $health_port}/")
  sed -e "s/{address: 0.0.0.0, port_value: 8081}/{address: 127.0.0.1, port_value: $port}/" \
    -e "s/port_value: 9002}/port_value: $picker_port}/" -e "s/port_value: 9901}/port_value: $admin}/" \
    ${health[@]+"${health[@]}"} "${ENVOY_CONFIG:-deploy/envoy/envoy.yaml}" >"$work/$name.envoy.yaml"
  .tools/bin/envoy -c "$work/$name.envoy.yaml" --disable-hot-restart --concurrency "${KVGATE_ENVOY_THREADS:-1}" \
    -l warn >"$work/$name.envoy.log" 2>&1 &
  pids+=($!)
  for tries in $(seq 200); do
    if [[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$admin/ready")" == 200 ]]; then
      envoy_port=$port
      return 0
    fi
    sleep 0.05  # start-up poll: Envoy announces nothing on stdout
  done
  echo "Envoy ($name) did not start:" >&2
  cat "$work/$name.envoy.log" >&2
  exit 1
}

# llm-d's endpoint picker (llm-d-router's epp) behind the same Envoy as
# kvgate's picker, configured by bench/peers/TARGET.yaml.in, its endpoints
# from a file; llmd_precise also reads the replicas' KV events on the socket
# start_fleet had them dial ($llmd_events_port) and tokenises through the
# first replica's render endpoint. The Go module proxy this project installs from does not serve
# llm-d-router, so KVGATE_LLMD_EPP names an epp binary; without one, or when
# it does not start, the target is added to $runs as --unavailable (named in
# the report) and this returns 1. Sets $envoy_port.
#   start_llmd TARGET REPLICA_URL...
start_llmd() {
  local target=$1 epp=${KVGATE_LLMD_EPP:-} index=0 url address grpc health metrics
  shift
  if [[ -z "$epp" || ! -x "$epp" ]]; then
    runs+=(--unavailable "$target=no llm-d EPP binary (KVGATE_LLMD_EPP names one built from llm-d-router)")
    return 1
  fi
  if [[ "$target" == llmd_precise && -z "${llmd_events_port:-}" ]]; then
    runs+=(--unavailable "$target=the replicas publish no KV events to llm-d's picker (kvgate-sim replicas only)")
    return 1
  fi
  if [[ ! -f "bench/peers/$target.yaml.in" ]]; then
    runs+=(--unavailable "$target=no configuration bench/peers/$target.yaml.in")
    return 1
  fi
  {
    echo "endpoints:"
    for url in "$@"; do
      address=${url#http://}
      address=${address%%/*}
      echo "  - {name: r$index, address: \"${address%:*}\", port: \"${address##*:}\"}"
      index=$((index + 1))
    done
  } >"$work/$target.endpoints.yaml"
  sed -e "s|@ENDPOINTS@|$work/$target.endpoints.yaml|" -e "s|@MODEL@|demo-model|" -e "s|@RENDER_URL@|$1|" \
    -e "s|@EVENTS@|tcp://127.0.0.1:${llmd_events_port:-0}|" "bench/peers/$target.yaml.in" >"$work/$target.epp.yaml"
  grpc=$(free_port)
  health=$(free_port)
  metrics=$(free_port)
  "$epp" --pool-name kvgate-bench --config-file "$work/$target.epp.yaml" --grpc-port "$grpc" \
    --grpc-health-port "$health" --metrics-port "$metrics" --metrics-endpoint-auth=false --secure-serving=false \
    --tracing=false --zap-devel=false --zap-log-level error >"$work/$target.epp.log" 2>&1 &
  pids+=($!)
  if ! wait_port "$health"; then
    cat "$work/$target.epp.log" >&2
    runs+=(--unavailable "$target=llm-d's EPP did not start: $(tail -1 "$work/$target.epp.log" | cut -c1-300)")
    return 1
  fi
  start_envoy "$target" "$grpc" "$health"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# The Rust routers (smg, vllm-router) listen before their workers have
# passed a health check; /readiness counts the healthy ones.
wait_router_ready() {  # port workers (up to a minute: a Python launcher starts each)
  local tries
  for tries in $(seq 1200); do
    if curl -fsS "http://127.0.0.1:$1/readiness" 2>/dev/null | grep -q "\"healthy_workers\":$2[,}]"; then
      return 0
    fi
    sleep 0.05  # start-up poll: the routers announce nothing on stdout
  done
  echo "router on port $1 never had $2 healthy workers" >&2
  return 1
}

wait_port() {
  local tries
  for tries in $(seq 200); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then
      return 0
    fi
    sleep 0.05  # start-up poll of a process that announces nothing (nginx, HAProxy)
  done
  echo "port $1 never answered" >&2
  return 1
}

start_fleet() {
  local blocks=$1 max_model_len=$2
  shift 2
  local replicas=${KVGATE_REPLICAS:-3} time_scale=${KVGATE_TIME_SCALE:-20}
  local sim_flags=(${KVGATE_SIM_FLAGS:-})
  local workers_yaml="" id line events_line replay_line target index port own_var own_flags
  local urls=()
  resets=()
  request_fields=()
  if [[ "${KVGATE_ENGINE:-vllm}" == llamacpp-real ]]; then
    # Real llama-server replicas (bench/load/llama_fleet.sh), given to kvgate
    # by URL only: it reads what they are from them. Each run restarts them.
    mapfile -t urls < <(bench/load/llama_fleet.sh start "$work/llama" "$replicas")
    ((${#urls[@]} == replicas)) || exit 1
    for ((index = 0; index < replicas; index++)); do
      workers_yaml+="      - {id: r$index, url: \"${urls[$index]}\"}"$'\n'
    done
    resets=(--reset-command "bench/load/llama_fleet.sh restart $work/llama")
    request_fields=(--request-fields "$(bench/load/llama_fleet.sh request-fields "$KVGATE_TOKENIZER")")
  fi
  # llm-d's precise picker binds one KV-events socket the replicas dial,
  # each naming itself (kv@address:port@model): its port and theirs are
  # chosen before they start.
  llmd_events_port=""
  [[ " $* " == *" llmd_precise "* && "${KVGATE_ENGINE:-vllm}" == vllm ]] && llmd_events_port=$(free_port)
  local dial_flags
  for ((index = 0; index < replicas; index++)); do
    [[ "${KVGATE_ENGINE:-vllm}" == llamacpp-real ]] && break
    id=r$index
    own_var="KVGATE_SIM_FLAGS_$id"
    read -r -a own_flags <<<"${!own_var:-}"
    if [[ "${KVGATE_ENGINE:-vllm}" == llamacpp ]]; then
      # llama-server's wire formats and slot cache (-np KVGATE_SLOTS), no KV events.
      start_server "$id" build/bench/sim/kvgate-sim --model demo-model --id "$id" --block-size 16 \
        --num-gpu-blocks "$blocks" --max-model-len "$max_model_len" --time-scale "$time_scale" \
        --engine-profile llamacpp --slots "${KVGATE_SLOTS:-2}" --cache-ram "${KVGATE_CACHE_RAM:-0}" \
        "${sim_flags[@]}" ${own_flags[@]+"${own_flags[@]}"}
      line=$started
      if [[ -n "${KVGATE_BARE_WORKERS:-}" ]]; then
        # As for real replicas: the URL only, the rest read from the engine.
        workers_yaml+="      - {id: $id, url: \"http://${line#listening }\"}"$'\n'
      else
        workers_yaml+="      - {id: $id, url: \"http://${line#listening }\", engine: llamacpp, slots: ${KVGATE_SLOTS:-2},"
        workers_yaml+=" cache_ram_mib: ${KVGATE_CACHE_RAM:-0}}"$'\n'
      fi
    else
      dial_flags=()
      if [[ -n "$llmd_events_port" ]]; then
        port=$(free_port)
        dial_flags=(--port "$port" --kv-events-topic "kv@127.0.0.1:$port@demo-model"
                    --kv-events-connect "tcp://127.0.0.1:$llmd_events_port")
      fi
      start_server "$id" build/bench/sim/kvgate-sim --model demo-model --id "$id" --block-size 16 \
        --num-gpu-blocks "$blocks" --max-model-len "$max_model_len" --time-scale "$time_scale" \
        --kv-events-endpoint tcp://127.0.0.1:0 --kv-events-replay-endpoint tcp://127.0.0.1:0 "${sim_flags[@]}" \
        ${dial_flags[@]+"${dial_flags[@]}"} ${own_flags[@]+"${own_flags[@]}"}
      line=$started
      read -r -t 10 -u "$started_fd" events_line
      read -r -t 10 -u "$started_fd" replay_line
      if [[ -n "${KVGATE_NO_EVENTS:-}" ]]; then
        # Approximate mode: the replicas publish, kvgate is not told where.
        workers_yaml+="      - {id: $id, url: \"http://${line#listening }\", kv_capacity_blocks: $blocks}"$'\n'
      else
        workers_yaml+="      - {id: $id, url: \"http://${line#listening }\", kv_events: \"${events_line#kv-events }\","
        workers_yaml+=" kv_events_replay: \"${replay_line#kv-events-replay }\", kv_capacity_blocks: $blocks}"$'\n'
      fi
    fi
    resets+=(--reset "http://${line#listening }")
    urls+=("http://${line#listening }")
  done
  if [[ "${KVGATE_ENGINE:-vllm}" == llamacpp-real ]]; then
    fleet="$replicas llama-server replicas ($(basename "${KVGATE_LLAMA_MODEL:-rand-llama-d256-l4.gguf}"), -np ${KVGATE_SLOTS:-2},"
    fleet+=" --cache-ram ${KVGATE_CACHE_RAM:-default}, -t ${KVGATE_LLAMA_THREADS:-1}"
    for ((index = 0; index < replicas; index++)); do
      own_var="KVGATE_LLAMA_THREADS_r$index"
      [[ -n "${!own_var:-}" ]] && fleet+="; r$index -t ${!own_var}"
    done
    fleet+="), kvgate given their URLs only"
  else
  fleet="$replicas kvgate-sim replicas x $blocks KV blocks of 16 tokens (max_model_len $max_model_len),"
  [[ "${KVGATE_ENGINE:-vllm}" == llamacpp ]] &&
    fleet="$replicas kvgate-sim replicas as llama-server -np ${KVGATE_SLOTS:-2} --cache-ram ${KVGATE_CACHE_RAM:-0} (whole prompts in slots, no KV events),"
  fleet+=" time scale $time_scale, default step costs (Llama-3-8B on an H100)${sim_flags:+, ${sim_flags[*]}}"
  for ((index = 0; index < replicas; index++)); do
    own_var="KVGATE_SIM_FLAGS_r$index"
    [[ -n "${!own_var:-}" ]] && fleet+="; r$index: ${!own_var}"
  done
  fi
  runs=()
  admins=()
  epps=()
  routers=()
  for target in "$@"; do
    case "$target" in
      nginx_* | haproxy_* | smg_* | vllm_router_*)
        port=$(free_port)
        bench/peers/peer.sh "$target" "$port" "$work/$target" "${urls[@]}" >"$work/$target.log" 2>&1 &
        pids+=($!)
        if ! wait_port "$port" || { [[ "$target" == smg_* || "$target" == vllm_router_* ]] &&
          ! wait_router_ready "$port" "${#urls[@]}"; }; then
          # Named in the report, and the other targets still run.
          echo "peer $target did not start:" >&2
          cat "$work/$target.log" >&2
          runs+=(--unavailable "$target=$(grep -v '^\s*$' "$work/$target.log" | tail -1 | cut -c1-300)")
          continue
        fi
        runs+=(--run "$target=http://127.0.0.1:$port")
        [[ "$target" == smg_* || "$target" == vllm_router_* ]] && routers+=("$port")
        echo "$target: http://127.0.0.1:$port"
        continue
        ;;
      llmd_*)
        if start_llmd "$target" "${urls[@]}"; then
          runs+=(--run "$target=http://127.0.0.1:$envoy_port")
          echo "$target: http://127.0.0.1:$envoy_port (Envoy + llm-d's endpoint picker)"
        fi
        continue
        ;;
    esac
    # picker_POLICY: kvgate as an endpoint picker with that policy, behind
    # kvgate-epp-dataplane (Envoy's part: ask the picker, forward, stream
    # the response back through it). envoy_POLICY: the same picker behind a
    # real Envoy running deploy/envoy/envoy.yaml (.tools/bin/envoy).
    local picker_policy=""
    if [[ "$target" == picker_* ]]; then
      picker_policy=${target#picker_}
    elif [[ "$target" == envoy_* ]]; then
      picker_policy=${target#envoy_}
    fi
    local variant="KVGATE_TARGET_${picker_policy:-$target}"
    local routing="{policy: ${picker_policy:-$target}}"
    [[ -n "${!variant:-}" ]] && routing=${!variant}
    # KVGATE_SETTINGS_<target>: top-level YAML for that target alone (a
    # cluster: section).
    local own_settings="KVGATE_SETTINGS_$target"
    {
      gateway_yaml_head "$target" "$routing"
      cat <<YAML
${picker_policy:+epp_listen: "127.0.0.1:0"}
${KVGATE_SETTINGS:-}
${!own_settings:-}
models:
  - name: demo-model
    block_size: 16
${KVGATE_TOKENIZER:+    tokenizer: "$KVGATE_TOKENIZER"}
${KVGATE_MODEL_SETTINGS:-}
    workers:
$workers_yaml
YAML
    } >"$work/$target.yaml"
    # KVGATE_BINARY_<target>: another kvgate binary for that target (an
    # earlier build, for a before/after comparison in one run).
    own_var="KVGATE_BINARY_$target"
    start_server "kvgate-$target" "${!own_var:-build/src/kvgate}" --config "$work/$target.yaml"
    api=$(sed -E 's/.*api=([^ ]+).*/\1/' <<<"$started")
    admin=$(sed -E 's/.*admin=([^ ]+).*/\1/' <<<"$started")
    if [[ -n "$picker_policy" ]]; then
      local epp
      epp=$(sed -E 's/.*epp=([^ ]+).*/\1/' <<<"$started")
      epps+=("$target=$epp")
      if [[ "$target" == envoy_* ]]; then
        start_envoy "$target" "${epp##*:}"
        api=127.0.0.1:$envoy_port
      else
        start_server "dataplane-$target" build/bench/epp/kvgate-epp-dataplane --picker "$epp"
        api=${started#listening }
      fi
    fi
    runs+=(--run "$target=http://$api")
    admins+=("$target=$admin")
    echo "kvgate ($target): api http://$api  admin http://$admin"
  done
}
