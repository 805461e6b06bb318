// Package chdbtest runs ClickHouse (chdb, ClickHouse's engine as a Python
// package) as a real S3 client in tests.
//
// Python finds the interpreter of the virtualenv that hack/chdb-venv.sh builds
// in bin/chdb-venv (the first run downloads chdb from PyPI, ~1 minute; later
// runs return at once). Run executes e2e/clickhouse/scenario.py against any S3
// endpoint: a MergeTree table on an S3 disk (INSERT batches, OPTIMIZE FINAL,
// SELECTs, ALTER DELETE, lightweight DELETE, DROP) and a Parquet file written
// and read through the s3() table function. Its Results are deterministic, so
// two runs against different endpoints (MinIO directly, the distcache gateway)
// must be equal; RequireSame checks that.
//
// Numbers in the results are json.Number, so 64-bit values compare exactly.
package chdbtest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil/repo"
)

// Timeouts are generous: the first venv build downloads hundreds of MB, and a
// scenario run on a loaded 2-core machine with chdb's cold start can take a
// while.
const (
	venvTimeout     = 20 * time.Minute
	scenarioTimeout = 5 * time.Minute
)

var (
	pythonOnce sync.Once
	pythonPath string
	pythonErr  error
)

// Python returns the path of a python interpreter that can import chdb. It is
// $CHDB_PYTHON when set, else the output of hack/chdb-venv.sh (run once per
// test binary; it is a no-op when bin/chdb-venv is already built). The test
// fails with the script's output when the venv cannot be built.
func Python(t testing.TB) string {
	t.Helper()
	pythonOnce.Do(func() { pythonPath, pythonErr = findPython() })
	if pythonErr != nil {
		t.Fatalf("chdbtest: no chdb python: %v", pythonErr)
	}
	return pythonPath
}

func findPython() (string, error) {
	if p := os.Getenv("CHDB_PYTHON"); p != "" {
		return p, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), venvTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "chdb-venv.sh"))
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/chdb-venv.sh: %v (the first run needs python3 with venv and network access to PyPI; "+
			"or set CHDB_PYTHON to a python that can import chdb)\n%s", err, tail(stderr.Bytes(), 8<<10))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	p := strings.TrimSpace(lines[len(lines)-1])
	if p == "" {
		return "", fmt.Errorf("hack/chdb-venv.sh printed no python path\n%s", tail(stderr.Bytes(), 8<<10))
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("hack/chdb-venv.sh printed %q: %v", p, err)
	}
	return p, nil
}

// Target is where a scenario run puts its data: an S3 endpoint
// (http://host:port, path-style), credentials, a bucket that exists, and a key
// prefix that no other run uses.
type Target struct {
	Endpoint  string
	AccessKey string
	SecretKey string
	Bucket    string
	Prefix    string
	Region    string // "" means us-east-1
}

// Result is the scenario's output document.
type Result struct {
	// Results maps a query name to its rows; deterministic for a given
	// generation (Params), whatever the endpoint.
	Results map[string]any `json:"results"`
	// Params are the generation parameters (batches, rows per batch, ...).
	Params map[string]any `json:"params"`
	// Info holds timings and ClickHouse's S3 counters (system.events); it
	// varies between runs.
	Info map[string]any `json:"info"`
	// Elapsed is the wall time of the whole python process.
	Elapsed time.Duration `json:"-"`
}

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
	py := Python(t)
	root, err := repo.Root()
	if err != nil {
		t.Fatalf("chdbtest: %v", err)
	}
	script := filepath.Join(root, "e2e", "clickhouse", "scenario.py")

	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout)
	defer cancel()
	args := append([]string{script, "--workdir", filepath.Join(t.TempDir(), "chdb")}, extraArgs...)
	cmd := exec.CommandContext(ctx, py, args...)
	// Credentials go through the environment, not argv.
	cmd.Env = append(os.Environ(),
		"S3_ENDPOINT="+tg.Endpoint,
		"S3_ACCESS_KEY="+tg.AccessKey,
		"S3_SECRET_KEY="+tg.SecretKey,
		"S3_BUCKET="+tg.Bucket,
		"S3_PREFIX="+tg.Prefix,
		"S3_REGION="+cmp.Or(tg.Region, "us-east-1"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%v (timed out after %v)", err, scenarioTimeout)
		}
		t.Fatalf("chdbtest: scenario against %s/%s/%s failed after %v: %v\nstderr:\n%s\nstdout:\n%s",
			tg.Endpoint, tg.Bucket, tg.Prefix, elapsed.Round(time.Millisecond), err,
			tail(stderr.Bytes(), 16<<10), tail(stdout.Bytes(), 4<<10))
	}
	var res Result
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("chdbtest: scenario output is not JSON: %v\nstdout:\n%s\nstderr:\n%s",
			err, tail(stdout.Bytes(), 4<<10), tail(stderr.Bytes(), 16<<10))
	}
	if len(res.Results) == 0 {
		t.Fatalf("chdbtest: scenario returned no results\nstderr:\n%s", tail(stderr.Bytes(), 16<<10))
	}
	if stderr.Len() > 0 {
		t.Logf("chdbtest: scenario stderr:\n%s", tail(stderr.Bytes(), 4<<10))
	}
	res.Elapsed = elapsed
	return &res
}

// Diff lists the differences between two results maps, one line per query
// name, sorted; nil means they are equal.
func Diff(want, got map[string]any) []string {
	names := map[string]bool{}
	for k := range want {
		names[k] = true
	}
	for k := range got {
		names[k] = true
	}
	var out []string
	for k := range names {
		w, inW := want[k]
		g, inG := got[k]
		switch {
		case !inW:
			out = append(out, fmt.Sprintf("%s: unexpected, got %s", k, short(g)))
		case !inG:
			out = append(out, fmt.Sprintf("%s: missing, want %s", k, short(w)))
		case !reflect.DeepEqual(w, g):
			out = append(out, fmt.Sprintf("%s:\n\twant %s\n\tgot  %s", k, short(w), short(g)))
		}
	}
	sort.Strings(out)
	return out
}

// RequireSame fails the test unless the two results maps are equal, naming
// the queries that differ.
func RequireSame(t testing.TB, wantName string, want map[string]any, gotName string, got map[string]any) {
	t.Helper()
	if d := Diff(want, got); len(d) > 0 {
		t.Fatalf("chdbtest: %s and %s differ in %d of %d queries:\n%s",
			wantName, gotName, len(d), len(want), strings.Join(d, "\n"))
	}
}

// Cell returns results[name][row][col], failing the test if it is not there.
func Cell(t testing.TB, results map[string]any, name string, row, col int) any {
	t.Helper()
	rows, ok := results[name].([]any)
	if !ok || row >= len(rows) {
		t.Fatalf("chdbtest: %s has no row %d: %s", name, row, short(results[name]))
	}
	cols, ok := rows[row].([]any)
	if !ok || col >= len(cols) {
		t.Fatalf("chdbtest: %s row %d has no column %d: %s", name, row, col, short(rows[row]))
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

func short(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	if len(b) > 400 {
		return string(b[:400]) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return string(b)
}

func tail(b []byte, n int) string {
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}
