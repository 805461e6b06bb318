package minioproc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A MinIO that exits at once (a port taken between its pick and the bind,
// a broken binary) is tried on other ports, then reported with the end of
// its log.
func TestStartReportsAProcessThatExits(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "minio")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"cannot bind $4\" >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Start(context.Background(), bin, filepath.Join(dir, "run"))
	if !errors.Is(err, errExited) {
		t.Fatalf("Start = %v, want errExited", err)
	}
	if n := strings.Count(err.Error(), "cannot bind 127.0.0.1:"); n != startAttempts {
		t.Errorf("the log in the error shows %d attempts, want %d:\n%v", n, startAttempts, err)
	}
}
