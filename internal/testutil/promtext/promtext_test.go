package promtext

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const page = `# HELP distcache_chunk_reads_total Chunk reads.
# TYPE distcache_chunk_reads_total counter
distcache_chunk_reads_total{result="hit_ram",tenant="a"} 3
distcache_chunk_reads_total{result="hit_disk",tenant="a"} 4
distcache_chunk_reads_total{result="miss",tenant="b"} 5
distcache_ring_epoch 7
odd_labels{path="a \"quoted\" \\ line\nbreak", x="1"} 2.5
`

func TestParseAndSum(t *testing.T) {
	ms, err := Parse(page)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 5 {
		t.Fatalf("%d samples, want 5: %v", len(ms), ms)
	}
	for _, tt := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"distcache_chunk_reads_total", nil, 12},
		{"distcache_chunk_reads_total", map[string]string{"result": "hit_ram|hit_disk"}, 7},
		{"distcache_chunk_reads_total", map[string]string{"tenant": "b"}, 5},
		{"distcache_chunk_reads_total", map[string]string{"tenant": "c"}, 0},
		{"distcache_ring_epoch", nil, 7},
		{"distcache_ring", nil, 0},
	} {
		if got := ms.Sum(tt.name, tt.match); got != tt.want {
			t.Errorf("Sum(%s, %v) = %v, want %v", tt.name, tt.match, got, tt.want)
		}
	}
	if got := ms[4].Labels["path"]; got != "a \"quoted\" \\ line\nbreak" {
		t.Errorf("escaped label value %q", got)
	}
}

func TestParseRefusesBadLines(t *testing.T) {
	for _, line := range []string{"no_value", "no_value{a=\"1\"}", `unterminated{a="1} 2`, "bad_value x", `bad_labels{a} 1`} {
		if _, err := Parse(line); err == nil {
			t.Errorf("Parse(%q) did not fail", line)
		}
	}
}

func TestScrape(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(page))
	}))
	defer srv.Close()
	ms, err := Scrape(context.Background(), srv.URL+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if got := ms.Sum("distcache_ring_epoch", nil); got != 7 {
		t.Errorf("ring epoch %v, want 7", got)
	}
	if _, err := Scrape(context.Background(), srv.URL+"/other"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("a 404 scraped as %v", err)
	}
}
