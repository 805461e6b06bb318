package benchkit

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Counter sums the samples of counter family name whose label has value;
// -1 when g cannot be gathered.
func Counter(g prometheus.Gatherer, name, label, value string) float64 {
	var sum float64
	if !eachSample(g, name, label, value, func(m *dto.Metric) { sum += m.GetCounter().GetValue() }) {
		return -1
	}
	return sum
}

// Histogram sums the sample sums and counts of histogram family name whose
// label has value (zero when g cannot be gathered).
func Histogram(g prometheus.Gatherer, name, label, value string) (sum float64, count uint64) {
	eachSample(g, name, label, value, func(m *dto.Metric) {
		sum += m.GetHistogram().GetSampleSum()
		count += m.GetHistogram().GetSampleCount()
	})
	return sum, count
}

// eachSample calls f with every sample of family name whose label has
// value; false when g cannot be gathered.
func eachSample(g prometheus.Gatherer, name, label, value string, f func(*dto.Metric)) bool {
	mfs, err := g.Gather()
	if err != nil {
		return false
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					f(m)
					break
				}
			}
		}
	}
	return true
}
