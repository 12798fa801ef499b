#!/usr/bin/env bash
# Disaggregated prefill and decode: a fleet of 2 prefill and 2 decode
# kvgate-sim replicas (vLLM's protocol, the KV moved over a 25 GB/s link)
# beside an aggregated fleet of the same 4 replicas, driven with identical
# offered traffic at ~70% of the PD fleet's prefill pool (2 replicas; 35%
# of the aggregated fleet's capacity), through:
#   rr_pd           both pools round robin, every prefill on a prefill worker
#   remote_pd       cache_aware decoders, every prefill on the cheapest prefill worker
#   conditional_pd  cache_aware decoders; the decoder prefills what it lacks little of
#                   (the defaults: local_prefill_tokens 512)
#   conditional_pd_ratio  the same, and also whatever it holds 70% of (local_prefill_ratio 0.7)
#   aggregated      the aggregated fleet, cache_aware
# The report adds time per output token (the decode phase's pace, which
# prefills on the same replica stall), the prompt tokens the replicas
# computed (a decoder's usage counts received KV as cached, so the client's
# hit rate overstates a PD fleet's reuse), the share of prefills run on a
# prefill worker and the mean KV transfer. Reports land in
# build/disaggregation-report/NAME/.
#   bench/load/disaggregation.sh weka70|mooncake70 [COUNT]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
traces=${KVGATE_TRACES:-../shared/data/traces}
source scripts/lib.sh
name=${1:-weka70}
case "$name" in
  weka70)
    time_scale=2
    blocks=2000
    max_model_len=$((blocks * 16))
    weka_workload "$traces" "${2:-75}"
    ;;
  mooncake70)
    time_scale=0.5
    blocks=4000
    max_model_len=12288
    mooncake_workload "$traces" "${2:-2000}"
    ;;
  *)
    echo "usage: bench/load/disaggregation.sh weka70|mooncake70 [COUNT]" >&2
    exit 2
    ;;
esac
time_scale=${KVGATE_TIME_SCALE:-$time_scale}
transfer_gbps=${KVGATE_TRANSFER_GBPS:-25}
choose_targets rr_pd remote_pd conditional_pd conditional_pd_ratio aggregated

cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run disaggregation
pd_workers=""
aggregated_workers=""
resets=()
start_replica() {  # id role
  local line events replay
  start_server "$1" build/bench/sim/kvgate-sim --model demo-model --id "$1" --block-size 16 \
    --num-gpu-blocks "$blocks" --max-model-len "$max_model_len" --time-scale "$time_scale" \
    --kv-events-endpoint tcp://127.0.0.1:0 --kv-events-replay-endpoint tcp://127.0.0.1:0 \
    --role "$2" --transfer-gbps "$transfer_gbps"
  line=$started
  read -r -t 10 -u "$started_fd" events
  read -r -t 10 -u "$started_fd" replay
  resets+=(--reset "http://${line#listening }")
  replica_yaml="      - {id: $1, url: \"http://${line#listening }\", kv_events: \"${events#kv-events }\","
  replica_yaml+=" kv_events_replay: \"${replay#kv-events-replay }\", kv_capacity_blocks: $blocks, role: $2}"$'\n'
}
for id in p0 p1; do
  start_replica "$id" prefill
  pd_workers+=$replica_yaml
done
for id in d0 d1; do
  start_replica "$id" decode
  pd_workers+=$replica_yaml
done
for id in a0 a1 a2 a3; do
  start_replica "$id" both
  aggregated_workers+=$replica_yaml
done
# The load is dialled against the PD fleet's prefill pool (2 replicas), the
# same offered traffic for every target.
replica_rate=$(curl -fsS "${resets[1]}/metrics" | sed -n 's/^kvgate_sim_prefill_tokens_per_second{[^}]*} //p')
fleet_rate=$(python3 -c "print(2 * $replica_rate)")

runs=()
admins=()
always_remote="local_prefill_tokens: 0, local_prefill_ratio: 1"
for target in "${targets[@]}"; do
  case "$target" in
    rr_pd) routing=round_robin; pd="{protocol: vllm, transfer_gbps: $transfer_gbps, $always_remote}" ;;
    remote_pd) routing=cache_aware; pd="{protocol: vllm, transfer_gbps: $transfer_gbps, $always_remote}" ;;
    conditional_pd) routing=cache_aware; pd="{protocol: vllm, transfer_gbps: $transfer_gbps}" ;;
    conditional_pd_ratio) routing=cache_aware; pd="{protocol: vllm, transfer_gbps: $transfer_gbps, local_prefill_ratio: 0.7}" ;;
    aggregated) routing=cache_aware; pd="" ;;
    *) echo "unknown target $target (rr_pd remote_pd conditional_pd conditional_pd_ratio aggregated)" >&2; exit 2 ;;
  esac
  workers=$pd_workers
  [[ -z "$pd" ]] && workers=$aggregated_workers
  {
    gateway_yaml_head "$target" "{policy: $routing}"
    cat <<YAML
models:
  - name: demo-model
    block_size: 16
${pd:+    disaggregation: $pd}
    workers:
$workers
YAML
  } >"$work/$target.yaml"
  start_server "kvgate-$target" build/src/kvgate --config "$work/$target.yaml"
  api=$(sed -E 's/.*api=([^ ]+).*/\1/' <<<"$started")
  admin=$(sed -E 's/.*admin=([^ ]+).*/\1/' <<<"$started")
  runs+=(--run "$target=http://$api")
  admins+=("$target=$admin")
