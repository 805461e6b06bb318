package envtestassets

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/distcache/distcache/internal/testutil/repo"
)

// The version is pinned in hack/build-kube.sh (which builds the binaries) and in
// KubeVersion (which finds them and which the envtest smoke test compares the
// server's version against); they must not drift apart.
func TestKubeVersionMatchesBuildScript(t *testing.T) {
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(filepath.Join(root, "hack", "build-kube.sh"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^KUBE_VERSION="\$\{KUBE_VERSION:-(v[0-9.]+)\}"`).FindSubmatch(script)
	if m == nil {
		t.Fatal("no KUBE_VERSION default found in hack/build-kube.sh")
	}
	if got := string(m[1]); got != KubeVersion {
		t.Fatalf("hack/build-kube.sh pins %s but envtestassets.KubeVersion is %s", got, KubeVersion)
	}
}

func TestPathHonoursEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvVar, dir)
	if _, err := Path(); err == nil {
		t.Fatal("expected an error for an empty assets directory")
	}
	for _, name := range Binaries {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	if got != dir {
		t.Fatalf("Path() = %s, want %s", got, dir)
	}
}

func TestPathErrorSaysWhatToRun(t *testing.T) {
	t.Setenv(EnvVar, "")
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "k8s", DirName(), "kube-apiserver")); err == nil {
		t.Skip("assets are built; nothing to check")
	}
	_, err = Path()
	if err == nil || !regexp.MustCompile(`make envtest-assets`).MatchString(err.Error()) {
		t.Fatalf("want an error mentioning make envtest-assets, got %v", err)
	}
}
