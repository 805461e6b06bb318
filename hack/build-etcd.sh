#!/usr/bin/env bash
# Builds etcd (the storage kube-apiserver needs, for envtest and the real test
# cluster) from the go.etcd.io/etcd/server/v3 Go module at a pinned version,
# into bin/ as etcd-VERSION plus a stable symlink bin/etcd. A second run is a
# no-op.
#
# etcd's own main lives in the root module go.etcd.io/etcd/v3, which is not
# installable with `go install mod@version` (it has replace directives), so we
# generate a wrapper module whose main just calls etcdmain.Main, exactly as
# etcd's main.go does.
set -euo pipefail
cd "$(dirname "$0")/.."

# Latest 3.6 patch; Kubernetes 1.36 is tested against etcd 3.6.
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"

# build_etcd DIR builds etcd's wrapper module into DIR/etcd.
build_etcd() {
  local wrapper="bin/.build/etcd-wrapper-${ETCD_VERSION}"
  rm -rf "$wrapper"
  mkdir -p "$wrapper"
  cat >"$wrapper/go.mod" <<GOMOD
module distcache.local/etcd-wrapper

go 1.26

require go.etcd.io/etcd/server/v3 ${ETCD_VERSION}
GOMOD
  cat >"$wrapper/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (
    cd "$wrapper"
    GOFLAGS=-mod=mod go mod tidy
    CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -buildvcs=false -ldflags "-s -w" -o "$1/etcd" .
  )
}

. hack/lib/build-once.sh
build_once etcd "$ETCD_VERSION" "a minute or two" build_etcd
