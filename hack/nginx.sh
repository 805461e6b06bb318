#!/usr/bin/env bash
# Puts a real nginx into bin/, from Debian's `nginx` package (bookworm:
# 1.22, built --with-http_ssl_module --with-http_slice_module), without
# installing the package: no system service, no user, nothing outside bin/.
# The B1 hit-path benchmark (internal/bench/hitpath) runs it as an
# mTLS-terminating proxy_cache in front of MinIO, the comparison column for
# cache hits. The binary needs only libc, libcrypt, libpcre2-8, libssl3 and
# zlib, which every bookworm system has; nginx-common (config files, the
# systemd unit) is not needed: the benchmark writes its own nginx.conf.
#
# The .deb is fetched with `apt-get download` (after `apt-get update` only if
# that fails), unpacked with `dpkg-deb -x`, and its usr/sbin/nginx copied to
# bin/nginx-<version>/; bin/nginx links there. Prints the absolute path of
# bin/nginx on stdout (progress goes to stderr). A second run is a no-op.
# Concurrent runs are serialised with flock.
set -euo pipefail
cd "$(dirname "$0")/.."

ready() { [ -x bin/nginx ]; }

# Fast path, without taking the lock.
if ready; then
  echo "$PWD/bin/nginx"
  exit 0
fi

mkdir -p bin
exec 9>bin/.nginx.lock
flock 9
if ready; then
  echo "$PWD/bin/nginx"
  exit 0
fi

for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || { echo "nginx.sh: $tool not found (needs a Debian-based system)" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
download() {
  # The sandbox user _apt cannot write into a private temp dir; the download
  # only writes the .deb there.
  (cd "$tmp" && apt-get download -q -o APT::Sandbox::User="$(id -un)" nginx) >&2
}
echo ">> downloading Debian's nginx package (first run only)" >&2
if ! download; then
  if [ "$(id -u)" != 0 ]; then
    echo "nginx.sh: apt-get download nginx failed; run 'apt-get update' as root and retry" >&2
    exit 1
  fi
  apt-get update -q >&2
  download
fi
deb=$(ls "$tmp"/nginx_*.deb)
version=$(dpkg-deb -f "$deb" Version) # e.g. 1.22.1-9+deb12u10
version=${version%%+*}                # upstream part: 1.22.1
version=${version%%-*}
dpkg-deb -x "$deb" "$tmp/root"

out="bin/nginx-${version}"
rm -rf "$out"
mkdir -p "$out"
cp "$tmp/root/usr/sbin/nginx" "$out/"
# Fails here, not in the benchmark, if a shared library is missing.
"$out/nginx" -V >&2
"$out/nginx" -V 2>&1 | grep -q -- '--with-http_slice_module' || { echo "nginx.sh: this nginx has no slice module" >&2; exit 1; }
ln -sfn "nginx-${version}/nginx" bin/nginx
echo "$PWD/bin/nginx"
