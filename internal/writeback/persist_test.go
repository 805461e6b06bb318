package writeback

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/miniotest"
)

type s3env struct {
	srv     *miniotest.Server
	backend *Backend
}

func newS3(t *testing.T) *s3env {
	t.Helper()
	srv := miniotest.Start(t)
	srv.CreateBucket(t, "bucket-a")
	b, err := s3backend.New(s3backend.Config{Endpoint: srv.Endpoint, Region: srv.Region, UsePathStyle: true,
		PartSize: 5 << 20, MaxBackoff: 20 * time.Millisecond})
	testutil.Must(t, err)
	creds := s3backend.Credentials{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
	return &s3env{srv: srv, backend: &Backend{S3: b, Credentials: func(string, string) (s3backend.Credentials, bool) { return creds, true }}}
}

// object is what MinIO holds at key (nil: nothing).
func (e *s3env) object(t *testing.T, key string) []byte {
	t.Helper()
	return miniotest.Object(t, e.srv.Client(t), "bucket-a", key)
}

// run starts p until the test ends.
func run(t *testing.T, p *Persister) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { p.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// drained waits until the journal holds nothing to persist.
func drained(t *testing.T, j *Journal, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for j.Stats().Dirty > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("after %v the journal still holds %+v", within, j.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Every version written reaches MinIO byte-exact (a large one as a
// multipart upload), a delete of a key S3 holds deletes it there, and the
// journal is empty once S3 has everything; Persisted is told S3's ETag.
func TestPersistsToS3(t *testing.T) {
	e := newS3(t)
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	r := rand.New(rand.NewPCG(7, 8))
	want := map[string][]byte{}
	for i := range 20 {
		key := fmt.Sprintf("obj/%02d", i)
		want[key] = testutil.RandomBytes(r, 1+r.IntN(64<<10))
		put(t, j, key, want[key])
	}
	want["big"] = testutil.RandomBytes(r, 12<<20) // above the 5 MiB part size
	put(t, j, "big", want["big"])
	var mu sync.Mutex
	etags := map[string]string{}
	run(t, &Persister{Journal: j, S3: e.backend, Persisted: func(en Entry, etag string) {
		mu.Lock()
		etags[en.Key] = etag
		mu.Unlock()
	}})
	drained(t, j, time.Minute)
	for key, b := range want {
		if got := e.object(t, key); !bytes.Equal(got, b) {
			t.Fatalf("%s: MinIO holds %d bytes, not the %d written", key, len(got), len(b))
		}
	}
	mu.Lock()
	if etags["obj/00"] != etagOf(want["obj/00"]) || etags["big"] == "" {
		t.Fatalf("Persisted ETags %q and %q; want the body's MD5 and the multipart ETag", etags["obj/00"], etags["big"])
	}
	mu.Unlock()

	_, err = j.Write(Entry{Name: Name{"team-a", "bucket-a", "obj/00"}, Version: j.NextVersion(), Op: OpDelete}, nil)
	testutil.Must(t, err)
	drained(t, j, time.Minute)
	if got := e.object(t, "obj/00"); got != nil {
		t.Fatalf("deleted key still in MinIO (%d bytes)", len(got))
	}
	if s := j.Stats(); s.Objects != 0 || s.Bytes != 0 {
		t.Fatalf("journal after persisting everything: %+v", s)
	}
}

// With MinIO down, writes are still taken (up to the limit) and kept; once
// it is back every one of them reaches it.
func TestS3DownThenBack(t *testing.T) {
	e := newS3(t)
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	r := rand.New(rand.NewPCG(9, 10))
	var attempts, failures int
	var mu sync.Mutex
	run(t, &Persister{Journal: j, S3: e.backend, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		Observe: func(_ Op, err error, _ time.Duration) {
			mu.Lock()
			attempts++
			if err != nil {
				failures++
			}
			mu.Unlock()
		}})
	e.srv.Stop()
	want := map[string][]byte{}
	for i := range 10 {
		key := fmt.Sprintf("down/%d", i)
		want[key] = testutil.RandomBytes(r, 1000+i)
		put(t, j, key, want[key])
	}
	time.Sleep(500 * time.Millisecond)
	if s := j.Stats(); s.Dirty != 10 {
		t.Fatalf("with S3 down the journal holds %+v, want all 10", s)
	}
	e.srv.Restart(t)
	drained(t, j, time.Minute)
	for key, b := range want {
		if got := e.object(t, key); !bytes.Equal(got, b) {
			t.Fatalf("%s: MinIO holds %d bytes after it came back, want %d", key, len(got), len(b))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if failures == 0 {
		t.Fatalf("%d attempts, none failed: S3 was never seen down", attempts)
	}
}

// Writes and deletes of a few keys from several writers while the
// persister runs, with the history recorded: once it drained, S3 holds for
// every key what the newest acknowledged operation says (the body, or
// nothing), never an older upload that finished late.
func TestS3EndsWithTheNewestVersion(t *testing.T) {
	e := newS3(t)
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	run(t, &Persister{Journal: j, S3: e.backend, Workers: 4})
	keys := []string{"k0", "k1", "k2"}
	type op struct {
		version uint64
		body    []byte // nil: delete
	}
	var (
		mu      sync.Mutex
		history = map[string][]op{}
		wg      sync.WaitGroup
	)
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 11))
			for range 40 {
				key := keys[r.IntN(len(keys))]
				en := Entry{Name: Name{"team-a", "bucket-a", key}, Version: j.NextVersion(), Op: OpPut}
				var body []byte
				if r.IntN(4) == 0 {
					en.Op = OpDelete
				} else {
					body = testutil.RandomBytes(r, 1+r.IntN(32<<10))
					en.Size = int64(len(body))
				}
				if _, err := j.Write(en, bytes.NewReader(body)); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				history[key] = append(history[key], op{en.Version, body})
				mu.Unlock()
				time.Sleep(time.Duration(r.IntN(3)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	drained(t, j, time.Minute)
	for _, key := range keys {
		var last op
		for _, o := range history[key] {
			if o.version > last.version {
				last = o
			}
		}
		if got := e.object(t, key); !bytes.Equal(got, last.body) {
			t.Fatalf("%s: MinIO holds %d bytes; the newest of %d operations (version %d) says %d bytes",
				key, len(got), len(history[key]), last.version, len(last.body))
		}
	}
}
