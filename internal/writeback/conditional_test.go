package writeback

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

// racingS3 is the persister's S3 with another holder persisting a newer
// version of the key right after the persister's first look at it, before
// its upload: what two holders that each take themselves for the one to
// persist (around a ring change) can do.
type racingS3 struct {
	*Backend
	newer func(e Entry)
	once  sync.Once
}

func (r *racingS3) Version(ctx context.Context, e Entry) (Seen, error) {
	seen, err := r.Backend.Version(ctx, e)
	r.once.Do(func() { r.newer(e) })
	return seen, err
}

// An upload never replaces a newer version that reached S3 after the
// persister looked: the key absent or holding an older object at the look,
// a single PUT, a multipart upload above the part size and a held
// multipart upload. The persister looks again, finds the newer version and
// drops its own.
func TestUploadNeverReplacesANewerVersion(t *testing.T) {
	e := newS3(t)
	c := e.srv.Client(t)
	r := rand.New(rand.NewPCG(21, 22))
	for _, tc := range []struct {
		name   string
		size   int
		parts  []int64
		before bool // MinIO holds an object of the key (not the cache's) at the look
	}{
		{name: "absent, one PUT", size: 10 << 10},
		{name: "older object, one PUT", size: 10 << 10, before: true},
		{name: "absent, multipart above the part size", size: 12 << 20},
		{name: "older object, held multipart upload", size: 11 << 20, parts: []int64{5 << 20, 5 << 20, 1 << 20}, before: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "race/" + strconv.Itoa(r.IntN(1e9))
			if tc.before {
				e.srv.PutObject(t, "bucket-a", key, []byte("written behind the cache's back"))
			}
			j, err := Open(t.TempDir(), 1<<30)
			testutil.Must(t, err)
			body := testutil.RandomBytes(r, tc.size)
			en := Entry{Name: Name{"team-a", "bucket-a", key}, Version: j.NextVersion(), Op: OpPut,
				Size: int64(len(body)), Parts: tc.parts, LastModified: time.Now()}
			_, err = j.Write(en, bytes.NewReader(body))
			testutil.Must(t, err)

			newerBody := testutil.RandomBytes(r, 1000)
			var persisted atomic.Int32
			s3 := &racingS3{Backend: e.backend, newer: func(old Entry) {
				// The newer version as its holder's persister sends it.
				_, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &old.Bucket, Key: &old.Key,
					Body: bytes.NewReader(newerBody), Metadata: map[string]string{VersionMetadata: strconv.FormatUint(old.Version+1, 10)}})
				if err != nil {
					t.Errorf("writing the newer version: %v", err)
				}
			}}
			run(t, &Persister{Journal: j, S3: s3, Persisted: func(Entry, string) { persisted.Add(1) }})
			drained(t, j, time.Minute)
			if got := e.object(t, key); !bytes.Equal(got, newerBody) {
				t.Fatalf("MinIO holds %d bytes, not the newer version's %d: the older upload replaced it", len(got), len(newerBody))
			}
			if n := persisted.Load(); n != 0 {
				t.Fatalf("Persisted was told %d times of a version S3 never kept", n)
			}
		})
	}
}

// An object deleted from S3 between the look and the upload (S3 answers
// If-Match on it 404) is looked at again, and the version goes up at once,
// not after a failed attempt's backoff.
func TestUploadAfterTheObjectSeenWasDeleted(t *testing.T) {
	e := newS3(t)
	c := e.srv.Client(t)
	key := "race/deleted"
	e.srv.PutObject(t, "bucket-a", key, []byte("an older object, deleted after the look"))
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	body := []byte("the held version")
	put(t, j, key, body)
	s3 := &racingS3{Backend: e.backend, newer: func(old Entry) {
		if _, err := c.DeleteObject(context.Background(), &s3.DeleteObjectInput{Bucket: &old.Bucket, Key: &old.Key}); err != nil {
			t.Errorf("deleting the object: %v", err)
		}
	}}
	var failed atomic.Int32
	run(t, &Persister{Journal: j, S3: s3, MinBackoff: time.Minute, Observe: func(_ Op, err error, _ time.Duration) {
		if err != nil {
			failed.Add(1)
			t.Logf("attempt failed: %v", err)
		}
	}})
	drained(t, j, 30*time.Second)
	if got := e.object(t, key); !bytes.Equal(got, body) {
		t.Fatalf("MinIO holds %q, want the held version", got)
	}
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d attempts failed; the object gone since the look should have been looked at again", n)
	}
}

