package nodecluster

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/distcache/distcache/internal/testutil"
)

// Counter sums the samples of a counter family on member i whose labels
// include want.
func (c *Cluster) Counter(i int, name string, want map[string]string) float64 {
	c.T.Helper()
	return Gather(c.T, c.Member(i).Registry, name, want)
}

// Sum is Counter summed over every member.
func (c *Cluster) Sum(name string, want map[string]string) float64 {
	c.T.Helper()
	var s float64
	for _, m := range c.Members() {
		s += Gather(c.T, m.Registry, name, want)
	}
	return s
}

// Gather sums the samples of a counter or gauge family in g whose labels
// include want.
func Gather(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	sum, err := Total(g, name, want)
	testutil.Must(t, err)
	return sum
}

// Total is Gather returning its error.
func Total(g prometheus.Gatherer, name string, want map[string]string) (float64, error) {
	families, err := g.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !matches(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.GetCounter().GetValue()
			case m.Gauge != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum, nil
}

func matches(m *dto.Metric, want map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
