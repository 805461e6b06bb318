package testutil

import (
	"os"
	"strconv"
	"testing"
)

// EnvInt is the positive whole number in the environment variable name,
// def when it is unset or empty; any other value fails the test (a
// mistyped setting of a long run is said at once).
func EnvInt(t testing.TB, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
