#!/usr/bin/env bash
# Copies CRD YAML files shipped inside a Go module into bin/NAME-VERSION/ and
# prints that directory's absolute path on stdout, for envtest suites that
# install other projects' CRDs. The module comes through the Go module proxy
# with `go mod download` (no GitHub access needed), outside this module so
# go.mod and go.sum are left alone. A second run is a no-op.
#
#   hack/module-crds.sh NAME MODULE VERSION DIR FILE...
#     NAME     prefix of the output directory under bin/
#     MODULE   Go module path, VERSION its version
#     DIR      directory inside the module holding the files
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -ge 5 ] || { echo "usage: $0 NAME MODULE VERSION DIR FILE..." >&2; exit 2; }
name=$1 module=$2 version=$3 dir=$4
shift 4
files=("$@")
out="bin/${name}-${version}"

have_all() {
  for f in "${files[@]}"; do [ -s "$out/$f" ] || return 1; done
}
if have_all; then
  echo "$PWD/$out"
  exit 0
fi

echo ">> fetching ${module}@${version} ${dir}/ from the Go module proxy (first run only)" >&2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
moddir=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "${module}@${version}" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$moddir" ] || [ ! -d "$moddir/$dir" ]; then
  echo "module-crds.sh: ${module}@${version} has no ${dir}/" >&2
  exit 1
fi
mkdir -p "$out"
for f in "${files[@]}"; do
  cp "$moddir/$dir/$f" "$out/$f.tmp"
  chmod 0644 "$out/$f.tmp" # the module cache is read-only
  mv "$out/$f.tmp" "$out/$f"
done
echo "$PWD/$out"
