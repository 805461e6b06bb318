package s3backend_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/chunk"
	"github.com/distcache/distcache/internal/s3backend"
	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/miniotest"
	"github.com/distcache/distcache/internal/testutil/s3proxy"
)

const bucket = "data"

// env is a MinIO with one bucket, a proxy in front of it, and a Backend
// talking to the proxy.
type env struct {
	srv   *miniotest.Server
	proxy *s3proxy.Proxy
	obs   *recorder
	b     *s3backend.Backend
}

// newEnv starts the servers and a Backend configured by cfg, whose
// Endpoint, Region, UsePathStyle, Default credentials and Observer are
// filled in unless set. Backoff is kept short.
func newEnv(t *testing.T, cfg s3backend.Config) *env {
	t.Helper()
	srv := miniotest.Start(t)
	srv.CreateBucket(t, bucket)
	e := &env{srv: srv, proxy: s3proxy.New(t, srv.Endpoint), obs: newRecorder()}
	e.b = e.backend(t, cfg)
	return e
}

func (e *env) backend(t *testing.T, cfg s3backend.Config) *s3backend.Backend {
	t.Helper()
	if cfg.Endpoint == "" {
		cfg.Endpoint = e.proxy.URL()
	}
	cfg.Region = e.srv.Region
	cfg.UsePathStyle = true
	if cfg.Default == (s3backend.Credentials{}) {
		cfg.Default = e.creds()
	}
	if cfg.Observer == nil {
		cfg.Observer = e.obs
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 20 * time.Millisecond
	}
	b, err := s3backend.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

func (e *env) creds() s3backend.Credentials {
	return s3backend.Credentials{AccessKeyID: e.srv.AccessKey, SecretAccessKey: e.srv.SecretKey}
}

// put writes an object directly to MinIO, bypassing the proxy and Backend.
func (e *env) put(t *testing.T, key string, data []byte) {
	t.Helper()
	_, err := e.srv.Client(t).PutObject(ctx(t), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
		ContentType: aws.String("application/x-test"),
	})
	if err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

// ctx is a context that bounds a test step so a hang fails instead of
// stalling the run.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// recorder is an Observer and RetryObserver that remembers what it saw.
type recorder struct {
	mu      sync.Mutex
	ops     []string // "op status"
	retries map[string]int
}

func newRecorder() *recorder { return &recorder{retries: map[string]int{}} }

func (r *recorder) ObserveS3(op, status string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op+" "+status)
}

func (r *recorder) ObserveRetry(op string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.retries[op]++
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops, r.retries = nil, map[string]int{}
}

func (r *recorder) check(t *testing.T, wantOps []string, wantRetries map[string]int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if fmt.Sprint(r.ops) != fmt.Sprint(wantOps) {
		t.Errorf("observed operations %q, want %q", r.ops, wantOps)
	}
	if wantRetries == nil {
		wantRetries = map[string]int{}
	}
	if fmt.Sprint(r.retries) != fmt.Sprint(wantRetries) {
		t.Errorf("observed retries %v, want %v", r.retries, wantRetries)
	}
}

func TestHeadReturnsMetadata(t *testing.T) {
	e := newEnv(t, s3backend.Config{})
	data := testutil.SeededBytes(1000, 1000)
	e.put(t, "obj", data)
	want, err := e.srv.Client(t).HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("obj")})
	testutil.Must(t, err)

	before := time.Now()
	m, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, "obj")
	if err != nil {
		t.Fatalf("Head: %v", err)
	}
	if m.Size != 1000 || m.ETag != aws.ToString(want.ETag) || m.ContentType != "application/x-test" ||
		!m.LastModified.Equal(aws.ToTime(want.LastModified)) || m.FetchedAt.Before(before) {
		t.Errorf("Head = %+v; want size 1000, ETag %s, content type application/x-test, last modified %v, fetched after %v",
			m, aws.ToString(want.ETag), aws.ToTime(want.LastModified), before)
	}
	e.obs.check(t, []string{"head ok"}, nil)
}

