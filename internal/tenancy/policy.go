package tenancy

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Mode is how the cache treats an object's writes and reads (a write
// policy). The zero value is WriteThrough.
type Mode string

// Modes of a Policy.
const (
	// WriteThrough acknowledges a write once S3 has it, and caches it.
	WriteThrough Mode = "WriteThrough"
	// WriteBack acknowledges a write once Replicas cache nodes hold it on
	// disk, and persists it to S3 in the background.
	WriteBack Mode = "WriteBack"
	// Transient keeps writes on Replicas cache nodes only, never in S3,
	// until deleted or expired.
	Transient Mode = "Transient"
	// ReadOnly refuses writes (S3 AccessDenied naming the policy).
	ReadOnly Mode = "ReadOnly"
	// NoCache sends reads and writes straight to S3 and caches nothing.
	NoCache Mode = "NoCache"
)

// Modes lists the modes this version implements, in documentation order.
var Modes = []Mode{WriteThrough, WriteBack, Transient, ReadOnly, NoCache}

// Policy applies a Mode to a bucket's keys under Prefix ("" for all). The
// longest Prefix that matches a key wins; keys no policy matches are
// WriteThrough.
type Policy struct {
	Bucket string `json:"bucket"`
	Prefix string `json:"prefix,omitempty"`
	Mode   Mode   `json:"mode"`
	// Replicas is how many cache nodes of the zone hold a WriteBack or
	// Transient write on disk before it is acknowledged (1 to
	// MaxReplicas; 0: DefaultReplicas).
	Replicas int `json:"replicas,omitempty"`
	// Expiry ends a Transient object this long after it was written: a
	// Go duration ("24h"); empty: never.
	Expiry string `json:"expiry,omitempty"`
}

// Replica counts of WriteBack and Transient policies.
const (
	DefaultReplicas = 2
	MaxReplicas     = 3
)

// policyFields are the keys of a policy in the file.
var policyFields = []string{"bucket", "prefix", "mode", "replicas", "expiry"}

// ReplicaCount is how many nodes hold a write of the policy's keys
// (WriteBack, Transient).
func (p Policy) ReplicaCount() int {
	if p.Replicas <= 0 {
		return DefaultReplicas
	}
	return p.Replicas
}

// ExpiryAfter is the policy's Expiry (0: none; the file was validated).
func (p Policy) ExpiryAfter() time.Duration {
	d, _ := time.ParseDuration(p.Expiry)
	return d
}

// String names the policy in errors users see: "ReadOnly (bucket b,
// prefix "tmp/")".
func (p Policy) String() string {
	if p.Prefix == "" {
		return fmt.Sprintf("%s (bucket %s)", p.Mode, p.Bucket)
	}
	return fmt.Sprintf("%s (bucket %s, prefix %q)", p.Mode, p.Bucket, p.Prefix)
}

// PolicyFor is the policy of the tenant's object bucket/key: the one of the
// longest matching prefix, or WriteThrough. A WriteBack key that some
// S3-compatible stores refuse to name (Persistable) is WriteThrough.
func (t *Tenant) PolicyFor(bucket, key string) Policy {
	best := Policy{Bucket: bucket, Mode: WriteThrough}
	found := false
	for _, p := range t.Policies {
		if p.Bucket != bucket || !strings.HasPrefix(key, p.Prefix) {
			continue
		}
		if !found || len(p.Prefix) > len(best.Prefix) {
			best, found = p, true
		}
	}
	if best.Mode == WriteBack && !Persistable(key) {
		return Policy{Bucket: bucket, Mode: WriteThrough}
	}
	return best
}

// Persistable reports whether every S3-compatible store is known to take
// key as an object's name. AWS S3 takes any UTF-8 key, but MinIO refuses a
// key with an empty segment (a leading "/", or "//"), a "." or ".."
// segment, a NUL byte, or invalid UTF-8, and HTTP clients and proxies
// rewrite such paths. A WriteBack write of one would be acknowledged and
// then never land in such a store, and its delete never either; so such
// keys are written through, and S3 answers for them.
func Persistable(key string) bool {
	if !utf8.ValidString(key) || strings.Contains(key, "//") || strings.HasPrefix(key, "/") || strings.IndexByte(key, 0) >= 0 {
		return false
	}
	for seg := range strings.SplitSeq(key, "/") {
		if s := strings.TrimSpace(seg); s == "." || s == ".." {
			return false
		}
	}
	return true
}

// validatePolicies checks a tenant's policies; fail reports a problem with
// the field it concerns.
func validatePolicies(t *Tenant, fail func(field, format string, args ...any)) {
	seen := map[[2]string]int{}
	for i, p := range t.Policies {
		at := fmt.Sprintf("policies[%d]", i)
		if !t.AllowsBucket(p.Bucket) {
			fail(at+".bucket", "%q is not one of the tenant's buckets", p.Bucket)
		}
		if len(p.Prefix) > maxKeyBytes {
			fail(at+".prefix", "longer than an S3 key (%d bytes)", maxKeyBytes)
		}
		if j, dup := seen[[2]string{p.Bucket, p.Prefix}]; dup {
			fail(at, "duplicate of policies[%d] (same bucket and prefix)", j)
		}
		seen[[2]string{p.Bucket, p.Prefix}] = i
		known := false
		for _, m := range Modes {
			known = known || p.Mode == m
		}
		switch {
		case !known && (p.Mode == WriteBack || p.Mode == Transient):
			fail(at+".mode", "%s is not implemented by this version (one of %s)", p.Mode, joinModes())
		case !known:
			fail(at+".mode", "%q is not one of %s", p.Mode, joinModes())
		}
		held := p.Mode == WriteBack || p.Mode == Transient
		switch {
		case p.Replicas != 0 && !held:
			fail(at+".replicas", "only WriteBack and Transient policies have replicas")
		case p.Replicas < 0 || p.Replicas > MaxReplicas:
			fail(at+".replicas", "%d is not between 1 and %d", p.Replicas, MaxReplicas)
		}
		if p.Expiry != "" {
			d, err := time.ParseDuration(p.Expiry)
			switch {
			case p.Mode != Transient:
				fail(at+".expiry", "only Transient policies expire")
			case err != nil || d <= 0:
				fail(at+".expiry", "%q is not a positive duration (e.g. 24h)", p.Expiry)
			}
		}
	}
}

// maxKeyBytes is S3's limit on a key's length.
const maxKeyBytes = 1024

func joinModes() string {
	s := make([]string, len(Modes))
	for i, m := range Modes {
		s[i] = string(m)
	}
	return strings.Join(s, ", ")
}
