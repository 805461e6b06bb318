package nodeapi

import (
	"maps"
	"net/http"
	"testing"

	"github.com/distcache/distcache/internal/chunk"
)

// Stored headers cross a hop apart from the hop's own: a Cache-Control of
// the answer itself is not the object's.
func TestStoredRoundTrip(t *testing.T) {
	hs := chunk.Headers{"X-Amz-Meta-Owner": "team-a", "Content-Encoding": "gzip", "X-Amz-Storage-Class": "GLACIER"}
	h := http.Header{"Cache-Control": {"no-cache"}}
	SetStored(h, hs)
	h.Set(HeaderStoredPrefix+"X-Amz-Tagging", "team=a") // not a stored header: dropped
	if got := Stored(h); !maps.Equal(got, hs) {
		t.Fatalf("Stored = %v, want %v", got, hs)
	}
	if Stored(http.Header{"Cache-Control": {"no-cache"}}) != nil {
		t.Error("no stored headers: want nil")
	}
}
