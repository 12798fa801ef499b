#!/usr/bin/env bash
# The llama.cpp fleet benchmark on real engines: three llama-server replicas
# with two slots each (../shared/engines/llama.cpp, the random-weights
# model of ../shared/data/models), twelve chat sessions in flight (the chat
# preset), and in front of them, one at a time from cold replicas:
#   cache_aware    kvgate given the replicas' URLs and nothing else about them
#   session_hash   kvgate's sticky sessions
#   round_robin
#   nginx_sticky   nginx hashing the session header (bench/peers)
#   smg_cache_aware, vllm_router_cache_aware, llmd_approximate: SGLang's
#                  gateway, vLLM's router and llm-d's picker behind Envoy,
#                  as they ship (bench/peers, docs/benchmarking.md)
# once with llama-server's default host-RAM prompt cache and once with
# --cache-ram 0. Then the same workload on kvgate-sim replicas in the
# llama.cpp profile, its prefill and decode costs set from what the real
# replicas' own counters measured, so each report row shows how far the
# simulator is from the engine.
# Reports: build/llamacpp-real-report/{ram-default,ram-0}/{real,sim}/
# (KVGATE_REPORT_SUFFIX is appended to llamacpp-real-report).
#   bench/load/llamacpp-real.sh [SESSIONS] [SEED]
# Heterogeneous fleet: KVGATE_LLAMA_THREADS_r0=2 (r0 gets two threads).
# KVGATE_LLAMA_RAM="0" runs one RAM setting only (default: "default 0");
# KVGATE_LLAMA_SIM=0 skips the simulated fleet (the table's simulated
# columns are then empty).
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
source scripts/lib.sh
sessions=${1:-12}
seed=${2:-1}
targets=(cache_aware session_hash round_robin nginx_sticky smg_cache_aware vllm_router_cache_aware llmd_approximate)
choose_targets "${targets[@]}"
export KVGATE_REPLICAS=${KVGATE_REPLICAS:-3} KVGATE_SLOTS=${KVGATE_SLOTS:-2}
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
out_top=build/llamacpp-real-report${KVGATE_REPORT_SUFFIX:-}
mkdir -p "$out_top"
model=${KVGATE_LLAMA_MODEL:-$top/../shared/data/models/rand-llama-d256-l4.gguf}
tokenizer="$top/$out_top/tokenizer"
python3 tools/gguf_tokenizer.py "$model" "$tokenizer"

