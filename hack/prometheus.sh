#!/usr/bin/env bash
# Puts a real Prometheus server and promtool into bin/, from Debian's
# `prometheus` package (bookworm: 2.42), without installing the package: no
# system service, no user, nothing outside bin/. e2e/monitoring runs them to
# scrape real cache nodes and to evaluate the dashboard's queries and the
# alert rules.
#
# The .deb is fetched with `apt-get download` (after `apt-get update` only if
# that fails), unpacked with `dpkg-deb -x`, and its usr/bin/prometheus and
# usr/bin/promtool copied to bin/prometheus-<version>/; bin/prometheus and
# bin/promtool link there. Prints the absolute path of bin/prometheus on
# stdout (progress goes to stderr). A second run is a no-op. Concurrent runs
# are serialised with flock.
set -euo pipefail
cd "$(dirname "$0")/.."
. hack/lib/debian-package.sh

ready() { [ -x bin/prometheus ] && [ -x bin/promtool ]; }

# Fast path, without taking the lock.
if ready; then
  echo "$PWD/bin/prometheus"
  exit 0
fi

mkdir -p bin
exec 9>bin/.prometheus.lock
flock 9
if ready; then
  echo "$PWD/bin/prometheus"
  exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
debian_package prometheus "$tmp"
version=$DEB_VERSION

out="bin/prometheus-${version}"
rm -rf "$out"
mkdir -p "$out"
cp "$tmp/root/usr/bin/prometheus" "$tmp/root/usr/bin/promtool" "$out/"
"$out/prometheus" --version >&2
"$out/promtool" --version >/dev/null
ln -sfn "prometheus-${version}/prometheus" bin/prometheus
ln -sfn "prometheus-${version}/promtool" bin/promtool
echo "$PWD/bin/prometheus"
