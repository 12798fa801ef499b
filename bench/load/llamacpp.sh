#!/usr/bin/env bash
# A llama.cpp fleet as the issue that asked for it ran one: three
# llama-server replicas with two slots each (kvgate-sim --engine-profile
# llamacpp: whole prompts in slots, no KV events), twelve chat sessions over
# three shared system prompts (the chat preset: one system prompt per four
# sessions), all in flight at once. cache_aware (cache_model: sequences,
# the default for engine: llamacpp) against session_hash (sticky sessions)
# and round_robin, each run several times with different seeds.
# KVGATE_CACHE_RAM=MIB turns on llama-server's host-RAM prompt cache
# (--cache-ram; 0, the default here, is off).
# Reports land in build/llamacpp-report/seed-N/.
#   bench/load/llamacpp.sh [RUNS] [SESSIONS]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
source scripts/lib.sh
export KVGATE_ENGINE=llamacpp KVGATE_SLOTS=${KVGATE_SLOTS:-2} KVGATE_REPLICAS=${KVGATE_REPLICAS:-3}
export KVGATE_TIME_SCALE=${KVGATE_TIME_SCALE:-5}
# llama.cpp's costs, not an H100's: prefill dominates (0.5 ms per prompt
# token, 15 ms a step), and cache_aware is told so, as an operator would
# set its priors for such a fleet.
export KVGATE_SIM_FLAGS=${KVGATE_SIM_FLAGS:---prefill-ms-per-token 0.5 --step-overhead-ms 15 --decode-ms-per-seq 1}
export KVGATE_TARGET_cache_aware=${KVGATE_TARGET_cache_aware:-'{policy: cache_aware, cache_aware: {prefill_ms_per_token: 0.5, prefill_base_ms: 15}}'}
repeats=${1:-3}
sessions=${2:-12}
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
for ((repeat = 1; repeat <= repeats; repeat++)); do
  (
    begin_run llamacpp
    start_fleet 4096 32768 cache_aware session_hash round_robin
    out=build/llamacpp-report/seed-$repeat
    rm -rf "$out"
    mkdir -p "$out"
    build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" --workload chat --sessions "$sessions" \
      --concurrency "$sessions" --seed "$repeat" --baseline session_hash --fleet "$fleet" --out "$work/report"
    cp "$work/report/"* "$out/"
    for target in cache_aware session_hash round_robin; do
      cp "$work/decisions-$target.jsonl" "$out/" 2>/dev/null || true
    done
  )
done
# Later turns' prompt tokens served from the slots, and mean time to first
# token, per run and target.
python3 - "$repeats" <<'PY'
import json, sys
for repeat in range(1, int(sys.argv[1]) + 1):
    summary = json.load(open(f"build/llamacpp-report/seed-{repeat}/summary.json"))
    line = []
    for run in summary["runs"]:
        later = [t for t in run["hit_rate_by_turn"] if t["turn"] >= 2]
        prompt = sum(t["prompt_tokens"] for t in later)
        cached = sum(t["cached_tokens"] for t in later)
        line.append(f'{run["name"]} later-turn hit {100 * cached / max(prompt, 1):.1f}% '
                    f'mean TTFT {run["ttft_ms"]["mean"]:.0f} ms')
    print(f"seed {repeat}: " + "; ".join(line))
PY
