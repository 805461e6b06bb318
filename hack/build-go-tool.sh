#!/usr/bin/env bash
# Builds one of the release tools from its Go module at a pinned version, into
# bin/ as NAME-VERSION plus a stable symlink bin/NAME, and prints nothing on
# stdout. A second run is a no-op.
#
#   hack/build-go-tool.sh ko           images (hack/ko-images.sh)
#   hack/build-go-tool.sh helm         the chart: lint, template, package, install
#   hack/build-go-tool.sh kubebuilder  its helm/v2-alpha plugin writes the chart's
#                                      templates from kustomize (hack/helm-chart.sh)
#   hack/build-go-tool.sh crd-ref-docs docs/api-reference.md from the API types
#   hack/build-go-tool.sh staticcheck  the linter of make vet and make test
#
# First builds, measured from empty Go module and build caches on the
# project's 2-core machine, which other builds shared at the time (load
# average about 5): ko 87 s, helm 204-292 s, kubebuilder 61-164 s.
set -euo pipefail
cd "$(dirname "$0")/.."

name=${1:?usage: $0 ko|helm|kubebuilder|crd-ref-docs|staticcheck}
case "$name" in
ko)
  # The newest release; ko's own goreleaser stamps the version like this.
  version=${KO_VERSION:-v0.19.1}
  pkg=github.com/google/ko
  ldflags="-X github.com/google/ko/pkg/commands.Version=${version#v}"
  ;;
helm)
  # Helm 4: v3 gets security fixes only. Charts are apiVersion v2, which
  # Helm 3 installs as well. The -X flags are those of helm's Makefile for a
  # tagged build (`helm version` reports the release, not "unreleased").
  version=${HELM_VERSION:-v4.3.1}
  pkg=helm.sh/helm/v4/cmd/helm
  ldflags="-X helm.sh/helm/v4/internal/version.version=${version} -X helm.sh/helm/v4/internal/version.metadata= -X helm.sh/helm/v4/internal/version.gitTreeState=clean"
  ;;
kubebuilder)
  # Only its helm/v2-alpha plugin is used; kubebuilder reads its version from
  # the module's build info.
  version=${KUBEBUILDER_VERSION:-v4.16.0}
  pkg=sigs.k8s.io/kubebuilder/v4
  ldflags=""
  ;;
crd-ref-docs)
  # Elastic's generator, as used by ECK and many operators: it reads the
  # kubebuilder markers of api/ and renders Markdown.
  version=${CRD_REF_DOCS_VERSION:-v0.3.0}
  pkg=github.com/elastic/crd-ref-docs
  ldflags=""
  ;;
staticcheck)
  # The Go linter make vet runs after go vet (staticcheck.conf).
  version=${STATICCHECK_VERSION:-v0.8.2}
  pkg=honnef.co/go/tools/cmd/staticcheck
  ldflags=""
  ;;
*)
  echo "build-go-tool: unknown tool $name (ko, helm, kubebuilder, crd-ref-docs or staticcheck)" >&2
  exit 2
  ;;
esac

. hack/lib/build-once.sh
# go install names the program after the package's last element, or the one
# before a major version suffix (kubebuilder/v4): NAME for every tool here.
go_install_once "$name" "$version" "" "$pkg" "$ldflags"
