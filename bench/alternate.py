#!/usr/bin/env python3
"""Side-by-side timings of Google Benchmark binaries on a noisy machine.

Runs each binary in turn, ROUNDS times, on the benchmarks FILTER selects,
and prints per benchmark each binary's median real time and its time ratio
to the first binary in every round. Quote the per-round ratios: a burst of
load on the machine moves one round, not the rest. The order swaps every
round (A B, B A, ...): on this machine the binary run second in a pair was
hit by bursts more often (1.4-1.8x in some rounds, whichever binary it was).

Usage: bench/alternate.py FILTER ROUNDS BINARY [BINARY...]
Environment: MIN_TIME (seconds per benchmark, default 0.5); the binaries'
own variables pass through (KVGATE_BENCH_TOKENIZER=gptoss for the tokenizer
benchmark). Example, the build before a change against this one:
  KVGATE_BENCH_TOKENIZER=qwen3 bench/alternate.py 'encode_adversarial/base64$' 3 \\
      /tmp/before/kvgate-tokenizer-bench build/bench/tokenizer/kvgate-tokenizer-bench
"""
import collections
import json
import os
import statistics
import subprocess
import sys


def run_once(binary, pattern, min_time):
    output = subprocess.run(
        [binary, f"--benchmark_filter={pattern}", f"--benchmark_min_time={min_time}", "--benchmark_format=json"],
        capture_output=True, text=True, check=True).stdout
    return {run["name"]: run["real_time"] for run in json.loads(output)["benchmarks"]
            if run.get("run_type") != "aggregate"}


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    pattern, rounds, binaries = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    min_time = os.environ.get("MIN_TIME", "0.5")
    times = collections.defaultdict(lambda: collections.defaultdict(list))
    for round_index in range(rounds):
        for binary in binaries if round_index % 2 == 0 else binaries[::-1]:
            for name, real_time in run_once(binary, pattern, min_time).items():
                times[name][binary].append(real_time)
    for name, by_binary in times.items():
        first = by_binary[binaries[0]]
        cells = []
        for binary in binaries:
            ratios = " ".join(f"{mine / theirs:.2f}" for mine, theirs in zip(by_binary[binary], first))
            cells.append(f"{statistics.median(by_binary[binary]):9.3f} ({ratios})")
        print(f"{name:50s} | " + " | ".join(cells))


if __name__ == "__main__":
    main()
