package clickhouse

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

//go:embed chbench.py
var chbenchPy []byte

// chdb runs chbench.py (ClickHouse's engine as a Python package) in fresh
// processes: one process is one ClickHouse server with its own caches.
type chdb struct {
	python string
	script string
	dir    string // parent of the processes' working directories
	seq    int
}

// findPython returns $CHDB_PYTHON or the venv python hack/chdb-venv.sh
// prints (it builds bin/chdb-venv on its first run, a no-op afterwards).
func findPython(ctx context.Context, root string) (string, error) {
	if p := os.Getenv("CHDB_PYTHON"); p != "" {
		return p, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "hack", "chdb-venv.sh"))
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/chdb-venv.sh: %v (or set CHDB_PYTHON to a python that can import chdb)\n%s", err, benchkit.Tail(stderr.Bytes(), 4<<10))
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	p := strings.TrimSpace(lines[len(lines)-1])
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("hack/chdb-venv.sh printed %q: %v", p, err)
	}
	return p, nil
}

func newChdb(python, dir string) (*chdb, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "chbench.py")
	if err := os.WriteFile(script, chbenchPy, 0o644); err != nil {
		return nil, err
	}
	return &chdb{python: python, script: script, dir: dir}, nil
}

// Endpoint is where a ClickHouse process keeps the table: its S3 disk is
// at URL/Bucket/Prefix/ (Prefix "": chbench.py's default, clickhouse).
type Endpoint struct {
	URL, AccessKey, SecretKey, Bucket, Prefix string
}

// Local is the Endpoint of a table on the ClickHouse process's own local
// disk, no S3 at all (StartInsert only).
var Local = Endpoint{URL: "local", Bucket: "none"}

func (c *chdb) command(ctx context.Context, ep Endpoint, args ...string) *exec.Cmd {
	c.seq++
	work := filepath.Join(c.dir, fmt.Sprintf("ch-%d", c.seq))
	args = append([]string{c.script, args[0], "--workdir", work, "--endpoint", ep.URL, "--bucket", ep.Bucket}, args[1:]...)
	if ep.Prefix != "" {
		args = append(args, "--prefix", ep.Prefix)
	}
	cmd := exec.CommandContext(ctx, c.python, args...)
	// Credentials go through the environment, not argv.
	cmd.Env = append(os.Environ(), "S3_ACCESS_KEY="+ep.AccessKey, "S3_SECRET_KEY="+ep.SecretKey)
	cmd.WaitDelay = 10 * time.Second
	benchkit.SetPdeathsig(cmd)
	return cmd
}

// loadInfo is chbench.py load's answer.
type loadInfo struct {
	Rows          int64             `json:"rows"`
	Parts         int64             `json:"parts"`
	Marks         int64             `json:"marks"`
	Uncompressed  int64             `json:"uncompressed"`
	Compressed    int64             `json:"compressed"`
	Version       string            `json:"version"` // ClickHouse's
	Chdb          string            `json:"chdb"`    // the chdb package's
	Seconds       float64           `json:"seconds"`
	Columns       [][3]any          `json:"columns"`
	ScatteredRows int64             `json:"scattered_rows"`
	Queries       map[string]string `json:"queries"`
}

// load creates and fills the table at ep.
func (c *chdb) load(ctx context.Context, ep Endpoint, rows int64) (*loadInfo, error) {
	cmd := c.command(ctx, ep, "load", "--rows", fmt.Sprint(rows))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("chbench.py load: %v\n%s", err, benchkit.Tail(stderr.Bytes(), 8<<10))
	}
	var li loadInfo
	if err := json.Unmarshal(stdout.Bytes(), &li); err != nil {
		return nil, fmt.Errorf("chbench.py load: %v: %s", err, benchkit.Tail(stdout.Bytes(), 2<<10))
	}
	return &li, nil
}

