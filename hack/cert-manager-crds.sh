#!/usr/bin/env bash
# cert-manager's Certificate and Issuer CRDs (deploy/crds/ of its Go module)
# in bin/cert-manager-crds-<version>/; prints the directory. e2e/operator
# installs them to check the operator's cert-manager mode (spec.tls.issuerRef).
set -euo pipefail
exec "$(dirname "$0")/module-crds.sh" cert-manager-crds github.com/cert-manager/cert-manager \
  "${CERT_MANAGER_VERSION:-v1.19.1}" deploy/crds \
  cert-manager.io_certificates.yaml cert-manager.io_issuers.yaml
