package writeback

import (
	"bytes"
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
)

// landLate PUTs body to MinIO as the persister's upload of version would
// land there, late (If-None-Match: *, the condition of an upload that
// found the key absent); version 0: an object written around the cache.
func (e *s3env) landLate(t *testing.T, key string, body []byte, version uint64) {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), Body: bytes.NewReader(body), IfNoneMatch: aws.String("*")}
	if version != 0 {
		in.Metadata = map[string]string{VersionMetadata: strconv.FormatUint(version, 10)}
	}
	if _, err := e.srv.Client(t).PutObject(context.Background(), in); err != nil {
		t.Fatalf("put %s to MinIO: %v", key, err)
	}
}

// putDeleted writes a put and a newer delete of key; the persister sends
// the delete alone, and S3 holds nothing of the key.
func putDeleted(t *testing.T, j *Journal, key string) (put1, del Entry) {
	t.Helper()
	put1 = put(t, j, key, []byte(key+" version 1"))
	del, err := j.Write(Entry{Name: put1.Name, Version: j.NextVersion(), Op: OpDelete}, nil)
	testutil.Must(t, err)
	return put1, del
}

// lateChecksLeft is how many looks at deleted keys are still to come.
func lateChecksLeft(j *Journal) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.late.Len()
}

// An upload of an older version that lands in S3 after a delete of its key
// was applied (its sender killed with it on the wire, or an attempt the
// SDK gave up on) is deleted again by the delete's persister, also when
// that node was restarted meanwhile; an object written around the cache,
// and a newer version, stay.
func TestUploadLandingAfterADeleteIsDeletedAgain(t *testing.T) {
	saved := LateUploadChecks
	LateUploadChecks = []time.Duration{300 * time.Millisecond, time.Second}
	t.Cleanup(func() { LateUploadChecks = saved })
	e := newS3(t)
	dir := t.TempDir()
	j, err := Open(dir, 1<<30)
	testutil.Must(t, err)
	late, _ := putDeleted(t, j, "late")
	_, _ = putDeleted(t, j, "around")
	_, newerDel := putDeleted(t, j, "newer")
	afterRestart, _ := putDeleted(t, j, "after-restart")
	var told atomic.Int32 // LateUpload calls for "late"
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		(&Persister{Journal: j, S3: e.backend, Poll: 50 * time.Millisecond,
			LateUpload: func(del Entry, landed uint64) {
				if del.Key == late.Key && landed == late.Version {
					told.Add(1)
				}
			}}).Run(ctx)
	}()
	drained(t, j, time.Minute)
	e.landLate(t, "late", []byte("late version 1"), late.Version)
	e.landLate(t, "around", []byte("written around the cache"), 0)
	e.landLate(t, "newer", []byte("a newer version"), newerDel.Version+1)
	waitGone(t, e, "late")
	stop()
	<-done
	if n := told.Load(); n != 1 {
		t.Errorf("LateUpload was told %d times of the late upload deleted again; want once", n)
	}
	testutil.Must(t, j.Close())

	// Restarted: its journal plans the looks again from the tombstones.
	e.landLate(t, "after-restart", []byte("after-restart version 1"), afterRestart.Version)
	j, err = Open(dir, 1<<30)
	testutil.Must(t, err)
	defer j.Close()
	run(t, &Persister{Journal: j, S3: e.backend, Poll: 50 * time.Millisecond})
	waitGone(t, e, "after-restart")
	deadline := time.Now().Add(time.Minute)
	for lateChecksLeft(j) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d looks at deleted keys still to come after a minute", lateChecksLeft(j))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := e.object(t, "around"); string(got) != "written around the cache" {
		t.Errorf("MinIO holds %q for an object written around the cache after the delete; want it kept", got)
	}
	if got := e.object(t, "newer"); string(got) != "a newer version" {
		t.Errorf("MinIO holds %q for a version newer than the delete; want it kept", got)
	}
}

// A holder the applied delete was handed to (a ring change moved the key
// to it) looks for late uploads too, and so does a holder that is not the
// key's persister.
func TestHandedOverDeleteLooksForLateUploads(t *testing.T) {
	saved := LateUploadChecks
	LateUploadChecks = []time.Duration{300 * time.Millisecond, time.Second}
	t.Cleanup(func() { LateUploadChecks = saved })
	e := newS3(t)
	j, err := Open(t.TempDir(), 1<<30)
	testutil.Must(t, err)
	defer j.Close()
	name := Name{"team-a", "bucket-a", "handed-over"}
	v1 := j.NextVersion()
	del := Entry{Name: name, Version: j.NextVersion(), Op: OpDelete, Done: true, Expires: time.Now().Add(TombstoneLife)}
	_, err = j.Write(del, nil)
	testutil.Must(t, err)
	e.landLate(t, name.Key, []byte("handed-over version 1"), v1)
	run(t, &Persister{Journal: j, S3: e.backend, Poll: 50 * time.Millisecond, Owns: func(Entry) bool { return false }})
	waitGone(t, e, name.Key)
}

// waitGone waits until MinIO holds nothing of key.
func waitGone(t *testing.T, e *s3env, key string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for e.object(t, key) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("after a minute MinIO still holds %q, an upload that landed after the key's delete", e.object(t, key))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
