package s3backend

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

func newLimitedClient(slots int, timeout time.Duration) *limitedClient {
	return &limitedClient{http: &http.Client{}, slots: make(chan struct{}, slots), timeout: timeout}
}

func get(t *testing.T, c *limitedClient, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	testutil.Must(t, err)
	return c.Do(req)
}

func TestLimitedClientHoldsSlotUntilBodyClosed(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "body")
	}))
	defer srv.Close()
	c := newLimitedClient(1, 10*time.Second)

	first, err := get(t, c, context.Background(), srv.URL)
	testutil.Must(t, err)
	// The only slot is taken until first's body is closed, so this one
	// waits until its context gives up.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if resp, err := get(t, c, ctx, srv.URL); !errors.Is(err, context.DeadlineExceeded) {
		if resp != nil {
			resp.Body.Close()
		}
		t.Fatalf("second request while the first body is open: %v; want it to wait for a slot", err)
	}

	if b, err := io.ReadAll(first.Body); err != nil || string(b) != "body" {
		t.Fatalf("first body = %q, %v", b, err)
	}
	first.Body.Close()
	first.Body.Close() // closing twice frees the slot once
	resp, err := get(t, c, context.Background(), srv.URL)
	if err != nil {
		t.Fatalf("request after the body was closed: %v", err)
	}
	resp.Body.Close()
	if n := len(c.slots); n != 0 {
		t.Errorf("%d slots still taken after every body was closed", n)
	}
}

// trickle writes n bytes, one every interval.
func trickle(n int, interval time.Duration) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.WriteHeader(http.StatusOK)
		for range n {
			w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			select {
			case <-time.After(interval):
			case <-r.Context().Done():
				return
			}
		}
	}
}

func TestLimitedClientTimeout(t *testing.T) {
	t.Run("before headers", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}))
		defer srv.Close()
		_, err := get(t, newLimitedClient(1, 100*time.Millisecond), context.Background(), srv.URL)
		if !errors.As(err, new(attemptTimeoutError)) || errorKind(err) != ErrUnavailable {
			t.Fatalf("stalled server: %v; want an attempt timeout, classified ErrUnavailable", err)
		}
	})
	t.Run("stalled body", func(t *testing.T) {
		srv := httptest.NewServer(trickle(5, time.Hour)) // one byte, then nothing
		defer srv.Close()
		resp, err := get(t, newLimitedClient(1, 100*time.Millisecond), context.Background(), srv.URL)
		testutil.Must(t, err)
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		if !errors.As(err, new(attemptTimeoutError)) || errorKind(err) != ErrUnavailable {
			t.Fatalf("stalled body: %v; want an attempt timeout, classified ErrUnavailable", err)
		}
	})
	t.Run("slow body that keeps moving", func(t *testing.T) {
		// 30 bytes 50 ms apart take longer than the 1 s timeout, but no
		// pause comes near it.
		srv := httptest.NewServer(trickle(30, 50*time.Millisecond))
		defer srv.Close()
		resp, err := get(t, newLimitedClient(1, time.Second), context.Background(), srv.URL)
		testutil.Must(t, err)
		defer resp.Body.Close()
		if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 30 {
			t.Fatalf("slow body: %d bytes, %v; want all 30", len(b), err)
		}
	})
}

func TestBackoff(t *testing.T) {
	for _, tc := range []struct {
		max     time.Duration
		attempt int
		ceiling time.Duration
	}{
		{2 * time.Second, 1, 100 * time.Millisecond},
		{2 * time.Second, 2, 200 * time.Millisecond},
		{2 * time.Second, 4, 800 * time.Millisecond},
		{2 * time.Second, 6, 2 * time.Second},
		{2 * time.Second, 60, 2 * time.Second},
		{20 * time.Millisecond, 1, 20 * time.Millisecond},
		{20 * time.Millisecond, 5, 20 * time.Millisecond},
	} {
		for range 100 {
			if d := backoff(tc.max, tc.attempt); d < tc.ceiling/2 || d > tc.ceiling {
				t.Fatalf("backoff(max %s, attempt %d) = %s; want in [%s, %s]", tc.max, tc.attempt, d, tc.ceiling/2, tc.ceiling)
			}
		}
	}
}
