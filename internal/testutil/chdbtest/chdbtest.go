// Package chdbtest runs ClickHouse (chdb, ClickHouse's engine as a Python
// package) as a real S3 client in tests, through pyscenario.
//
// Python finds the interpreter of the virtualenv that hack/chdb-venv.sh builds
// in bin/chdb-venv (the first run downloads chdb from PyPI, ~1 minute; later
// runs return at once). Run executes e2e/clickhouse/scenario.py against any S3
// endpoint: a MergeTree table on an S3 disk (INSERT batches, OPTIMIZE FINAL,
// SELECTs, ALTER DELETE, lightweight DELETE, DROP) and a Parquet file written
// and read through the s3() table function. Its Results are deterministic, so
// two runs against different endpoints (MinIO directly, the distcache gateway)
// must be equal; RequireSame checks that.
package chdbtest

import (
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil/pyscenario"
)

// scenarioTimeout is generous: a scenario run on a loaded 2-core machine
// with chdb's cold start can take a while.
const scenarioTimeout = 5 * time.Minute

var venv = pyscenario.Venv{Script: "hack/chdb-venv.sh", EnvVar: "CHDB_PYTHON", Module: "chdb"}

// Python returns the path of a python interpreter that can import chdb. It is
// $CHDB_PYTHON when set, else the output of hack/chdb-venv.sh (run once per
// test binary; it is a no-op when bin/chdb-venv is already built). The test
// fails with the script's output when the venv cannot be built.
func Python(t testing.TB) string {
	t.Helper()
	return venv.Python(t)
}

// Target is where a scenario run puts its data (pyscenario.Target).
type Target = pyscenario.Target

// Result is the scenario's output document: Results maps a query name to
// its rows, Info holds timings and ClickHouse's S3 counters
// (system.events).
type Result = pyscenario.Result

// RunScenario runs e2e/clickhouse/scenario.py against the endpoint and
// returns its results (see Result.Results). The test fails, with the script's
// stderr, if the scenario does.
func RunScenario(t testing.TB, endpoint, accessKey, secretKey, bucket, prefix string) map[string]any {
	t.Helper()
	return Run(t, Target{Endpoint: endpoint, AccessKey: accessKey, SecretKey: secretKey, Bucket: bucket, Prefix: prefix}).Results
}

// Run is RunScenario with the whole output document. Extra arguments are
// passed to scenario.py (for example "--batches=2").
func Run(t testing.TB, tg Target, extraArgs ...string) *Result {
	t.Helper()
	args := append([]string{"--workdir", filepath.Join(t.TempDir(), "chdb")}, extraArgs...)
	return pyscenario.Run(t, Python(t), "e2e/clickhouse/scenario.py", tg, scenarioTimeout, args...)
}

// Diff lists the differences between two results maps, one line per query
// name, sorted; nil means they are equal.
func Diff(want, got map[string]any) []string { return pyscenario.Diff(want, got) }

// RequireSame fails the test unless the two results maps are equal, naming
// the queries that differ.
func RequireSame(t testing.TB, wantName string, want map[string]any, gotName string, got map[string]any) {
	t.Helper()
	pyscenario.RequireSame(t, wantName, want, gotName, got)
}

// Cell returns results[name][row][col], failing the test if it is not there.
func Cell(t testing.TB, results map[string]any, name string, row, col int) any {
	t.Helper()
	rows, ok := results[name].([]any)
	if !ok || row >= len(rows) {
		t.Fatalf("chdbtest: %s has no row %d: %s", name, row, pyscenario.Short(results[name]))
	}
	cols, ok := rows[row].([]any)
	if !ok || col >= len(cols) {
		t.Fatalf("chdbtest: %s row %d has no column %d: %s", name, row, col, pyscenario.Short(rows[row]))
	}
	return cols[col]
}

// Uint returns Cell as an unsigned integer.
func Uint(t testing.TB, results map[string]any, name string, row, col int) uint64 {
	t.Helper()
	v := Cell(t, results, name, row, col)
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("chdbtest: %s[%d][%d] = %#v, not a number", name, row, col, v)
	}
	u, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		t.Fatalf("chdbtest: %s[%d][%d] = %s: %v", name, row, col, n, err)
	}
	return u
}

// Rows returns the number of rows a query returned.
func Rows(t testing.TB, results map[string]any, name string) int {
	t.Helper()
	rows, ok := results[name].([]any)
	if !ok {
		t.Fatalf("chdbtest: no query %q in results", name)
	}
	return len(rows)
}
