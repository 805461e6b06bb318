package writeback

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

// etagOf is S3's ETag of a body sent in one PUT.
func etagOf(b []byte) string {
	h := md5.Sum(b)
	return `"` + hex.EncodeToString(h[:]) + `"`
}

func put(t testing.TB, j *Journal, key string, body []byte) Entry {
	t.Helper()
	e, err := j.Write(Entry{Name: Name{"team-a", "bucket-a", key}, Version: j.NextVersion(), Op: OpPut,
		Size: int64(len(body)), LastModified: time.Now()}, bytes.NewReader(body))
	testutil.Must(t, err)
	return e
}

func readBody(t testing.TB, j *Journal, e Entry) []byte {
	t.Helper()
	f, err := j.OpenBody(e)
	testutil.Must(t, err)
	defer f.Close()
	b, err := io.ReadAll(f)
	testutil.Must(t, err)
	return b
}

// What Write acknowledged is there after the journal is opened again: the
// newest version of each key, deletes included; files a crash left half
// written are removed.
func TestAcknowledgedVersionsSurviveReopening(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	j, err := Open(dir, 1<<30)
	testutil.Must(t, err)
	v1, v2 := testutil.RandomBytes(r, 1000), testutil.RandomBytes(r, 3000)
	put(t, j, "a", v1)
	put(t, j, "a", v2)
	kept := put(t, j, "b", v1)
	del, err := j.Write(Entry{Name: Name{"team-a", "bucket-a", "c"}, Version: j.NextVersion(), Op: OpDelete}, nil)
	testutil.Must(t, err)
	if kept.ETag != etagOf(v1) {
		t.Fatalf("ETag %s, want the body's MD5 %s", kept.ETag, etagOf(v1))
	}
	// What a crash mid-write leaves: a temporary file, a body without
	// its entry.
	testutil.Must(t, os.WriteFile(filepath.Join(dir, "x.data.123.tmp"), []byte("half"), 0o600))
	orphan := Entry{Name: Name{"team-a", "bucket-a", "d"}, Version: 99}
	testutil.Must(t, os.WriteFile(j.path(&orphan, ".data"), []byte("never acknowledged"), 0o600))

	j2, err := Open(dir, 1<<30)
	testutil.Must(t, err)
	a, ok := j2.Get(Name{"team-a", "bucket-a", "a"})
	if !ok || a.ETag != etagOf(v2) || !bytes.Equal(readBody(t, j2, a), v2) {
		t.Fatalf("key a after reopening: %+v %v, want the second version", a, ok)
	}
	if c, ok := j2.Get(del.Name); !ok || c.Op != OpDelete {
		t.Fatalf("key c after reopening: %+v %v, want its delete", c, ok)
	}
	if _, ok := j2.Get(orphan.Name); ok {
		t.Fatal("a body without its entry came back")
	}
	if s := j2.Stats(); s.Objects != 3 || s.Bytes != int64(len(v1)+len(v2)) {
		t.Fatalf("stats after reopening %+v, want 3 objects of %d bytes", s, len(v1)+len(v2))
	}
	testutil.Must(t, j2.Close()) // and the segment it prepared ahead
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		if filepath.Ext(f.Name()) != segmentExt { // small bodies live in the log with their entries
			t.Fatalf("file %s left, want only the log's segments", f.Name())
		}
	}
	if v := j2.NextVersion(); v <= a.Version {
		t.Fatalf("version %d after reopening is not above %d", v, a.Version)
	}
}

