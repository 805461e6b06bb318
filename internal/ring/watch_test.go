package ring

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/logbuf"
)

func TestHolder(t *testing.T) {
	var h Holder
	if h.Load() != nil {
		t.Fatal("zero Holder not empty")
	}
	ch := h.Changed()
	r1 := mustNew(t, specOf(1, members(3)))
	if !h.StoreIfNewer(r1) || h.Load() != r1 {
		t.Fatal("StoreIfNewer into an empty holder did not store")
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by a store")
	}

	ch = h.Changed()
	if h.Changed() != ch {
		t.Error("Changed returned two channels without a store in between")
	}
	for _, epoch := range []int64{0, 1} {
		if h.StoreIfNewer(mustNew(t, specOf(epoch, members(4)))) || h.Load() != r1 {
			t.Errorf("StoreIfNewer stored epoch %d over epoch 1", epoch)
		}
	}
	select {
	case <-ch:
		t.Fatal("Changed closed without a store")
	default:
	}

	r0 := mustNew(t, specOf(0, members(2)))
	h.Store(r0) // Store does not look at epochs
	if h.Load() != r0 {
		t.Error("Store did not store")
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed not closed by Store")
	}
}

func TestHolderConcurrent(t *testing.T) {
	var rings []*Ring
	for epoch := range int64(50) {
		rings = append(rings, mustNew(t, specOf(epoch, members(3))))
	}
	var h Holder
	h.Store(rings[0])
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for epoch, r := range rings {
				ch := h.Changed()
				_ = h.Load().Owner(testIDs()[epoch])
				h.StoreIfNewer(r)
				select {
				case <-ch:
				default:
				}
			}
		})
	}
	wg.Wait()
	if h.Load().Epoch() != 49 {
		t.Errorf("epoch %d after concurrent stores, want 49", h.Load().Epoch())
	}
}

func ringJSON(t *testing.T, epoch int64, n int) []byte {
	t.Helper()
	data, err := json.Marshal(specOf(epoch, members(n)))
	testutil.Must(t, err)
	return data
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// startWatch runs WatchFile until the test ends and checks that it then
// returns nil.
func startWatch(t *testing.T, path string, h *Holder) *logbuf.Buffer {
	t.Helper()
	logs := &logbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	go func() { done <- WatchFile(ctx, path, h, logger) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("WatchFile returned %v", err)
			}
		case <-time.After(testutil.WaitTimeout):
			t.Error("WatchFile did not return after its context was canceled")
		}
	})
	return logs
}

// watchRing writes a ring of epoch with three members to dir/ring.json,
// runs WatchFile on it until the test ends and waits for the initial load.
func watchRing(t *testing.T, dir string, epoch int64) (path string, h *Holder, logs *logbuf.Buffer) {
	t.Helper()
	path = filepath.Join(dir, "ring.json")
	writeFile(t, path, ringJSON(t, epoch, 3))
	h = &Holder{}
	logs = startWatch(t, path, h)
	testutil.WaitFor(t, "the initial load", epochIs(h, epoch))
	return path, h, logs
}

func epochIs(h *Holder, epoch int64) func() bool {
	return func() bool { r := h.Load(); return r != nil && r.Epoch() == epoch }
}

func TestLoadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ring.json")
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("LoadFile of a missing file: %v", err)
	}
	writeFile(t, path, []byte(`{"epoch":1}`))
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "hash.algorithm") {
		t.Errorf("LoadFile of an invalid file: %v", err)
	}
	writeFile(t, path, ringJSON(t, 4, 3))
	r, err := LoadFile(path)
	if err != nil || r.Epoch() != 4 || len(r.Members()) != 3 {
		t.Fatalf("LoadFile = %v, %v", r, err)
	}
}

