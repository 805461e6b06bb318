// Package gobuild builds a program of this module once per state of the
// tree, for the test packages that run a binary as a process (each its own
// test process) and for the benchmarks: a binary is kept in the temporary
// directory under a key made of what the linker reads, the compiled
// archive of every package it links (their paths in the Go build cache
// name their content) and the -ldflags, so it is built again only when
// the code, the toolchain, the build settings or the flags change.
package gobuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Cachenode is the import path of the cachenode binary.
const Cachenode = "github.com/distcache/distcache/cachenode"

// keep is how long a binary nobody used stays in the temporary directory.
const keep = 24 * time.Hour

// Build returns the path of the binary of pkg (an import path, or a
// ./path relative to dir) linked with ldflags, building it in the module
// at dir ("": the current directory) unless a binary of this very tree is
// kept. Concurrent builds of one key, in this process or others, leave
// one binary.
func Build(ctx context.Context, dir, pkg, ldflags string) (string, error) {
	name, key, err := buildKey(ctx, dir, pkg, ldflags)
	if err != nil {
		return "", err
	}
	root := filepath.Join(os.TempDir(), "distcache-gobuild")
	kept := filepath.Join(root, name+"-"+key)
	bin := filepath.Join(kept, name)
	if _, err := os.Stat(bin); err == nil {
		now := time.Now()
		_ = os.Chtimes(kept, now, now) // in use: not pruned
		return bin, nil
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(root, name+".building-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp) // gone once renamed
	args := []string{"build", "-o", filepath.Join(tmp, name)}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	if _, err := goCommand(ctx, dir, append(args, pkg)...); err != nil {
		return "", err
	}
	// Another build of the same key may have won: its binary is as good.
	if err := os.Rename(tmp, kept); err != nil {
		if _, serr := os.Stat(bin); serr != nil {
			return "", err
		}
	}
	prune(root, name, kept)
	return bin, nil
}

// buildKey is the name of pkg's binary and a key for what it links.
func buildKey(ctx context.Context, dir, pkg, ldflags string) (name, key string, err error) {
	out, err := goCommand(ctx, dir, "list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Name}} {{.Export}}", pkg)
	if err != nil {
		return "", "", err
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	// -deps lists pkg itself last.
	self := strings.Fields(lines[len(lines)-1])
	if len(self) < 2 || self[1] != "main" {
		return "", "", fmt.Errorf("%s is not a program", pkg)
	}
	h := sha256.New()
	h.Write(out)
	fmt.Fprintf(h, "ldflags %q\n", ldflags)
	return path.Base(self[0]), hex.EncodeToString(h.Sum(nil))[:20], nil
}

// prune removes name's binaries other than current that nobody used for
// keep.
func prune(root, name, current string) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(root, e.Name())
		if p == current || !e.IsDir() || !strings.HasPrefix(e.Name(), name+"-") {
			continue
		}
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > keep {
			_ = os.RemoveAll(p)
		}
	}
}

func goCommand(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
