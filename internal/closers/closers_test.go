package closers

import (
	"slices"
	"testing"
)

func TestListRunsLastFirstOnce(t *testing.T) {
	var c List
	var ran []int
	for i := range 3 {
		c.Add(func() { ran = append(ran, i) })
	}
	c.Close()
	c.Close()
	if want := []int{2, 1, 0}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
}
