# Sourced by the hack/*-venv.sh scripts, from the repository root: a Python
# virtualenv in bin/ holding pinned packages from PyPI, built once.

# pyvenv NAME NOTE CHECK REQUIREMENT... makes bin/NAME a virtualenv holding
# exactly REQUIREMENT... (pip specifiers; binary wheels only), runs the
# python snippet CHECK in it before declaring it good, and prints its
# python's path on stdout (progress goes to stderr). NOTE says what a first
# build costs. A second call is a no-op: bin/NAME/.distcache-stamp holds the
# requirement set, and the venv is rebuilt only when it differs. Concurrent
# calls (parallel test packages) are serialised with flock.
#
# Needs python3 (>= 3.9) with the venv module. On Debian, python3-venv is
# installed with apt-get when `python3 -m venv` cannot create a venv.
# Override the interpreter with PYTHON=/path/to/python3.
pyvenv() {
  local name=$1 note=$2 check=$3
  shift 3
  local venv="bin/$name"
  local stamp="$venv/.distcache-stamp" want="$*" py="$PWD/bin/$name/bin/python"

  # Fast path, without taking the lock.
  if [ -x "$py" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "$py"
    return 0
  fi

  mkdir -p bin
  exec 9>"bin/.$name.lock"
  flock 9
  if [ -x "$py" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "$py"
    return 0
  fi

  local python="${PYTHON:-python3}"
  if ! command -v "$python" >/dev/null 2>&1; then
    echo "$name: $python not found; install python3 (>= 3.9)" >&2
    return 1
  fi

  # Debian's python3 has a venv module that cannot bootstrap pip without the
  # python3-venv package (ensurepip); check for both.
  if ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      echo ">> installing python3-venv with apt-get" >&2
      export DEBIAN_FRONTEND=noninteractive
      if ! apt-get install -y -q python3-venv >&2; then
        apt-get update -q >&2
        apt-get install -y -q python3-venv >&2
      fi
    else
      echo "$name: '$python -m venv' is unavailable; install python3-venv (apt-get install python3-venv)" >&2
      return 1
    fi
  fi

  echo ">> creating $venv with $1 (first run only${note:+; $note})" >&2
  rm -rf "$venv"
  "$python" -m venv "$venv" >&2
  "$py" -m pip install --disable-pip-version-check --no-input -q --only-binary=:all: "$@" >&2
  "$py" -c "$check" >&2
  printf '%s' "$want" >"$stamp"
  echo "$py"
}
