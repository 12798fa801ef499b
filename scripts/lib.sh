# shellcheck shell=bash
# Shared by the scripts that start servers on 127.0.0.1 (sourced, not run).
# begin_run NAME: a work folder in $work and a list of started PIDs in
# $pids, both cleaned up when the script exits.
# start_server NAME COMMAND...: starts a server whose first stdout line
# announces its address and puts that line in $started (later lines can be
# read from file descriptor $started_fd). Call it directly,
# not inside $(...): a subshell would lose the PID and leak the server.

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
