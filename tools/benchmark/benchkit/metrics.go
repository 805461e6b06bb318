package benchkit

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Counter sums the samples of counter family name whose labels have the
// values given in labelValues, as label, value pairs; -1 when g cannot be
// gathered.
func Counter(g prometheus.Gatherer, name string, labelValues ...string) float64 {
	var sum float64
	if !eachSample(g, name, labelValues, func(m *dto.Metric) { sum += m.GetCounter().GetValue() }) {
		return -1
	}
	return sum
}

// Histogram sums the sample sums and counts of histogram family name whose
// labels have the values given in labelValues, as label, value pairs (zero
// when g cannot be gathered).
func Histogram(g prometheus.Gatherer, name string, labelValues ...string) (sum float64, count uint64) {
	eachSample(g, name, labelValues, func(m *dto.Metric) {
		sum += m.GetHistogram().GetSampleSum()
		count += m.GetHistogram().GetSampleCount()
	})
	return sum, count
}

// eachSample calls f with every sample of family name whose labels have
// the values of labelValues (label, value pairs); false when g cannot be
// gathered.
func eachSample(g prometheus.Gatherer, name string, labelValues []string, f func(*dto.Metric)) bool {
	mfs, err := g.Gather()
	if err != nil {
		return false
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if hasLabels(m, labelValues) {
				f(m)
			}
		}
	}
	return true
}

// hasLabels reports whether m has every label, value pair of labelValues.
func hasLabels(m *dto.Metric, labelValues []string) bool {
	for i := 0; i+1 < len(labelValues); i += 2 {
		found := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labelValues[i] && lp.GetValue() == labelValues[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