func TestWatchFileLoadsAndFollowsRenames(t *testing.T) {
	dir := t.TempDir()
	path, h, _ := watchRing(t, dir, 1)

	for epoch := int64(2); epoch <= 3; epoch++ {
		tmp := filepath.Join(dir, fmt.Sprintf(".ring.json.tmp%d", epoch))
		writeFile(t, tmp, ringJSON(t, epoch, int(epoch)+2))
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, fmt.Sprintf("epoch %d", epoch), epochIs(h, epoch))
		if n := len(h.Load().Members()); n != int(epoch)+2 {
			t.Errorf("epoch %d has %d members, want %d", epoch, n, epoch+2)
		}
	}

	// In-place rewrite too.
	writeFile(t, path, ringJSON(t, 4, 3))
	testutil.WaitFor(t, "epoch 4", epochIs(h, 4))
}

func TestWatchFileKeepsRingOnInvalidContent(t *testing.T) {
	path, h, logs := watchRing(t, t.TempDir(), 1)
	before := h.Load()

	writeFile(t, path, []byte(`{"epoch":2,"hash":{"algorithm":"rendezvous-xxhash64"},"members":[{"name":"cache-a-0","address":"a:1","weight":0}]}`))
	testutil.WaitFor(t, "the invalid file to be reported", func() bool { return strings.Contains(logs.String(), "ring file invalid") })
	if h.Load() != before {
		t.Errorf("ring replaced by an invalid file: epoch %d", h.Load().Epoch())
	}
	if !strings.Contains(logs.String(), "members[0].weight: must be > 0") {
		t.Errorf("failure logged without its reason: %s", logs.String())
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the missing file to be reported", func() bool { return strings.Contains(logs.String(), "ring file unreadable") })
	if h.Load() != before {
		t.Error("ring replaced after the file was removed")
	}

	writeFile(t, path, ringJSON(t, 2, 4))
	testutil.WaitFor(t, "epoch 2", epochIs(h, 2))
}

func TestWatchFileIgnoresEpochRegression(t *testing.T) {
	path, h, logs := watchRing(t, t.TempDir(), 5)
	inForce := h.Load()
	ignored := func(n int) func() bool {
		return func() bool { return strings.Count(logs.String(), "is not higher than the ring in force") == n }
	}

	// A lower epoch.
	writeFile(t, path, ringJSON(t, 4, 6))
	testutil.WaitFor(t, "epoch 4 to be ignored", ignored(1))
	// The same epoch with other members.
	writeFile(t, path, ringJSON(t, 5, 7))
	testutil.WaitFor(t, "a different epoch 5 to be ignored", ignored(2))
	if h.Load() != inForce {
		t.Fatalf("ring replaced by epoch %d with %d members", h.Load().Epoch(), len(h.Load().Members()))
	}
	if !strings.Contains(logs.String(), "fileEpoch=4 epoch=5") || !strings.Contains(logs.String(), "fileEpoch=5 epoch=5") {
		t.Errorf("regressions logged without their epochs: %s", logs.String())
	}

	// The ring in force written again, reformatted: same content, no warning.
	spec := inForce.Spec()
	data, err := json.MarshalIndent(&spec, "", "    ")
	testutil.Must(t, err)
	writeFile(t, path, data)
	testutil.WaitFor(t, "the rewrite to be seen", func() bool { return strings.Contains(logs.String(), "ring file rewritten with the ring in force") })
	if !ignored(2)() || h.Load() != inForce {
		t.Errorf("the ring in force rewritten was reported as a regression or replaced the ring: %s", logs.String())
	}

	// A higher epoch is taken.
	writeFile(t, path, ringJSON(t, 6, 4))
	testutil.WaitFor(t, "epoch 6", epochIs(h, 6))
}

func TestWatchFileBadDirectory(t *testing.T) {
	err := WatchFile(t.Context(), filepath.Join(t.TempDir(), "missing", "ring.json"), new(Holder), nil)
	if err == nil {
		t.Fatal("WatchFile of a file in a missing directory succeeded")
	}
}
