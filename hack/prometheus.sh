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

for tool in apt-get dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || { echo "prometheus.sh: $tool not found (needs a Debian-based system)" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
download() {
  # The sandbox user _apt cannot write into a private temp dir; the download
  # only writes the .deb there.
  (cd "$tmp" && apt-get download -q -o APT::Sandbox::User="$(id -un)" prometheus) >&2
}
echo ">> downloading Debian's prometheus package (first run only)" >&2
if ! download; then
  if [ "$(id -u)" != 0 ]; then
    echo "prometheus.sh: apt-get download prometheus failed; run 'apt-get update' as root and retry" >&2
    exit 1
  fi
  apt-get update -q >&2
  download
fi
deb=$(ls "$tmp"/prometheus_*.deb)
version=$(dpkg-deb -f "$deb" Version) # e.g. 2.42.0+ds-5+deb12u1
version=${version%%+*}                # upstream part: 2.42.0
version=${version%%-*}
dpkg-deb -x "$deb" "$tmp/root"

out="bin/prometheus-${version}"
rm -rf "$out"
mkdir -p "$out"
cp "$tmp/root/usr/bin/prometheus" "$tmp/root/usr/bin/promtool" "$out/"
"$out/prometheus" --version >&2
"$out/promtool" --version >/dev/null
ln -sfn "prometheus-${version}/prometheus" bin/prometheus
ln -sfn "prometheus-${version}/promtool" bin/promtool
echo "$PWD/bin/prometheus"
