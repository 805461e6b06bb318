package httprange

import "testing"

// TestParseModes reads the same headers both ways: the node API's (an
// error for what it cannot read) and S3's (Lenient: ignored). Each mode's
// full rules are tested where it is used (internal/node, internal/gateway:
// FuzzParseRange in both).
func TestParseModes(t *testing.T) {
	const size = 100
	type result struct {
		r      Range
		ok     bool
		reason Reason
	}
	tests := []struct {
		header          string
		strict, lenient result
	}{
		{"", result{}, result{}},
		{"bytes=10-19", result{Range{10, 10}, true, 0}, result{Range{10, 10}, true, 0}},
		{"bytes=90-", result{Range{90, 10}, true, 0}, result{Range{90, 10}, true, 0}},
		{"bytes=-5", result{Range{95, 5}, true, 0}, result{Range{95, 5}, true, 0}},
		{"bytes=100-", result{reason: Unsatisfiable}, result{reason: Unsatisfiable}},
		{"bytes=-0", result{reason: Unsatisfiable}, result{reason: Unsatisfiable}},
		{" Bytes = 1 - 2 ", result{reason: NotSingle}, result{Range{1, 2}, true, 0}},
		{"bytes=0-1,5-6", result{reason: NotSingle}, result{}},
		{"bytes=5", result{reason: NoDash}, result{}},
		{"bytes=-x", result{reason: BadSuffix}, result{}},
		{"bytes=x-1", result{reason: BadFirst}, result{}},
		{"bytes=5-2", result{reason: BadLast}, result{}},
		{"bytes=90-99999999999999999999", result{reason: BadLast}, result{Range{90, 10}, true, 0}},
		{"bytes=+1-2", result{Range{1, 2}, true, 0}, result{}},
	}
	for _, tt := range tests {
		for _, mode := range []struct {
			lenient bool
			want    result
		}{{false, tt.strict}, {true, tt.lenient}} {
			r, ok, err := Parse(tt.header, size, mode.lenient)
			var reason Reason
			if err != nil {
				reason = err.Reason
			}
			if got := (result{r, ok, reason}); got != mode.want {
				t.Errorf("Parse(%q, lenient=%v) = %+v, want %+v", tt.header, mode.lenient, got, mode.want)
			}
		}
	}
}
