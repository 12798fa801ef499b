#!/usr/bin/env bash
# Many LoRA adapters on one base model. The chat preset's sessions (default
# 240) each name one of ADAPTERS (default 16) adapters, adapter i taking a
# share ~ 1/(i+1) of them (Zipf 1); four replicas each hold 4 adapters at
# once (--max-loras 4), a batch mixes at most 4, and loading one takes
# 20 ms of model time (10 ms at the fleet's time scale 2, which kvgate is
# told as models[].lora_load; the replicas report max_lora themselves). At
# 70% load, through round robin, sticky sessions, the Dynamo and SGLang
# re-implementations (like those routers they key their index by adapter
# and ignore residency) and cache_aware. The report adds adapter loads per
# 1,000 requests. Reports land in build/lora-report/.
#   bench/load/lora.sh [SESSIONS] [ADAPTERS]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
sessions=${1:-240}
adapters=${2:-16}
source scripts/lib.sh
names=()
for ((index = 0; index < adapters; index++)); do names+=("adapter-$index"); done
list=$(IFS=,; echo "${names[*]}")
export KVGATE_REPLICAS=${KVGATE_REPLICAS:-4} KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-2}
export KVGATE_SIM_FLAGS="--lora-adapters $list --max-loras 4 --lora-load-ms 20 ${KVGATE_SIM_FLAGS:-}"
export KVGATE_MODEL_SETTINGS="    adapters: [$list]
    max_loras: 4
    lora_load: 10ms"
choose_targets round_robin session_hash dynamo_cost sglang_cache_aware cache_aware
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run lora
start_fleet 4000 2560 "${targets[@]}" >/dev/null
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" --workload chat --sessions "$sessions" \
  --adapters "$adapters" --adapter-zipf 1 --load 0.7 --concurrency 64 --baseline round_robin \
  --fleet "$fleet; $adapters adapters, 4 per replica at once, 20 ms (model time) per load" --out "$work/report" >/dev/null
out=build/lora-report
rm -rf "$out"
mkdir -p "$out"
cp "$work/report/"* "$out/"
sed -n '/^| run | requests/,/^$/p;/^| run | adapter loads/,/^$/p' "$out/report.md"
