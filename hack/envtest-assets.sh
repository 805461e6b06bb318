#!/usr/bin/env bash
# Ensures the binaries controller-runtime's envtest runs (kube-apiserver, etcd,
# kubectl) are built and laid out in bin/k8s/<version>-<os>-<arch>/, the same
# layout setup-envtest uses, and prints that directory's absolute path, for
#   KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh) go test ./...
# Build progress goes to stderr; a second run is a no-op. The versions are
# pinned in hack/build-kube.sh and hack/build-etcd.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

# Only what envtest needs, even when build-kube.sh's default list grows.
KUBE_BINARIES="kube-apiserver kubectl" hack/build-kube.sh >&2
hack/build-etcd.sh >&2

apiserver=$(readlink bin/kube-apiserver) # kube-apiserver-vX.Y.Z
kube_version="${apiserver#kube-apiserver-}"
dir="bin/k8s/${kube_version#v}-$(go env GOOS)-$(go env GOARCH)"
mkdir -p "$dir"
ln -sfn "../../${apiserver}" "$dir/kube-apiserver"
ln -sfn "../../$(readlink bin/kubectl)" "$dir/kubectl"
ln -sfn "../../$(readlink bin/etcd)" "$dir/etcd"
for name in kube-apiserver etcd kubectl; do
  [ -x "$dir/$name" ] || { echo "envtest-assets: $dir/$name is not executable" >&2; exit 1; }
done
echo "$(pwd)/${dir}"
