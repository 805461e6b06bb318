package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"
)

// runInitDataDir prepares a node's data directory for a container that runs
// as a non-root user: a hostPath directory on the host's NVMe is created by
// the kubelet owned by root, and fsGroup does not apply to hostPath volumes.
// The operator runs it as an init container (as root, with CAP_CHOWN only)
// in hostPath mode. Only the directory itself is chowned, not its contents:
// a warm cache left by the same user is kept as it is.
func runInitDataDir(args []string) error {
	fs := flag.NewFlagSet("init-data-dir", flag.ContinueOnError)
	dir := fs.String("dir", "", "data directory to create and hand over")
	uid := fs.Int("uid", 65532, "owner user id (the cache node's runAsUser)")
	gid := fs.Int("gid", 65532, "owner group id")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("init-data-dir: --dir is required")
	}
	if err := os.MkdirAll(*dir, 0o750); err != nil {
		return fmt.Errorf("init-data-dir: %w", err)
	}
	st, err := os.Stat(*dir)
	if err != nil {
		return fmt.Errorf("init-data-dir: %w", err)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) == *uid && int(sys.Gid) == *gid {
		return nil
	}
	if err := os.Chown(*dir, *uid, *gid); err != nil {
		return fmt.Errorf("init-data-dir: %w", err)
	}
	fmt.Printf("init-data-dir: %s now owned by %d:%d\n", *dir, *uid, *gid)
	return nil
}