func TestGetRangeChunksAreByteExact(t *testing.T) {
	e := newEnv(t, s3backend.Config{})
	for _, tc := range []struct {
		size, chunkSize int64
	}{
		{size: 1, chunkSize: 4},      // 1-byte object
		{size: 1000, chunkSize: 300}, // last chunk partial (100 bytes)
		{size: 1000, chunkSize: 250}, // chunks divide the object exactly
		{size: 1000, chunkSize: 4096},
	} {
		t.Run(fmt.Sprintf("size=%d/chunk=%d", tc.size, tc.chunkSize), func(t *testing.T) {
			key := fmt.Sprintf("obj-%d-%d", tc.size, tc.chunkSize)
			data := testutil.SeededBytes(uint64(tc.size), int(tc.size))
			e.put(t, key, data)
			m, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, key)
			testutil.Must(t, err)
			for i := range chunk.Count(m.Size, tc.chunkSize) {
				off, n, _ := chunk.Bounds(m.Size, tc.chunkSize, i)
				got, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, key, m.ETag, off, n)
				if err != nil {
					t.Fatalf("chunk %d [%d,+%d): %v", i, off, n, err)
				}
				if !bytes.Equal(got, data[off:off+n]) || int64(cap(got)) != n {
					t.Fatalf("chunk %d [%d,+%d): got %d bytes (cap %d), not the object's bytes", i, off, n, len(got), cap(got))
				}
			}
		})
	}
}

func TestGetRangeOutsideObject(t *testing.T) {
	e := newEnv(t, s3backend.Config{})
	data := testutil.SeededBytes(1000, 1000)
	e.put(t, "obj", data)

	got, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "obj", "", 999, 1)
	if err != nil || !bytes.Equal(got, data[999:]) {
		t.Fatalf("last byte: %v, %v", got, err)
	}
	for _, tc := range []struct {
		name        string
		off, length int64
		requests    int // S3 requests expected
	}{
		{"runs past the end", 950, 100, 1},
		{"starts at the end", 1000, 1, 1},
		{"starts past the end", 5000, 10, 1},
		{"negative offset", -1, 10, 0},
		{"negative length", 0, -1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.proxy.Reset()
			_, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "obj", "", tc.off, tc.length)
			if !errors.Is(err, s3backend.ErrInvalidRange) {
				t.Errorf("GetRange(%d, %d) = %v; want ErrInvalidRange", tc.off, tc.length, err)
			}
			if errors.Is(err, s3backend.ErrUnavailable) {
				t.Errorf("GetRange(%d, %d) = %v; must not be ErrUnavailable", tc.off, tc.length, err)
			}
			if n := e.proxy.Count("", "/"); n != tc.requests {
				t.Errorf("S3 saw %d requests, want %d (no retries of a bad range)", n, tc.requests)
			}
		})
	}
}

func TestGetRangeZeroLengthAsksNothing(t *testing.T) {
	e := newEnv(t, s3backend.Config{})
	// Not even the object's existence is checked.
	got, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "missing", `"nope"`, 10, 0)
	if err != nil || got == nil || len(got) != 0 {
		t.Fatalf("GetRange(length 0) = %v, %v; want an empty non-nil slice and no error", got, err)
	}
	if n := e.proxy.Count("", "/"); n != 0 {
		t.Errorf("S3 saw %d requests, want 0", n)
	}
	e.obs.check(t, nil, nil)
}

func TestGetRangeIfMatchAfterOverwrite(t *testing.T) {
	e := newEnv(t, s3backend.Config{})
	e.put(t, "obj", []byte("version one"))
	v1, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, "obj")
	testutil.Must(t, err)
	if got, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "obj", v1.ETag, 0, 7); err != nil || string(got) != "version" {
		t.Fatalf("GetRange with current ETag = %q, %v", got, err)
	}

	e.put(t, "obj", []byte("version two"))
	_, err = e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "obj", v1.ETag, 0, 7)
	if !errors.Is(err, s3backend.ErrPreconditionFailed) {
		t.Fatalf("GetRange with the old ETag = %v; want ErrPreconditionFailed", err)
	}
	v2, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, "obj")
	testutil.Must(t, err)
	if got, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "obj", v2.ETag, 8, 3); err != nil || string(got) != "two" {
		t.Fatalf("GetRange with the new ETag = %q, %v", got, err)
	}
	e.obs.check(t, []string{"head ok", "get ok", "get precondition_failed", "head ok", "get ok"}, nil)
}

