package tenancy

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil/logbuf"
)

// waitTimeout bounds every wait. It is generous on purpose: tests wait for
// behaviour and never assert on timing.
const waitTimeout = 20 * time.Second

func tenantsYAML(names ...string) []byte {
	var b strings.Builder
	b.WriteString("tenants:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "  - name: %s\n    buckets: [bkt-%s]\n", n, n)
	}
	return []byte(b.String())
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func startWatcher(t *testing.T, path string) (*Watcher, *logbuf.Buffer) {
	t.Helper()
	logs := &logbuf.Buffer{}
	w, err := Watch(t.Context(), path, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, logs
}

func hasTenant(w *Watcher, name string) bool {
	_, ok := w.Current().Tenant(name)
	return ok
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestWatchInitialLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tenants.yaml")

	if _, err := Watch(t.Context(), path, nil); err == nil {
		t.Error("missing file: no error")
	}
	writeFile(t, path, []byte("tenants: [{name: Bad, buckets: [bkt]}]"))
	if _, err := Watch(t.Context(), path, nil); err == nil || !strings.Contains(err.Error(), "name") {
		t.Errorf("invalid file: err = %v", err)
	}
	if _, err := Watch(t.Context(), filepath.Join(dir, "missing-dir", "tenants.yaml"), nil); err == nil {
		t.Error("missing directory: no error")
	}

	writeFile(t, path, tenantsYAML("a"))
	w, _ := startWatcher(t, path)
	if !hasTenant(w, "a") {
		t.Errorf("Current() = %+v", w.Current())
	}
	if ok, failed := w.Reloads(); ok != 0 || failed != 0 {
		t.Errorf("Reloads() = %d, %d before any change", ok, failed)
	}
}

func TestWatchInPlaceRewrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	writeFile(t, path, tenantsYAML("a"))
	w, _ := startWatcher(t, path)

	writeFile(t, path, tenantsYAML("a", "b"))
	waitFor(t, "tenant b", func() bool { return hasTenant(w, "b") })
	select {
	case <-w.Changed():
	case <-time.After(waitTimeout):
		t.Error("no Changed notification")
	}
	if ok, failed := w.Reloads(); ok == 0 || failed != 0 {
		t.Errorf("Reloads() = %d, %d", ok, failed)
	}
}

func TestWatchRenameOver(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tenants.yaml")
	writeFile(t, path, tenantsYAML("a"))
	w, _ := startWatcher(t, path)

	for i, names := range [][]string{{"b"}, {"c"}} {
		tmp := filepath.Join(dir, fmt.Sprintf(".tenants.yaml.tmp%d", i))
		writeFile(t, tmp, tenantsYAML(names...))
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "tenant "+names[0], func() bool { return hasTenant(w, names[0]) })
		if hasTenant(w, "a") {
			t.Error("tenant a still present after being removed")
		}
	}
}

func TestWatchInvalidReloadKeepsPrevious(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tenants.yaml")
	writeFile(t, path, tenantsYAML("a"))
	w, logs := startWatcher(t, path)
	before := w.Current()

	// Invalid: a field unknown to the schema.
	writeFile(t, path, []byte("tenants:\n  - name: b\n    buckets: [bkt]\n    quota: 1\n"))
	waitFor(t, "a failed reload", func() bool { _, failed := w.Reloads(); return failed >= 1 })
	if w.Current() != before {
		t.Errorf("config replaced by an invalid file: %+v", w.Current())
	}
	if !strings.Contains(logs.String(), "reload failed") || !strings.Contains(logs.String(), `unknown field \"quota\"`) {
		t.Errorf("failure not logged with its reason: %s", logs.String())
	}

	// Removed: also kept.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a second failed reload", func() bool { _, failed := w.Reloads(); return failed >= 2 })
	if w.Current() != before {
		t.Errorf("config replaced after the file was removed: %+v", w.Current())
	}

	// A valid file is picked up again.
	writeFile(t, path, tenantsYAML("c"))
	waitFor(t, "tenant c", func() bool { return hasTenant(w, "c") })
	if ok, _ := w.Reloads(); ok != 1 {
		t.Errorf("ok reloads = %d, want 1", ok)
	}
}

func TestWatchStopsWithContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	writeFile(t, path, tenantsYAML("a"))
	w, _ := startWatcher(t, path)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.done:
	default:
		t.Fatal("watch goroutine still running after Close")
	}
	if !hasTenant(w, "a") {
		t.Error("Current() lost after Close")
	}
}
