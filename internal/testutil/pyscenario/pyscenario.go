// Package pyscenario runs a Python S3 client (ClickHouse's engine chdb,
// boto3) as a real client in tests: a scenario script, run by the python of
// a virtualenv a hack/*-venv.sh script builds in bin/, against an S3
// endpoint, prints one JSON document whose Results are deterministic for a
// given generation, so two runs against different endpoints (MinIO
// directly, the distcache gateway) must be equal; RequireSame checks that.
//
// Numbers in the results are json.Number, so 64-bit values compare exactly.
package pyscenario

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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil/repo"
)

// venvTimeout is generous: a first venv build downloads hundreds of MB.
const venvTimeout = 20 * time.Minute

// Venv is a virtualenv that a script of hack/ builds and whose python it
// prints on stdout.
type Venv struct {
	Script string // relative to the repository root, e.g. hack/chdb-venv.sh
	EnvVar string // names a python to use instead, e.g. CHDB_PYTHON
	Module string // what the python must import, for messages
}

var (
	pythonsMu sync.Mutex
	pythons   = map[Venv]*python{}
)

type python struct {
	once sync.Once
	path string
	err  error
}

// Python returns the path of the venv's python: $EnvVar when set, else what
// Script prints (run once per test binary; it is a no-op once the venv is
// built). The test fails with the script's output when it cannot be built.
func (v Venv) Python(t testing.TB) string {
	t.Helper()
	pythonsMu.Lock()
	p := pythons[v]
	if p == nil {
		p = &python{}
		pythons[v] = p
	}
	pythonsMu.Unlock()
	p.once.Do(func() { p.path, p.err = v.find() })
	if p.err != nil {
		t.Fatalf("pyscenario: no python that can import %s: %v", v.Module, p.err)
	}
	return p.path
}

func (v Venv) find() (string, error) {
	if p := os.Getenv(v.EnvVar); p != "" {
		return p, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), venvTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, v.Script))
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %v (the first run needs python3 with venv and network access to PyPI; "+
			"or set %s to a python that can import %s)\n%s", v.Script, err, v.EnvVar, v.Module, Tail(stderr.Bytes(), 8<<10))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	p := strings.TrimSpace(lines[len(lines)-1])
	if p == "" {
		return "", fmt.Errorf("%s printed no python path\n%s", v.Script, Tail(stderr.Bytes(), 8<<10))
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s printed %q: %v", v.Script, p, err)
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
	// CABundle, when set, is the PEM file of the CAs an https Endpoint's
	// certificate chains to (AWS_CA_BUNDLE, which boto3 reads).
	CABundle string
}

// scenarioEnv is environ without what would make an AWS SDK (boto3, or
// ClickHouse's S3 client) behave otherwise than the scenario says: no AWS_*
// variable, and no shared config or credentials files (a developer's
// ~/.aws/config with s3 signature_version = s3v4, for one, changes which
// signer boto3 presigns with); then tg, and AWS_CA_BUNDLE for its CAs.
func scenarioEnv(environ []string, tg Target) []string {
	env := make([]string, 0, len(environ)+10)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"AWS_CONFIG_FILE="+os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE="+os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
		"S3_ENDPOINT="+tg.Endpoint,
		"S3_ACCESS_KEY="+tg.AccessKey,
		"S3_SECRET_KEY="+tg.SecretKey,
		"S3_BUCKET="+tg.Bucket,
		"S3_PREFIX="+tg.Prefix,
		"S3_REGION="+cmp.Or(tg.Region, "us-east-1"),
	)
	if tg.CABundle != "" {
		env = append(env, "AWS_CA_BUNDLE="+tg.CABundle)
	}
	return env
}

// Result is a scenario's output document.
type Result struct {
	// Results maps a step's name to what it gave; deterministic for a
	// given generation (Params), whatever the endpoint.
	Results map[string]any `json:"results"`
	// Params are the generation parameters (batches, rows per batch, ...).
	Params map[string]any `json:"params"`
	// Info holds what varies between runs or endpoints: timings, counters.
	Info map[string]any `json:"info"`
	// Elapsed is the wall time of the whole python process.
	Elapsed time.Duration `json:"-"`
}

// Run runs script (relative to the repository root) with py against tg,
// which it gets from the environment (S3_ENDPOINT, S3_ACCESS_KEY,
// S3_SECRET_KEY, S3_BUCKET, S3_PREFIX, S3_REGION, AWS_CA_BUNDLE: credentials
// never in argv), with args, for at most timeout. The test fails, with the script's
// stderr, if the scenario does or prints no results.
func Run(t testing.TB, py, script string, tg Target, timeout time.Duration, args ...string) *Result {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatalf("pyscenario: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, append([]string{filepath.Join(root, script)}, args...)...)
	cmd.Env = scenarioEnv(os.Environ(), tg)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%v (timed out after %v)", err, timeout)
		}
		t.Fatalf("pyscenario: %s against %s/%s/%s failed after %v: %v\nstderr:\n%s\nstdout:\n%s",
			script, tg.Endpoint, tg.Bucket, tg.Prefix, elapsed.Round(time.Millisecond), err,
			Tail(stderr.Bytes(), 16<<10), Tail(stdout.Bytes(), 4<<10))
	}
	var res Result
	dec := json.NewDecoder(&stdout)
	dec.UseNumber()
	if err := dec.Decode(&res); err != nil {
		t.Fatalf("pyscenario: %s printed no JSON: %v\nstdout:\n%s\nstderr:\n%s",
			script, err, Tail(stdout.Bytes(), 4<<10), Tail(stderr.Bytes(), 16<<10))
	}
	if len(res.Results) == 0 {
		t.Fatalf("pyscenario: %s returned no results\nstderr:\n%s", script, Tail(stderr.Bytes(), 16<<10))
	}
	if stderr.Len() > 0 {
		t.Logf("pyscenario: %s stderr:\n%s", script, Tail(stderr.Bytes(), 4<<10))
	}
	res.Elapsed = elapsed
	return &res
}

// Diff lists the differences between two results maps, one line per step,
// sorted; nil means they are equal.
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
			out = append(out, fmt.Sprintf("%s: unexpected, got %s", k, Short(g)))
		case !inG:
			out = append(out, fmt.Sprintf("%s: missing, want %s", k, Short(w)))
		case !reflect.DeepEqual(w, g):
			out = append(out, fmt.Sprintf("%s:\n\twant %s\n\tgot  %s", k, Short(w), Short(g)))
		}
	}
	sort.Strings(out)
	return out
}

// RequireSame fails the test unless the two results maps are equal, naming
// the steps that differ.
func RequireSame(t testing.TB, wantName string, want map[string]any, gotName string, got map[string]any) {
	t.Helper()
	if d := Diff(want, got); len(d) > 0 {
		t.Fatalf("pyscenario: %s and %s differ in %d of %d steps:\n%s",
			wantName, gotName, len(d), len(want), strings.Join(d, "\n"))
	}
}

// Short is v as JSON, cut to 400 bytes.
func Short(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	if len(b) > 400 {
		return string(b[:400]) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return string(b)
}

// Tail is the last n bytes of b.
func Tail(b []byte, n int) string {
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}
