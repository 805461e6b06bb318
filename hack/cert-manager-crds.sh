#!/usr/bin/env bash
# Copies cert-manager's Certificate and Issuer CRDs into
# bin/cert-manager-crds-<version>/ and prints that directory's absolute path
# on stdout, for envtest (e2e/operator installs them to check the operator's
# cert-manager mode, spec.tls.issuerRef).
#
# The YAML ships in cert-manager's Go module (deploy/crds/), fetched through
# the Go module proxy with `go mod download`: no GitHub access needed. A
# second run is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=${CERT_MANAGER_VERSION:-v1.19.1}
CRDS=(cert-manager.io_certificates.yaml cert-manager.io_issuers.yaml)
out="bin/cert-manager-crds-${VERSION}"

have_all() {
  for f in "${CRDS[@]}"; do [ -s "$out/$f" ] || return 1; done
}
if have_all; then
  echo "$PWD/$out"
  exit 0
fi

echo ">> fetching the cert-manager ${VERSION} CRDs from the Go module proxy (first run only)" >&2
# Outside this module, so go.mod and go.sum are left alone.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "github.com/cert-manager/cert-manager@${VERSION}" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir/deploy/crds" ]; then
  echo "cert-manager-crds.sh: github.com/cert-manager/cert-manager@${VERSION} has no deploy/crds" >&2
  exit 1
fi
mkdir -p "$out"
for f in "${CRDS[@]}"; do
  cp "$dir/deploy/crds/$f" "$out/$f.tmp"
  chmod 0644 "$out/$f.tmp" # the module cache is read-only
  mv "$out/$f.tmp" "$out/$f"
done
echo "$PWD/$out"
