package testutil

import (
	"bytes"
	"fmt"
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

// fatalTB records a Fatalf instead of stopping the test.
type fatalTB struct {
	testing.TB
	failed string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

func TestEnvInt(t *testing.T) {
	const name = "DISTCACHE_TESTUTIL_ENVINT"
	for _, tc := range []struct {
		value string
		want  int
		fails bool
	}{
		{"", 3, false},
		{"12", 12, false},
		{"0", 0, true},
		{"-2", 0, true},
		{"lots", 0, true},
	} {
		t.Setenv(name, tc.value)
		f := &fatalTB{TB: t}
		got := EnvInt(f, name, 3)
		if tc.fails != (f.failed != "") || !tc.fails && got != tc.want {
			t.Errorf("%s=%q: %d, failed %q; want %d, fails %v", name, tc.value, got, f.failed, tc.want, tc.fails)
		}
	}
}

func TestReadBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, "the answer")
	}))
	resp, body, err := ReadBody(http.Get(srv.URL))
	if err != nil || resp.StatusCode != http.StatusCreated || string(body) != "the answer" {
		t.Fatalf("ReadBody = %v, %q, %v; want 201, %q, nil", resp, body, err, "the answer")
	}
	srv.Close()
	if resp, body, err := ReadBody(http.Get(srv.URL)); err == nil || resp != nil || body != nil {
		t.Fatalf("ReadBody of a failed request = %v, %q, %v; want its error", resp, body, err)
	}
}
