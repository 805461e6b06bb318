#!/usr/bin/env bash
# Builds CoreDNS, the cluster DNS of the real test cluster (hack/cluster.sh),
# from its Go module at a pinned version, into bin/ as coredns-VERSION plus a
# stable symlink bin/coredns. Static (CGO_ENABLED=0), so it runs in a
# one-layer image. A second run is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

# CoreDNS 1.15 is what Kubernetes 1.36's kubeadm ships (same minor).
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"

. hack/lib/build-once.sh
go_install_once coredns "$COREDNS_VERSION" "a minute or two" github.com/coredns/coredns
