// Package benchtest runs the parts of the benchmark program
// (tools/benchmark) as tests: their quick runs, tiny sizes through the
// same code paths, which `make test` runs with everything else.
package benchtest

import (
	"log"
	"os"
	"path/filepath"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/repo"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// Env is the environment of a quick run of part (b1, b2, ...): Bin is
// the repository's bin/, or the directory of $MINIO_BIN when that names a
// minio binary (as miniotest finds MinIO); Root is the repository; the
// work and image directories are the test's; progress lines go to t.Log,
// prefixed with the part.
func Env(t testing.TB, part string) benchkit.Env {
	t.Helper()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin")
	if p := os.Getenv("MINIO_BIN"); p != "" && filepath.Base(p) == "minio" {
		bin = filepath.Dir(p)
	}
	return benchkit.Env{Bin: bin, Root: root, WorkDir: t.TempDir(), ImgDir: t.TempDir(), Quick: true,
		Log: log.New(testutil.LogWriter{T: t}, part+": ", 0)}
}
