#!/usr/bin/env bash
# Builds the release images with ko (.ko.yaml), for linux/amd64 and
# linux/arm64, without Docker:
#
#   VERSION=0.2.0 hack/ko-images.sh [OUT]        (OUT defaults to dist)
#
#   OUT/images/distcache-operator-VERSION.oci.tar    IMAGE_REPO/operator:vVERSION
#   OUT/images/distcache-cachenode-VERSION.oci.tar   IMAGE_REPO/cachenode:vVERSION
#   OUT/sbom/{distcache,cachenode}-*.spdx.json       ko's SPDX SBOMs, per platform and index
#   OUT/images/digests.txt                            NAME:TAG@DIGEST of each index
#
# Each tarball is an OCI image layout holding the multi-platform index (what
# a registry would hold, with the same digest), named as BuildKit names
# its OCI exports, so that any of these load or push it:
#   ctr -n k8s.io images import --all-platforms FILE
#   docker load -i FILE              (Docker 25 or newer; this machine's platform)
#   skopeo copy --all oci-archive:FILE docker://REGISTRY/...
#   crane push (after tar -x) / oras cp --from-oci-layout
#
# IMAGE_REPO (default ghcr.io/distcache) is where the images are said to
# live: the install manifest and the chart name IMAGE_REPO/NAME:vVERSION.
# With KO_DOCKER_REPO set, ko also pushes them there (KO_DOCKER_REPO is then
# IMAGE_REPO), with the SBOMs attached, using the registry credentials of
# ~/.docker/config.json as ko does.
set -euo pipefail
cd "$(dirname "$0")/.."
source hack/lib/ko.sh

: "${VERSION:?VERSION=x.y.z is required}"
VERSION=${VERSION#v}
tag="v${VERSION}"
out=${1:-dist}
push=false
if [ -n "${KO_DOCKER_REPO:-}" ]; then
  push=true
  IMAGE_REPO=$KO_DOCKER_REPO
fi
IMAGE_REPO=${IMAGE_REPO:-ghcr.io/distcache}
platforms=${PLATFORMS:-linux/amd64,linux/arm64}

# The binaries report VERSION as `make build VERSION=x.y.z` and the kubectl
# plugin stamp it (without the v of the image tag).
ko_setup
mkdir -p "$out/images" "$out/sbom"
# ko names what it writes to a layout after the layout's path, which must
# then read as a repository name: relative, lower case (so no mktemp).
tmp=bin/.build/ko-layouts-$$
rm -rf "$tmp"
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
: >"$out/images/digests.txt"

for spec in "operator ." "cachenode ./cachenode"; do
  read -r name importpath <<<"$spec"
  ref="$IMAGE_REPO/$name:$tag"
  echo ">> $ref ($platforms, push=$push)" >&2
  if ! KO_DOCKER_REPO="$IMAGE_REPO/$name" bin/ko build --bare --tags "$tag" --push="$push" \
    --platform "$platforms" --oci-layout-path "$tmp/$name" --sbom spdx --sbom-dir "$out/sbom" \
    --image-refs "$tmp/$name.ref" "$importpath" >/dev/null 2>"$tmp/$name.log"; then
    cat "$tmp/$name.log" >&2
    exit 1
  fi
  digest=$(bin/ocilayout name -layout "$tmp/$name" -ref "$ref")
  echo "$ref@$digest" >>"$out/images/digests.txt"
  # Reproducible: sorted names, fixed times and owners.
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$tmp/$name" \
    -cf "$out/images/distcache-$name-$VERSION.oci.tar" .
done
cat "$out/images/digests.txt"
