#!/usr/bin/env bash
# clang-tidy (rules in .clang-tidy) over the pure modules, which carry no
# Asio templates and so check in under a minute. Needs a configured build/
# (compile_commands.json); scripts/test.sh runs it after the release build.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
clang-tidy -p build --quiet src/core/*.cpp src/policy/*.cpp src/openai/*.cpp src/config/*.cpp src/tokenizer/*.cpp \
  src/chat_template/*.cpp src/prompt/*.cpp 2>&1 \
  | { grep -v "warnings generated" || true; }
