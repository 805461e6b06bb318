package benchkit

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Knobs reads a part's BENCH_* variables and keeps those set, as
// NAME=value in the order read, for the section to name: a run narrowed by
// them is not the default measurement.
type Knobs []string

// Note names NAME=v among the knobs.
func (k *Knobs) Note(name, v string) { *k = append(*k, name+"="+v) }

// List is name's comma-separated values; nil (and nothing noted) when the
// variable is empty.
func (k *Knobs) List(name string) []string {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	k.Note(name, v)
	return strings.Split(v, ",")
}

// Positive hands set name's value when it is set, a number above zero.
func (k *Knobs) Positive(name string, set func(float64)) error {
	return k.positive(name, func(v string) bool {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			return false
		}
		set(f)
		return true
	})
}

// PositiveInt hands set name's value when it is set, a whole number above
// zero.
func (k *Knobs) PositiveInt(name string, set func(int)) error {
	return k.positive(name, func(v string) bool {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return false
		}
		set(n)
		return true
	})
}

// positive hands name's value, when it is set, to use, which says whether
// it is a positive number (and then uses it).
func (k *Knobs) positive(name string, use func(string) bool) error {
	v := os.Getenv(name)
	if v == "" {
		return nil
	}
	if !use(v) {
		return fmt.Errorf("%s: %q is not a positive number", name, v)
	}
	k.Note(name, v)
	return nil
}

// PositiveInts is name's comma-separated whole numbers above zero; nil
// when the variable is empty.
func (k *Knobs) PositiveInts(name string) ([]int, error) {
	var out []int
	for _, s := range k.List(name) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive number", name, s)
		}
		out = append(out, n)
	}
	return out, nil
}

// ProfileDir is BENCH_PROFILE_DIR, made if missing: where a part writes
// the profiles of its cells ("" when not set: no profiles).
func (k *Knobs) ProfileDir() (string, error) {
	const name = "BENCH_PROFILE_DIR"
	v := os.Getenv(name)
	if v == "" {
		return "", nil
	}
	if err := os.MkdirAll(v, 0o755); err != nil {
		return "", err
	}
	k.Note(name, v)
	return v, nil
}
