#!/usr/bin/env bash
# Cross-builds the kubectl plugin (cmd/kubectl-distcache) for each platform
# into dist/ as kubectl-distcache_<version>_<os>_<arch>.tar.gz (the binary
# and LICENSE), writes their sums to dist/kubectl-distcache_<version>_checksums.txt
# and renders the krew manifest (hack/krew/distcache.yaml) into
# dist/krew/distcache.yaml. make plugin-dist runs it; make release calls that.
#
#   VERSION    the version (default: what hack/version-ldflags.sh stamps)
#   PLATFORMS  os/arch list (default: linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
#   URL_BASE   where the tarballs are published, for the krew manifest
#              (default: the GitHub release of v<version>)
#   DIST       output directory (default: dist)
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
ldflags=$(hack/version-ldflags.sh)
version=${VERSION:-$(sed -E 's/.*Version=([^ ]*).*/\1/' <<<"$ldflags")}
version=${version#v}
platforms=${PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64}
url_base=${URL_BASE:-https://github.com/distcache/distcache/releases/download/v$version}
dist=${DIST:-dist}

mkdir -p "$dist/krew"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sums="$dist/kubectl-distcache_${version}_checksums.txt"
: >"$sums"
entries=""
for p in $platforms; do
  os=${p%/*} arch=${p#*/}
  name="kubectl-distcache_${version}_${os}_${arch}.tar.gz"
  mkdir -p "$work/$os-$arch"
  echo "kubectl-distcache $version $os/$arch" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch "$GO" build -trimpath -ldflags "$ldflags -s -w" \
    -o "$work/$os-$arch/kubectl-distcache" ./cmd/kubectl-distcache
  cp LICENSE "$work/$os-$arch/LICENSE"
  # Reproducible: fixed order, owner and times.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 \
    -C "$work/$os-$arch" -czf "$dist/$name" kubectl-distcache LICENSE
  sum=$(sha256sum "$dist/$name" | cut -d' ' -f1)
  echo "$sum  $name" >>"$sums"
  entries+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $url_base/$name
    sha256: $sum
    bin: kubectl-distcache
    files:
    - from: kubectl-distcache
      to: .
    - from: LICENSE
      to: .
"
done
# The template's comment header is for the template; the rendered manifest
# starts at apiVersion.
sed -n '/^apiVersion:/,$p' hack/krew/distcache.yaml |
  sed "s|@VERSION@|v$version|" |
  awk -v entries="$entries" '/^@PLATFORMS@$/ { printf "%s", entries; next } { print }' \
  >"$dist/krew/distcache.yaml"
echo "$dist/krew/distcache.yaml" >&2
