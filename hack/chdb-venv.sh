#!/usr/bin/env bash
# Creates bin/chdb-venv, a Python virtualenv holding a pinned chdb (ClickHouse's
# engine as a Python package, from PyPI), and prints the venv's python path on
# stdout (progress goes to stderr). The e2e/clickhouse tests use it as a real
# ClickHouse client for S3.
#
# A second run is a no-op: the stamp file bin/chdb-venv/.distcache-stamp holds
# the pinned requirement set, and the venv is rebuilt only when it differs.
# Concurrent runs (parallel test packages) are serialised with flock.
#
# Needs python3 (>= 3.9) with the venv module. On Debian, python3-venv is
# installed with apt-get when `python3 -m venv` cannot create a venv.
# Override the interpreter with PYTHON=/path/to/python3.
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

venv="bin/chdb-venv"
stamp="$venv/.distcache-stamp"
want="${REQUIREMENTS[*]}"
py="$PWD/$venv/bin/python"

# Fast path, without taking the lock.
if [ -x "$py" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$py"
  exit 0
fi

mkdir -p bin
exec 9>bin/.chdb-venv.lock
flock 9
if [ -x "$py" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$py"
  exit 0
fi

PYTHON="${PYTHON:-python3}"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "chdb-venv: $PYTHON not found; install python3 (>= 3.9)" >&2
  exit 1
fi

# Debian's python3 has a venv module that cannot bootstrap pip without the
# python3-venv package (ensurepip); check for both.
if ! "$PYTHON" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo ">> installing python3-venv with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -q python3-venv >&2; then
      apt-get update -q >&2
      apt-get install -y -q python3-venv >&2
    fi
  else
    echo "chdb-venv: '$PYTHON -m venv' is unavailable; install python3-venv (apt-get install python3-venv)" >&2
    exit 1
  fi
fi

echo ">> creating $venv with ${REQUIREMENTS[0]} (first run only; ~900 MB installed)" >&2
rm -rf "$venv"
"$PYTHON" -m venv "$venv" >&2
"$py" -m pip install --disable-pip-version-check --no-input -q --only-binary=:all: "${REQUIREMENTS[@]}" >&2
# Prove the engine loads and runs a query before declaring the venv good.
"$py" -c 'import chdb; r = chdb.query("SELECT 1 + 1", "CSV"); assert str(r).strip() == "2", r' >&2
printf '%s' "$want" >"$stamp"
echo "$py"
