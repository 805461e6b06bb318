#!/usr/bin/env bash
# Builds controller-gen (CRD and RBAC manifests, deepcopy code) from its Go
# module at a pinned version, into bin/ as controller-gen-VERSION plus a stable
# symlink bin/controller-gen. A second run is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

# controller-tools v0.23 is built against k8s.io/* v0.37, the same line as
# sigs.k8s.io/controller-runtime v0.25 in our go.mod (v0.22 is too; v0.23 is the
# newest release on it). Bump together with controller-runtime.
CONTROLLER_TOOLS_VERSION="${CONTROLLER_TOOLS_VERSION:-v0.23.0}"
out="bin/controller-gen-${CONTROLLER_TOOLS_VERSION}"

if [ ! -x "$out" ]; then
  echo ">> building controller-gen ${CONTROLLER_TOOLS_VERSION} (first run only, about a minute)"
  mkdir -p bin
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install -trimpath -ldflags "-s -w" "sigs.k8s.io/controller-tools/cmd/controller-gen@${CONTROLLER_TOOLS_VERSION}"
  mv "$tmp/controller-gen" "$out"
fi
ln -sfn "$(basename "$out")" bin/controller-gen
