#!/usr/bin/env bash
# The prometheus-operator's ServiceMonitor, PodMonitor and PrometheusRule CRDs in
# bin/prometheus-operator-crds-<version>/; prints the directory, for envtest
# (e2e/monitoring, e2e/deploy). The version is the one go.mod requires of the
# API types module, so the CRDs match the Go types the operator writes; the
# YAML is not in that module but in the root module at the same version
# (example/prometheus-operator-crd/).
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(go list -m -f '{{.Version}}' github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring)
exec hack/module-crds.sh prometheus-operator-crds github.com/prometheus-operator/prometheus-operator \
  "$version" example/prometheus-operator-crd \
  monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_podmonitors.yaml monitoring.coreos.com_prometheusrules.yaml
