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

check() {
  "$1/prometheus" --version >&2
  "$1/promtool" --version >/dev/null
}
debian_programs prometheus check usr/bin/prometheus usr/bin/promtool
