package main

import (
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

func TestInitDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "host", "cache-zone-a-0")
	uid, gid := os.Getuid(), os.Getgid()
	if err := runInitDataDir([]string{"--dir=" + dir, "--uid=" + itoa(uid), "--gid=" + itoa(gid)}); err != nil {
		t.Fatal(err)
	}
	// A warm cache inside stays untouched on a second run.
	keep := filepath.Join(dir, "000001.vlog")
	if err := os.WriteFile(keep, []byte("warm"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := runInitDataDir([]string{"--dir=" + dir, "--uid=" + itoa(uid), "--gid=" + itoa(gid)}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s := st.Sys().(*syscall.Stat_t); int(s.Uid) != uid || int(s.Gid) != gid || !st.IsDir() {
		t.Fatalf("owner %d:%d dir %v", s.Uid, s.Gid, st.IsDir())
	}
	if b, err := os.ReadFile(keep); err != nil || string(b) != "warm" {
		t.Fatalf("contents changed: %q %v", b, err)
	}
	if os.Getuid() == 0 {
		// As root (CI, the init container): ownership really moves.
		other := filepath.Join(t.TempDir(), "other")
		if err := runInitDataDir([]string{"--dir=" + other, "--uid=65532", "--gid=65532"}); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(other)
		if s := st.Sys().(*syscall.Stat_t); s.Uid != 65532 || s.Gid != 65532 {
			t.Fatalf("owner %d:%d, want 65532:65532", s.Uid, s.Gid)
		}
	}
	if err := runInitDataDir(nil); err == nil {
		t.Fatal("no --dir accepted")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
