package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/distcache/distcache/internal/testutil/gobin"
)

// pluginDir holds the kubectl-distcache binary the suite built (gobin:
// once per state of the tree, alone in its directory), so that `kubectl
// distcache` finds it on PATH as a user's kubectl would.
var pluginDir string

// buildPlugin builds cmd/kubectl-distcache, stamped as make plugin
// stamps it, and sets pluginDir.
func buildPlugin(ctx context.Context) {
	GinkgoHelper()
	if pluginDir != "" {
		return
	}
	ldflags := strings.TrimSpace(runHack(ctx, "version-ldflags.sh"))
	bin, err := gobin.Path("github.com/distcache/distcache/cmd/kubectl-distcache", ldflags)
	Expect(err).NotTo(HaveOccurred())
	pluginDir = filepath.Dir(bin)
}

// kubectlDistcache runs `kubectl distcache ARGS` through bin/kubectl's
// plugin lookup, bounded by commandTimeout.
func kubectlDistcache(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	fmt.Fprintf(GinkgoWriter, "$ kubectl distcache %s\n", strings.Join(args, " "))
	env := []string{"PATH=" + pluginDir + string(os.PathListSeparator) + os.Getenv("PATH"), "KUBECONFIG=" + kubeconfig}
	return run(ctx, env, nil, kubectlBin, append([]string{"distcache"}, args...)...)
}

// kubectlDistcacheJSON runs `kubectl distcache ARGS -o json` and decodes
// its report.
func kubectlDistcacheJSON(ctx context.Context, g Gomega, into any, args ...string) {
	out, err := kubectlDistcache(ctx, append(args, "-o", "json")...)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal([]byte(out), into)).To(Succeed(), out)
}
