// Command pause is the sandbox ("pause") image of the local test cluster
// (hack/cluster.sh): the process that holds a pod's namespaces. It does
// nothing until SIGTERM or SIGINT and, being PID 1 of pods that share their
// process namespace, reaps the orphans that are re-parented to it, as the
// upstream pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