func TestNotFound(t *testing.T) {
	e := newEnv(t, s3backend.Config{})
	none := s3backend.Credentials{}
	for name, err := range map[string]error{
		"head missing key":    second(e.b.Head(ctx(t), none, bucket, "missing")),
		"get missing key":     second(e.b.GetRange(ctx(t), none, bucket, "missing", "", 0, 1)),
		"head missing bucket": second(e.b.Head(ctx(t), none, "no-such-bucket", "k")),
		"get missing bucket":  second(e.b.GetRange(ctx(t), none, "no-such-bucket", "k", "", 0, 1)),
	} {
		if !errors.Is(err, s3backend.ErrNotFound) || s3backend.Class(err) != s3backend.StatusNotFound {
			t.Errorf("%s: %v (class %s); want ErrNotFound", name, err, s3backend.Class(err))
		}
	}
	if n := e.proxy.Count("", "/"); n != 4 {
		t.Errorf("S3 saw %d requests, want 4 (not-found is not retried)", n)
	}
}

func second[T any](_ T, err error) error { return err }

func TestAccessDenied(t *testing.T) {
	e := newEnv(t, s3backend.Config{})
	e.put(t, "obj", []byte("secret"))
	good := e.creds()
	badSecret := s3backend.Credentials{AccessKeyID: good.AccessKeyID, SecretAccessKey: "wrong-secret-key"}
	unknownKey := s3backend.Credentials{AccessKeyID: "nobody", SecretAccessKey: "wrong-secret-key"}

	for name, cr := range map[string]s3backend.Credentials{"wrong secret": badSecret, "unknown key": unknownKey} {
		if _, err := e.b.Head(ctx(t), cr, bucket, "obj"); !errors.Is(err, s3backend.ErrAccessDenied) {
			t.Errorf("Head with %s: %v; want ErrAccessDenied", name, err)
		}
		if _, err := e.b.GetRange(ctx(t), cr, bucket, "obj", "", 0, 1); !errors.Is(err, s3backend.ErrAccessDenied) {
			t.Errorf("GetRange with %s: %v; want ErrAccessDenied", name, err)
		}
	}

	// Tenant credentials take precedence over bad defaults; zero ones fall
	// back to the defaults.
	b := e.backend(t, s3backend.Config{Default: badSecret})
	if got, err := b.GetRange(ctx(t), good, bucket, "obj", "", 0, 6); err != nil || string(got) != "secret" {
		t.Errorf("GetRange with good tenant credentials = %q, %v", got, err)
	}
	if _, err := b.Head(ctx(t), s3backend.Credentials{}, bucket, "obj"); !errors.Is(err, s3backend.ErrAccessDenied) {
		t.Errorf("Head with bad default credentials: %v; want ErrAccessDenied", err)
	}
}

func TestPut(t *testing.T) {
	const partSize = 5 << 20
	e := newEnv(t, s3backend.Config{PartSize: partSize})
	for _, tc := range []struct {
		name      string
		size      int
		knownSize bool
		multipart bool
	}{
		{"empty", 0, true, false},
		{"small", 1234, true, false},
		{"small unknown size", 1234, false, false},
		{"exactly one part", partSize, true, false},
		{"large", 12 << 20, true, true},
		{"large unknown size", 12 << 20, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.proxy.Reset()
			key := "put/" + strings.ReplaceAll(tc.name, " ", "-")
			data := testutil.SeededBytes(uint64(tc.size), tc.size)
			size := int64(tc.size)
			if !tc.knownSize {
				size = -1
			}
			// A plain io.Reader: Put must not rely on seeking.
			put, err := e.b.Put(ctx(t), s3backend.Credentials{}, bucket, key, io.MultiReader(bytes.NewReader(data)), size, "text/x-test")
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			etag := put.ETag
			m, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, key)
			if err != nil {
				t.Fatalf("Head: %v", err)
			}
			if m.ETag != etag || m.Size != int64(tc.size) || m.ContentType != "text/x-test" {
				t.Errorf("Head = %+v; want ETag %s (from Put), size %d, content type text/x-test", m, etag, tc.size)
			}
			// What Put tells without asking S3 again agrees with S3: the
			// size, the type, and Last-Modified within S3's second.
			if put.Size != m.Size || put.ContentType != m.ContentType {
				t.Errorf("Put = %+v, Head = %+v", put, m)
			}
			if d := put.LastModified.Sub(m.LastModified); put.LastModified.IsZero() || d < -2*time.Second || d > 2*time.Second {
				t.Errorf("Put's LastModified %v, S3's %v", put.LastModified, m.LastModified)
			}
			got, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, key, etag, 0, int64(tc.size))
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("read back %d bytes, %v; want the %d bytes put", len(got), err, tc.size)
			}
			// CreateMultipartUpload is POST /bucket/key?uploads.
			if mp := e.proxy.Count(http.MethodPost, "/"+bucket+"/"+key) > 0; mp != tc.multipart {
				t.Errorf("multipart upload used: %v, want %v", mp, tc.multipart)
			}
			// Waiting for S3's 100 Continue would cost every large PUT and
			// part a round trip.
			for _, r := range e.proxy.Requests() {
				if r.Expect != "" {
					t.Errorf("%s %s sent Expect: %s", r.Method, r.Path, r.Expect)
				}
			}
		})
	}
}

