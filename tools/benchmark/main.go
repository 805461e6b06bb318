// Command benchmark runs the benchmark parts of `make bench` one after the other
// on this machine and writes their chapters into docs/benchmarks.md, with the
// plots in docs/img/. A run of some parts (-parts b1,b3) replaces only their
// chapters, each of which says when and on what it ran.
//
//	go run ./tools/benchmark                        # every part
//	go run ./tools/benchmark -parts b2              # one part
//	go run ./tools/benchmark -quick -docs /tmp/x    # smoke run into another directory
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
	"github.com/distcache/distcache/tools/benchmark/clickhouse"
	"github.com/distcache/distcache/tools/benchmark/hitpath"
	"github.com/distcache/distcache/tools/benchmark/hitratio"
	"github.com/distcache/distcache/tools/benchmark/scaleout"
	"github.com/distcache/distcache/tools/benchmark/writepath"
)

// part is one chapter of docs/benchmarks.md.
type part struct {
	id  string
	run func(context.Context, benchkit.Env) (benchkit.Section, error)
}

// parts in the order of the chapters.
var parts = []part{
	{"b1", hitpath.Run},
	{"b2", clickhouse.Run},
	{"b3", scaleout.Run},
	{"b4", hitratio.Run},
	{"b5", writepath.Run},
	{"micro", runMicro},
}

const intro = `# Benchmarks

Speed is measured, never asserted by tests. ` + "`make bench`" + ` runs every part
below on one machine in one go and rewrites this file and the plots in
docs/img/; each chapter says when, on what machine and under what load it ran.
Compare the columns of one table with each other (they come from the same run,
back to back); absolute figures depend on the machine. The goals of issue #6
are judged in the chapters ("Goals"). How the hit path was profiled and
cut, pass by pass, is kept apart in tools/benchmark/profiling.md.

` + "```sh" + `
make bench                      # every part (go run ./tools/benchmark)
make bench BENCH_PARTS=b1,b4    # some parts; the other chapters stay as they are
` + "```" + `
`

func main() {
	ids := make([]string, len(parts))
	for i, p := range parts {
		ids[i] = p.id
	}
	only := flag.String("parts", strings.Join(ids, ","), "comma-separated parts to run, of: "+strings.Join(ids, ",")+
		"; none: only rewrite the page's last chapter (the link to the profiling history)")
	quick := flag.Bool("quick", false, "smoke mode: tiny sizes, same code paths")
	docs := flag.String("docs", "docs", "directory of benchmarks.md; plots go to its img/")
	bin := flag.String("bin", "bin", "the repository's bin/ directory (servers and tools)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	want := strings.Split(*only, ",")
	if *only == "none" {
		want = nil
	}
	if err := run(ctx, want, *quick, *docs, *bin); err != nil {
		log.Fatal(err)
	}
	if err := writeHistoryLink(filepath.Join(*docs, "benchmarks.md")); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, want []string, quick bool, docs, bin string) error {
	for _, id := range want {
		if !slices.ContainsFunc(parts, func(p part) bool { return p.id == id }) {
			return fmt.Errorf("unknown part %q", id)
		}
	}
	binAbs, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	root, err := os.Getwd() // make bench runs from the repository
	if err != nil {
		return err
	}
	imgDir := filepath.Join(docs, "img")
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		return err
	}
	docPath := filepath.Join(docs, "benchmarks.md")
	for _, p := range parts {
		if !slices.Contains(want, p.id) {
			continue
		}
		work, err := os.MkdirTemp("", "distcache-bench-"+p.id+"-")
		if err != nil {
			return err
		}
		logger := log.New(os.Stderr, p.id+": ", log.Ltime)
		env := benchkit.Env{Bin: binAbs, Root: root, WorkDir: work, ImgDir: imgDir, Quick: quick, Log: logger}
		start, loadBefore := time.Now(), benchkit.LoadAverage()
		logger.Printf("start (load average %s)", loadBefore)
		sec, err := p.run(ctx, env)
		os.RemoveAll(work)
		if err != nil {
			return fmt.Errorf("part %s: %w", p.id, err)
		}
		took := time.Since(start)
		logger.Printf("done in %s", took.Round(time.Second))
		body := "## " + sec.Title + "\n\n" + benchkit.RunInfo(start, took, loadBefore, benchkit.LoadAverage()) + "\n" + strings.TrimSpace(sec.Markdown) + "\n"
		// Write after every part, so a later failure keeps the finished chapters.
		old, err := os.ReadFile(docPath)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		doc := string(old)
		if !strings.HasPrefix(doc, "# Benchmarks") || !strings.Contains(doc, "<!-- bench:") {
			doc = intro // the first generated run replaces the hand-written page
		}
		if err := os.WriteFile(docPath, []byte(benchkit.Splice(doc, p.id, body)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// historyLink is the page's last chapter: the session-by-session profiling
// notes are for developers, kept out of the users' page.
const historyLink = `## Profiling history

How the hit path and the ClickHouse table were profiled and what each pass
changed (CPU and allocation profiles, before/after figures, what was left)
is in [tools/benchmark/profiling.md](../tools/benchmark/profiling.md), for developers;
the chapters above are the current figures.
`

// writeHistoryLink puts historyLink into the page as its "profiling"
// chapter (replacing the notes older runs copied there).
func writeHistoryLink(docPath string) error {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		return err
	}
	return os.WriteFile(docPath, []byte(benchkit.Splice(string(doc), "profiling", historyLink)), 0o644)
}
