#!/usr/bin/env bash
# Builds the MinIO server that tests and the demo use as their S3 backend, from
# its Go module at a pinned version, into bin/. A second run is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

# MinIO publishes no semver tags; this pseudo-version is its 2026-02-12 commit.
MINIO_VERSION="${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"
out="bin/minio-${MINIO_VERSION}"

if [ ! -x "$out" ]; then
  echo ">> building MinIO ${MINIO_VERSION} (first run only, a few minutes)"
  mkdir -p bin
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  CGO_ENABLED=0 GOBIN="$tmp" GOFLAGS=-mod=mod go install -trimpath -ldflags "-s -w" "github.com/minio/minio@${MINIO_VERSION}"
  mv "$tmp/minio" "$out"
fi
ln -sfn "$(basename "$out")" bin/minio
