#!/usr/bin/env bash
# Validates deploy/kubernetes (run by the test command through ctest):
# every kustomization renders with `kubectl kustomize`, every rendering and
# the plain manifests pass check.mjs (schemas, selectors, ports, probes, the
# mounted config through `kvgate check-config`, the drain grace), the plain
# manifests are the base's rendering, and check.mjs catches the mistakes
# selftest.mjs makes on purpose.
#   deploy/kubernetes/check/run.sh PATH/TO/kvgate
set -euo pipefail
kvgate=${1:?usage: run.sh PATH/TO/kvgate}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
for tool in kubectl node; do
  command -v "$tool" >/dev/null || { echo "check: $tool not found: run scripts/setup.sh test" >&2; exit 1; }
done
[[ -d "$here/node_modules/kubernetes-models" ]] || { echo "check: npm packages missing: run scripts/setup.sh test" >&2; exit 1; }
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for dir in "$top/base" "$top"/overlays/*/; do
  name=$(basename "$dir")
  # kustomize v5 warns about fields v2 (Debian 12's kubectl) still needs.
  kubectl kustomize "$dir" >"$scratch/$name.yaml" 2> >(grep -v "is deprecated" >&2)
  node "$here/check.mjs" "$scratch/$name.yaml" --kvgate "$kvgate"
done
node "$here/check.mjs" "$top/kvgate.yaml" --kvgate "$kvgate"
node "$here/same.mjs" "$top/kvgate.yaml" "$scratch/base.yaml"
node "$here/selftest.mjs" "$scratch/base.yaml" --kvgate "$kvgate"
node "$here/check_envoy.mjs" "$top/../envoy/envoy.yaml"
echo "deploy/kubernetes: all checks passed"
