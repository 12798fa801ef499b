#!/usr/bin/env bash
# kvgate-sim capacity on one core: short completions and 64 concurrent
# streams at --time-scale 1 (the sim pinned to CPU 1, wrk on CPU 0), plus the
# sim's CPU use while idle.
# Usage: bench/sim/perf/run.sh [SECONDS]
set -euo pipefail
top=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$top"
seconds=${1:-10}
bash scripts/setup.sh bench >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j2 --target kvgate-sim >/dev/null

work=$(mktemp -d /tmp/kvgate-sim-bench-XXXXXX)
mkfifo "$work/out"
taskset -c 1 build/bench/sim/kvgate-sim --model sim-model --num-gpu-blocks 16384 \
  --kv-events-endpoint "tcp://127.0.0.1:*" >"$work/out" 2>"$work/err" &
sim=$!
trap 'kill $sim 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
exec {fd}<"$work/out"
read -r -t 10 -u "$fd" line
port=${line##*:}

cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' "/proc/$sim/stat"; }
measure() {  # name connections script
  local before after
  before=$(cpu_seconds)
  taskset -c 0 wrk -t1 -c"$2" -d"${seconds}s" --latency -s "bench/sim/perf/$3" \
    "http://127.0.0.1:$port/v1/$4" >"$work/$1.txt"
  after=$(cpu_seconds)
  awk -v name="$1" -v cpu="$(awk -v a="$before" -v b="$after" -v s="$seconds" 'BEGIN { printf "%.0f", 100 * (b - a) / s }')" '
    /^Requests\/sec/ { rps = $2 } $1 == "50%" { p50 = $2 } $1 == "99%" { p99 = $2 }
    END { printf "| %s | %s | %s | %s | %s%% |\n", name, rps, p50, p99, cpu }' "$work/$1.txt"
}

echo "| workload | requests/s | p50 | p99 | sim CPU |"
echo "|---|---|---|---|---|"
measure "short completions, 32 connections" 32 completion.lua completions
measure "64 concurrent streams of 32 tokens" 64 stream.lua chat/completions
idle_before=$(cpu_seconds)
sleep "$seconds"  # measuring idle CPU: nothing to synchronise with
idle_after=$(cpu_seconds)
awk -v a="$idle_before" -v b="$idle_after" -v s="$seconds" 'BEGIN { printf "\nidle CPU: %.2f%% of a core\n", 100 * (b - a) / s }'
