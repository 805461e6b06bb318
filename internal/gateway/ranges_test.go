package gateway

import (
	"net/http"
	"testing"

	"github.com/distcache/distcache/internal/httprange"
)

func TestParseRange(t *testing.T) {
	const size = 1000
	tests := []struct {
		header      string
		size        int64
		off, n      int64
		partial     bool
		unsatisfied bool
	}{
		{header: "", size: size},
		{header: "bytes=0-0", size: size, off: 0, n: 1, partial: true},
		{header: "bytes=0-999", size: size, off: 0, n: 1000, partial: true},
		{header: "bytes=10-19", size: size, off: 10, n: 10, partial: true},
		{header: "bytes=990-2000", size: size, off: 990, n: 10, partial: true},                    // last clamped
		{header: "bytes=990-99999999999999999999999", size: size, off: 990, n: 10, partial: true}, // saturates
		{header: "bytes=500-", size: size, off: 500, n: 500, partial: true},
		{header: "bytes=-100", size: size, off: 900, n: 100, partial: true},
		{header: "bytes=-5000", size: size, off: 0, n: 1000, partial: true}, // suffix larger than the object
		{header: "bytes = 1-2", size: size, off: 1, n: 2, partial: true},
		{header: "Bytes=1-2", size: size, off: 1, n: 2, partial: true},
		{header: "bytes=1000-", size: size, unsatisfied: true},
		{header: "bytes=1000-1001", size: size, unsatisfied: true},
		{header: "bytes=-0", size: size, unsatisfied: true},
		{header: "bytes=0-", size: 0, unsatisfied: true},
		{header: "bytes=-1", size: 0, unsatisfied: true},
		// Ignored, as S3 does: the whole object is sent.
		{header: "bytes=5-2", size: size},
		{header: "bytes=0-1,5-6", size: size},
		{header: "items=0-1", size: size},
		{header: "bytes=abc", size: size},
		{header: "bytes=1-x", size: size},
		{header: "bytes=--1", size: size},
		{header: "bytes=", size: size},
	}
	for _, tt := range tests {
		r, partial, err := parseRange(tt.header, tt.size)
		if tt.unsatisfied {
			if err == nil || err.Status != http.StatusRequestedRangeNotSatisfiable || err.Code != CodeInvalidRange {
				t.Errorf("%q on %d bytes: got %+v, %v, %v; want 416 InvalidRange", tt.header, tt.size, r, partial, err)
			}
			continue
		}
		if err != nil || partial != tt.partial || (partial && (r.Off != tt.off || r.Len != tt.n)) {
			t.Errorf("%q on %d bytes: got %+v partial=%v err=%v; want off=%d n=%d partial=%v",
				tt.header, tt.size, r, partial, err, tt.off, tt.n, tt.partial)
		}
	}
}

func TestContentRange(t *testing.T) {
	if got := (httprange.Range{Off: 10, Len: 5}).ContentRange(100); got != "bytes 10-14/100" {
		t.Errorf("got %q", got)
	}
}
