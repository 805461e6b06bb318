#!/usr/bin/env bash
# Creates bin/chdb-venv, a Python virtualenv holding a pinned chdb (ClickHouse's
# engine as a Python package, from PyPI), and prints the venv's python path on
# stdout (progress goes to stderr). The e2e/clickhouse tests use it as a real
# ClickHouse client for S3.
#
# A second run is a no-op (hack/lib/pyvenv.sh says how, and what it needs).
set -euo pipefail
cd "$(dirname "$0")/.."

# chdb 4.4.0 embeds ClickHouse 26.9 (chdb-core). The rest pins chdb's own
# dependencies so that every machine gets the same set.
REQUIREMENTS=(
  chdb==4.4.0
  chdb-core==26.9.0
  pandas==3.1.1
  pyarrow==26.0.1
  numpy==2.4.6
  python-dateutil==4.0.0
  tzdata==2026.6
)

# shellcheck source=hack/lib/pyvenv.sh
. hack/lib/pyvenv.sh
# The check proves the engine loads and runs a query.
pyvenv chdb-venv "~900 MB installed" \
  'import chdb; r = chdb.query("SELECT 1 + 1", "CSV"); assert str(r).strip() == "2", r' \
  "${REQUIREMENTS[@]}"