// A copy of a version older than the one held is dropped; the same version
// twice (a retried copy) is held once; a newer one replaces it.
func TestNewestVersionWins(t *testing.T) {
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	r := rand.New(rand.NewPCG(3, 4))
	n := Name{"team-a", "bucket-a", "k"}
	old, cur := testutil.RandomBytes(r, 500), testutil.RandomBytes(r, 700)
	write := func(v uint64, b []byte) {
		t.Helper()
		_, err := j.Write(Entry{Name: n, Version: v, Op: OpPut, Size: int64(len(b))}, bytes.NewReader(b))
		testutil.Must(t, err)
	}
	write(20, cur)
	write(10, old)
	write(20, cur)
	e, _ := j.Get(n)
	if e.Version != 20 || !bytes.Equal(readBody(t, j, e), cur) {
		t.Fatalf("held version %d, want 20", e.Version)
	}
	if s := j.Stats(); s.Bytes != int64(len(cur)) {
		t.Fatalf("%d bytes held, want %d (the older and the repeated copy give their space back)", s.Bytes, len(cur))
	}
	write(30, old)
	if e, _ := j.Get(n); e.Version != 30 {
		t.Fatalf("held version %d, want 30", e.Version)
	}
	// A copy must be the body its ETag says.
	_, err = j.Write(Entry{Name: n, Version: 40, Op: OpPut, Size: int64(len(cur)), ETag: etagOf(old)}, bytes.NewReader(cur))
	if !errors.Is(err, ErrBadBody) {
		t.Fatalf("a body of another ETag: %v, want ErrBadBody", err)
	}
	_, err = j.Write(Entry{Name: n, Version: 41, Op: OpPut, Size: 10}, bytes.NewReader(cur))
	if !errors.Is(err, ErrBadBody) {
		t.Fatalf("a body longer than its size: %v, want ErrBadBody", err)
	}
	if e, _ := j.Get(n); e.Version != 30 || j.Stats().Bytes != int64(len(old)) {
		t.Fatalf("after refused copies: version %d, %d bytes; want 30 and %d", e.Version, j.Stats().Bytes, len(old))
	}
}

// The pinned limit is never passed: a write that does not fit is refused
// with ErrFull, and fits again once space was given back.
func TestPinnedLimit(t *testing.T) {
	j, err := Open(t.TempDir(), 10_000)
	testutil.Must(t, err)
	r := rand.New(rand.NewPCG(5, 6))
	a := put(t, j, "a", testutil.RandomBytes(r, 6000))
	body := testutil.RandomBytes(r, 5000)
	_, err = j.Write(Entry{Name: Name{"team-a", "bucket-a", "b"}, Version: j.NextVersion(), Op: OpPut, Size: 5000}, bytes.NewReader(body))
	if !errors.Is(err, ErrFull) {
		t.Fatalf("a write past the limit: %v, want ErrFull", err)
	}
	j.Drop(a)
	put(t, j, "b", body)
	if s := j.Stats(); s.Bytes != 5000 || s.Objects != 1 {
		t.Fatalf("stats %+v, want one object of 5000 bytes", s)
	}
}

// Transient objects end at their expiry: no longer read, listed or held.
func TestTransientExpiry(t *testing.T) {
	j, err := Open(t.TempDir(), 1<<20)
	testutil.Must(t, err)
	now := time.Now()
	j.now = func() time.Time { return now }
	n := Name{"team-a", "tmp", "spill/1"}
	_, err = j.Write(Entry{Name: n, Version: j.NextVersion(), Op: OpPut, Size: 3, Transient: true, Expires: now.Add(time.Minute)},
		bytes.NewReader([]byte("abc")))
	testutil.Must(t, err)
	if got := j.List("team-a", "tmp", "spill/"); len(got) != 1 {
		t.Fatalf("listed %v, want the transient object", got)
	}
	now = now.Add(2 * time.Minute)
	if _, ok := j.Get(n); ok {
		t.Fatal("an expired transient object is still read")
	}
	if gone := j.Expire(); len(gone) != 1 || j.Stats().Bytes != 0 {
		t.Fatalf("expired %v, %d bytes left; want it gone", gone, j.Stats().Bytes)
	}
}

// A copy that arrives after the drop of its version (the persister was
// faster than the write's copies) is done with: it is not kept.
func TestCopyAfterItsDropIsNotKept(t *testing.T) {
	j, err := Open(t.TempDir(), 1<<20)
	testutil.Must(t, err)
	e := Entry{Name: Name{"team-a", "bucket-a", "k"}, Version: 7, Op: OpPut, Size: 3, LastModified: time.Now()}
	j.Drop(e)
	if _, err := j.Write(e, bytes.NewReader([]byte("abc"))); err != nil {
		t.Fatal(err)
	}
	if got, ok := j.Get(e.Name); ok {
		t.Fatalf("a copy of a dropped version is kept: %v", got)
	}
	if b := j.Stats().Bytes; b != 0 {
		t.Fatalf("%d bytes held", b)
	}
	e.Version = 8 // a newer write is kept
	if _, err := j.Write(e, bytes.NewReader([]byte("abc"))); err != nil {
		t.Fatal(err)
	}
	if _, ok := j.Get(e.Name); !ok {
		t.Fatal("a newer version after a drop is not kept")
	}
}
