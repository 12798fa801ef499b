#!/usr/bin/env bash
# Added time to first token on very long chats (hot-path issue): the same
# conversations, each one system prompt of about TOKENS_K thousand tokens of
# distinct prose and a short question, sent straight to one kvgate-sim
# replica and through kvgate (KVGATE_THREADS, default 2) in front of it,
# SESSIONS of them in flight at once. The replica's step costs are zero, so
# its time to first token is its own handling of the body: what the gateway
# adds is the difference. Three runs in one kvgate-bench compare: direct, then
# through kvgate twice, the first with prompts it has never seen (cold) and
# the second with the same prompts again (warm: with a tokenizer, the
# segment cache holds them). The replica's cache is reset before each run.
#   bench/load/long_prompts.sh [TOKENS_K] [SESSIONS] [TOKENIZER_DIR]
# Defaults: 128 (about 500 kB of JSON per request), 64, approximate tokens.
# Report: build/long-prompts-report/.
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
tokens_k=${1:-128}
sessions=${2:-64}
tokenizer=${3:-}
source scripts/lib.sh
cmake --build build -j"${KVGATE_JOBS:-2}" --target kvgate kvgate-sim kvgate-bench >/dev/null
begin_run long-prompts

# Distinct prose per session: corpus prose documents in an order of its own,
# behind a line naming the session, up to about 3.8 bytes per token.
python3 - "$tokens_k" "$sessions" "$work/workload.jsonl" <<'PY'
import gzip, json, random, sys
tokens_k, sessions, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with gzip.open("tests/tokenizer/golden/corpus.jsonl.gz", "rt") as corpus:
    prose = [json.loads(line)["text"] for line in corpus if json.loads(line)["kind"] == "prose"]
with open(out, "w") as file:
    for session in range(sessions):
        order = list(range(len(prose)))
        random.Random(session).shuffle(order)
        parts, size = [f"Session {session}: read these notes before answering.\n"], 0
        for index in order * 8:
            if size >= tokens_k * 1000 * 3.8:
                break
            parts.append(prose[index])
            size += len(prose[index])
        turn = {"user": f"Summarise the notes for session {session} in one line.", "max_tokens": 1}
        file.write(json.dumps({"id": f"s{session}", "system": "\n".join(parts), "turns": [turn]}) + "\n")
PY

export KVGATE_REPLICAS=1 KVGATE_TIME_SCALE=1 KVGATE_THREADS=${KVGATE_THREADS:-2}
[[ -n $tokenizer ]] && export KVGATE_TOKENIZER=$(cd "$tokenizer" && pwd)
export KVGATE_SIM_FLAGS="--prefill-ms-per-token 0 --decode-ms-per-seq 0 --step-overhead-ms 0 --attention-ms-per-context-token 0"
max_model_len=$((tokens_k * 1000 * 2))
start_fleet $((sessions * max_model_len / 16)) "$max_model_len" cache_aware
replica=${resets[1]}
gateway=${runs[1]#*=}
build/bench/load/kvgate-bench compare --run "direct=$replica" --run "cold=$gateway" --run "warm=$gateway" \
  "${resets[@]}" --workload "$work/workload.jsonl" --concurrency "$sessions" --baseline direct \
  --fleet "one kvgate-sim with zero step costs; kvgate threads: $KVGATE_THREADS, ${tokenizer:-approximate tokens}" \
  --out "$work/report"
out=build/long-prompts-report
rm -rf "$out"
mkdir -p "$out"
cp "$work/report/"* "$out/"
python3 - "$out/summary.json" <<'PY'
import json, sys
runs = {run["name"]: run["ttft_ms"] for run in json.load(open(sys.argv[1]))["runs"]}
direct = runs["direct"]
for name in ("cold", "warm"):
    added = {key: runs[name][key] - direct[key] for key in ("p50", "p90", "p99")}
    print(f"{name}: TTFT p50 {runs[name]['p50']:.1f} ms, p99 {runs[name]['p99']:.1f} ms; added over direct: "
          + ", ".join(f"{key} {value:+.1f} ms" for key, value in added.items()))
PY
