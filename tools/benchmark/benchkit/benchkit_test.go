package benchkit

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTableMarkdown(t *testing.T) {
	got := Table{Header: []string{"a", "b"}, Rows: [][]string{{"1", "x|y"}}}.Markdown()
	want := "| a | b |\n|---|---|\n| 1 | x\\|y |\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestQuantiles(t *testing.T) {
	var l Latencies
	for i := 100; i >= 1; i-- {
		l.Add(time.Duration(i) * time.Millisecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Millisecond, 0.99: 99 * time.Millisecond, 0.999: 100 * time.Millisecond, 0: time.Millisecond} {
		if got := l.Quantile(q); got != want {
			t.Errorf("Quantile(%v) = %v, want %v", q, got, want)
		}
	}
	if (&Latencies{}).Quantile(0.5) != 0 {
		t.Error("empty Latencies should answer 0")
	}
}

func TestRatios(t *testing.T) {
	if Ratio(3, 2) != "1.50x" || Ratio(1, 0) != "n/a" || Percent(1, 4) != "25%" {
		t.Fatal(Ratio(3, 2), Ratio(1, 0), Percent(1, 4))
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1000: "1000 B", 1 << 10: "1 KiB", 1536: "1536 B", 3 << 19: "1536 KiB", 4 << 20: "4 MiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestProcessCPUGrows(t *testing.T) {
	before := ProcessCPU()
	deadline := time.Now().Add(5 * time.Second)
	x := 0
	for ProcessCPU() <= before && time.Now().Before(deadline) {
		for i := 0; i < 1e6; i++ {
			x += i
		}
	}
	if ProcessCPU() <= before {
		t.Fatalf("process CPU did not grow while spinning (%d)", x)
	}
}

func TestSpliceReplacesOnlyItsPart(t *testing.T) {
	doc := Splice("# Benchmarks\n", "b1", "one")
	doc = Splice(doc, "b2", "two")
	doc = Splice(doc, "b1", "ONE")
	if strings.Count(doc, "<!-- bench:b1 -->") != 1 || !strings.Contains(doc, "ONE") || strings.Contains(doc, "one\n") || !strings.Contains(doc, "two") {
		t.Fatalf("unexpected doc:\n%s", doc)
	}
	if strings.Index(doc, "ONE") > strings.Index(doc, "two") {
		t.Fatalf("b1 moved after b2:\n%s", doc)
	}
}

func TestPlotsArePNGs(t *testing.T) {
	dir := t.TempDir()
	line := filepath.Join(dir, "line.png")
	bars := filepath.Join(dir, "bars.png")
	s := []Series{{Name: "a", X: []float64{1, 2, 3}, Y: []float64{1, 4, 9}}, {Name: "b", X: []float64{1, 2, 3}, Y: []float64{2, 3, 4}}}
	if err := LinePlot(line, "t", "x", "y", s); err != nil {
		t.Fatal(err)
	}
	if err := BarPlot(bars, "t", "y", []string{"g1", "g2", "g3"}, s); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{line, bars} {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if b := img.Bounds(); b.Dx() < 400 || b.Dy() < 200 {
			t.Fatalf("%s: %v is too small", p, b)
		}
	}
	if err := BarPlot(bars, "t", "y", []string{"g1"}, s); err == nil {
		t.Fatal("mismatched groups should be an error")
	}
	s[0].Low, s[0].High = []float64{0.5, 3, 8}, []float64{2, 5, 10}
	if err := BarPlot(bars, "t", "y", []string{"g1", "g2", "g3"}, s); err != nil {
		t.Fatal(err)
	}
	s[0].High = s[0].High[:2]
	if err := BarPlot(bars, "t", "y", []string{"g1", "g2", "g3"}, s); err == nil {
		t.Fatal("whiskers that do not match the groups should be an error")
	}
}
