package monitoring

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/repo"
)

// githubAnchor is the anchor GitHub gives a Markdown heading: lower case,
// spaces to hyphens, everything but letters, digits, '-' and '_' dropped.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// runbookSections reads docs/operations.md: the text of every heading's
// section, by the heading's anchor.
func runbookSections(t *testing.T) map[string]string {
	t.Helper()
	root, err := repo.Root()
	testutil.Must(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	testutil.Must(t, err)
	sections := map[string]string{}
	heading := regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	locs := heading.FindAllStringSubmatchIndex(string(doc), -1)
	for i, l := range locs {
		end := len(doc)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		sections[githubAnchor(string(doc[l[2]:l[3]]))] = string(doc[l[1]:end])
	}
	return sections
}

// TestRunbooks: every alert links its own section of docs/operations.md,
// and that section says what the alert means, how to check it and what to
// do.
func TestRunbooks(t *testing.T) {
	groups, err := RuleGroups(Target{Namespace: "ns", Cache: "c"}, "")
	testutil.Must(t, err)
	sections := runbookSections(t)
	seen := map[string]bool{}
	for _, r := range groups[0].Rules {
		url := r.Annotations["runbook_url"]
		page, anchor, ok := strings.Cut(url, "#")
		if !ok || page != RunbookURL || !strings.HasPrefix(page, "https://github.com/distcache/distcache/blob/main/docs/operations.md") {
			t.Errorf("%s: runbook_url %q is not a section of docs/operations.md", r.Alert, url)
			continue
		}
		if anchor != githubAnchor(r.Alert) {
			t.Errorf("%s: runbook_url anchor %q is not the alert's own section", r.Alert, anchor)
		}
		if seen[anchor] {
			t.Errorf("%s: runbook_url %q is shared with another alert", r.Alert, url)
		}
		seen[anchor] = true
		text, ok := sections[anchor]
		if !ok {
			t.Errorf("%s: docs/operations.md has no heading with anchor #%s", r.Alert, anchor)
			continue
		}
		for _, part := range []string{"**What it means.**", "**How to check.**", "**What to do.**"} {
			if !strings.Contains(text, part) {
				t.Errorf("%s: its runbook section lacks %s", r.Alert, part)
			}
		}
	}
	if len(seen) != len(groups[0].Rules) || len(seen) < 12 {
		t.Errorf("%d runbooks for %d alerts", len(seen), len(groups[0].Rules))
	}
}

func TestGithubAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"DistcacheNodeDown":                   "distcachenodedown",
		"Network policies":                    "network-policies",
		"`cachenode serve`":                   "cachenode-serve",
		"On Kubernetes (the operator)":        "on-kubernetes-the-operator",
		"Pod Security":                        "pod-security",
		"DistcacheGatewayCertificateExpiring": "distcachegatewaycertificateexpiring",
	} {
		if got := githubAnchor(heading); got != want {
			t.Errorf("%q: %q, want %q", heading, got, want)
		}
	}
}
