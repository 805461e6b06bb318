package writeback

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

// A version Confirm finds superseded elsewhere is never sent: MinIO keeps
// nothing of it and the journal lets it go. One Confirm cannot answer for
// waits for its backoff and is sent once Confirm says it is the newest.
func TestConfirmKeepsSupersededVersionsFromS3(t *testing.T) {
	e := newS3(t)
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	stale := put(t, j, "stale", []byte("version 1, deleted elsewhere"))
	pending := put(t, j, "pending", []byte("the newest version, its witness down at first"))
	var asked atomic.Int32
	run(t, &Persister{Journal: j, S3: e.backend, MinBackoff: 10 * time.Millisecond,
		Confirm: func(_ context.Context, en Entry) (*Entry, error) {
			switch en.Key {
			case stale.Key:
				newer := en
				newer.Version++
				return &newer, nil
			case pending.Key:
				if asked.Add(1) < 3 {
					return nil, errors.New("a witness did not answer")
				}
			}
			return nil, nil
		}})
	drained(t, j, time.Minute)
	if got := e.object(t, stale.Key); got != nil {
		t.Fatalf("a superseded version reached MinIO (%q)", got)
	}
	if got := e.object(t, pending.Key); string(got) != "the newest version, its witness down at first" {
		t.Fatalf("MinIO holds %q for the version confirmed after two failed checks", got)
	}
	if n := asked.Load(); n != 4 {
		t.Fatalf("Confirm asked %d times about the pending version; want 4 (two failures, the answer, and once more when MinIO had it)", n)
	}
	if _, ok := j.Get(stale.Name); ok {
		t.Fatal("the journal still holds the superseded version")
	}
}

// Told that another holder persisted a delete, a holder keeps the delete as
// a tombstone (done, durable across reopening) instead of dropping it, so
// that it can still tell a late copy of an older version that the key was
// deleted; told the same of a put, it drops its copy.
func TestAppliedDeleteIsKeptAsATombstone(t *testing.T) {
	dir := t.TempDir()
	j, err := Open(dir, 1<<30)
	testutil.Must(t, err)
	name := Name{"team-a", "bucket-a", "gone"}
	old := put(t, j, "gone", []byte("version 1"))
	del, err := j.Write(Entry{Name: name, Version: j.NextVersion(), Op: OpDelete}, nil)
	testutil.Must(t, err)
	kept := put(t, j, "kept", []byte("persisted by its other holder"))

	j.Applied(del)
	j.Applied(kept)
	if got, ok := j.Get(name); !ok || got.Op != OpDelete || !got.Done || got.Version != del.Version {
		t.Fatalf("after Applied the journal holds %+v (ok %v); want the delete, done", got, ok)
	}
	if _, ok := j.Get(kept.Name); ok {
		t.Fatal("a put another holder persisted is still held")
	}
	if s := j.Stats(); s.Dirty != 0 {
		t.Fatalf("%d versions left to persist; want none", s.Dirty)
	}
	testutil.Must(t, j.Close())

	j, err = Open(dir, 1<<30)
	testutil.Must(t, err)
	defer j.Close()
	if got, ok := j.Get(name); !ok || !got.Done || got.Version != del.Version {
		t.Fatalf("after reopening the journal holds %+v (ok %v); want the done delete", got, ok)
	}
	if late, err := j.Write(old, bytes.NewReader([]byte("version 1"))); err != nil || late.Version != del.Version {
		t.Fatalf("a late copy of version 1 was stored as %+v (err %v); want the tombstone to stay newest", late, err)
	}
}

// overtakenS3 is the persister's S3 with another holder applying a delete
// of the key while the persister's upload of an older version is under
// way: S3 had nothing when the delete went, and the upload lands after it.
type overtakenS3 struct {
	*Backend
	j    *Journal
	once sync.Once
	t    *testing.T
}

func (o *overtakenS3) Put(ctx context.Context, e Entry, body io.Reader, seen Seen) (string, error) {
	o.once.Do(func() {
		del, err := o.j.Write(Entry{Name: e.Name, Version: o.j.NextVersion(), Op: OpDelete}, nil)
		if err != nil {
			o.t.Error(err)
			return
		}
		o.j.Applied(del) // persisted by the other holder: S3 had nothing to delete
	})
	return o.Backend.Put(ctx, e, body, seen)
}

// An upload that lands after another holder applied a newer delete of the
// key is deleted again: S3 ends without the key, as the delete left it.
func TestUploadOvertakenByADeleteIsUndone(t *testing.T) {
	e := newS3(t)
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	v1 := put(t, j, "overtaken", []byte("version 1"))
	var persisted atomic.Int32
	run(t, &Persister{Journal: j, S3: &overtakenS3{Backend: e.backend, j: j, t: t},
		Persisted: func(Entry, string) { persisted.Add(1) }})
	deadline := time.Now().Add(time.Minute)
	for {
		got, ok := j.Get(v1.Name)
		if ok && got.Done && e.object(t, v1.Key) == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute MinIO holds %q and the journal %+v; want nothing in MinIO and the delete done", e.object(t, v1.Key), got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n := persisted.Load(); n != 0 {
		t.Fatalf("Persisted was told of %d versions; want none (the upload was undone)", n)
	}
}

// Once S3 has an upload, Confirm is asked again: a delete of the key that
// another holder applied while the upload was under way (S3 had nothing
// for it to delete, and this node is not among its holders, so Applied
// never reaches it) deletes the upload again; a newer put leaves it, its
// own upload replacing it.
func TestUploadOvertakenByADeleteElsewhereIsUndone(t *testing.T) {
	e := newS3(t)
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	deleted := put(t, j, "deleted-elsewhere", []byte("version 1, deleted elsewhere meanwhile"))
	overwritten := put(t, j, "overwritten-elsewhere", []byte("version 1, overwritten elsewhere meanwhile"))
	var asked sync.Map
	var persisted, superseded atomic.Int32
	run(t, &Persister{Journal: j, S3: e.backend, Persisted: func(Entry, string) { persisted.Add(1) },
		Superseded: func(Entry) { superseded.Add(1) },
		Confirm: func(_ context.Context, en Entry) (*Entry, error) {
			if _, again := asked.LoadOrStore(en.Key, true); !again {
				return nil, nil // before the upload: nothing newer yet
			}
			newer := en
			newer.Version++
			if en.Key == deleted.Key {
				newer.Op, newer.Size, newer.Done = OpDelete, 0, true
			}
			return &newer, nil
		}})
	drained(t, j, time.Minute)
	if got := e.object(t, deleted.Key); got != nil {
		t.Fatalf("MinIO holds %q, an upload a delete elsewhere overtook", got)
	}
	if got := e.object(t, overwritten.Key); string(got) != "version 1, overwritten elsewhere meanwhile" {
		t.Fatalf("MinIO holds %q for the version a newer put follows; want it left for that put to replace", got)
	}
	if n := persisted.Load(); n != 0 {
		t.Fatalf("Persisted was told of %d versions; want none (both have a newer version elsewhere)", n)
	}
	if n := superseded.Load(); n != 2 {
		t.Fatalf("Superseded was told of %d versions; want 2 (their other holders must drop their copies)", n)
	}
}
