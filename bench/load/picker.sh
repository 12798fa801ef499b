#!/usr/bin/env bash
# The endpoint picker against the proxy, on the same replicas in one
# invocation, and the picker's own cost:
#  1. the demo's chat workload (kvgate-bench's "chat" preset, SESSIONS
#     sessions, default 200) at 70% load, through kvgate's proxy with
#     cache_aware, through a real Envoy (deploy/envoy/envoy.yaml) asking
#     kvgate's picker with cache_aware (envoy_cache_aware), and through
#     kvgate-epp-dataplane (a stand-in for Envoy's data path) asking it
#     (picker_cache_aware): hit rate, TTFT;
#  2. the WEKA Claude Code sessions at 70% (trace.sh weka70's scaling,
#     WEKA sessions, default 75), the same two targets;
#  3. kvgate-epp-load against the picker: a 32k-token chat's pick latency
#     beside the gateway's own decision time (kvgate_picker_pick_seconds),
#     and small requests per second with kvgate pinned to one CPU;
#  4. a 32k-token chat through real Envoy asking the picker against the
#     same Envoy configuration routing straight to the one replica (no
#     ext_proc), requests alternating between the two: what the picker
#     adds to the client's latency.
# Reports land in build/picker-report/ (chat/, weka/, cost.json, envoy.json).
# KVGATE_PICKER_STEPS: the steps to run (default "1 2 3 4").
#   bench/load/picker.sh [SESSIONS] [WEKA_SESSIONS]
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
traces=${KVGATE_TRACES:-../shared/data/traces}
sessions=${1:-200}
weka_sessions=${2:-75}
source scripts/lib.sh
[[ -x .tools/bin/envoy ]] || bash scripts/install_tools.sh
cmake --build build -j"${KVGATE_JOBS:-2}" \
  --target kvgate kvgate-sim kvgate-bench kvgate-epp-dataplane kvgate-epp-load >"${TMPDIR:-/tmp}/kvgate-picker-build.log" ||
  { tail -20 "${TMPDIR:-/tmp}/kvgate-picker-build.log" >&2; exit 1; }
out=build/picker-report
rm -rf "$out"
mkdir -p "$out"
targets=(cache_aware envoy_cache_aware picker_cache_aware)
steps=" ${KVGATE_PICKER_STEPS:-1 2 3 4} "
step() { [[ "$steps" == *" $1 "* ]]; }

step 1 && echo "== 1. the chat workload at 70% load" && (
  export KVGATE_TIME_SCALE=2
  begin_run picker-chat
  start_fleet 4000 2560 "${targets[@]}" >/dev/null
  build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" --workload chat --sessions "$sessions" \
    --load 0.7 --concurrency 64 --baseline cache_aware --fleet "$fleet" --out "$work/report" >/dev/null
  mkdir -p "$out/chat" && cp "$work/report/"* "$out/chat/"
)
step 1 && sed -n '/^| run | requests/,/^$/p' "$out/chat/report.md"

step 2 && echo "== 2. the WEKA sessions at 70% load" && (
  export KVGATE_REPLICAS=4 KVGATE_TIME_SCALE=2
  weka_workload "$traces" "$weka_sessions"
  begin_run picker-weka
  start_fleet 2000 32000 "${targets[@]}" >/dev/null
  build/bench/load/kvgate-bench compare "${runs[@]}" "${resets[@]}" "${workload[@]}" --load 0.70 \
    --baseline cache_aware --fleet "$fleet" --out "$work/report" >/dev/null
  mkdir -p "$out/weka" && cp "$work/report/"* "$out/weka/"
)
step 2 && sed -n '/^| run | requests/,/^$/p' "$out/weka/report.md"

