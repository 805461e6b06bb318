#!/usr/bin/env bash
# Copies the prometheus-operator's ServiceMonitor and PrometheusRule CRDs into
# bin/prometheus-operator-crds-<version>/ and prints that directory's absolute
# path on stdout, for envtest (e2e/monitoring installs them in its
# kube-apiserver).
#
# The version is the one go.mod requires of the API types module
# (github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring),
# so the CRDs always match the Go types the operator writes. The YAML is not
# in that module; it comes from the root module at the same version
# (example/prometheus-operator-crd/), fetched through the Go module proxy
# with `go mod download`: no GitHub access needed. A second run is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

CRDS=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml)

version=$(go list -m -f '{{.Version}}' github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring)
out="bin/prometheus-operator-crds-${version}"

have_all() {
  for f in "${CRDS[@]}"; do [ -s "$out/$f" ] || return 1; done
}
if have_all; then
  echo "$PWD/$out"
  exit 0
fi

echo ">> fetching the prometheus-operator ${version} CRDs from the Go module proxy (first run only)" >&2
# Outside this module, so go.mod and go.sum are left alone.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
dir=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator@${version}" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$dir" ] || [ ! -d "$dir/example/prometheus-operator-crd" ]; then
  echo "prometheus-operator-crds.sh: github.com/prometheus-operator/prometheus-operator@${version} has no example/prometheus-operator-crd" >&2
  exit 1
fi
mkdir -p "$out"
for f in "${CRDS[@]}"; do
  cp "$dir/example/prometheus-operator-crd/$f" "$out/$f.tmp"
  chmod 0644 "$out/$f.tmp" # the module cache is read-only
  mv "$out/$f.tmp" "$out/$f"
done
echo "$PWD/$out"
