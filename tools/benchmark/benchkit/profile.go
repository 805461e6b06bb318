package benchkit

import (
	"os"
	"runtime/pprof"
)

// StartCPUProfile starts a CPU profile of the bench process into path (a
// cell's, for BENCH_PROFILE_DIR); stop ends it and closes the file.
func StartCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}
