package node

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/time/rate"

	"github.com/distcache/distcache/internal/metrics"
)

// A store that fails every request (a broken disk) is warned about once per
// storeWarnEvery, with the count, not once per request; the metric counts
// every failure.
func TestStoreFailureWarningsAreRateLimited(t *testing.T) {
	var logs bytes.Buffer
	m := metrics.NewNode(prometheus.NewRegistry())
	s := &Server{metrics: m, log: slog.New(slog.NewTextHandler(&logs, nil)),
		storeWarn: rate.Sometimes{First: 1, Interval: storeWarnEvery}}
	broken := errors.New("input/output error")
	for range 500 {
		s.storeFailed("get_chunk", broken)
	}
	if n := strings.Count(logs.String(), "local store failed"); n != 1 {
		t.Fatalf("500 failures within %s logged %d warnings, want 1:\n%s", storeWarnEvery, n, logs.String())
	}
	var got dto.Metric
	if err := m.StoreFailures.WithLabelValues("get_chunk", "error").Write(&got); err != nil || got.GetCounter().GetValue() != 500 {
		t.Fatalf("store failures metric = %v (%v), want 500", got.GetCounter().GetValue(), err)
	}
	// The next warning carries the failures since the first one.
	s.storeWarn = rate.Sometimes{First: 1}
	s.storeFailed("get_chunk", broken)
	if !strings.Contains(logs.String(), "failuresSinceLastWarning=500") {
		t.Fatalf("second warning does not count the 499 suppressed failures and itself:\n%s", logs.String())
	}
}