// A delete never removes a newer version that reached S3 after the
// persister looked: it is conditional on the object seen. MinIO ignores
// If-Match on a DELETE, so the proxy in front of it answers the
// conditional DELETE as AWS S3 does when the object changed (412).
func TestDeleteNeverRemovesANewerVersion(t *testing.T) {
	e := newS3(t)
	proxy, backend := e.behindProxy(t, false, s3proxy.Rule{Method: http.MethodDelete, Conditional: true, Times: 1,
		Fault: s3proxy.Fault{Kind: s3proxy.Status, Status: http.StatusPreconditionFailed, Code: "PreconditionFailed"}})

	key := "race/delete"
	e.srv.PutObject(t, "bucket-a", key, []byte("an older version"))
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	en := Entry{Name: Name{"team-a", "bucket-a", key}, Version: j.NextVersion(), Op: OpDelete}
	_, err = j.Write(en, nil)
	testutil.Must(t, err)
	newerBody := []byte("the newer version, persisted by another holder after the look")
	c := e.srv.Client(t)
	s3 := &racingS3{Backend: backend, newer: func(old Entry) {
		_, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &old.Bucket, Key: &old.Key,
			Body: bytes.NewReader(newerBody), Metadata: map[string]string{VersionMetadata: strconv.FormatUint(old.Version+1, 10)}})
		if err != nil {
			t.Errorf("writing the newer version: %v", err)
		}
	}}
	run(t, &Persister{Journal: j, S3: s3})
	drained(t, j, time.Minute)
	if got := e.object(t, key); !bytes.Equal(got, newerBody) {
		t.Fatalf("MinIO holds %q, not the newer version: the older delete removed it", got)
	}
	deletes := 0
	for _, rec := range proxy.Requests() {
		if rec.Method == http.MethodDelete {
			deletes++
			if rec.IfMatch == "" {
				t.Fatalf("a DELETE without If-Match: %+v", rec)
			}
		}
	}
	if deletes != 1 {
		t.Fatalf("%d DELETEs reached S3; want the one refused, then none (the newer version makes the delete stale)", deletes)
	}
}

// An S3 without conditional writes and deletes (it answers them 501
// NotImplemented) still gets every version and delete: the backend falls
// back to plain PUTs and DELETEs, once each.
func TestS3WithoutConditionalWrites(t *testing.T) {
	e := newS3(t)
	proxy, backend := e.behindProxy(t, false, notImplemented)
	j := e.persistAll(t, backend, 23, 5)
	for _, key := range []string{"plain/0", "plain/1"} {
		_, err := j.Write(Entry{Name: Name{"team-a", "bucket-a", key}, Version: j.NextVersion(), Op: OpDelete}, nil)
		testutil.Must(t, err)
	}
	drained(t, j, time.Minute)
	for _, key := range []string{"plain/0", "plain/1"} {
		if got := e.object(t, key); got != nil {
			t.Fatalf("%s deleted, but MinIO still holds %d bytes", key, len(got))
		}
	}
	refused := map[string]int{}
	for _, rec := range proxy.Requests() {
		if rec.IfMatch != "" || rec.IfNoneMatch != "" {
			if rec.Status != http.StatusNotImplemented {
				t.Fatalf("a conditional request answered %d, after S3 said it has none: %+v", rec.Status, rec)
			}
			refused[rec.Method]++
		}
	}
	if refused[http.MethodPut] != 1 || refused[http.MethodDelete] != 1 || len(refused) != 2 {
		t.Fatalf("conditional requests refused by the S3 without them: %v; want one PUT and one DELETE, then plain ones", refused)
	}
}

