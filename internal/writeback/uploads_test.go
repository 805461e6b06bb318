package writeback

import (
	"bytes"
	"crypto/md5"
	"errors"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

// An upload's parts are kept (an upload of a part number again replaces
// it), checked against the ETags a completion names, read in order, and
// written to the journal as one version whose ETag is S3's multipart ETag
// of those parts; the journal refuses the parts' bytes under another.
func TestUploadCompletesIntoAMultipartVersion(t *testing.T) {
	dir := t.TempDir()
	u, err := OpenUploads(filepath.Join(dir, "uploads"))
	testutil.Must(t, err)
	j, err := Open(dir, 1<<30)
	testutil.Must(t, err)
	n := Name{"team-a", "bucket-a", "wb/big"}
	up, err := u.Create(n, "text/plain", nil, time.Now())
	testutil.Must(t, err)
	if _, err := u.Get(up.ID, Name{"team-a", "bucket-a", "other"}); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("the upload read as another key's: %v", err)
	}
	if _, err := u.Get("../../etc", n); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("a path as upload ID: %v", err)
	}
	r := testutil.NewRand(5)
	one, two := testutil.RandomBytes(r, 1000), testutil.RandomBytes(r, 10)
	_, err = u.PutPart(up.ID, 2, bytes.NewReader([]byte("replaced")), 8)
	testutil.Must(t, err)
	p2, err := u.PutPart(up.ID, 2, bytes.NewReader(two), 10)
	testutil.Must(t, err)
	p1, err := u.PutPart(up.ID, 1, bytes.NewReader(one), 1000)
	testutil.Must(t, err)
	if _, err := u.PutPart(up.ID, 3, bytes.NewReader(two), 11); !errors.Is(err, ErrBadBody) {
		t.Fatalf("a short part: %v", err)
	}
	if u.Used() != 1010 {
		t.Fatalf("parts use %d bytes, want 1010", u.Used())
	}
	if _, err := u.Chosen(up.ID, []int{1, 2}, []string{p1.ETag, etagOf([]byte("replaced"))}); !errors.Is(err, ErrInvalidPart) {
		t.Fatalf("a replaced part's ETag: %v", err)
	}
	parts, err := u.Chosen(up.ID, []int{1, 2}, []string{p1.ETag, p2.ETag})
	testutil.Must(t, err)

	s1, s2 := md5.Sum(one), md5.Sum(two)
	want := MultipartETag([][]byte{s1[:], s2[:]})
	entry := Entry{Name: n, Version: j.NextVersion(), Op: OpPut, Size: 1010, Parts: []int64{1000, 10}, ETag: want}
	body, err := u.Open(up.ID, parts)
	testutil.Must(t, err)
	e, err := j.Write(entry, body)
	body.Close()
	testutil.Must(t, err)
	if e.ETag != want {
		t.Fatalf("ETag %s, want %s", e.ETag, want)
	}
	if got := readBody(t, j, e); !bytes.Equal(got, append(append([]byte{}, one...), two...)) {
		t.Fatal("the version's body is not its parts in order")
	}
	// The same bytes cut into other parts are another ETag.
	entry.Version, entry.Parts = j.NextVersion(), []int64{10, 1000}
	if _, err := j.Write(entry, io.MultiReader(bytes.NewReader(one), bytes.NewReader(two))); !errors.Is(err, ErrBadBody) {
		t.Fatalf("parts cut elsewhere under the same ETag: %v", err)
	}

	u.Remove(up.ID)
	if u.Used() != 0 {
		t.Fatalf("%d bytes used after the upload ended", u.Used())
	}
	if _, err := u.Get(up.ID, n); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("an ended upload: %v", err)
	}
}

// Uploads survive a restart (their parts counted again) until swept.
func TestUploadsReopenAndSweep(t *testing.T) {
	dir := t.TempDir()
	u, err := OpenUploads(dir)
	testutil.Must(t, err)
	n := Name{"team-a", "bucket-a", "k"}
	old, err := u.Create(n, "", nil, time.Now().Add(-48*time.Hour))
	testutil.Must(t, err)
	fresh, err := u.Create(n, "", nil, time.Now())
	testutil.Must(t, err)
	for _, id := range []string{old.ID, fresh.ID} {
		_, err := u.PutPart(id, 1, bytes.NewReader([]byte("12345")), 5)
		testutil.Must(t, err)
	}
	u, err = OpenUploads(dir)
	testutil.Must(t, err)
	if u.Used() != 10 {
		t.Fatalf("reopened: %d bytes used, want 10", u.Used())
	}
	if n := u.Sweep(time.Now().Add(-24 * time.Hour)); n != 1 {
		t.Fatalf("swept %d uploads, want the old one", n)
	}
	if _, err := u.Get(fresh.ID, n); err != nil {
		t.Fatalf("the fresh upload was swept: %v", err)
	}
	if u.Used() != 5 {
		t.Fatalf("%d bytes used after the sweep, want 5", u.Used())
	}
}
