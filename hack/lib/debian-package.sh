# Sourced by the hack/ scripts that take a program out of a Debian package
# without installing the package (hack/nginx.sh, hack/prometheus.sh): no
# system service, no user, nothing outside the caller's directory.

# debian_programs PACKAGE CHECK PATH... puts the programs at PATH... in
# Debian's PACKAGE (usr/sbin/nginx) into bin/PACKAGE-VERSION/, runs CHECK
# on that directory (so a missing shared library fails here, not in the
# program's user), links bin/PROGRAM to each and prints the absolute path of
# the first link on stdout. A second run finds the links and does only the
# printing; concurrent runs are serialised with flock (bin/.PACKAGE.lock).
debian_programs() {
  local package=$1 check=$2
  shift 2
  local tmp out path
  if ! debian_programs_ready "$@"; then
    mkdir -p bin
    exec 9>"bin/.${package}.lock"
    flock 9
  fi
  if ! debian_programs_ready "$@"; then
    tmp=$(mktemp -d)
    # shellcheck disable=SC2064 # tmp is expanded now, as it is local
    trap "rm -rf '$tmp'" EXIT
    debian_package "$package" "$tmp"
    out="bin/${package}-${DEB_VERSION}"
    rm -rf "$out"
    mkdir -p "$out"
    for path in "$@"; do
      cp "$tmp/root/$path" "$out/"
    done
    "$check" "$out"
    for path in "$@"; do
      ln -sfn "${package}-${DEB_VERSION}/${path##*/}" "bin/${path##*/}"
    done
  fi
  echo "$PWD/bin/${1##*/}"
}

# debian_programs_ready PATH... tells whether bin/ has every program.
debian_programs_ready() {
  local path
  for path in "$@"; do
    [ -x "bin/${path##*/}" ] || return 1
  done
}

# debian_package NAME DIR fetches NAME's .deb for this system into DIR with
# `apt-get download` (after `apt-get update`, as root, only if that fails)
# and unpacks it into DIR/root with `dpkg-deb -x`. It sets DEB_VERSION to
# the package's upstream version (1.22.1 of 1.22.1-9+deb12u10, 2.42.0 of
# 2.42.0+ds-5+deb12u1). Progress goes to stderr; failures exit.
debian_package() {
  local name=$1 dir=$2 me=${0##*/} tool deb
  for tool in apt-get dpkg-deb; do
    command -v "$tool" >/dev/null 2>&1 || { echo "$me: $tool not found (needs a Debian-based system)" >&2; exit 1; }
  done
  echo ">> downloading Debian's $name package (first run only)" >&2
  if ! debian_download "$name" "$dir"; then
    if [ "$(id -u)" != 0 ]; then
      echo "$me: apt-get download $name failed; run 'apt-get update' as root and retry" >&2
      exit 1
    fi
    apt-get update -q >&2
    debian_download "$name" "$dir"
  fi
  deb=$(ls "$dir/${name}"_*.deb)
  DEB_VERSION=$(dpkg-deb -f "$deb" Version)
  DEB_VERSION=${DEB_VERSION%%+*}
  DEB_VERSION=${DEB_VERSION%%-*}
  dpkg-deb -x "$deb" "$dir/root"
}

debian_download() {
  # The sandbox user _apt cannot write into a private temp dir; the
  # download only writes the .deb there.
  (cd "$2" && apt-get download -q -o APT::Sandbox::User="$(id -un)" "$1") >&2
}