done
fleet="2 prefill + 2 decode kvgate-sim replicas (vLLM protocol, $transfer_gbps GB/s KV link) beside 4 aggregated ones,"
fleet+=" $blocks KV blocks of 16 tokens each, time scale $time_scale, default step costs (Llama-3-8B on an H100);"
fleet+=" load dialled against the PD fleet's prefill pool (2 replicas)"
baseline=()
[[ " ${targets[*]} " == *" rr_pd "* ]] && baseline=(--baseline rr_pd)
build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" "${workload[@]}" --load 0.7 \
  --prefill-tokens-per-s "$fleet_rate" "${baseline[@]}" --fleet "$fleet" --out "$work/report" >/dev/null
out=build/disaggregation-report/$name
collect_report "$out"
# The PD figures side by side (the full report is report.md).
KVGATE_REPLICA_IDS="p0 p1 d0 d1 a0 a1 a2 a3" python3 - "$out/summary.json" <<'PY'
import json, os, sys
runs = json.load(open(sys.argv[1]))["runs"]
ids = os.environ["KVGATE_REPLICA_IDS"].split()
def ms(run, key, stat):
    return run.get(key, {}).get(stat, 0.0)
print("| run | requests | errors | TTFT mean ms | TTFT p90 ms | TPOT p50 ms | TPOT p90 ms | prompt tokens computed "
      "by the replicas | client-reported hit rate | prefills on a prefill worker | KV transfers | mean transfer ms |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for run in runs:
    print(f"| {run['name']} | {run['requests']} | {run['errors']} | {ms(run, 'ttft_ms', 'mean'):.1f} | "
          f"{ms(run, 'ttft_ms', 'p90'):.1f} | {ms(run, 'tpot_ms', 'p50'):.2f} | {ms(run, 'tpot_ms', 'p90'):.2f} | "
          f"{run.get('replica_prefill_tokens_computed', 0):.0f} | {100 * run.get('hit_rate', 0):.1f}% | "
          f"{100 * run.get('remote_prefill_share', 0):.1f}% | {run.get('kv_transfers', 0):.0f} | "
          f"{run.get('kv_transfer_ms_mean', 0):.1f} |")
print()
print("| run | pool | prompt tokens admitted | own-cache hit rate | prompt tokens computed | KV transfers received |")
print("|---|---|---|---|---|---|")
pools = {"p": "prefill", "d": "decode", "a": "aggregated"}
for run in runs:
    work = run.get("replica_work", [])
    for letter, pool in pools.items():
        rows = [row for index, row in enumerate(work) if index < len(ids) and ids[index][0] == letter]
        prompt = sum(row.get("prompt_tokens") or 0 for row in rows)
        if prompt == 0:
            continue
        hits = sum(row.get("prefix_hit_tokens") or 0 for row in rows)
        computed = sum(row.get("computed_prompt_tokens") or 0 for row in rows)
        transfers = sum(row.get("kv_transfers") or 0 for row in rows)
        print(f"| {run['name']} | {pool} | {prompt:.0f} | {100 * hits / prompt:.1f}% | {computed:.0f} | {transfers:.0f} |")
by = {run["name"]: run for run in runs}
def ratio(a, b, key, stat=None):
    if a not in by or b not in by:
        return "-"
    x = by[a][key][stat] if stat else by[a].get(key, 0)
    y = by[b][key][stat] if stat else by[b].get(key, 0)
    return f"{x / y:.2f}x" if y else "-"
print()
print(f"conditional_pd vs rr_pd: mean TTFT {ratio('conditional_pd', 'rr_pd', 'ttft_ms', 'mean')}, "
      f"prompt tokens computed {ratio('conditional_pd', 'rr_pd', 'replica_prefill_tokens_computed')}")
print(f"conditional_pd vs remote_pd: mean TTFT {ratio('conditional_pd', 'remote_pd', 'ttft_ms', 'mean')}")
print(f"conditional_pd_ratio vs rr_pd: mean TTFT {ratio('conditional_pd_ratio', 'rr_pd', 'ttft_ms', 'mean')}, "
      f"prompt tokens computed {ratio('conditional_pd_ratio', 'rr_pd', 'replica_prefill_tokens_computed')}; "
      f"vs remote_pd: mean TTFT {ratio('conditional_pd_ratio', 'remote_pd', 'ttft_ms', 'mean')}")
for pd in ("conditional_pd", "conditional_pd_ratio", "remote_pd", "rr_pd"):
    print(f"{pd} vs aggregated: TPOT p90 {ratio(pd, 'aggregated', 'tpot_ms', 'p90')}, "
          f"mean TTFT {ratio(pd, 'aggregated', 'ttft_ms', 'mean')}")
PY
