package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// microPackages hold the Go benchmarks of the hot paths.
var microPackages = []string{"./internal/store/", "./internal/node/", "./internal/client/", "./internal/ring/", "./internal/sigv4/"}

// benchLine is one result line of `go test -bench -benchmem`.
var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.+)$`)

// runMicro runs the Go micro-benchmarks and tabulates them.
func runMicro(ctx context.Context, env benchkit.Env) (benchkit.Section, error) {
	benchtime := "1s"
	if env.Quick {
		benchtime = "1x"
	}
	args := append([]string{"test", "-run", "^$", "-bench", ".", "-benchmem", "-benchtime", benchtime}, microPackages...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Env = append(os.Environ(), "MINIO_BIN="+env.Bin+"/minio")
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	env.Logf("go %s", strings.Join(args, " "))
	if err := cmd.Run(); err != nil {
		return benchkit.Section{}, fmt.Errorf("go test -bench: %w\n%s", err, out.String())
	}
	t := benchkit.Table{Header: []string{"package", "benchmark", "ns/op", "MB/s", "B/op", "allocs/op"}}
	pkg := ""
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimPrefix(rest, "github.com/distcache/distcache/")
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		metrics := map[string]string{}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			metrics[f[i+1]] = f[i]
		}
		t.Rows = append(t.Rows, []string{pkg, strings.TrimPrefix(m[1], "Benchmark"), metrics["ns/op"], or(metrics["MB/s"], "-"), metrics["B/op"], metrics["allocs/op"]})
	}
	if len(t.Rows) == 0 {
		return benchkit.Section{}, fmt.Errorf("no benchmark results in:\n%s", out.String())
	}
	md := "Go benchmarks of the hot paths, one process per package, `-benchtime " + benchtime + "`:\n\n" +
		"```sh\nmake bench BENCH_PARTS=micro   # = go test -run '^$' -bench . -benchmem " + strings.Join(microPackages, " ") + "\n```\n\n" +
		t.Markdown()
	return benchkit.Section{Title: "Go micro-benchmarks", Markdown: md}, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
