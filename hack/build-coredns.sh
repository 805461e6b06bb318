#!/usr/bin/env bash
# Builds CoreDNS, the cluster DNS of the real test cluster (hack/cluster.sh),
# from its Go module at a pinned version, into bin/ as coredns-VERSION plus a
# stable symlink bin/coredns. Static (CGO_ENABLED=0), so it runs in a
# one-layer image. A second run is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

# CoreDNS 1.15 is what Kubernetes 1.36's kubeadm ships (same minor).
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
out="bin/coredns-${COREDNS_VERSION}"

if [ ! -x "$out" ] && command -v flock >/dev/null; then
  # Concurrent callers wait for one build.
  mkdir -p bin/.build
  exec 9>bin/.build/coredns.lock
  flock 9
fi

if [ ! -x "$out" ]; then
  echo ">> building CoreDNS ${COREDNS_VERSION} (first run only, a minute or two)"
  mkdir -p bin
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@${COREDNS_VERSION}"
  mv "$tmp/coredns" "$out"
fi
ln -sfn "$(basename "$out")" bin/coredns
