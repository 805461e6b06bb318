package testutil

import (
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil/logbuf"
)

// Process is a command a test runs (a cachenode, Prometheus) until the
// test ends.
type Process struct {
	Cmd *exec.Cmd
	// Logs holds its output, unless Cmd came with an output of its own.
	Logs *logbuf.Buffer

	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done
	once sync.Once
}

// StopTimeout is how long Stop waits after SIGTERM before SIGKILL.
const StopTimeout = 30 * time.Second

// StartProcess starts cmd, its output into Logs unless cmd.Stdout is set,
// and stops it (Stop) when the test ends; if the test failed, Logs are
// logged under name.
func StartProcess(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	if cmd.Stdout == nil && cmd.Stderr == nil {
		p.Logs = &logbuf.Buffer{}
		cmd.Stdout, cmd.Stderr = p.Logs, p.Logs
	}
	Must(t, cmd.Start())
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() && p.Logs != nil {
			t.Logf("%s output:\n%s", name, p.Logs.String())
		}
	})
	return p
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the process's exit status once Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Stop ends the process: SIGTERM, then SIGKILL after StopTimeout. It
// returns once the process has exited, and is idempotent.
func (p *Process) Stop() {
	p.once.Do(func() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(StopTimeout):
			_ = p.Cmd.Process.Kill()
			<-p.done
		}
	})
}
