# shellcheck shell=bash
# Shared by the scripts that start servers on 127.0.0.1 (sourced, not run).
# begin_run NAME: a work folder in $work and a list of started PIDs in
# $pids, both cleaned up when the script exits.
# start_server NAME COMMAND...: starts a server whose first stdout line
# announces its address and puts that line in $started (later lines can be
# read from file descriptor $started_fd). Call it directly,
# not inside $(...): a subshell would lose the PID and leak the server.
# start_fleet BLOCKS MAX_MODEL_LEN POLICY...: three kvgate-sim replicas with
# KV events and one kvgate per policy in front of all three; sets $runs
# (kvgate-bench --run flags), $resets (--reset flags), $api and $admin (the
# last gateway's).

begin_run() {
  work=$(mktemp -d "/tmp/kvgate-$1-XXXXXX")
  pids=()
  trap end_run EXIT
}

end_run() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
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

start_fleet() {
  local blocks=$1 max_model_len=$2
  shift 2
  local workers_yaml="" id line events_line replay_line policy
  resets=()
  for id in r0 r1 r2; do
    start_server "$id" build/bench/sim/kvgate-sim --model demo-model --block-size 16 \
      --num-gpu-blocks "$blocks" --max-model-len "$max_model_len" --time-scale 20 \
      --kv-events-endpoint tcp://127.0.0.1:0 --kv-events-replay-endpoint tcp://127.0.0.1:0
    line=$started
    read -r -t 10 -u "$started_fd" events_line
    read -r -t 10 -u "$started_fd" replay_line
    workers_yaml+="      - {id: $id, url: \"http://${line#listening }\", kv_events: \"${events_line#kv-events }\","
    workers_yaml+=" kv_events_replay: \"${replay_line#kv-events-replay }\", kv_capacity_blocks: $blocks}"$'\n'
    resets+=(--reset "http://${line#listening }")
  done
  runs=()
  for policy in "$@"; do
    cat >"$work/$policy.yaml" <<YAML
listen: "127.0.0.1:0"
admin_listen: "127.0.0.1:0"
threads: 1
access_log: false
routing: {policy: $policy}
health_check: {interval: 1s}
models:
  - name: demo-model
    block_size: 16
    workers:
$workers_yaml
YAML
    start_server "kvgate-$policy" build/src/kvgate --config "$work/$policy.yaml"
    api=$(sed -E 's/.*api=([^ ]+).*/\1/' <<<"$started")
    admin=$(sed -E 's/.*admin=([^ ]+).*/\1/' <<<"$started")
    runs+=(--run "$policy=http://$api")
    echo "kvgate ($policy): api http://$api  admin http://$admin"
  done
}
