package filewatch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

// errInvalid is what recorder's Apply returns for content starting with
// "invalid".
var errInvalid = errors.New("invalid content")

// recorder is Options.Apply and Options.OnError that record their calls.
type recorder struct {
	mu      sync.Mutex
	applied []string // contents applied, in order
	tried   int      // Apply calls, failed ones included
	errs    []error
}

func (r *recorder) apply(data []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tried++
	if strings.HasPrefix(string(data), "invalid") {
		return errInvalid
	}
	r.applied = append(r.applied, string(data))
	return nil
}

func (r *recorder) onError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *recorder) options() Options {
	return Options{Apply: r.apply, OnError: r.onError}
}

// current is the content last applied.
func (r *recorder) current() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.applied) == 0 {
		return ""
	}
	return r.applied[len(r.applied)-1]
}

func (r *recorder) appliedList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.applied)
}

func (r *recorder) triedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tried
}

func (r *recorder) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

func (r *recorder) is(content string) func() bool {
	return func() bool { return r.current() == content }
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renameOver replaces path by a new file, as atomic writers do.
func renameOver(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	writeFile(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// start runs a Watcher of path until stop is called or the test ends; stop
// returns once Run has returned.
func start(t *testing.T, path string, opts Options) (w *Watcher, stop func()) {
	t.Helper()
	w, err := New(path, opts)
	testutil.Must(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx)
	}()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(testutil.WaitTimeout):
			t.Error("Run did not return after its context was canceled")
		}
	}
	t.Cleanup(stop)
	return w, stop
}

// watchV1 writes "v1" to a file, runs a Watcher of it (re-reading every
// resync if not zero) until stop is called or the test ends, and waits until
// v1 is applied.
func watchV1(t *testing.T, resync time.Duration) (path string, r *recorder, w *Watcher, stop func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "f")
	writeFile(t, path, "v1")
	r = new(recorder)
	opts := r.options()
	opts.Resync = resync
	w, stop = start(t, path, opts)
	testutil.WaitFor(t, "the initial read", r.is("v1"))
	return path, r, w, stop
}

func TestInPlaceRewrite(t *testing.T) {
	path, r, _, _ := watchV1(t, 0)

	writeFile(t, path, "v2")
	testutil.WaitFor(t, "v2", r.is("v2"))
}

func TestRenameOver(t *testing.T) {
	path, r, _, _ := watchV1(t, 0)

	for _, content := range []string{"v2", "v3"} {
		renameOver(t, path, content)
		testutil.WaitFor(t, content, r.is(content))
	}
}

// kubeDir mimics how the kubelet publishes a mounted ConfigMap or Secret:
// files in a timestamped directory, a ..data symlink to it, and user-visible
// symlinks through ..data. An update writes a new timestamped directory,
// swaps ..data atomically (symlink + rename) and removes the old directory.
type kubeDir struct {
	t   *testing.T
	dir string
	gen int
	cur string
}

