// Package tenancy holds the tenants configuration of a cache node: which
// tenants exist, which buckets each may use, its disk cache quota and its
// optional backend credentials. A node loads it from a file and hot-reloads
// it (Watch); the operator writes it as a Secret mounted into the pod.
//
// The file is YAML (or JSON):
//
//	tenants:
//	  - name: clickhouse-prod            # a DNS label; the tenant certificate's
//	                                     # URI SAN is spiffe://distcache/tenant/<name>
//	    buckets: [ch-data, ch-backups]   # exact S3 bucket names; no wildcards
//	    quotaBytes: 107374182400         # disk cache quota; 0 or absent = none
//	    credentials:                     # optional: this tenant's own backend credentials
//	      accessKeyID: AKIA...
//	      secretAccessKey: ...
//	      sessionToken: ...              # optional
//	    policies:                        # optional write policies (policy.go); default WriteThrough
//	      - bucket: ch-data
//	        prefix: tmp/                 # optional; the longest matching prefix wins
//	        mode: ReadOnly               # WriteThrough, ReadOnly or NoCache
//	  - name: analytics
//	    buckets: [events]
//
// Parsing is strict: unknown or duplicate fields are errors (field names are
// case-sensitive: "Buckets" is not buckets), and so is a file
// without a tenants key (write "tenants: []" for none), so that an empty or
// truncated file is never taken for "no tenants". Tenant names are unique;
// every tenant lists at least one valid bucket name. Two tenants may list the
// same bucket: cache entries are keyed by tenant, so they never share data.
package tenancy

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/distcache/distcache/internal/pki"
)

// Credentials are a tenant's own backend (S3) credentials. String, GoString
// and LogValue redact the secrets.
type Credentials struct {
	AccessKeyID     string `json:"accessKeyID"`
	SecretAccessKey string `json:"secretAccessKey"`
	SessionToken    string `json:"sessionToken,omitempty"`
}

// String shows the access key ID only.
func (c Credentials) String() string {
	return fmt.Sprintf("{AccessKeyID:%s SecretAccessKey:REDACTED SessionToken:%s}", c.AccessKeyID, redacted(c.SessionToken))
}

// GoString is String, so %#v does not leak secrets either.
func (c Credentials) GoString() string { return "tenancy.Credentials" + c.String() }

// LogValue shows the access key ID only.
func (c Credentials) LogValue() slog.Value {
	return slog.GroupValue(slog.String("accessKeyID", c.AccessKeyID))
}

func redacted(s string) string {
	if s == "" {
		return ""
	}
	return "REDACTED"
}

// Tenant is one tenant's configuration.
type Tenant struct {
	Name        string       `json:"name"`
	Buckets     []string     `json:"buckets"`
	QuotaBytes  int64        `json:"quotaBytes,omitempty"` // 0 = no quota
	Credentials *Credentials `json:"credentials,omitempty"`
	// Policies are the write policies of the tenant's buckets and
	// prefixes (policy.go); none: every write is WriteThrough.
	Policies []Policy `json:"policies,omitempty"`
}

// AllowsBucket reports whether the tenant may use bucket b (exact match).
func (t *Tenant) AllowsBucket(b string) bool {
	return t != nil && slices.Contains(t.Buckets, b)
}

// Config is the whole tenants configuration. Treat it as immutable once
// published: the Watcher hands the same value to every reader.
type Config struct {
	Tenants []Tenant `json:"tenants"`

	byName map[string]*Tenant // built by Parse; nil for hand-made Configs
}

// Tenant returns the tenant called name.
func (c *Config) Tenant(name string) (*Tenant, bool) {
	if c == nil {
		return nil, false
	}
	if c.byName != nil {
		t, ok := c.byName[name]
		return t, ok
	}
	for i := range c.Tenants {
		if c.Tenants[i].Name == name {
			return &c.Tenants[i], true
		}
	}
	return nil, false
}

// file is the on-disk form; the pointer tells a missing tenants key from an
// empty list.
type file struct {
	Tenants *[]Tenant `json:"tenants"`
}

// Parse parses and validates a tenants configuration. The error lists every
// problem found, each naming the tenant (by index and name) and the field.
func Parse(data []byte) (*Config, error) {
	var f file
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("tenancy: %w", err)
	}
	if f.Tenants == nil {
		return nil, errors.New(`tenancy: tenants: required (write "tenants: []" for none)`)
	}
	if err := exactFieldNames(data); err != nil {
		return nil, err
	}
	c := &Config{Tenants: *f.Tenants}
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.byName = make(map[string]*Tenant, len(c.Tenants))
	for i := range c.Tenants {
		c.byName[c.Tenants[i].Name] = &c.Tenants[i]
	}
	return c, nil
}

