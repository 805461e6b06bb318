# Sourced by the hack/build-*.sh scripts, from the repository root: a pinned
# program is built into bin/ once, as NAME-VERSION plus a stable symlink
# bin/NAME, so that a second run is a no-op and a version bump builds anew.

# build_once NAME VERSION NOTE BUILD [ARGS...] builds bin/NAME-VERSION unless
# it is there: it waits for a concurrent caller's build of NAME (make -j,
# parallel test setups; where the machine has flock), then runs
# `BUILD ARGS... DIR`, which must leave the program in DIR/NAME (an empty
# temporary directory), and moves it into place. NOTE says how long a first
# build takes. Progress goes to stderr. Either way bin/NAME points at it.
build_once() {
  local name=$1 version=$2 note=$3
  shift 3
  local out="bin/${name}-${version}"
  if [ ! -x "$out" ] && command -v flock >/dev/null; then
    mkdir -p bin/.build
    exec 9>"bin/.build/${name}.lock"
    flock 9
  fi
  if [ ! -x "$out" ]; then
    echo ">> building ${name} ${version} (first run only${note:+, $note})" >&2
    mkdir -p bin
    build_once_tmp=$(mktemp -d)
    trap 'rm -rf "$build_once_tmp"' EXIT
    "$@" "$build_once_tmp"
    mv "$build_once_tmp/${name}" "$out"
  fi
  ln -sfn "$(basename "$out")" "bin/${name}"
}

# go_install_once NAME VERSION NOTE PKG [LDFLAGS] builds bin/NAME-VERSION
# with `go install PKG@VERSION` (static, trimmed, stripped; LDFLAGS added),
# as build_once does.
go_install_once() {
  build_once "$1" "$2" "$3" go_install_to "$4@$2" "${5:-}"
}

# go_install_to PKG@VERSION LDFLAGS DIR installs into DIR.
go_install_to() {
  CGO_ENABLED=0 GOBIN="$3" GOFLAGS=-mod=mod go install -trimpath -ldflags "-s -w${2:+ $2}" "$1" >&2
}
