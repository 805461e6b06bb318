#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each, one after the
# other, and prints a summary table. `make fuzz` calls it.
#
#   FUZZTIME      how long each target runs (go test -fuzztime; default 30s)
#   FUZZ_MATCH    only targets whose "package.FuzzName" matches this
#                 extended regular expression (default: all)
#   FUZZ_PARALLEL fuzzing workers per target (go test -parallel; default:
#                 GOMAXPROCS)
#   FUZZ_MINIMIZE how long the fuzzer may minimize each new input
#                 (go test -fuzzminimizetime; default 5s: go's 60s let one
#                 large interesting input of FuzzChunkedDecoder's 66 KiB
#                 seed take a whole 30s run, which then showed 0 execs/s)
#
# The seed corpora (f.Add and testdata/fuzz/FuzzXxx/) run in plain `go
# test`. A crash fails the run: `go test` leaves the failing input under the
# package's testdata/fuzz/FuzzXxx/, where it becomes a regression seed once
# committed (fix the bug first). Inputs found interesting along the way stay
# in the Go build cache ($(go env GOCACHE)/fuzz), not in the tree.
set -euo pipefail

cd "$(dirname "$0")/.."
FUZZTIME=${FUZZTIME:-30s}
FUZZ_MATCH=${FUZZ_MATCH:-.}
FUZZ_MINIMIZE=${FUZZ_MINIMIZE:-5s}
parallel=()
if [[ -n ${FUZZ_PARALLEL:-} ]]; then
	parallel=(-parallel "$FUZZ_PARALLEL")
fi

# Packages with a fuzz target: only those are compiled to list them.
mapfile -t dirs < <(grep -rlE --include='*_test.go' '^func Fuzz[A-Z0-9_]' . \
	--exclude-dir=bin --exclude-dir=.git | xargs -r -n1 dirname | sort -u)
if [[ ${#dirs[@]} -eq 0 ]]; then
	echo "no fuzz targets found" >&2
	exit 1
fi

targets=()
for d in "${dirs[@]}"; do
	pkg=$(go list "$d")
	while read -r name; do
		[[ $name == Fuzz* ]] || continue
		if [[ "${pkg##*/}.$name" =~ $FUZZ_MATCH ]]; then
			targets+=("$pkg $name")
		fi
	done < <(go test -list '^Fuzz' "$d")
done
echo "fuzzing ${#targets[@]} targets for $FUZZTIME each"

log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
rows=()
failed=0
for t in "${targets[@]}"; do
	read -r pkg name <<<"$t"
	out="$log/${pkg//\//_}.$name.log"
	echo "== ${pkg#github.com/distcache/distcache/} $name"
	if go test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZ_MINIMIZE" "${parallel[@]}" "$pkg" >"$out" 2>&1; then
		result=ok
	else
		result=FAIL
		failed=1
		sed -n '/--- FAIL/,$p' "$out" | head -40
		crasher=$(grep -oE 'testdata/fuzz/[^ ]+' "$out" | head -1 || true)
		if [[ -n $crasher ]]; then
			result="CRASH $(go list -f '{{.Dir}}' "$pkg" | sed "s|^$PWD/||")/$crasher"
		fi
	fi
	# The last progress line: "fuzz: elapsed: 30s, execs: 123 (4/sec), new interesting: 5 (total: 12)"
	last=$(grep -E '^fuzz: elapsed: .*execs: ' "$out" | tail -1 || true)
	execs=$(sed -nE 's/.*execs: ([0-9]+).*/\1/p' <<<"$last")
	newi=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
	total=$(sed -nE 's/.*\(total: ([0-9]+)\).*/\1/p' <<<"$last")
	# execs/s over the fuzzing time go reports (not compiling, not the seeds).
	elapsed=$(sed -nE 's/^fuzz: elapsed: ([0-9hms.]+),.*/\1/p' <<<"$last")
	fsecs=0
	[[ $elapsed =~ ([0-9]+)h ]] && fsecs=$((fsecs + 3600 * BASH_REMATCH[1]))
	[[ $elapsed =~ ([0-9]+)m ]] && fsecs=$((fsecs + 60 * BASH_REMATCH[1]))
	[[ $elapsed =~ ([0-9]+)s ]] && fsecs=$((fsecs + BASH_REMATCH[1]))
	rate=-
	if [[ -n $execs && $fsecs -gt 0 ]]; then
		rate=$((execs / fsecs))
	fi
	rows+=("$(printf '%-22s %-34s %12s %9s %9s %7s  %s' "${pkg##*/}" "$name" "${execs:--}" "$rate" "${newi:--}" "${total:--}" "$result")")
done

echo
printf '%-22s %-34s %12s %9s %9s %7s  %s\n' package target execs execs/s "new" corpus result
printf '%s\n' "${rows[@]}"
exit $failed
