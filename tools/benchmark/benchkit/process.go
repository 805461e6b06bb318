package benchkit

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a server a bench runs as a child process (cachenode serve or
// gateway), its output in a log file.
type Process struct {
	Name string
	Cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// StartProcess starts bin with args, env added to this process's, output
// to logPath; the child dies with this process.
func StartProcess(bin, logPath, name string, env []string, args ...string) (*Process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	SetPdeathsig(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's ID.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM and waits (SIGKILL after 30 s).
func (p *Process) Stop() {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}

// LogTail is the end of the process's log, for error messages.
func (p *Process) LogTail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	return Tail(b, 4<<10)
}

// WaitReady polls url until it answers 200, for two minutes at most.
func (p *Process) WaitReady(ctx context.Context, url string) error {
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s: %v\n%s", p.Name, url, err, p.LogTail())
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited before it was ready:\n%s", p.Name, p.LogTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Tail is the last n bytes of b.
func Tail(b []byte, n int) string {
	if len(b) > n {
		return "..." + string(b[len(b)-n:])
	}
	return string(b)
}

// Metrics is a scrape of Prometheus text: sample line (name{labels}) to
// value, summed over the URLs scraped.
type Metrics map[string]float64

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{.*\})?)\s+(\S+)`)

// Scrape reads the /metrics pages at urls.
func Scrape(ctx context.Context, urls ...string) (Metrics, error) {
	m := Metrics{}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "#") {
				continue
			}
			if s := sampleLine.FindStringSubmatch(line); s != nil {
				if v, err := strconv.ParseFloat(s[2], 64); err == nil {
					m[s[1]] += v
				}
			}
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Sum adds the samples of family name whose label set holds every
// label="value" in labels.
func (m Metrics) Sum(name string, labels ...string) float64 {
	var s float64
	for k, v := range m {
		fam, rest, _ := strings.Cut(k, "{")
		if fam != name {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(rest, l) {
				ok = false
				break
			}
		}
		if ok {
			s += v
		}
	}
	return s
}

// Sub is m - o, sample by sample.
func (m Metrics) Sub(o Metrics) Metrics {
	d := Metrics{}
	for k, v := range m {
		d[k] = v - o[k]
	}
	return d
}
