#!/usr/bin/env bash
# Tokenizer throughput, kvgate against the reference JavaScript tokenizer on
# the same corpus documents, one after the other in one run, with the ratio.
# Usage: bench/tokenizer/run.sh [FAMILY]   (default qwen3; needs a release
# build in build/ and tools/goldens/node_modules: cd tools/goldens && npm ci)
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
family=${1:-qwen3}
bench="$top/build/bench/tokenizer/kvgate-tokenizer-bench"
[[ -x "$bench" ]] || { echo "build first: cmake --build build --target kvgate-tokenizer-bench" >&2; exit 1; }
[[ -d "$top/tools/goldens/node_modules" ]] || (cd "$top/tools/goldens" && npm ci --no-audit --no-fund --loglevel=error)

kvgate_output=$(KVGATE_BENCH_TOKENIZER=$family "$bench" --benchmark_filter='encode_(prose|code)$|load' \
  --benchmark_min_time=2 --benchmark_format=json)
echo "$kvgate_output" | python3 -c '
import json, sys
for run in json.load(sys.stdin)["benchmarks"]:
    if run["name"].startswith("load"):
        print("load: %.0f ms, tables %.1f MiB for a %.1f MiB file (%.2fx)" % (run["real_time"], run["tables_MiB"], run["file_MiB"], run["tables_per_file_byte"]))
' 
for kind in prose code; do
  ours=$(echo "$kvgate_output" | python3 -c "
import json, sys
for run in json.load(sys.stdin)['benchmarks']:
    if run['name'] == 'encode_$kind': print(run['bytes_per_second'] / 1e6)")
  reference_line=$(node "$top/bench/tokenizer/reference.mjs" "$family" "$kind")
  reference=$(echo "$reference_line" | awk '{print $2}')
  echo "reference: $reference_line"
  python3 -c "print(f'$kind: kvgate {float($ours):.1f} MB/s, reference {float($reference):.1f} MB/s, ratio {float($ours)/float($reference):.1f}x')"
done