run_fleet() {  # run_fleet ENGINE OUT [SIM FLAGS]: one compare of every target
  local engine=$1 out=$2
  (
    export KVGATE_ENGINE=$engine KVGATE_TOKENIZER=$tokenizer KVGATE_BARE_WORKERS=1 KVGATE_TIME_SCALE=1
    [[ -n "${3:-}" ]] && export KVGATE_SIM_FLAGS=$3
    begin_run llamacpp-real
    start_fleet 1000000 16384 "${targets[@]}"
    if [[ "$engine" == llamacpp-real ]]; then
      # Each kvgate first serves other conversations than the measured
      # ones, as a gateway that has been running has: a few agent sessions
      # (long prompts: the engines' prefill costs), then twice as many
      # chats as the fleet has slots (slots taken over and conversations
      # coming back: whether the engines keep a RAM prompt cache).
      local index name warm_chats=$((2 * KVGATE_REPLICAS * KVGATE_SLOTS))
      for ((index = 0; index + 1 < ${#runs[@]}; index += 2)); do
        [[ "${runs[$index]}" == --run ]] || continue
        name=${runs[$index + 1]%%=*}
        [[ " ${admins[*]} " == *" $name="* ]] || continue  # kvgate's own only
        build/bench/load/kvgate-bench run --target "${runs[$index + 1]#*=}" ${request_fields[@]+"${request_fields[@]}"} \
          --workload agent --sessions 4 --concurrency 4 --seed 99 --session-prefix warm- --name warm-up --out "$work/warm-$name" >/dev/null 2>&1
        build/bench/load/kvgate-bench run --target "${runs[$index + 1]#*=}" ${request_fields[@]+"${request_fields[@]}"} \
          --workload chat --sessions "$warm_chats" --concurrency "$warm_chats" --seed 99 --session-prefix warm- --name warm-up-chat \
          --out "$work/warm-chat-$name" >/dev/null 2>&1
      done
      # The decision logs hold the warm-up too: what ends after this is the run.
      date +%s.%N >"$work/run-start"
      # Cold replicas before each run, and every gateway and peer router
      # seeing them up.
      resets=(--reset-command "bench/load/llama_fleet.sh restart $work/llama && bench/load/llama_fleet.sh \
wait-gateways $work/llama ${admins[*]#*=} && bench/load/llama_fleet.sh wait-routers $work/llama $KVGATE_REPLICAS \
${routers[*]:-}")
    fi
    build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" ${request_fields[@]+"${request_fields[@]}"} --workload chat --sessions "$sessions" \
      --concurrency "$sessions" --seed "$seed" --baseline nginx_sticky --replicas "$KVGATE_REPLICAS" \
      --fleet "$fleet" --out "$work/report"
    rm -rf "$out" && mkdir -p "$out"
    cp "$work/report/"* "$out/"
    cp "$work"/decisions-*.jsonl "$work"/run-start "$out/" 2>/dev/null || true
    for target in cache_aware session_hash round_robin; do
      [[ -n "${admins[*]:-}" ]] || break
      for entry in "${admins[@]}"; do
        [[ "$entry" == "$target="* ]] && curl -s "http://${entry#*=}/debug/workers" >"$out/workers-$target.json"
      done
    done
    if [[ "$engine" == llamacpp-real ]]; then
      bench/load/llama_fleet.sh metrics "$work/llama" >"$out/engine-costs.txt"
    fi
  )
}

rams=(${KVGATE_LLAMA_RAM:-default 0})
for ram in "${rams[@]}"; do
  if [[ "$ram" == default ]]; then unset KVGATE_CACHE_RAM; else export KVGATE_CACHE_RAM=0; fi
  echo "######## llama-server --cache-ram $ram: real replicas"
  run_fleet llamacpp-real "$out_top/ram-$ram/real"
  if [[ "${KVGATE_LLAMA_SIM:-1}" == 0 ]]; then
    rm -rf "$out_top/ram-$ram/sim"
    continue
  fi
  # The simulator's llama.cpp profile at the real replicas' measured costs
  # (their mean prefill and decode ms per token), in real time.
  read -r prefill decode < <(awk '{ p += $2; d += $3; n++ } END { printf "%.4f %.4f\n", p / n, d / n }' \
    "$out_top/ram-$ram/real/engine-costs.txt")
  echo "######## the same on kvgate-sim (llama.cpp profile, prefill $prefill ms/token, decode $decode ms/token)"
  KVGATE_CACHE_RAM=${KVGATE_CACHE_RAM:-8192} run_fleet llamacpp "$out_top/ram-$ram/sim" \
    "--prefill-ms-per-token $prefill --decode-ms-per-seq $decode --step-overhead-ms 0"
done

# Per target: later-turn hit rate and mean TTFT, real against simulated, and
# each against nginx sticky sessions on the same engines.
python3 - "$out_top" "${rams[@]}" <<'PY'
import gzip, json, os, statistics, sys
top = sys.argv[1]
def runs(path):
    if not os.path.exists(f"{path}/summary.json"):
        return {}
    summary = json.load(open(f"{path}/summary.json"))
    result = {}
    for run in summary["runs"]:
        if "failure" in run:
            print(f"{run['name']} in {path}: {run['failure']}")
            continue
        later = [t for t in run["hit_rate_by_turn"] if t["turn"] >= 2]
        prompt = sum(t["prompt_tokens"] for t in later)
        cached = sum(t["cached_tokens"] for t in later)
        result[run["name"]] = (100 * cached / max(prompt, 1), run["ttft_ms"]["mean"], run.get("errors", 0))
    return result
for ram in sys.argv[2:]:
    real, sim = runs(f"{top}/ram-{ram}/real"), runs(f"{top}/ram-{ram}/sim")
    print(f"\n--cache-ram {ram}")
    print("| target | later-turn hit (real) | (sim) | mean TTFT ms (real) | (sim) | sim/real TTFT | real TTFT / nginx_sticky |")
    print("|---|---|---|---|---|---|---|")
    base = real["nginx_sticky"][1]
    for name, (hit, ttft, errors) in real.items():
        s_hit, s_ttft, _ = sim.get(name, (float("nan"), float("nan"), 0))
        print(f"| {name} | {hit:.1f}% | {s_hit:.1f}% | {ttft:.0f} | {s_ttft:.0f} | {s_ttft / ttft:.2f} | {ttft / base:.2f} |")
    # Each pricing kvgate's own decisions on the real replicas (cache_aware
    # and its variants), the run's apart from the warm-up's: how far its
    # expected first tokens were from the realized ones (from the request's
    # dispatch: a wait in kvgate's admission queue is not the worker's),
    # and how many cached-token predictions were within a block of the
    # engine's figure.
    start_file = f"{top}/ram-{ram}/real/run-start"
    run_start = float(open(start_file).read()) if os.path.exists(start_file) else 0.0
    for name in real:
        log = f"{top}/ram-{ram}/real/decisions-{name}.jsonl"
        if not os.path.exists(log):
            continue
        figures = {"run": ([], [0, 0]), "warm-up": ([], [0, 0])}
        for line in open(log):
            record = json.loads(line)
            if record.get("status") != 200 or record.get("retries"):
                continue
            errors, (exact_predicted) = figures["run" if record["ts"] >= run_start else "warm-up"]
            ttft, expected = record.get("ttft_ms"), record.get("expected_ttft_ms")
            if ttft is not None:
                ttft -= record.get("dispatch_ms") or 0
            if ttft and expected and ttft > 0:
                errors.append(abs(ttft - expected) / ttft)
            if record.get("cached_tokens") is not None and record.get("predicted_cached_tokens") is not None:
                exact_predicted[1] += 1
                exact_predicted[0] += abs(record["cached_tokens"] - record["predicted_cached_tokens"]) < 16
        for phase, (errors, (exact, predicted)) in figures.items():
            if errors:
                print(f"{name}, {phase}: median |realized - expected| / realized "
                      f"{100 * statistics.median(errors):.0f}% over {len(errors)} answers; "
                      f"predictions within a block {exact}/{predicted}")
PY
