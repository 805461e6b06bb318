// Package envtestassets locates the kube-apiserver, etcd and kubectl binaries
// that controller-runtime's envtest runs. The project builds them from source
// (hack/build-kube.sh, hack/build-etcd.sh) and lays them out, by
// hack/envtest-assets.sh, in bin/k8s/<version>-<os>-<arch>/ at the repository
// root, the same layout setup-envtest uses.
package envtestassets

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil/repo"
)

// KubeVersion is the Kubernetes version the project pins for its test control
// plane. It must equal KUBE_VERSION in hack/build-kube.sh (a unit test checks).
const KubeVersion = "v1.36.3"

// EnvVar is the environment variable envtest itself reads; when set it wins.
const EnvVar = "KUBEBUILDER_ASSETS"

// Binaries are the files envtest needs in the assets directory.
var Binaries = []string{"kube-apiserver", "etcd", "kubectl"}

// DirName is the name of the assets directory under bin/k8s/, for example
// "1.36.3-linux-amd64".
func DirName() string {
	return strings.TrimPrefix(KubeVersion, "v") + "-" + runtime.GOOS + "-" + runtime.GOARCH
}

// Path returns the directory holding the envtest binaries: $KUBEBUILDER_ASSETS
// if set, otherwise <repo root>/bin/k8s/DirName(). It returns an error telling
// how to build the binaries if the directory does not hold all of them.
func Path() (string, error) {
	if dir := os.Getenv(EnvVar); dir != "" {
		if err := check(dir); err != nil {
			return "", fmt.Errorf("%s=%s: %w; unset it to use the project's own build (`make envtest-assets`)", EnvVar, dir, err)
		}
		return dir, nil
	}
	root, err := repo.Root()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "bin", "k8s", DirName())
	if err := check(dir); err != nil {
		return "", fmt.Errorf("envtest binaries for Kubernetes %s not found: %w; "+
			"run `make envtest-assets` (or hack/envtest-assets.sh) in %s, or set %s", KubeVersion, err, root, EnvVar)
	}
	return dir, nil
}

// Dir is Path for plain Go tests: it fails the test if the binaries are missing.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func check(dir string) error {
	var missing []string
	for _, name := range Binaries {
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p) // follows symlinks, so a dangling link counts as missing
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing or not executable: %s", strings.Join(missing, ", "))
	}
	return nil
}
