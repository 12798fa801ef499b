#!/usr/bin/env bash
# clang-tidy (rules in .clang-tidy) over the pure modules and kvgate-bench's
# pure workload and report code, which carry no Asio templates and so check
# in a few minutes. Needs a configured build/ (compile_commands.json);
# scripts/test.sh runs it after the release build. Files go to
# KVGATE_JOBS (default 2) clang-tidy processes at once.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
files=(src/core/*.cpp src/jsonio/*.cpp src/policy/*.cpp src/openai/*.cpp src/config/*.cpp src/tokenizer/*.cpp
  src/chat_template/*.cpp src/prompt/*.cpp src/prefix/*.cpp src/index/*.cpp src/kv_events/decoder.cpp
  src/kv_events/event_draft.cpp src/kv_events/worker_caches.cpp src/kv_events/model_cache.cpp
  src/kv_events/sequence_tracker.cpp src/kv_events/block_recency.cpp src/kv_events/sequence_slots.cpp src/route/session_table.cpp
  src/route/session_gaps.cpp src/route/router.cpp src/route/attempt.cpp src/route/outlier_filter.cpp src/route/explain.cpp
  src/route/inference_request.cpp src/route/cost_sample.cpp src/cluster/message.cpp src/cluster/peer_table.cpp
  src/workers/slot_occupancy.cpp src/workers/slot_holds.cpp
  src/discovery/discovered_workers.cpp src/obs/recent_activity.cpp src/crypto/*.cpp src/tenant/*.cpp
  src/admission/*.cpp src/picker/ext_proc_messages.cpp src/app/ordered_lines.cpp src/app/tokenize_command.cpp src/app/cpus.cpp
  bench/load/workload.cpp bench/load/answer.cpp bench/load/report.cpp bench/load/report_html.cpp
  bench/load/dial.cpp bench/load/capacity.cpp)
# -Wno-unknown-warning-option: the build's GCC-only flags (-Wno-restrict).
# A finding fails the run (WarningsAsErrors in .clang-tidy): xargs exits
# non-zero when any clang-tidy does.
printf '%s\n' "${files[@]}" |
  xargs -P "${KVGATE_JOBS:-2}" -n 4 clang-tidy -p build --quiet --extra-arg=-Wno-unknown-warning-option 2>&1 |
  { grep -v "warnings generated" || true; }
