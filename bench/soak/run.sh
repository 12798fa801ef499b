#!/usr/bin/env bash
# Soak: MINUTES of multi-turn chat traffic (kvgate-bench's chat preset, 16
# sessions at a time) through one cache_aware gateway in front of three
# kvgate-sim replicas, with a fault injected into a random replica every
# few seconds (500s, a hang, 10x slow, streams cut after 3 tokens, lost
# KV-event batches, an engine restart; each lasts 2 s). Every 15 s it
# samples the gateway's RSS, open file descriptors and the requests it
# answered; at the end it compares the clients' count with the gateway's
# and prints the table BENCHMARKS.md keeps.
# Usage: bench/soak/run.sh [MINUTES]   (default 10)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
minutes=${1:-10}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null

source scripts/lib.sh
begin_run soak
# The session table is bounded at 4,096 keys (default 65,536) so that the
# gateway reaches its steady state within minutes: every bounded structure
# full, memory flat from then on unless something leaks.
export KVGATE_SETTINGS='timeouts: {upstream_response: 2s, upstream_idle: 2s}
sessions: {max_sessions: 4096}'
start_fleet 400 4096 cache_aware >/dev/null
gateway_pid=${pids[-1]}
replicas=()
for ((index = 1; index < ${#resets[@]}; index += 2)); do replicas+=("${resets[index]}"); done

# Inference requests the gateway answered (its own count, by model).
answered() {
  curl -s "http://$admin/metrics" | awk '/^kvgate_requests_total\{/ && /model="demo-model"/ { sum += $NF } END { printf "%d", sum }'
}

samples=$work/samples.tsv
printf 'minute\trss_mib\topen_fds\tanswered\n' >"$samples"
(
  started=$SECONDS
  while kill -0 "$gateway_pid" 2>/dev/null; do
    rss_kib=$(awk '/^VmRSS/ { print $2 }' "/proc/$gateway_pid/status")
    fds=$(find "/proc/$gateway_pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
    awk -v s=$((SECONDS - started)) -v r="$rss_kib" -v f="$fds" -v a="$(answered)" \
      'BEGIN { printf "%.2f\t%.1f\t%d\t%s\n", s / 60, r / 1024, f, a }' >>"$samples"
    sleep 15
  done
) &
sampler=$!

faults=('{"mode":"status","status":500}' '{"mode":"hang"}' '{"mode":"slow","factor":10}'
  '{"mode":"drop_after","tokens":3}' '{"mode":"drop_batches","count":3}' '{"mode":"restart"}')
fault_log=$work/faults.log
(
  RANDOM=7
  while true; do
    sleep 3
    replica=${replicas[RANDOM % ${#replicas[@]}]}
    fault=${faults[RANDOM % ${#faults[@]}]}
    echo "$fault" >>"$fault_log"
    curl -s -o /dev/null -d "$fault" "$replica/sim/fault" || true
    sleep 2
    curl -s -o /dev/null -d '{"mode":"none"}' "$replica/sim/fault" || true
  done
) &
injector=$!

echo "soak: $minutes min of chat traffic through kvgate (pid $gateway_pid), a fault every 5 s" >&2
build/bench/load/kvgate-bench run --target "http://$api" --workload chat --sessions $((minutes * 2000)) --concurrency 16 \
  --duration $((minutes * 60)) --out "$work/report" --fleet "$fleet" --name soak >"$work/bench.log" 2>&1 || {
  cat "$work/bench.log" >&2
  exit 1
}
kill "$injector" 2>/dev/null || true
sleep 16  # one more sample after the load
kill "$sampler" 2>/dev/null || true
wait "$injector" "$sampler" 2>/dev/null || true

mkdir -p build/soak-report
cp "$work/report/"* "$samples" "$fault_log" build/soak-report/
python3 - "$work/report/summary.json" "$samples" "$fault_log" "$(answered)" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
run = summary["runs"][0] if "runs" in summary else summary
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[2])][1:]
faults = [line for line in open(sys.argv[3])]
answered = int(sys.argv[4])
sent = run.get("requests", 0)
errors = run.get("errors", 0)
print(f"requests sent {sent}, errors {errors} ({errors / max(sent, 1):.2%}), answered by the gateway {answered}, "
      f"lost {sent - answered}; faults injected {len(faults)}")
print("errors by kind:", json.dumps(run.get("error_kinds", {})))
ttft, latency = run["ttft_ms"], run["latency_ms"]
print(f"TTFT p50 {ttft['p50']:.1f} ms, p99 {ttft['p99']:.1f} ms; request p99 {latency['p99']:.1f} ms; "
      f"{run['requests_per_second']:.1f} requests/s")
print("| minute | RSS MiB | open FDs | requests answered |")
print("|---|---|---|---|")
for minute, rss, fds, done in rows:
    print(f"| {float(minute):.1f} | {float(rss):.1f} | {fds} | {done} |")
PY
