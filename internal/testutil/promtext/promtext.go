// Package promtext reads what the cache nodes and gateways serve on
// /metrics (the Prometheus text exposition format, their answer to a
// scrape without an Accept header), for the e2e suites that check metrics
// without a Prometheus.
package promtext

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

// Sample is one line of the text format.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples are the samples of one scrape.
type Samples []Sample

// Sum adds up the samples of name whose labels have the given values; a
// value may list alternatives separated by '|'. A nil match sums them all.
func (ms Samples) Sum(name string, match map[string]string) float64 {
	var total float64
next:
	for _, s := range ms {
		if s.Name != name {
			continue
		}
		for k, want := range match {
			if !strings.Contains("|"+want+"|", "|"+s.Labels[k]+"|") {
				continue next
			}
		}
		total += s.Value
	}
	return total
}

var client = &http.Client{Timeout: 10 * time.Second}

// Scrape GETs url (a /metrics page) within 15 s and parses it; an answer
// other than 200 is an error.
func Scrape(ctx context.Context, url string) (Samples, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, body, err := testutil.ReadBody(client.Do(req))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return Parse(string(body))
}

// Parse reads the text format: comments and empty lines are skipped, a
// line without a value is an error.
func Parse(text string) (Samples, error) {
	var out Samples
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		s := Sample{Labels: map[string]string{}}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		s.Name, line = line[:i], line[i:]
		if line[0] == '{' {
			rest, err := parseLabels(line[1:], s.Labels)
			if err != nil {
				return nil, fmt.Errorf("metrics line of %s: %w", s.Name, err)
			}
			line = rest
		}
		fields := strings.Fields(line)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line of %s: no value", s.Name)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line of %s: %w", s.Name, err)
		}
		s.Value = v
		out = append(out, s)
	}
	return out, nil
}

// parseLabels reads `k="v",...}` into labels and returns what follows.
func parseLabels(s string, labels map[string]string) (string, error) {
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return s[1:], nil
		}
		eq := strings.Index(s, `="`)
		if eq <= 0 {
			return "", fmt.Errorf("bad labels %q", s)
		}
		name := s[:eq]
		s = s[eq+2:]
		var v strings.Builder
		for {
			if s == "" {
				return "", fmt.Errorf("unterminated value of label %s", name)
			}
			c := s[0]
			s = s[1:]
			if c == '"' {
				break
			}
			if c == '\\' && s != "" {
				switch s[0] {
				case 'n':
					v.WriteByte('\n')
				default:
					v.WriteByte(s[0])
				}
				s = s[1:]
				continue
			}
			v.WriteByte(c)
		}
		labels[name] = v.String()
	}
}
