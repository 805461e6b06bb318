#!/usr/bin/env bash
# Prints the -ldflags that stamp the version into both binaries, through
# github.com/prometheus/common/version as Prometheus and its exporters do:
# `cachenode version`, `manager --version`, distcache_build_info{version=...}
# and the operator's status.operatorVersion read it. The revision is set
# too: Go's own VCS stamping is off where GOFLAGS has -buildvcs=false.
#
#   VERSION  the version (default: git describe --tags --always --dirty,
#            "devel" outside a git checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo devel)}
branch=$(git rev-parse --abbrev-ref HEAD 2>/dev/null || echo unknown)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
pkg=github.com/prometheus/common/version
echo "-X $pkg.Version=$version -X $pkg.Branch=$branch -X $pkg.Revision=$revision"
