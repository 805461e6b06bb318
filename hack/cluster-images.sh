#!/usr/bin/env bash
# Builds the images of the local test cluster (hack/cluster.sh) with ko as
# image tarballs in bin/images/, for this machine's platform, without a
# container engine or a registry, and prints their paths, one per line, on
# stdout (progress goes to stderr):
#
#   distcache.local/operator:dev   the operator (.), as a release builds it
#   distcache.local/cachenode:dev  the cache node (./cachenode), likewise
#   distcache.local/pause:dev      the pod sandbox, hack/images/pause
#   distcache.local/probe:dev      lookups and GETs from inside a pod, hack/images/probe
#   distcache.local/minio:dev      MinIO at hack/build-minio.sh's version
#   distcache.local/coredns:dev    CoreDNS at hack/build-coredns.sh's version
#
# Every image is ko's (.ko.yaml): the binary at /ko-app/NAME as the
# entrypoint, on the distroless-like nonroot base of hack/lib/ko.sh, user
# 65532 (the pause image 65535, as upstream's). The operator and cachenode
# images are those of a release (hack/ko-images.sh) for one platform, with
# the version of hack/version-ldflags.sh; the Dockerfile builds the same
# binaries for Docker users. ko leaves an image whose inputs did not change
# as it was (same digest).
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib/ko.sh

root=$PWD
out="$root/bin/images"
mkdir -p "$out"
log() { echo "cluster-images: $*" >&2; }

hack/build-minio.sh >&2
hack/build-coredns.sh >&2
ko_setup
platform="linux/$(go env GOARCH)"

# image NAME IMPORTPATH [ko build flags...]: ko in the current directory.
image() {
  local name=$1 importpath=$2
  shift 2
  log "$name"
  # ko's log (and its git status of a dirty tree) only when it fails.
  if ! KO_DOCKER_REPO="distcache.local/$name" "$root/bin/ko" build --bare --tags dev --push=false \
    --platform "$platform" --sbom none --tarball "$out/$name.tar.tmp" "$@" "$importpath" >/dev/null 2>"$out/$name.log"; then
    cat "$out/$name.log" >&2
    return 1
  fi
  mv "$out/$name.tar.tmp" "$out/$name.tar"
  echo "$out/$name.tar"
}

image operator .
image cachenode ./cachenode
image pause ./hack/images/pause --image-user 65535:65535
image probe ./hack/images/probe

# MinIO and CoreDNS from their modules, each in a module of its own that
# requires it (hack/lib/ko.sh), at the versions their build scripts pin.
for spec in "minio github.com/minio/minio MINIO_VERSION" "coredns github.com/coredns/coredns COREDNS_VERSION"; do
  read -r name module var <<<"$spec"
  dir=$(ko_wrapper_module "$name" "$module" "$(ko_version_of "hack/build-$name.sh" "$var")")
  # No .ko.yaml there: ko's defaults (CGO_ENABLED=0, -trimpath) and -s.
  (cd "$dir" && KO_CONFIG_PATH="" GOFLAGS="-mod=mod -ldflags=-s" image "$name" "$module")
done
