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

. hack/lib/build-once.sh
go_install_once controller-gen "$CONTROLLER_TOOLS_VERSION" "about a minute" sigs.k8s.io/controller-tools/cmd/controller-gen
