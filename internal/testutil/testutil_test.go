package testutil

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

func TestSeededBytesReplay(t *testing.T) {
	a, b := SeededBytes(7, 4096), SeededBytes(7, 4096)
	if !bytes.Equal(a, b) {
		t.Fatal("the same seed gave other bytes")
	}
	if bytes.Equal(a, SeededBytes(8, 4096)) {
		t.Fatal("two seeds gave the same bytes")
	}
	if !bytes.Equal(a[:100], SeededBytes(7, 100)) {
		t.Fatal("a shorter draw of the same seed is not a prefix")
	}
}

// TestWaitStatusWaitsForTheStatus serves 503 twice, then 200.
func TestWaitStatusWaitsForTheStatus(t *testing.T) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	WaitStatus(t, srv.URL, http.StatusOK, nil)
	if got := n.Load(); got != 3 {
		t.Fatalf("%d requests, want 3", got)
	}
}
