// Command probe is the image the local test cluster (hack/cluster.sh) and its
// users run to look at the cluster from inside a pod, since no registry (and
// so no busybox) is reachable:
//
//	probe lookup [-timeout 60s] NAME   resolve NAME, print its addresses
//	probe get [-timeout 60s] URL       GET URL until it answers 2xx, print the body
//	probe sleep                        block until SIGTERM (then kubectl exec probe ...)
//
// Without arguments it sleeps. ko builds the image (hack/cluster-images.sh),
// so the binary is /ko-app/probe and the image's entrypoint:
// `kubectl exec POD -- /ko-app/probe lookup NAME`.
//
// lookup and get retry until they succeed or the timeout passes (a freshly
// started CoreDNS can leave the first queries unanswered for seconds), and exit
// 1 with the last error then.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

const usage = `usage:
  probe lookup [-timeout 60s] NAME
  probe get [-timeout 60s] [-insecure] URL
  probe sleep (the default)`

func main() {
	if len(os.Args) < 2 {
		os.Args = append(os.Args, "sleep")
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "lookup":
		err = lookup(args)
	case "get":
		err = get(args)
	case "sleep":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
		<-ctx.Done()
		stop()
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

func lookup(args []string) error {
	fs := flag.NewFlagSet("lookup", flag.ExitOnError)
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("lookup wants one name")
	}
	host := fs.Arg(0)
	return retry(*timeout, func(ctx context.Context) error {
		addrs, err := net.DefaultResolver.LookupHost(ctx, host)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", host, strings.Join(addrs, " "))
		return nil
	})
}

func get(args []string) error {
	fs := flag.NewFlagSet("get", flag.ExitOnError)
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	insecure := fs.Bool("insecure", false, "accept any TLS server certificate")
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("get wants one URL")
	}
	url := fs.Arg(0)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if *insecure {
		transport.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for by -insecure
	}
	client := &http.Client{Transport: transport}
	return retry(*timeout, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if err != nil {
			return err
		}
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		fmt.Printf("%s %s\n%s", url, resp.Status, body)
		return nil
	})
}

// retry calls attempt, each call limited to 5 s, until it succeeds or timeout
// has passed.
func retry(timeout time.Duration, attempt func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := attempt(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s: %w", timeout, err)
		}
		fmt.Fprintln(os.Stderr, "probe: retrying:", err)
		time.Sleep(500 * time.Millisecond)
	}
}
