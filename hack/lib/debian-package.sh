# Sourced by the hack/ scripts that take a program out of a Debian package
# without installing the package (hack/nginx.sh, hack/prometheus.sh): no
# system service, no user, nothing outside the caller's directory.

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
