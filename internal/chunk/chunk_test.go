package chunk

import "testing"

func TestBounds(t *testing.T) {
	const cs = 10
	tests := []struct {
		name             string
		size, index      int64
		wantOff, wantLen int64
		wantOK           bool
	}{
		{"empty object has no chunks", 0, 0, 0, 0, false},
		{"one byte", 1, 0, 0, 1, true},
		{"chunk minus one", cs - 1, 0, 0, cs - 1, true},
		{"exactly one chunk", cs, 0, 0, cs, true},
		{"no second chunk at exact size", cs, 1, 0, 0, false},
		{"chunk plus one: tail", cs + 1, 1, cs, 1, true},
		{"middle chunk is full", 3*cs + 5, 2, 2 * cs, cs, true},
		{"negative index", 25, -1, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			off, n, ok := Bounds(tt.size, cs, tt.index)
			if off != tt.wantOff || n != tt.wantLen || ok != tt.wantOK {
				t.Fatalf("Bounds(%d, %d, %d) = %d, %d, %v; want %d, %d, %v",
					tt.size, cs, tt.index, off, n, ok, tt.wantOff, tt.wantLen, tt.wantOK)
			}
		})
	}
}

func TestCountAndSpan(t *testing.T) {
	if got := Count(21, 10); got != 3 {
		t.Fatalf("Count(21,10) = %d, want 3", got)
	}
	if f, l := Span(9, 2, 10); f != 0 || l != 1 {
		t.Fatalf("Span(9,2,10) = %d..%d, want 0..1", f, l)
	}
	if f, l := Span(10, 10, 10); f != 1 || l != 1 {
		t.Fatalf("Span(10,10,10) = %d..%d, want 1..1", f, l)
	}
}