// session is one running ClickHouse process that has attached the table.
type session struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *lockedBuffer
	// Attach is what attaching cost (reads of the table's metadata).
	Attach map[string]int64
}

// result is the answer to one command of a session.
type result struct {
	Seconds float64          `json:"seconds"`
	Rows    [][]any          `json:"rows"`
	Events  map[string]int64 `json:"events"`
	Batches []float64        `json:"batches"` // seconds of each INSERT (insert)
}

// chOpts are a ClickHouse process's caches beyond its defaults.
type chOpts struct {
	FSCache bool // a local filesystem cache disk over the S3 disk
	// PageCache is the size of ClickHouse's userspace page cache (server
	// settings page_cache_max_size and page_cache_min_size), which every
	// query then uses (use_page_cache_for_disks_without_file_cache); 0:
	// none.
	PageCache int64
}

// serve starts a ClickHouse process reading the table at ep with opts.
func (c *chdb) serve(ctx context.Context, ep Endpoint, opts chOpts) (*session, error) {
	var args []string
	if opts.FSCache {
		args = append(args, "--fs-cache")
	}
	if opts.PageCache > 0 {
		args = append(args, "--page-cache", fmt.Sprint(opts.PageCache))
	}
	s, err := c.start(ctx, ep, append([]string{"serve"}, args...)...)
	if err != nil {
		return nil, err
	}
	var hello struct {
		Events        map[string]int64 `json:"events"`
		PageCacheSize int64            `json:"page_cache_max_size"`
	}
	if err := s.read(&hello); err != nil {
		s.kill()
		return nil, fmt.Errorf("attach: %w", err)
	}
	// The size is a startup argument of the engine: one that did not reach
	// its server settings fails here, not as a row without a cache.
	if hello.PageCacheSize != opts.PageCache {
		s.kill()
		return nil, fmt.Errorf("chbench.py: page_cache_max_size is %d in the server's settings, want %d", hello.PageCacheSize, opts.PageCache)
	}
	s.Attach = hello.Events
	return s, nil
}

// start starts chbench.py with args (its command first) as a session
// that takes commands on stdin.
func (c *chdb) start(ctx context.Context, ep Endpoint, args ...string) (*session, error) {
	cmd := c.command(ctx, ep, args...)
	s := &session{cmd: cmd, stderr: &lockedBuffer{}}
	var err error
	if s.in, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	s.out = bufio.NewReader(stdout)
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *session) read(v any) error {
	line, err := s.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("chbench.py: %v\n%s", err, benchkit.Tail(s.stderr.Bytes(), 8<<10))
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber() // 64-bit answers compare exactly
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("chbench.py: %v: %s", err, benchkit.Tail(line, 2<<10))
	}
	return nil
}

func (s *session) do(cmd, query string) (*result, error) {
	req, _ := json.Marshal(map[string]string{"cmd": cmd, "query": query})
	if _, err := s.in.Write(append(req, '\n')); err != nil {
		return nil, fmt.Errorf("chbench.py: %v\n%s", err, benchkit.Tail(s.stderr.Bytes(), 8<<10))
	}
	var r result
	if err := s.read(&r); err != nil {
		return nil, err
	}
	return &r, nil
}

// run runs the query ("full" or "scattered") once and times it.
func (s *session) run(query string) (*result, error) { return s.do("run", query) }

// verify answers the query's checksum (after the timed runs).
func (s *session) verify(query string) (*result, error) { return s.do("verify", query) }

// close asks the process to quit and waits for it.
func (s *session) close() error {
	_, _ = s.in.Write([]byte(`{"cmd":"quit"}` + "\n"))
	_ = s.in.Close()
	err := s.cmd.Wait()
	if err != nil {
		return fmt.Errorf("chbench.py: %v\n%s", err, benchkit.Tail(s.stderr.Bytes(), 8<<10))
	}
	return nil
}

func (s *session) kill() {
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

var errAnswer = errors.New("answers differ")