// The storage class goes to S3 with the PUT, single or multipart, and
// comes back with Head as S3 answers it: named only when not STANDARD.
func TestPutKeepsStorageClass(t *testing.T) {
	const partSize = 5 << 20
	e := newEnv(t, s3backend.Config{PartSize: partSize})
	for _, tc := range []struct {
		name, class string
		size        int
		want        chunk.Headers
	}{
		{"single", "REDUCED_REDUNDANCY", 100, chunk.Headers{"X-Amz-Storage-Class": "REDUCED_REDUNDANCY"}},
		{"multipart", "REDUCED_REDUNDANCY", partSize + 1, chunk.Headers{"X-Amz-Storage-Class": "REDUCED_REDUNDANCY"}},
		{"standard", "", 100, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "class/" + tc.name
			c := ctx(t)
			if tc.class != "" {
				c = s3backend.WithHeaders(c, chunk.Headers{"X-Amz-Storage-Class": tc.class})
			}
			put, err := e.b.Put(c, s3backend.Credentials{}, bucket, key, bytes.NewReader(testutil.SeededBytes(7, tc.size)), int64(tc.size), "")
			testutil.Must(t, err)
			m, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, key)
			testutil.Must(t, err)
			// (A multipart upload's parts carry the SDK's checksums: S3
			// keeps a checksum of them, which TestPutKeepsChecksum checks.)
			if !maps.Equal(m.Headers.WithoutChecksum(), tc.want) || !maps.Equal(put.Headers, tc.want) {
				t.Errorf("Head's headers %v, Put's %v; want %v", m.Headers, put.Headers, tc.want)
			}
			direct, err := e.srv.Client(t).HeadObject(ctx(t), &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
			testutil.Must(t, err)
			if string(direct.StorageClass) != tc.class {
				t.Errorf("S3 stored the class %q, want %q", direct.StorageClass, tc.class)
			}
		})
	}
}

