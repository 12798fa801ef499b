#!/usr/bin/env bash
# Installs everything kvgate needs to build, test and benchmark on Debian 12.
# Idempotent: packages already present are skipped, so the quick start and CI
# can call it on every run. Must run as root (apt-get).
set -euo pipefail

build_packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  libboost1.81-dev nlohmann-json3-dev libspdlog-dev prometheus-cpp-dev
  libxxhash-dev libyaml-cpp-dev libzmq3-dev cppzmq-dev
  libgtest-dev libgmock-dev libbenchmark-dev libpcre2-dev libutf8proc-dev zlib1g-dev libabsl-dev libssl-dev
  libsimdjson-dev libmimalloc-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libhiredis-dev
)
# Tests: clang (and lld) for the sanitizer build and the libFuzzer targets,
# clang-format for the format check, promtool to
# validate /metrics and the alert rules, curl for scripts; nginx and HAProxy
# are the peers a kvgate-bench test compares against (bench/peers), python3
# finds free ports and makes the real llama-server suite's tokenizer folder
# (tools/gguf_tokenizer.py); chromium (headless) renders the status page and the
# bench reports (scripts/screenshot.py); iproute2's ss destroys live TCP
# connections in the fault suite.
# python3-venv holds the pinned Envoy (scripts/install_tools.sh).
# redis-server is the shared state of several kvgate replicas (cluster:);
# the cluster suite starts its own.
test_packages=(clang lld clang-format clang-tidy libclang-rt-14-dev prometheus curl nginx-light haproxy python3 python3-venv chromium iproute2 redis-server)
# Benchmarks: wrk as the load generator.
bench_packages=(wrk)

want=("${build_packages[@]}")
case "${1:-build}" in
  build) ;;
  test) want+=("${test_packages[@]}") ;;
  bench) want+=("${test_packages[@]}" "${bench_packages[@]}") ;;
  *) echo "usage: $0 [build|test|bench]" >&2; exit 64 ;;
esac

missing=()
for package in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
# Node.js runs the OpenAI SDK client tests; any Node >= 18 will do, so an
# existing installation (e.g. from NodeSource) is kept.
if [[ "${1:-build}" != build ]] && ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
# kubectl renders the Kustomize overlays in the tests; any kubectl will do
# (Debian 12's kubernetes-client is 1.20, whose kustomize reads the overlays).
if [[ "${1:-build}" != build ]] && ! command -v kubectl >/dev/null 2>&1; then
  missing+=(kubernetes-client)
fi

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing packages (${missing[*]}); run as root" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The nginx and HAProxy packages start default services where a service
# manager exists; tests and benchmarks run their own, so those are stopped.
if [[ "${1:-build}" != build ]] && command -v service >/dev/null 2>&1; then
  service nginx stop >/dev/null 2>&1 || true
  service haproxy stop >/dev/null 2>&1 || true
  service redis-server stop >/dev/null 2>&1 || true
fi

if [[ "${1:-build}" != build ]]; then
  top=$(cd "$(dirname "$0")/.." && pwd)
  # Envoy and llm-d's vLLM simulator, pinned, into .tools/.
  bash "$top/scripts/install_tools.sh"
  # Real model tokenizers for the tokenizer goldens and benchmarks.
  bash "$top/scripts/fetch_tokenizers.sh"
  if [[ ! -d "$top/tests/node/node_modules/openai" ]]; then
    echo "setup: installing the pinned npm packages for tests/node"
    (cd "$top/tests/node" && npm ci --no-audit --no-fund --loglevel=error)
  fi
  # The Kubernetes manifests' checker (schemas from kubernetes-models).
  if [[ ! -d "$top/deploy/kubernetes/check/node_modules/kubernetes-models" ]]; then
    echo "setup: installing the pinned npm packages for deploy/kubernetes/check"
    (cd "$top/deploy/kubernetes/check" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
