package benchkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestCounterMatchesEveryLabelPair sums only the samples that have every
// label, value pair asked for, whatever their other labels.
func TestCounterMatchesEveryLabelPair(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "requests_total"}, []string{"kind", "result", "peer"})
	reg.MustRegister(c)
	c.WithLabelValues("handoff", "ok", "a").Add(1)
	c.WithLabelValues("handoff", "ok", "b").Add(2)
	c.WithLabelValues("handoff", "miss", "a").Add(4)
	c.WithLabelValues("forward", "ok", "a").Add(8)
	for _, tc := range []struct {
		pairs []string
		want  float64
	}{
		{nil, 15},
		{[]string{"result", "ok"}, 11},
		{[]string{"kind", "handoff"}, 7},
		{[]string{"kind", "handoff", "result", "ok"}, 3},
		{[]string{"kind", "handoff", "result", "ok", "peer", "b"}, 2},
		{[]string{"kind", "nothing"}, 0},
	} {
		if got := Counter(reg, "requests_total", tc.pairs...); got != tc.want {
			t.Errorf("Counter(%q) = %v, want %v", tc.pairs, got, tc.want)
		}
	}
}