// A full-object checksum declared in the stored headers goes to S3 with a
// single PUT, read whole or streamed, and S3 checks and keeps it; a
// multipart upload sends none and keeps none in what Put tells. Head
// answers the checksum S3 keeps, however the object was written.
func TestPutKeepsChecksum(t *testing.T) {
	const partSize = 5 << 20
	e := newEnv(t, s3backend.Config{PartSize: partSize, StreamAbove: 1 << 20})
	crc32Of := func(b []byte, tab *crc32.Table) string {
		return base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(b, tab)))
	}
	sha256Of := func(b []byte) string {
		sum := sha256.Sum256(b)
		return base64.StdEncoding.EncodeToString(sum[:])
	}
	for _, tc := range []struct {
		name     string
		size     int
		header   string
		checksum func([]byte) string
		kept     bool
	}{
		{"read whole", 1000, "X-Amz-Checksum-Crc32", func(b []byte) string { return crc32Of(b, crc32.IEEETable) }, true},
		{"streamed", 2 << 20, "X-Amz-Checksum-Sha256", sha256Of, true},
		{"multipart", partSize + 1, "X-Amz-Checksum-Crc32c", func(b []byte) string { return crc32Of(b, crc32.MakeTable(crc32.Castagnoli)) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "checksum/" + strings.ReplaceAll(tc.name, " ", "-")
			data := testutil.SeededBytes(11, tc.size)
			sum := sha256.Sum256(data)
			c := s3backend.WithPayloadSHA256(ctx(t), hex.EncodeToString(sum[:])) // streams over http
			c = s3backend.WithHeaders(c, chunk.Headers{tc.header: tc.checksum(data), "X-Amz-Meta-Owner": "a"})
			put, err := e.b.Put(c, s3backend.Credentials{}, bucket, key, io.MultiReader(bytes.NewReader(data)), int64(tc.size), "")
			testutil.Must(t, err)
			want := chunk.Headers{"X-Amz-Meta-Owner": "a"}
			if tc.kept {
				want[tc.header], want["X-Amz-Checksum-Type"] = tc.checksum(data), "FULL_OBJECT"
			}
			m, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, key)
			testutil.Must(t, err)
			if !tc.kept {
				// S3 keeps the checksum of the parts' own checksums, which
				// the SDK computes: Head tells it, Put does not know it.
				if m.Headers["X-Amz-Checksum-Type"] != "COMPOSITE" {
					t.Errorf("Head's headers %v, want a COMPOSITE checksum", m.Headers)
				}
				m.Headers = m.Headers.WithoutChecksum()
			}
			if !maps.Equal(put.Headers, want) || !maps.Equal(m.Headers, want) {
				t.Errorf("Put's headers %v, Head's %v; want %v", put.Headers, m.Headers, want)
			}
		})
	}
	t.Run("a wrong checksum is refused by S3", func(t *testing.T) {
		c := s3backend.WithHeaders(ctx(t), chunk.Headers{"X-Amz-Checksum-Crc32": crc32Of([]byte("other"), crc32.IEEETable)})
		if _, err := e.b.Put(c, s3backend.Credentials{}, bucket, "checksum/wrong", strings.NewReader("body"), 4, ""); err == nil {
			t.Fatal("Put with a wrong checksum succeeded")
		}
		if _, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, "checksum/wrong"); !errors.Is(err, s3backend.ErrNotFound) {
			t.Errorf("Head after the refused Put: %v, want not found", err)
		}
	})
	t.Run("Head answers a checksum the SDK stored", func(t *testing.T) {
		body := []byte("written by another S3 client")
		_, err := e.srv.Client(t).PutObject(ctx(t), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String("checksum/sdk"),
			Body: bytes.NewReader(body), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
		testutil.Must(t, err)
		m, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, "checksum/sdk")
		testutil.Must(t, err)
		want := chunk.Headers{"X-Amz-Checksum-Crc32c": crc32Of(body, crc32.MakeTable(crc32.Castagnoli)), "X-Amz-Checksum-Type": "FULL_OBJECT"}
		if !maps.Equal(m.Headers, want) {
			t.Errorf("Head's headers %v, want %v", m.Headers, want)
		}
	})
}

func TestPutBodyOfWrongSize(t *testing.T) {
	e := newEnv(t, s3backend.Config{PartSize: 5 << 20, StreamAbove: 1 << 20})
	for _, tc := range []struct {
		name       string
		body, size int
		declared   bool // its SHA-256 declared: streamed when above StreamAbove
	}{
		{"short small", 50, 100, false},
		{"long small", 150, 100, false},
		{"short large", 6 << 20, 12 << 20, false},
		{"short streamed", 2 << 20, 3 << 20, true},
		{"long streamed", 3<<20 + 1, 3 << 20, true},
		{"one byte long streamed", 2<<20 + 1, 2 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "wrong/" + strings.ReplaceAll(tc.name, " ", "-")
			data := testutil.SeededBytes(uint64(tc.body), tc.body)
			c := ctx(t)
			if tc.declared {
				// The SHA-256 of the bytes S3 would get: only the length
				// check can refuse them.
				sum := sha256.Sum256(data[:min(tc.body, tc.size)])
				c = s3backend.WithPayloadSHA256(c, hex.EncodeToString(sum[:]))
			}
			_, err := e.b.Put(c, s3backend.Credentials{}, bucket, key, io.MultiReader(bytes.NewReader(data)), int64(tc.size), "")
			var be *s3backend.BodyError
			if !errors.As(err, &be) || errors.Is(err, s3backend.ErrUnavailable) {
				t.Fatalf("Put of a %d-byte body as %d bytes: %v; want a BodyError that is not ErrUnavailable", tc.body, tc.size, err)
			}
			if _, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, key); !errors.Is(err, s3backend.ErrNotFound) {
				t.Errorf("after the failed Put, Head = %v; want ErrNotFound (nothing stored)", err)
			}
		})
	}
}

