#!/usr/bin/env bash
# Writes kvgate.yaml, the plain manifests (the base rendered), for users
# without kustomize: kubectl apply -f deploy/kubernetes/kvgate.yaml
# Run after changing base/; the test command fails while they differ.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
{
  echo "# kvgate on Kubernetes, plain manifests: deploy/kubernetes/base rendered by"
  echo "# deploy/kubernetes/render.sh (do not edit; edit base/ and re-render)."
  echo "# Edit the ConfigMap's kvgate.yaml (the workers) before applying."
  kubectl kustomize "$here/base"
} >"$here/kvgate.yaml"
echo "wrote $here/kvgate.yaml"
