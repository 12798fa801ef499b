#!/usr/bin/env bash
# Builds and runs every test: the release build (the programs and the
# suites run once: OpenAI SDK, deploy checks, bench runs), the ASan+UBSan
# build (every other unit and integration suite), ThreadSanitizer on the
# shared-memory code, libFuzzer smoke runs, clang-tidy and the format check.
# Usage: scripts/test.sh   (from anywhere; installs what is missing first)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
jobs=${KVGATE_JOBS:-2}
# Each stage says how long it took: CI's budget is 30 minutes on 2 cores.
stage() { echo "== $1   (at ${SECONDS}s)"; }

bash scripts/setup.sh test

stage "format check"
mapfile -t sources < <(git ls-files '*.cpp' '*.hpp' 2>/dev/null || find src include tests bench -name '*.[ch]pp')
clang-format --dry-run -Werror "${sources[@]}"

# The suites that run once, in the release pass: the SDK test and the deploy
# checks (labels node, deploy), the simulator's own suite (a release fixture
# in the sanitizer pass), kvgate-bench's runs and the cost model's learning
# and the llama.cpp fleet scenario (they mostly wait on simulated replicas),
# the real-model folders, the real llama-server replicas (tests/integration/
# llamacpp_test.cpp: the engine is a release binary either way), the
# tokenizer goldens of the families whose
# encoder paths Qwen3 (byte-level) and Gemma 3 (SentencePiece) already take
# under the sanitizers, the dashboard's metric names and the session table's
# million-key cap. The sanitizer pass runs every other test.
once='^(Sim|Bench|ExactTokens|TokenizeCommand|Deploy|RouterLearning|LlamaServer)\.|^LlamaCppFleet\.Predictions|^SessionTable\.AMillion|^Families/Golden\..*"(llama3_1|deepseek_v3|gptoss)"|^Families/LongWords\.'

stage "release build (programs, fixtures, the suites run once)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$jobs" --target kvgate_release_pass
# The picker behind a real Envoy runs in both passes: the release build is
# what a data plane meets, the sanitizers check the picker's stream handling.
(cd build && ctest --output-on-failure -j"$jobs" --timeout 180 -R "$once|^Envoy\\.|^EnvoyFleet\\." &&
  ctest --output-on-failure -j"$jobs" --timeout 180 -L 'node|deploy')

stage "clang-tidy (pure modules)"
bash scripts/lint.sh

stage "ASan+UBSan build"
# The replicas the integration suites start (kvgate-sim, the test upstream)
# are fixtures, not the gateway under test: the release build's serve.
# Clang builds it: the same sanitizers in about half GCC's compile time on
# the Beast-heavy files (5 min instead of 10 on two cores), and a second
# compiler's warnings on every file.
# The libFuzzer targets are built here too (KVGATE_FUZZ): they link the
# same module libraries, so the parsers compile once for both passes.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DKVGATE_SANITIZE=ON -DKVGATE_FUZZ=ON -DKVGATE_BUILD_BENCH=OFF \
  -DCMAKE_CXX_COMPILER=clang++ -DKVGATE_TEST_FIXTURES_FROM="$top/build" >/dev/null
cmake --build build-asan -j"$jobs"
# Leak checks stay on: a leak fails the run.
(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --output-on-failure -j"$jobs" --timeout 300 -LE 'node|deploy' \
  -E "$once")
stage "ThreadSanitizer (the code shared between threads without Asio)"
# The prefix index (one writer, lock-free readers), the tokenizer's shared
# segment cache, the worker state atomics (and drift window), the router's
# session table, the published routing-table snapshot, `kvgate
# tokenize`'s ordered lines and the cluster's outbox, each with a
# multi-threaded test.
cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVGATE_SANITIZE_THREAD=ON >/dev/null
cmake --build build-tsan -j"$jobs" --target index_test tokenizer_test workers_test session_table_test ordered_lines_test core_test cluster_test
for target in index_test tokenizer_test workers_test ordered_lines_test cluster_test; do
  TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/"$target" --gtest_brief=1
done
TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/session_table_test --gtest_brief=1 --gtest_filter="*Threads*"
TSAN_OPTIONS=halt_on_error=1 build-tsan/tests/core_test --gtest_brief=1 --gtest_filter="Published.*"
stage "fuzz smoke (libFuzzer, built in the ASan+UBSan pass)"
fuzz_seconds=${KVGATE_FUZZ_SECONDS:-4}
for target in inspect_request config kv_event_decoder prometheus_text tokenizer chat_template ext_proc prefill_answer cluster_message; do
  # Work on a copy: libFuzzer adds what it finds to the corpus folder.
  scratch=$(mktemp -d)
  cp fuzz/corpus/"$target"/* "$scratch"/
  build-asan/fuzz/"$target"_fuzzer "$scratch" -max_total_time="$fuzz_seconds" -timeout=5 -rss_limit_mb=2048 2>&1 | tail -1
  rm -rf "$scratch"
done
echo "== all tests passed in ${SECONDS}s"
