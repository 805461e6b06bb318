package clickhouse

import (
	"context"
	"fmt"
	"time"
)

// Engine runs ClickHouse (chdb) processes for the other parts of the
// bench: B5 (tools/benchmark/writepath) inserts B2's table through it, the
// same table definition and rows (chbench.py insert).
type Engine struct{ ch *chdb }

// NewEngine finds chdb's python ($CHDB_PYTHON, or the venv
// hack/chdb-venv.sh in the repository root builds) and keeps its
// processes' directories under dir.
func NewEngine(ctx context.Context, root, dir string) (*Engine, error) {
	python, err := findPython(ctx, root)
	if err != nil {
		return nil, err
	}
	ch, err := newChdb(python, dir)
	if err != nil {
		return nil, err
	}
	return &Engine{ch: ch}, nil
}

// Inserter is one fresh ClickHouse process that has created B2's table,
// empty and with its background merges stopped, at an endpoint, and holds
// the rows to insert in memory, in batches.
type Inserter struct {
	s *session
	// Version is ClickHouse's, Chdb the chdb package's.
	Version, Chdb string
	// Generated is what creating the table and generating the rows took
	// (not part of the inserts).
	Generated time.Duration
}

// StartInsert starts an Inserter of rows rows (B2's first rows) in
// batches INSERTs, its table at ep.
func (e *Engine) StartInsert(ctx context.Context, ep Endpoint, rows, batches int) (*Inserter, error) {
	if rows < batches || batches < 1 {
		return nil, fmt.Errorf("clickhouse: %d rows in %d batches", rows, batches)
	}
	s, err := e.ch.start(ctx, ep, "insert", "--rows", fmt.Sprint(rows), "--batches", fmt.Sprint(batches))
	if err != nil {
		return nil, err
	}
	var hello struct {
		Generated float64 `json:"generated"`
		Version   string  `json:"version"`
		Chdb      string  `json:"chdb"`
	}
	if err := s.read(&hello); err != nil {
		s.kill()
		return nil, fmt.Errorf("create and generate: %w", err)
	}
	return &Inserter{s: s, Version: hello.Version, Chdb: hello.Chdb, Generated: seconds(hello.Generated)}, nil
}

// Pid is the ClickHouse process's.
func (in *Inserter) Pid() int { return in.s.cmd.Process.Pid }

// Inserted is what the INSERTs took.
type Inserted struct {
	Batches []time.Duration // each INSERT, from its start until ClickHouse answered it
	// Events are ClickHouse's own counts during them: its S3 requests
	// (S3PutObject, S3UploadPart, S3HeadObject, ...), WriteBufferFromS3Bytes,
	// InsertedRows.
	Events map[string]int64
}

// Total is the INSERTs' time, one after the other.
func (i Inserted) Total() time.Duration {
	var t time.Duration
	for _, b := range i.Batches {
		t += b
	}
	return t
}

// Insert runs the INSERTs, one batch after the other.
func (in *Inserter) Insert() (Inserted, error) {
	r, err := in.s.do("insert", "")
	if err != nil {
		return Inserted{}, err
	}
	out := Inserted{Events: r.Events}
	for _, b := range r.Batches {
		out.Batches = append(out.Batches, seconds(b))
	}
	if len(out.Batches) == 0 {
		return out, fmt.Errorf("chbench.py insert: no INSERT timed")
	}
	return out, nil
}

// Fingerprint is the table's row count and the sum of its rows' hashes,
// as this process reads the table from its endpoint.
func (in *Inserter) Fingerprint() (string, error) { return fingerprint(in.s) }

// Close asks the process to quit and waits for it.
func (in *Inserter) Close() error { return in.s.close() }

// Kill ends the process.
func (in *Inserter) Kill() { in.s.kill() }

// Fingerprint starts a fresh ClickHouse process that attaches the table at
// ep (one an Inserter created there) and returns its fingerprint.
func (e *Engine) Fingerprint(ctx context.Context, ep Endpoint) (_ string, err error) {
	s, err := e.ch.serve(ctx, ep, chOpts{})
	if err != nil {
		return "", err
	}
	defer func() {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}()
	return fingerprint(s)
}

func fingerprint(s *session) (string, error) {
	r, err := s.verify("table")
	if err != nil {
		return "", err
	}
	if len(r.Rows) != 1 || len(r.Rows[0]) != 2 {
		return "", fmt.Errorf("chbench.py verify table: %v", r.Rows)
	}
	return fmt.Sprintf("%v rows, hash sum %v", r.Rows[0][0], r.Rows[0][1]), nil
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
