package benchkit

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestKnobsNoteWhatIsSet(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "profiles")
	t.Setenv("BENCH_PROFILE_DIR", dir)
	t.Setenv("BENCH_T_LIST", "a,b")
	t.Setenv("BENCH_T_SECONDS", "1.5")
	t.Setenv("BENCH_T_ROUNDS", "2")
	t.Setenv("BENCH_T_EMPTY", "")
	var k Knobs
	if got, err := k.ProfileDir(); err != nil || got != dir {
		t.Fatalf("ProfileDir = %q, %v", got, err)
	}
	if got := k.List("BENCH_T_LIST"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("List = %q", got)
	}
	if got := k.List("BENCH_T_EMPTY"); got != nil {
		t.Fatalf("List of an empty variable = %q", got)
	}
	var secs float64
	var rounds int
	if err := k.Positive("BENCH_T_SECONDS", func(f float64) { secs = f }); err != nil || secs != 1.5 {
		t.Fatalf("Positive: %v, %v", secs, err)
	}
	if err := k.PositiveInt("BENCH_T_ROUNDS", func(n int) { rounds = n }); err != nil || rounds != 2 {
		t.Fatalf("PositiveInt: %v, %v", rounds, err)
	}
	if err := k.PositiveInt("BENCH_T_EMPTY", func(int) { t.Fatal("set from an empty variable") }); err != nil {
		t.Fatal(err)
	}
	want := []string{"BENCH_PROFILE_DIR=" + dir, "BENCH_T_LIST=a,b", "BENCH_T_SECONDS=1.5", "BENCH_T_ROUNDS=2"}
	if !slices.Equal(k, want) {
		t.Fatalf("knobs %q, want %q", k, want)
	}
}

func TestKnobsRefuseWhatIsNotPositive(t *testing.T) {
	for _, c := range []struct {
		value string
		read  func(*Knobs) error
	}{
		{"0", func(k *Knobs) error { return k.Positive("BENCH_T", func(float64) {}) }},
		{"x", func(k *Knobs) error { return k.Positive("BENCH_T", func(float64) {}) }},
		{"2.5", func(k *Knobs) error { return k.PositiveInt("BENCH_T", func(int) {}) }},
		{"2,3", func(k *Knobs) error { return k.PositiveInt("BENCH_T", func(int) {}) }},
		{"1,0", func(k *Knobs) error { _, err := k.PositiveInts("BENCH_T"); return err }},
	} {
		t.Setenv("BENCH_T", c.value)
		var k Knobs
		if err := c.read(&k); err == nil || !strings.Contains(err.Error(), "is not a positive number") {
			t.Errorf("BENCH_T=%s: error %v", c.value, err)
		}
	}
}