// TestPutStreamsWithDeclaredSHA256: over plain http, a body above
// StreamAbove whose SHA-256 its writer declared goes to S3 in one PUT as it
// arrives (S3 has the request before the body has ended), signed with that
// SHA-256 and without waiting for a 100 Continue.
func TestPutStreamsWithDeclaredSHA256(t *testing.T) {
	e := newEnv(t, s3backend.Config{PartSize: 8 << 20, StreamAbove: 1 << 20})
	data := testutil.SeededBytes(3<<20, 3<<20)
	sum := sha256.Sum256(data)
	declared := hex.EncodeToString(sum[:])
	body := e.proxy.BodyHeldUntilPut(data, 1<<20, "")
	put, err := e.b.Put(s3backend.WithPayloadSHA256(ctx(t), declared), s3backend.Credentials{}, bucket, "streamed", body, int64(len(data)), "")
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if put.Size != int64(len(data)) || put.ETag == "" {
		t.Errorf("Put = %+v", put)
	}
	got, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "streamed", put.ETag, 0, int64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v; want the %d bytes put", len(got), err, len(data))
	}
	var puts []s3proxy.Record
	for _, r := range e.proxy.Requests() {
		if r.Method != http.MethodGet {
			puts = append(puts, r)
		}
	}
	if len(puts) != 1 || puts[0].Method != http.MethodPut || puts[0].ContentSHA256 != declared || puts[0].Expect != "" {
		t.Errorf("S3 saw %+v; want one PUT signed with the declared SHA-256, without Expect", puts)
	}
}

// TestPutDeclaredSHA256IsChecked: S3 refuses a body that is not the one
// whose SHA-256 was declared, streamed or read first, and stores nothing.
func TestPutDeclaredSHA256IsChecked(t *testing.T) {
	e := newEnv(t, s3backend.Config{PartSize: 8 << 20, StreamAbove: 1 << 20})
	other := sha256.Sum256([]byte("another body"))
	c := s3backend.WithPayloadSHA256(ctx(t), hex.EncodeToString(other[:]))
	for name, size := range map[string]int{"read first": 1000, "streamed": 2 << 20, "multipart": 8<<20 + 5} {
		key := "mismatch/" + strings.ReplaceAll(name, " ", "-")
		_, err := e.b.Put(c, s3backend.Credentials{}, bucket, key, bytes.NewReader(testutil.SeededBytes(uint64(size), size)), int64(size), "")
		if err == nil || errors.Is(err, s3backend.ErrUnavailable) {
			t.Errorf("%s: Put of a body that does not match its declared SHA-256 = %v; want a refusal that is not ErrUnavailable", name, err)
		}
		if name == "multipart" && !errors.Is(err, s3backend.ErrPayloadSHA256Mismatch) {
			t.Errorf("%s: Put = %v; want ErrPayloadSHA256Mismatch (S3 checks only each part's own hash)", name, err)
		}
		if _, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, key); !errors.Is(err, s3backend.ErrNotFound) {
			t.Errorf("%s: after the refused Put, Head = %v; want ErrNotFound", name, err)
		}
	}
}

func TestDelete(t *testing.T) {
	e := newEnv(t, s3backend.Config{})
	e.put(t, "obj", []byte("x"))
	if err := e.b.Delete(ctx(t), s3backend.Credentials{}, bucket, "obj"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, "obj"); !errors.Is(err, s3backend.ErrNotFound) {
		t.Errorf("Head after Delete = %v; want ErrNotFound", err)
	}
	if err := e.b.Delete(ctx(t), s3backend.Credentials{}, bucket, "obj"); err != nil {
		t.Errorf("Delete of a missing object = %v; want nil", err)
	}
	e.obs.check(t, []string{"delete ok", "head not_found", "delete ok"}, nil)
}

