package chdbtest

import (
	"encoding/json"
	"strings"
	"testing"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDiff(t *testing.T) {
	a := decode(t, `{"q1": [[1, "x"]], "q2": [[18446744073709551615]], "q3": []}`)
	b := decode(t, `{"q1": [[1, "x"]], "q2": [[18446744073709551614]], "q4": []}`)
	if d := Diff(a, a); d != nil {
		t.Fatalf("Diff(a, a) = %v", d)
	}
	d := Diff(a, b)
	if len(d) != 3 || !strings.HasPrefix(d[0], "q2:") || !strings.HasPrefix(d[1], "q3: missing") ||
		!strings.HasPrefix(d[2], "q4: unexpected") {
		t.Fatalf("Diff(a, b) = %q", d)
	}
	if got := Uint(t, a, "q2", 0, 0); got != 18446744073709551615 {
		t.Fatalf("Uint = %d", got)
	}
	if got := Rows(t, a, "q3"); got != 0 {
		t.Fatalf("Rows = %d", got)
	}
}
