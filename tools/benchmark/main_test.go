package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

func TestRunWritesChaptersAndKeepsOthers(t *testing.T) {
	calls := 0
	fake := func(title, body string) func(context.Context, benchkit.Env) (benchkit.Section, error) {
		return func(_ context.Context, env benchkit.Env) (benchkit.Section, error) {
			calls++
			if !env.Quick || env.WorkDir == "" || !filepath.IsAbs(env.Bin) {
				t.Errorf("unexpected env %+v", env)
			}
			return benchkit.Section{Title: title, Markdown: body}, nil
		}
	}
	old := parts
	defer func() { parts = old }()
	parts = []part{{"p1", fake("Part one", "first v1")}, {"p2", fake("Part two", "second v1")}}
	docs := t.TempDir()
	if err := run(context.Background(), []string{"p1", "p2"}, true, docs, "bin"); err != nil {
		t.Fatal(err)
	}
	parts = []part{{"p1", fake("Part one", "first v2")}, {"p2", fake("Part two", "second v2")}}
	if err := run(context.Background(), []string{"p1"}, true, docs, "bin"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(docs, "benchmarks.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, want := range []string{"# Benchmarks", "## Part one", "first v2", "second v1", "load average"} {
		if !strings.Contains(doc, want) {
			t.Errorf("doc lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(doc, "first v1") || strings.Index(doc, "Part one") > strings.Index(doc, "Part two") {
		t.Errorf("p1 not replaced in place:\n%s", doc)
	}
	if calls != 3 {
		t.Errorf("%d part runs, want 3", calls)
	}
	if err := run(context.Background(), []string{"nope"}, true, docs, "bin"); err == nil {
		t.Error("an unknown part should be refused")
	}
}