func TestRetriesSlowDown(t *testing.T) {
	e := newEnv(t, s3backend.Config{MaxAttempts: 4})
	e.put(t, "obj", []byte("payload"))

	e.proxy.FailNext(2, http.StatusServiceUnavailable, "SlowDown")
	got, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "obj", "", 0, 7)
	if err != nil || string(got) != "payload" {
		t.Fatalf("GetRange after two SlowDowns = %q, %v; want payload", got, err)
	}
	if n := e.proxy.Count(http.MethodGet, "/"+bucket+"/obj"); n != 3 {
		t.Errorf("S3 saw %d GETs, want 3", n)
	}
	e.obs.check(t, []string{"get ok"}, map[string]int{"get": 2})

	e.obs.reset()
	e.proxy.FailNext(1, http.StatusInternalServerError, "InternalError")
	if _, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, "obj"); err != nil {
		t.Fatalf("Head after one 500 = %v", err)
	}
	e.obs.check(t, []string{"head ok"}, map[string]int{"head": 1})
}

func TestRetriesExhaustedIsUnavailable(t *testing.T) {
	e := newEnv(t, s3backend.Config{MaxAttempts: 3})
	e.put(t, "obj", []byte("payload"))

	e.proxy.FailNext(10, http.StatusServiceUnavailable, "SlowDown")
	_, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "obj", "", 0, 7)
	if !errors.Is(err, s3backend.ErrUnavailable) {
		t.Fatalf("GetRange with S3 failing = %v; want ErrUnavailable", err)
	}
	if n := e.proxy.Count(http.MethodGet, "/"); n != 3 {
		t.Errorf("S3 saw %d GETs, want MaxAttempts = 3", n)
	}
	e.obs.check(t, []string{"get unavailable"}, map[string]int{"get": 2})

	e.proxy.Reset()
	e.proxy.FailNext(10, http.StatusInternalServerError, "InternalError")
	if _, err := e.b.Put(ctx(t), s3backend.Credentials{}, bucket, "new", strings.NewReader("x"), 1, ""); !errors.Is(err, s3backend.ErrUnavailable) {
		t.Fatalf("Put with S3 failing = %v; want ErrUnavailable", err)
	}
}

func TestGetRangeRetriesBrokenBody(t *testing.T) {
	e := newEnv(t, s3backend.Config{MaxAttempts: 2})
	data := testutil.SeededBytes(64<<10, 64<<10)
	e.put(t, "obj", data)

	e.proxy.TruncateNext(1)
	got, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "obj", "", 0, int64(len(data)))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("GetRange with one body cut short: %d bytes, %v", len(got), err)
	}
	if n := e.proxy.Count(http.MethodGet, "/"); n != 2 {
		t.Errorf("S3 saw %d GETs, want 2", n)
	}
	e.obs.check(t, []string{"get ok"}, map[string]int{"get": 1})

	e.proxy.Reset()
	e.proxy.TruncateNext(2)
	if _, err := e.b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "obj", "", 0, int64(len(data))); !errors.Is(err, s3backend.ErrUnavailable) {
		t.Fatalf("GetRange with every body cut short = %v; want ErrUnavailable", err)
	}
	if n := e.proxy.Count(http.MethodGet, "/"); n != 2 {
		t.Errorf("S3 saw %d GETs, want MaxAttempts = 2", n)
	}
}

func TestS3DownIsUnavailable(t *testing.T) {
	e := newEnv(t, s3backend.Config{})
	// Straight to MinIO: through the proxy a dead MinIO is a 502.
	b := e.backend(t, s3backend.Config{Endpoint: e.srv.Endpoint, MaxAttempts: 2, RequestTimeout: time.Second})
	e.put(t, "obj", []byte("payload"))
	e.srv.Stop()

	none := s3backend.Credentials{}
	for name, err := range map[string]error{
		"head":   second(b.Head(ctx(t), none, bucket, "obj")),
		"get":    second(b.GetRange(ctx(t), none, bucket, "obj", "", 0, 1)),
		"put":    second(b.Put(ctx(t), none, bucket, "new", strings.NewReader("x"), 1, "")),
		"delete": b.Delete(ctx(t), none, bucket, "obj"),
	} {
		if !errors.Is(err, s3backend.ErrUnavailable) {
			t.Errorf("%s with MinIO down = %v; want ErrUnavailable", name, err)
		}
	}

	e.srv.Restart(t)
	if got, err := b.GetRange(ctx(t), none, bucket, "obj", "", 0, 7); err != nil || string(got) != "payload" {
		t.Errorf("GetRange after MinIO came back = %q, %v", got, err)
	}
}

