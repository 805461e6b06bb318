#!/usr/bin/env bash
# Builds the images of the local test cluster (hack/cluster.sh) as image
# tarballs in bin/images/, without a container engine or a registry, and
# prints their paths, one per line, on stdout (progress goes to stderr):
#
#   distcache.local/operator:dev   the operator (go build .), /manager
#   distcache.local/cachenode:dev  the cache node (go build ./cachenode), /cachenode
#   distcache.local/pause:dev      the pod sandbox, hack/imagebuild/pause
#   distcache.local/probe:dev      lookups and GETs from inside a pod, hack/imagebuild/probe
#   distcache.local/minio:dev      MinIO (hack/build-minio.sh), entrypoint minio
#   distcache.local/coredns:dev    CoreDNS (hack/build-coredns.sh), /coredns
#
# The operator and cachenode images follow the Dockerfile's operator and
# cachenode targets: the same static binaries built with the same flags, the
# same entrypoints, the same user (65532:65532), on the files of
# distroless/static:nonroot a static binary can use (user database, /tmp, CA
# certificates). Keep the two in step. hack/imagebuild writes the tarballs with
# go-containerregistry and skips an image whose inputs did not change.
set -euo pipefail
cd "$(dirname "$0")/.."

out=bin/images
mkdir -p "$out"
log() { echo "cluster-images: $*" >&2; }

hack/build-minio.sh >&2
hack/build-coredns.sh >&2

log "building binaries"
export CGO_ENABLED=0
go build -o bin/imagebuild ./hack/imagebuild
# As the Dockerfile builds them.
ldflags="-s -w $(hack/version-ldflags.sh)"
go build -trimpath -ldflags "$ldflags" -o "$out/manager" .
go build -trimpath -ldflags "$ldflags" -o "$out/cachenode" ./cachenode
go build -trimpath -ldflags "-s -w" -o "$out/pause" ./hack/imagebuild/pause
go build -trimpath -ldflags "-s -w" -o "$out/probe" ./hack/imagebuild/probe

ca_bundle=()
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
  ca_bundle=(-ca-bundle /etc/ssl/certs/ca-certificates.crt)
fi
nonroot=(-base nonroot "${ca_bundle[@]}" -user 65532:65532)

image() { # NAME, imagebuild flags...
  local name=$1; shift
  bin/imagebuild -o "$out/$name.tar" -tag "distcache.local/$name:dev" "$@"
  echo "$(pwd)/$out/$name.tar"
}

image operator "${nonroot[@]}" -entrypoint /manager -add "$out/manager=/manager"
image cachenode "${nonroot[@]}" -entrypoint /cachenode -add "$out/cachenode=/cachenode"
# Upstream's pause runs as 65535.
image pause -user 65535:65535 -entrypoint /pause -add "$out/pause=/pause"
image probe "${nonroot[@]}" -entrypoint /probe -cmd sleep -add "$out/probe=/probe"
image minio "${nonroot[@]}" -entrypoint minio -add "$(readlink -f bin/minio)=/usr/bin/minio"
image coredns "${nonroot[@]}" -entrypoint /coredns -add "$(readlink -f bin/coredns)=/coredns"
