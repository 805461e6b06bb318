package gobuild

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
)

// writeProgram writes a module of one program printing greeting (or the
// value -ldflags gives main.greeting) into dir.
func writeProgram(t *testing.T, dir, greeting string) {
	t.Helper()
	files := map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nvar greeting = \"" + greeting + "\"\n\nfunc main() { fmt.Print(greeting) }\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func run(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("%s: %v", bin, err)
	}
	return string(out)
}

// TestBuildKeepsOneBinaryPerTree builds a program, builds it again
// unchanged (the same binary, not rebuilt), with other -ldflags and after
// its source changed (other binaries, each running what it was built
// from).
func TestBuildKeepsOneBinaryPerTree(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // where binaries are kept
	ctx := context.Background()
	dir := t.TempDir()
	writeProgram(t, dir, "hello")
	first, err := Build(ctx, dir, ".", "")
	testutil.Must(t, err)
	if got := run(t, first); got != "hello" {
		t.Fatalf("first build prints %q", got)
	}
	if filepath.Base(first) != "hello" || !strings.HasPrefix(first, os.TempDir()) {
		t.Errorf("binary at %s, want hello under %s", first, os.TempDir())
	}
	info, err := os.Stat(first)
	testutil.Must(t, err)
	again, err := Build(ctx, dir, ".", "")
	testutil.Must(t, err)
	if again != first {
		t.Errorf("unchanged tree built to %s, then %s", first, again)
	}
	if info2, err := os.Stat(again); err != nil || !info2.ModTime().Equal(info.ModTime()) {
		t.Errorf("the kept binary was written again (%v)", err)
	}

	flagged, err := Build(ctx, dir, ".", "-X main.greeting=flagged")
	testutil.Must(t, err)
	if flagged == first || run(t, flagged) != "flagged" {
		t.Errorf("other -ldflags: %s prints %q", flagged, run(t, flagged))
	}

	writeProgram(t, dir, "changed")
	changed, err := Build(ctx, dir, ".", "")
	testutil.Must(t, err)
	if changed == first || run(t, changed) != "changed" {
		t.Errorf("changed source: %s prints %q", changed, run(t, changed))
	}
	if run(t, first) != "hello" {
		t.Error("the first binary was overwritten")
	}
}

func TestBuildRefusesALibrary(t *testing.T) {
	if _, err := Build(context.Background(), "", "github.com/distcache/distcache/internal/ring", ""); err == nil {
		t.Fatal("a library package built as a program")
	}
}
