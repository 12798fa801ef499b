#!/usr/bin/env bash
# `kvgate tokenize` end to end on adversarial text (random-letter words up to
# 100 kB, whitespace runs, base64, minified JSON, CJK without spaces: ten
# draws of each, about 20 MB of JSON lines), per family: the whole run and
# the start-up alone (a one-line input), and MB/s, for this build with its
# default threads (one per core) and with `--threads 1` (the figure per
# core). KVGATE_BASELINE=PATH adds another kvgate binary (run with its own
# defaults), alternated with these. KVGATE_ROUNDS=N
# (default 4) runs each binary N times and reports the median of each
# figure: start-up alone moves by a tenth of a second from one run to the
# next on a busy machine, as much as a change to the encoder. The order
# swaps every round (A B, B A, ...): the binary run second in a round came
# out up to a tenth faster, whichever it was.
# Usage: bench/tokenizer/tokenize_command.sh [FAMILY...]   (default: all five;
# needs a release build in build/ and scripts/fetch_tokenizers.sh)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
families=("$@")
[[ ${#families[@]} -gt 0 ]] || families=(qwen3 llama3_1 deepseek_v3 gemma3 gptoss)
input=$(mktemp /tmp/kvgate-adversarial-XXXXXX.jsonl)
trap 'rm -f "$input" "$input.one" "$input.out"' EXIT
build/bench/tokenizer/kvgate-tokenizer-bench --adversarial-jsonl >"$input"
head -1 "$input" >"$input.one"
bytes=$(stat -c %s "$input")
# Each entry is a command (the binary and its options), split on spaces.
binaries=("build/src/kvgate" "build/src/kvgate --threads 1")
[[ -n ${KVGATE_BASELINE:-} ]] && binaries+=("$KVGATE_BASELINE")
seconds() {  # wall-clock seconds of one run of "$@" < $2's input
  local start end
  start=$(date +%s.%N)
  "$@" >"$input.out"
  end=$(date +%s.%N)
  awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f", b - a }'
}
echo "input: $(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1e6 }') MB of JSON lines"
echo
rounds=${KVGATE_ROUNDS:-4}
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo "| family | command | whole run (s) | start-up (s) | MB/s whole run |"
echo "|---|---|---|---|---|"
for family in "${families[@]}"; do
  declare -A wholes=() startups=()
  for ((round = 0; round < rounds; ++round)); do
    order=("${binaries[@]}")
    if ((round % 2 == 1)); then
      order=()
      for ((index = ${#binaries[@]} - 1; index >= 0; --index)); do order+=("${binaries[index]}"); done
    fi
    for binary in "${order[@]}"; do
      read -ra command <<<"$binary"
      whole=$(seconds "${command[0]}" tokenize --tokenizer ".cache/tokenizers/$family" "${command[@]:1}" <"$input")
      errors=$(grep -c '"error"' "$input.out" || true)
      [[ $errors -eq 0 ]] || { echo "$family: $errors lines failed" >&2; exit 1; }
      startup=$(seconds "${command[0]}" tokenize --tokenizer ".cache/tokenizers/$family" "${command[@]:1}" <"$input.one")
      wholes[$binary]+="$whole "
      startups[$binary]+="$startup "
    done
  done
  for binary in "${binaries[@]}"; do
    whole=$(tr ' ' '\n' <<<"${wholes[$binary]}" | grep . | median)
    startup=$(tr ' ' '\n' <<<"${startups[$binary]}" | grep . | median)
    echo "| $family | $binary | $whole | $startup | $(awk -v b="$bytes" -v t="$whole" 'BEGIN { printf "%.1f", b / 1e6 / t }') |"
  done
  unset wholes startups
done