step 3 && echo "== 3. the picker's own cost" && (
  export KVGATE_TIME_SCALE=2
  begin_run picker-cost
  start_fleet 4000 40000 picker_cache_aware >/dev/null
  admin=${admins[0]#*=}
  epp=${epps[0]#*=}
  gateway_pid=$(pgrep -f "kvgate --config $work/picker_cache_aware.yaml" | head -1)
  # The gateway on CPU 0 (all its threads: I/O, gRPC, control), the client on CPU 1.
  taskset -a -p 0x1 "$gateway_pid" >/dev/null
  load=(taskset 0x2 build/bench/epp/kvgate-epp-load --picker "$epp" --admin "$admin")
  "${load[@]}" --prompt-tokens 32768 --count 50 >/dev/null  # warm-up: tokeniser caches, connections
  long=$("${load[@]}" --prompt-tokens 32768 --count 1000 --concurrency 1)
  small=$("${load[@]}" --prompt-tokens 64 --count 20000 --concurrency 8)
  printf '{"long_chat": %s, "small_requests_one_core": %s}\n' "$long" "$small" >"$out/cost.json"
)
step 3 && cat "$out/cost.json"

step 4 && echo "== 4. what the picker adds behind a real Envoy, 32k-token chat" && (
  export KVGATE_TIME_SCALE=1000 KVGATE_REPLICAS=1
  begin_run picker-envoy
  start_fleet 4000 40000 envoy_cache_aware >/dev/null
  picked=${runs[1]#*=}
  admin=${admins[0]#*=}
  replica=$(curl -s "http://$admin/debug/workers" | python3 -c 'import json,sys; print(json.load(sys.stdin)["workers"][0]["url"][7:])')
  # The shipped bootstrap without the ext_proc filter, its pool the replica.
  python3 - "$replica" deploy/envoy/envoy.yaml >"$work/direct.yaml" <<'PY'
import re, sys
host, port = sys.argv[1].rsplit(":", 1)
text = open(sys.argv[2]).read()
text = re.sub(r"(?m)^                  - name: envoy\.filters\.http\.ext_proc\n(?:                    .*\n)+", "", text)
text = re.sub(r"(?m)^    - name: pool\n(?:      .*\n)+",
              "    - name: pool\n      type: STATIC\n      connect_timeout: 5s\n      load_assignment:\n"
              "        cluster_name: pool\n        endpoints:\n          - lb_endpoints:\n"
              f"              - endpoint: {{address: {{socket_address: {{address: {host}, port_value: {port}}}}}}}\n",
              text)
print(text, end="")
PY
  ENVOY_CONFIG="$work/direct.yaml" start_envoy direct 9
  direct="http://127.0.0.1:$envoy_port"
  python3 - "$picked" "$direct" "$out/envoy.json" <<'PY'
import json, sys, time, urllib.request
picked, direct, out = sys.argv[1:]
words = " ".join(f"w{i}" for i in range(1, 40000))
def body(chars):
    return json.dumps({"model": "demo-model", "max_tokens": 1,
                       "messages": [{"role": "user", "content": words[:chars]}]}).encode()
def once(base, data):
    request = urllib.request.Request(base + "/v1/chat/completions", data, {"content-type": "application/json"})
    start = time.perf_counter()
    with urllib.request.urlopen(request) as response:
        response.read()
    return (time.perf_counter() - start) * 1000
def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]
report = {}
# 32k tokens (kvgate's approximation: 4 bytes a token), and a 64-token chat.
for name, data in (("chat_32k_tokens", body(32768 * 4)), ("chat_64_tokens", body(64 * 4))):
    for base in (picked, direct):
        for _ in range(20):
            once(base, data)  # warm-up: tokeniser caches, connections, the replica's prefix cache
    times = {"picker": [], "direct": []}
    for _ in range(300):  # alternating, so both see the same machine
        times["picker"].append(once(picked, data))
        times["direct"].append(once(direct, data))
    row = {side: {"p50_ms": round(pct(v, 0.5), 3), "p99_ms": round(pct(v, 0.99), 3)} for side, v in times.items()}
    row["added_p50_ms"] = round(row["picker"]["p50_ms"] - row["direct"]["p50_ms"], 3)
    row["added_p99_ms"] = round(row["picker"]["p99_ms"] - row["direct"]["p99_ms"], 3)
    report[name] = row
json.dump(report, open(out, "w"), indent=1)
PY
)
step 4 && cat "$out/envoy.json"
:
