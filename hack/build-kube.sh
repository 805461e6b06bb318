#!/usr/bin/env bash
# Builds Kubernetes binaries (kube-apiserver and kubectl for envtest; the
# whole control plane, kubelet and kube-proxy for the real test cluster of
# hack/cluster.sh) from the k8s.io/kubernetes Go module at a pinned version,
# into bin/ as NAME-VERSION plus a stable symlink bin/NAME. A second run is a
# no-op.
#
# k8s.io/kubernetes cannot be built with a plain `go install mod@version`: its
# go.mod requires the staging modules (k8s.io/api, k8s.io/client-go, ...) at
# v0.0.0 and replaces them with ./staging/... directories. So we generate a
# small wrapper module that requires k8s.io/kubernetes and replaces every
# staging module with its published v0.MINOR.PATCH tag; the list of staging
# modules is read from k8s.io/kubernetes's own go.mod, never hand-maintained.
#
# Why 1.36 and not the newest: this project's build and CI machines run cgroup
# v1, which upstream has deprecated, and kubelet 1.38 will likely want
# containerd 2.x (Debian ships 1.x). The main module's client libraries
# (k8s.io/* v0.37) are fine against a 1.36 server (client-go supports +/-1
# minor). Keep internal/testutil/envtestassets.KubeVersion in sync (a unit test
# there checks it).
set -euo pipefail
cd "$(dirname "$0")/.."

KUBE_VERSION="${KUBE_VERSION:-v1.36.3}"
# Binaries to build (package k8s.io/kubernetes/cmd/NAME): by default everything
# the real single-node test cluster (hack/cluster.sh) runs. envtest asks for
# kube-apiserver and kubectl only (hack/envtest-assets.sh).
KUBE_BINARIES="${KUBE_BINARIES:-kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl}"

missing_binaries() {
  missing=()
  for name in $KUBE_BINARIES; do
    [ -x "bin/${name}-${KUBE_VERSION}" ] || missing+=("$name")
  done
}

missing_binaries
if [ "${#missing[@]}" -gt 0 ] && command -v flock >/dev/null; then
  # Concurrent callers (make -j, parallel test setups) wait for one build.
  mkdir -p bin/.build
  exec 9>bin/.build/kube.lock
  flock 9
  missing_binaries
fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo ">> building Kubernetes ${KUBE_VERSION}: ${missing[*]} (first run only, several minutes)"
  mkdir -p bin
  root=$(pwd)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT

  # k8s.io/kubernetes's own go.mod, from the module cache, and its release time.
  # Queried from an empty directory so that no go.mod around us is involved.
  kube_gomod=$(cd "$tmp" && go mod download "k8s.io/kubernetes@${KUBE_VERSION}" &&
    go list -m -f '{{.GoMod}}' "k8s.io/kubernetes@${KUBE_VERSION}")
  release_time=$(cd "$tmp" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "k8s.io/kubernetes@${KUBE_VERSION}")
  [ -f "$kube_gomod" ] || { echo "cannot find go.mod of k8s.io/kubernetes@${KUBE_VERSION}" >&2; exit 1; }

  # v1.36.3 -> staging modules are tagged v0.36.3.
  ver="${KUBE_VERSION#v}"
  major="${ver%%.*}"
  rest="${ver#*.}"
  minor="${rest%%.*}"
  staging_version="v0.${rest}"

  wrapper="bin/.build/kube-wrapper-${KUBE_VERSION}"
  rm -rf "$wrapper"
  mkdir -p "$wrapper"
  {
    echo "module distcache.local/kube-wrapper"
    echo
    sed -n 's/^go \(.*\)$/go \1/p' "$kube_gomod" | head -n1
    # Kubernetes builds with its own go.mod as the main module, so carry over its
    # godebug settings (only the main module's apply).
    sed -n '/^godebug /p' "$kube_gomod"
    echo
    echo "require k8s.io/kubernetes ${KUBE_VERSION}"
    echo
    echo "replace ("
    sed -n 's#^\(replace\)\{0,1\}[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/.*$#\t\2 => \2 '"${staging_version}"'#p' "$kube_gomod"
    echo ")"
    echo
    for name in $KUBE_BINARIES; do
      echo "tool k8s.io/kubernetes/cmd/${name}"
    done
  } >"$wrapper/go.mod"
  grep -q '=> k8s.io/api ' "$wrapper/go.mod" || { echo "no staging replace lines found in $kube_gomod" >&2; exit 1; }

  # Version stamping as Kubernetes's hack/lib/version.sh does it; without it
  # kubectl cannot parse the server version. buildDate is the release's time, so
  # the build is reproducible.
  ldflags="-s -w"
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X ${pkg}.gitVersion=${KUBE_VERSION}"
    ldflags+=" -X ${pkg}.gitMajor=${major}"
    ldflags+=" -X ${pkg}.gitMinor=${minor}"
    ldflags+=" -X ${pkg}.gitTreeState=clean"
    # The commit is unknown from the module proxy; empty beats the "$Format:%H$"
    # placeholder in the source.
    ldflags+=" -X ${pkg}.gitCommit="
    ldflags+=" -X ${pkg}.buildDate=${release_time}"
  done

  pkgs=()
  for name in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/${name}"); done
  (
    cd "$wrapper"
    GOFLAGS=-mod=mod go mod tidy
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
  )
  for name in "${missing[@]}"; do
    mv "$tmp/${name}" "${root}/bin/${name}-${KUBE_VERSION}"
  done
fi

for name in $KUBE_BINARIES; do
  ln -sfn "${name}-${KUBE_VERSION}" "bin/${name}"
done