// With PutIfAbsent, a small version of a new key goes up in one request (a
// PUT with If-None-Match: *, no HEAD); one of a key S3 holds gets the 412,
// then the look and the decision any version gets: an older object is
// replaced, a newer version kept. A version above PutIfAbsentMax is looked
// at first.
func TestPutIfAbsent(t *testing.T) {
	e := newS3(t)
	proxy, backend := e.behindProxy(t, true)
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	r := rand.New(rand.NewPCG(25, 26))

	e.srv.PutObject(t, "bucket-a", "older/k", []byte("written behind the cache's back"))
	newer := []byte("a newer version, persisted by another holder")
	want := map[string][]byte{"new/k": testutil.RandomBytes(r, 10<<10), "older/k": testutil.RandomBytes(r, 10<<10),
		"big/k": testutil.RandomBytes(r, PutIfAbsentMax+1), "stale/k": newer}
	for _, key := range []string{"new/k", "older/k", "big/k"} {
		put(t, j, key, want[key])
	}
	stale := put(t, j, "stale/k", testutil.RandomBytes(r, 1000))
	_, err = e.srv.Client(t).PutObject(context.Background(), &s3.PutObjectInput{Bucket: &stale.Bucket, Key: &stale.Key,
		Body: bytes.NewReader(newer), Metadata: map[string]string{VersionMetadata: strconv.FormatUint(stale.Version+1, 10)}})
	testutil.Must(t, err)
	proxy.Reset()

	run(t, &Persister{Journal: j, S3: backend})
	drained(t, j, time.Minute)
	e.holds(t, want)
	for _, c := range []struct {
		prefix     string
		heads, put int
	}{{"/bucket-a/new/", 0, 1}, {"/bucket-a/older/", 1, 2}, {"/bucket-a/stale/", 1, 1}, {"/bucket-a/big/", 1, 1}} {
		if h, p := proxy.Count(http.MethodHead, c.prefix), proxy.Count(http.MethodPut, c.prefix); h != c.heads || p != c.put {
			t.Errorf("%s: %d HEADs and %d PUTs reached S3, want %d and %d", c.prefix, h, p, c.heads, c.put)
		}
	}
}

// With PutIfAbsent on an S3 without conditional writes, no PUT goes up
// without a look before it once S3 said so: the version that found out is
// looked at on its next attempt, as every later one.
func TestPutIfAbsentOnS3WithoutConditionalWrites(t *testing.T) {
	e := newS3(t)
	proxy, backend := e.behindProxy(t, true, notImplemented)
	e.persistAll(t, backend, 27, 4)
	looked := map[string]bool{}
	for _, rec := range proxy.Requests() {
		switch {
		case rec.Method == http.MethodHead:
			looked[rec.Path] = true
		case rec.Method == http.MethodPut && rec.IfMatch == "" && rec.IfNoneMatch == "" && !looked[rec.Path]:
			t.Fatalf("a plain PUT of %s with no look at it before", rec.Path)
		}
	}
}

// notImplemented answers every conditional request as an S3 without
// conditional writes does.
var notImplemented = s3proxy.Rule{Conditional: true,
	Fault: s3proxy.Fault{Kind: s3proxy.Status, Status: http.StatusNotImplemented, Code: "NotImplemented"}}

// behindProxy puts e's MinIO behind a proxy that applies rules, and
// returns it with a Backend (PutIfAbsent: putIfAbsent) that goes through it.
func (e *s3env) behindProxy(t *testing.T, putIfAbsent bool, rules ...s3proxy.Rule) (*s3proxy.Proxy, *Backend) {
	t.Helper()
	proxy := s3proxy.New(t, e.srv.Endpoint)
	proxy.Inject(rules...)
	b, err := s3backend.New(s3backend.Config{Endpoint: proxy.URL(), Region: e.srv.Region, UsePathStyle: true,
		PartSize: 5 << 20, MaxBackoff: 20 * time.Millisecond})
	testutil.Must(t, err)
	return proxy, &Backend{S3: b, Credentials: e.backend.Credentials, PutIfAbsent: putIfAbsent}
}

// persistAll writes n versions of up to 32 KiB under plain/0, plain/1,
// ..., persists them through backend one at a time (retrying quickly),
// and fails the test unless MinIO then holds them all. It returns the
// journal, its persister still running.
func (e *s3env) persistAll(t *testing.T, backend *Backend, seed uint64, n int) *Journal {
	t.Helper()
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	r := rand.New(rand.NewPCG(seed, seed+1))
	want := map[string][]byte{}
	for i := range n {
		key := "plain/" + strconv.Itoa(i)
		want[key] = testutil.RandomBytes(r, 1+r.IntN(32<<10))
		put(t, j, key, want[key])
	}
	run(t, &Persister{Journal: j, S3: backend, Workers: 1, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	drained(t, j, time.Minute)
	e.holds(t, want)
	return j
}

// holds fails the test unless MinIO holds every body of want at its key.
func (e *s3env) holds(t *testing.T, want map[string][]byte) {
	t.Helper()
	for key, body := range want {
		if got := e.object(t, key); !bytes.Equal(got, body) {
			t.Fatalf("%s: MinIO holds %d bytes, want %d", key, len(got), len(body))
		}
	}
}
