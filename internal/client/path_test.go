package client

import (
	"testing"
)

func TestPageKeysAreUnambiguous(t *testing.T) {
	keys := map[string]bool{}
	for _, k := range []string{
		pageKey("ab", "c", `"e"`, 1, 2), pageKey("a", "bc", `"e"`, 1, 2), pageKey("a", "b", `c"e"`, 1, 2),
		pageKey("ab", "c", `"e"`, 12, 2), pageKey("ab", "c", `"e"`, 1, 22), pageKey("ab", "c", `"f"`, 1, 2),
		pageKey("ab", "c", `"e"`, 11, 2),
	} {
		if keys[k] {
			t.Fatalf("page key %q is not unique", k)
		}
		keys[k] = true
	}
}