func (c *Config) validate() error {
	var errs []error
	seen := make(map[string]int, len(c.Tenants))
	for i := range c.Tenants {
		t := &c.Tenants[i]
		at := fmt.Sprintf("tenants[%d]", i)
		if t.Name != "" {
			at += fmt.Sprintf(" (%q)", t.Name)
		}
		fail := func(field, format string, args ...any) {
			errs = append(errs, fmt.Errorf("tenancy: %s: %s: %s", at, field, fmt.Sprintf(format, args...)))
		}
		if err := pki.ValidateName(t.Name); err != nil {
			fail("name", "%s", strings.TrimPrefix(err.Error(), "pki: "))
		} else if j, dup := seen[t.Name]; dup {
			fail("name", "duplicate of tenants[%d]", j)
		} else {
			seen[t.Name] = i
		}
		if len(t.Buckets) == 0 {
			fail("buckets", "at least one bucket is required")
		}
		buckets := make(map[string]bool, len(t.Buckets))
		for j, b := range t.Buckets {
			if err := ValidateBucketName(b); err != nil {
				fail(fmt.Sprintf("buckets[%d]", j), "%v", err)
			} else if buckets[b] {
				fail(fmt.Sprintf("buckets[%d]", j), "duplicate bucket %q", b)
			}
			buckets[b] = true
		}
		if t.QuotaBytes < 0 {
			fail("quotaBytes", "must be >= 0, got %d", t.QuotaBytes)
		}
		if cr := t.Credentials; cr != nil {
			if cr.AccessKeyID == "" {
				fail("credentials.accessKeyID", "required when credentials are given")
			}
			if cr.SecretAccessKey == "" {
				fail("credentials.secretAccessKey", "required when credentials are given")
			}
		}
		validatePolicies(t, fail)
	}
	return errors.Join(errs...)
}

// ValidateBucketName checks the S3 general purpose bucket naming rules: 3 to
// 63 characters of lowercase letters, digits, '.' and '-', beginning and
// ending with a letter or digit, no ".." / ".-" / "-.", not an IPv4 address,
// not starting with "xn--" or "sthree-". Wildcards are not bucket names.
func ValidateBucketName(b string) error {
	if b == "*" || strings.ContainsAny(b, "*?") {
		return fmt.Errorf("bucket %q: wildcards are not allowed, list buckets explicitly", b)
	}
	if len(b) < 3 || len(b) > 63 {
		return fmt.Errorf("bucket %q: must be 3 to 63 characters long", b)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("bucket %q: only lowercase letters, digits, '.' and '-' are allowed", b)
		}
	}
	if !isAlnum(b[0]) || !isAlnum(b[len(b)-1]) {
		return fmt.Errorf("bucket %q: must begin and end with a letter or digit", b)
	}
	for _, bad := range []string{"..", ".-", "-."} {
		if strings.Contains(b, bad) {
			return fmt.Errorf("bucket %q: must not contain %q", b, bad)
		}
	}
	if looksLikeIPv4(b) {
		return fmt.Errorf("bucket %q: must not be formatted as an IP address", b)
	}
	for _, prefix := range []string{"xn--", "sthree-"} {
		if strings.HasPrefix(b, prefix) {
			return fmt.Errorf("bucket %q: must not start with %q", b, prefix)
		}
	}
	return nil
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// looksLikeIPv4 reports four dot-separated groups of digits (leading zeros
// included, which netip would refuse).
func looksLikeIPv4(b string) bool {
	parts := strings.Split(b, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// fieldNames are the keys of the file, at each level.
var (
	fileFields       = []string{"tenants"}
	tenantFields     = []string{"name", "buckets", "quotaBytes", "credentials", "policies"}
	credentialFields = []string{"accessKeyID", "secretAccessKey", "sessionToken"}
)

// exactFieldNames refuses keys that differ from a field name in case only.
// encoding/json, under the YAML decoder, matches keys case-insensitively:
// "Buckets" would be taken for buckets, and a second "NAME" would silently
// replace name.
func exactFieldNames(data []byte) error {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("tenancy: %w", err)
	}
	var errs []error
	check := func(at string, raw json.RawMessage, allowed []string) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		for k := range m {
			if !slices.Contains(allowed, k) {
				errs = append(errs, fmt.Errorf("tenancy: %sfield %q: field names are case-sensitive (one of %s)", at, k, strings.Join(allowed, ", ")))
			}
		}
		return m
	}
	top := check("", js, fileFields)
	var tenants []json.RawMessage
	_ = json.Unmarshal(top["tenants"], &tenants)
	for i, raw := range tenants {
		t := check(fmt.Sprintf("tenants[%d]: ", i), raw, tenantFields)
		if cr, ok := t["credentials"]; ok {
			check(fmt.Sprintf("tenants[%d]: credentials: ", i), cr, credentialFields)
		}
		var policies []json.RawMessage
		_ = json.Unmarshal(t["policies"], &policies)
		for j, p := range policies {
			check(fmt.Sprintf("tenants[%d]: policies[%d]: ", i, j), p, policyFields)
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(errs...)
}

// Changed lists the tenants of old whose entry cur removes or changes in
// any way (buckets, quota, credentials, policies): what anyone keeps on
// their behalf may no longer be theirs to use.
func Changed(old, cur *Config) []string {
	var out []string
	for i := range old.Tenants {
		t := &old.Tenants[i]
		if n, ok := cur.Tenant(t.Name); !ok || !reflect.DeepEqual(t, n) {
			out = append(out, t.Name)
		}
	}
	return out
}