func TestRequestTimeoutIsRetriedThenUnavailable(t *testing.T) {
	e := newEnv(t, s3backend.Config{MaxAttempts: 2, RequestTimeout: 200 * time.Millisecond})
	e.put(t, "obj", []byte("payload"))

	e.proxy.SetDelay(5 * time.Second) // far beyond RequestTimeout
	_, err := e.b.Head(ctx(t), s3backend.Credentials{}, bucket, "obj")
	if !errors.Is(err, s3backend.ErrUnavailable) {
		t.Fatalf("Head against a stalled S3 = %v; want ErrUnavailable", err)
	}
	if n := e.proxy.Count(http.MethodHead, "/"); n != 2 {
		t.Errorf("S3 saw %d HEADs, want MaxAttempts = 2", n)
	}
	e.obs.check(t, []string{"head unavailable"}, map[string]int{"head": 1})
}

func TestCanceledIsNotUnavailable(t *testing.T) {
	e := newEnv(t, s3backend.Config{})
	e.put(t, "obj", []byte("payload"))
	e.proxy.SetDelay(5 * time.Second)

	c, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := e.b.GetRange(c, s3backend.Credentials{}, bucket, "obj", "", 0, 1)
	if !errors.Is(err, context.Canceled) || errors.Is(err, s3backend.ErrUnavailable) {
		t.Fatalf("GetRange canceled by the caller = %v; want context.Canceled, not ErrUnavailable", err)
	}
	e.obs.check(t, []string{"get canceled"}, nil)
}

func TestMaxConcurrent(t *testing.T) {
	const gets = 20
	e := newEnv(t, s3backend.Config{MaxConcurrent: 3})
	e.put(t, "obj", []byte("payload"))

	run := func(b *s3backend.Backend) {
		t.Helper()
		e.proxy.Reset()
		e.proxy.SetDelay(300 * time.Millisecond)
		var wg sync.WaitGroup
		errs := make(chan error, gets)
		for range gets {
			wg.Go(func() {
				if _, err := b.GetRange(ctx(t), s3backend.Credentials{}, bucket, "obj", "", 0, 7); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("GetRange: %v", err)
		}
	}

	run(e.b)
	if m := e.proxy.InFlightMax(); m > 3 || m < 1 {
		t.Errorf("S3 had up to %d requests in flight, want at most MaxConcurrent = 3", m)
	}
	// The same load without the cap does overlap more, so the check above
	// can fail.
	run(e.backend(t, s3backend.Config{MaxConcurrent: gets}))
	if m := e.proxy.InFlightMax(); m <= 3 {
		t.Errorf("without the cap S3 had only %d requests in flight; the test cannot tell", m)
	}
}

func TestClientPerCredentials(t *testing.T) {
	b, err := s3backend.New(s3backend.Config{
		Endpoint: "http://127.0.0.1:1", Default: s3backend.Credentials{AccessKeyID: "a", SecretAccessKey: "b"},
	})
	testutil.Must(t, err)
	one := s3backend.Credentials{AccessKeyID: "one", SecretAccessKey: "s"}
	two := s3backend.Credentials{AccessKeyID: "two", SecretAccessKey: "s"}
	first, again := b.Client(one), b.Client(one)
	def, defAgain := b.Client(s3backend.Credentials{}), b.Client(s3backend.Credentials{})
	if first != again || first == b.Client(two) || def != defAgain || def == first {
		t.Error("Client is not cached per credentials")
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for name, cfg := range map[string]s3backend.Config{
		"part size below 5 MiB": {PartSize: 1 << 20},
		"negative attempts":     {MaxAttempts: -1},
	} {
		cfg.Default = s3backend.Credentials{AccessKeyID: "a", SecretAccessKey: "b"}
		if _, err := s3backend.New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}
