package processfaults_test

import (
	"os"
	"syscall"
)

// blocks is the bytes a file has allocated on disk (st_blocks), or its
// size where the platform does not say.
func blocks(st os.FileInfo) int64 {
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return sys.Blocks * 512
	}
	return st.Size()
}
