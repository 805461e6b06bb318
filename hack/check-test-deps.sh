#!/usr/bin/env bash
# Fails when a program or any other non-test package of the module links
# the testing package or a test harness (internal/testutil/...): product
# binaries and the benchmark program (tools/benchmark) must not carry test
# code. The harnesses under internal/testutil are the only non-test
# packages allowed to; test files (_test.go) are not looked at. `make test`
# runs it.
#
#   GO   the go command (default: go)
set -euo pipefail

cd "$(dirname "$0")/.."
GO=${GO:-go}
module=$($GO list -m)
harness="$module/internal/testutil"

# One line per package with non-test files: its import path, its name
# (main: a program), and everything it links (.Deps: its non-test
# imports, transitively).
listing=$($GO list -f '{{if .GoFiles}}{{.ImportPath}} {{.Name}} {{join .Deps " "}}{{end}}' ./...)

bad=0 programs=0 packages=0
while read -r pkg name deps; do
	case "$pkg" in "" | "$harness" | "$harness"/*) continue ;; esac
	packages=$((packages + 1))
	[ "$name" = main ] && programs=$((programs + 1))
	for dep in $deps; do
		case "$dep" in
		testing | "$harness" | "$harness"/*)
			echo "$pkg links $dep" >&2
			bad=1
			;;
		esac
	done
done <<<"$listing"

if [ "$bad" != 0 ]; then
	echo "check-test-deps: non-test code links testing or a test harness (go list -deps PACKAGE shows the chain; move the code to internal/testutil or give it an error-returning form outside it)" >&2
	exit 1
fi
echo "check-test-deps: $packages packages ($programs programs) link neither testing nor internal/testutil"
