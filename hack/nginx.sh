#!/usr/bin/env bash
# Puts a real nginx into bin/, from Debian's `nginx` package (bookworm:
# 1.22, built --with-http_ssl_module --with-http_slice_module), without
# installing the package: no system service, no user, nothing outside bin/.
# The B1 hit-path benchmark (tools/benchmark/hitpath) runs it as an
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
. hack/lib/debian-package.sh

check() {
  "$1/nginx" -V >&2
  "$1/nginx" -V 2>&1 | grep -q -- '--with-http_slice_module' || { echo "nginx.sh: this nginx has no slice module" >&2; exit 1; }
}
debian_programs nginx check usr/sbin/nginx
