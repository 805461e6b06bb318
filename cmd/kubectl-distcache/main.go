// Command kubectl-distcache is the `kubectl distcache` plugin: put it on
// the PATH and kubectl runs it for `kubectl distcache ...`
// (docs/kubectl-plugin.md). The commands are in internal/kubectlplugin.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/go-logr/logr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/distcache/distcache/internal/kubectlplugin"
)

func main() {
	// controller-runtime's client logs nothing the user needs; without a
	// logger it would complain on stderr that none was set.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := kubectlplugin.NewCommand(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(1)
	}
}