func (k *kubeDir) publish(files map[string]string) {
	t := k.t
	k.gen++
	ts := fmt.Sprintf("..2026_01_02_03_04_%02d.%09d", k.gen, k.gen)
	if err := os.Mkdir(filepath.Join(k.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		writeFile(t, filepath.Join(k.dir, ts, name), content)
	}
	tmp := filepath.Join(k.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(k.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if k.cur == "" {
		for name := range files {
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(k.dir, name)); err != nil {
				t.Fatal(err)
			}
		}
	} else if err := os.RemoveAll(filepath.Join(k.dir, k.cur)); err != nil {
		t.Fatal(err)
	}
	k.cur = ts
}

func TestKubernetesSymlinkSwap(t *testing.T) {
	k := &kubeDir{t: t, dir: t.TempDir()}
	k.publish(map[string]string{"f": "v1", "other": "x"})
	var r recorder
	start(t, filepath.Join(k.dir, "f"), r.options())
	testutil.WaitFor(t, "the initial read", r.is("v1"))

	for i, other := range []string{"x", "y", "z"} {
		content := fmt.Sprintf("v%d", i+2)
		k.publish(map[string]string{"f": content, "other": other})
		testutil.WaitFor(t, content, r.is(content))
	}
	if got := r.appliedList(); !slices.Equal(got, []string{"v1", "v2", "v3", "v4"}) {
		t.Errorf("applied %q", got)
	}
}

func TestUnchangedContentNotReapplied(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	writeFile(t, path, "v1")
	var r recorder
	w, err := New(path, r.options())
	testutil.Must(t, err)
	defer w.Close()
	for range 2 {
		if err := w.Load(); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, path, "v1")
	renameOver(t, path, "v1")
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	if got := r.appliedList(); !slices.Equal(got, []string{"v1"}) {
		t.Fatalf("applied %q, want v1 once", got)
	}
	writeFile(t, path, "v2")
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	// Back to a content applied before, but not the last one: applied again.
	renameOver(t, path, "v1")
	if err := w.Load(); err != nil {
		t.Fatal(err)
	}
	if got := r.appliedList(); !slices.Equal(got, []string{"v1", "v2", "v1"}) {
		t.Fatalf("applied %q, want v1 v2 v1", got)
	}
}

func TestRunSkipsUnchangedContent(t *testing.T) {
	path, r, _, _ := watchV1(t, time.Millisecond) // re-read all the time

	renameOver(t, path, "v1")
	// A failing content, to see that the file has been re-read since.
	renameOver(t, path, "invalid")
	testutil.WaitFor(t, "the invalid content to be reported", func() bool { return len(r.errors()) == 1 })
	if got := r.appliedList(); !slices.Equal(got, []string{"v1"}) {
		t.Errorf("applied %q, want v1 once", got)
	}
}

func TestFailuresReportedOnce(t *testing.T) {
	path, r, _, _ := watchV1(t, time.Millisecond) // re-read all the time

	renameOver(t, path, "invalid 1")
	// Failed content is handed again at each re-read, reported once.
	tried := r.triedCount()
	testutil.WaitFor(t, "re-reads of the invalid content", func() bool { return r.triedCount() >= tried+5 })
	if errs := r.errors(); len(errs) != 1 || !errors.Is(errs[0], errInvalid) {
		t.Fatalf("errors %v, want one errInvalid", errs)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the missing file to be reported", func() bool { return len(r.errors()) == 2 })
	if err := r.errors()[1]; !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read failure reported as %v", err)
	}

	// The same failure again after another one: reported again.
	renameOver(t, path, "invalid 1")
	testutil.WaitFor(t, "the invalid content to be reported again", func() bool { return len(r.errors()) == 3 })

	renameOver(t, path, "v2")
	testutil.WaitFor(t, "v2", r.is("v2"))
	if got := r.appliedList(); !slices.Equal(got, []string{"v1", "v2"}) {
		t.Errorf("applied %q", got)
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	var r recorder
	w, err := New(path, r.options())
	testutil.Must(t, err)
	defer w.Close()
	if w.Path() != path {
		t.Errorf("Path() = %q, want %q", w.Path(), path)
	}
	if err := w.Load(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: %v", err)
	}
	writeFile(t, path, "invalid")
	if err := w.Load(); !errors.Is(err, errInvalid) {
		t.Errorf("Load of invalid content: %v", err)
	}
	if len(r.errors()) != 0 {
		t.Errorf("Load reported %v", r.errors())
	}
}

func TestContextCancelStopsRun(t *testing.T) {
	_, _, w, stop := watchV1(t, 0)
	stop()
	if err := w.Close(); err != nil {
		t.Errorf("Close after Run: %v", err)
	}
}

func TestNewMissingDirectory(t *testing.T) {
	if _, err := New(filepath.Join(t.TempDir(), "missing", "f"), Options{Apply: func([]byte) error { return nil }}); err == nil {
		t.Fatal("New of a file in a missing directory succeeded")
	}
}
