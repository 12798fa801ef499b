#!/usr/bin/env bash
# Builds and runs bench/proxy/syscall_cost.cpp: the cost of one system call
# here (see that file). Usage: bench/proxy/syscall_cost.sh
set -euo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
binary=$(mktemp /tmp/kvgate-syscall-cost-XXXXXX)
trap 'rm -f "$binary"' EXIT
c++ -std=c++20 -O2 -o "$binary" "$top/bench/proxy/syscall_cost.cpp"
"$binary"
