// Command cachenode is the distcache data-plane binary.
//
//	cachenode serve   run a cache node (mTLS chunk API + plain metrics port)
//	cachenode certs   issue certificates for running outside Kubernetes
//	cachenode gateway serve the S3 API next to compute, in front of the cache
//	cachenode init-data-dir  hand a hostPath data directory to the node's user
//	cachenode version        print the version this binary was built as
package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
)

const usage = `usage: cachenode <command> [flags]

commands:
  serve    run a cache node
  certs    issue a CA and server, peer and tenant certificates (outside Kubernetes)
  gateway  serve the S3 API (path-style, SigV4) in front of the cache, next to compute
  init-data-dir  create the data directory and give it to the node's user (an init container)
  version  print the version, revision and Go version this binary was built with (also --version)

Run 'cachenode <command> -h' for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	stopProfile, err := startCPUProfile(os.Getenv("DISTCACHE_CPU_PROFILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cachenode:", err)
		os.Exit(1)
	}
	switch os.Args[1] {
	case "serve":
		err = runServer(os.Args[2:], parseServeFlags)
	case "certs":
		err = runCerts(os.Args[2:])
	case "gateway":
		err = runServer(os.Args[2:], parseGatewayFlags)
	case "init-data-dir":
		err = runInitDataDir(os.Args[2:])
	case "version", "--version", "-version":
		fmt.Println(version.Print("cachenode"))
	case "-h", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "cachenode: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	stopProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cachenode:", err)
		os.Exit(1)
	}
}

// startCPUProfile writes a CPU profile of the whole run to path when it is
// set (DISTCACHE_CPU_PROFILE: how the benchmarks profile the processes they
// start); the profile is complete once the command returns (SIGTERM).
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("DISTCACHE_CPU_PROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("DISTCACHE_CPU_PROFILE: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// newRegistry is the metrics registry of `serve` and `gateway`: the Go
// runtime's and the process's collectors, and distcache_build_info with
// the version the binary was built as (set with -ldflags, Makefile VERSION).
func newRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		versioncollector.NewCollector("distcache"))
	return reg
}
