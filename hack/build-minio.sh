#!/usr/bin/env bash
# Builds the MinIO server that tests and the demo use as their S3 backend, from
# its Go module at a pinned version, into bin/. A second run is a no-op.
set -euo pipefail
cd "$(dirname "$0")/.."

# MinIO publishes no semver tags; this pseudo-version is its 2026-02-12 commit.
MINIO_VERSION="${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"

. hack/lib/build-once.sh
go_install_once minio "$MINIO_VERSION" "a few minutes" github.com/minio/minio
