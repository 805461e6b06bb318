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

// An S3 without conditional writes (it answers them 501 NotImplemented)
// still gets every version: the backend falls back to plain PUTs, once.
func TestS3WithoutConditionalWrites(t *testing.T) {
	e := newS3(t)
	proxy := s3proxy.New(t, e.srv.Endpoint)
	proxy.Inject(s3proxy.Rule{Conditional: true,
		Fault: s3proxy.Fault{Kind: s3proxy.Status, Status: http.StatusNotImplemented, Code: "NotImplemented"}})
	b, err := s3backend.New(s3backend.Config{Endpoint: proxy.URL(), Region: e.srv.Region, UsePathStyle: true,
		PartSize: 5 << 20, MaxBackoff: 20 * time.Millisecond})
	testutil.Must(t, err)
	backend := &Backend{S3: b, Credentials: e.backend.Credentials}

	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	r := rand.New(rand.NewPCG(23, 24))
	want := map[string][]byte{}
	for i := range 5 {
		key := "plain/" + strconv.Itoa(i)
		want[key] = testutil.RandomBytes(r, 1+r.IntN(32<<10))
		put(t, j, key, want[key])
	}
	run(t, &Persister{Journal: j, S3: backend, Workers: 1, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	drained(t, j, time.Minute)
	for key, body := range want {
		if got := e.object(t, key); !bytes.Equal(got, body) {
			t.Fatalf("%s: MinIO holds %d bytes, want %d", key, len(got), len(body))
		}
	}
	conditional, refused := 0, 0
	for _, rec := range proxy.Requests() {
		if rec.IfMatch != "" || rec.IfNoneMatch != "" {
			conditional++
			if rec.Status == http.StatusNotImplemented {
				refused++
			}
		}
	}
	if conditional != 1 || refused != 1 {
		t.Fatalf("%d conditional writes reached the S3 without them (%d refused); want one, then plain PUTs", conditional, refused)
	}
}
